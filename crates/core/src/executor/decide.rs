//! decide: a call's facts for the pure [`crate::policy::decide`], the rewrite hook, and the
//! call's way on: straight to perform, to an approval card, or to the person.

use serde_json::Value;

use crate::action::{ActionMeta, PreparedCall};
use crate::audit::{AuditEvent, Decider};
use crate::handoff::HandoffMachine;
use crate::policy::{ApprovalPolicy, Facts};
use crate::reason::{Hook, Reason};
use crate::time::Timestamp;

use super::card::Next;
use super::live::{Decided, Live, LiveState};
use super::state::{ExecutorState, Stop};
use super::trail::AuditContext;

/// A rewrite hook's request: run this instead.
pub(crate) struct Rewritten {
    pub(crate) action: String,
    pub(crate) arguments: Value,
}

impl ExecutorState {
    /// The facts the decision reads; the classifier is the one hook it runs.
    pub(crate) fn facts(
        &self,
        meta: &ActionMeta,
        prepared: &dyn PreparedCall,
        arguments: &Value,
        generation: u64,
        trace: &AuditContext,
    ) -> Result<Facts, Stop> {
        let caller = trace.caller;
        // The mode is read before any hook runs (and no hook may switch it).
        let mode = self.mode.get();
        let verdict = self.hook(Hook::Classify, || prepared.classify())?;
        Ok(Facts {
            kind: meta.kind,
            level: self.level(meta),
            verdict,
            mode,
            caller,
            grant: self.grants.covering(meta, generation, arguments, caller),
            handoff: meta.handoff.is_some(),
            question: meta.question.is_some(),
            countersigned: meta.countersigned,
            confirm_twice: meta.confirm_twice,
            reversal: meta.reversal,
            untrusted: self.untrusted_in(trace).map(|source| source.to_string()),
            untrusted_always: self.policy.file().is_some_and(|f| f.untrusted.ask_always),
        })
    }

    /// The action's rewrite hook: `Some` when it changes the call.
    pub(crate) fn rewrite(
        &self,
        meta: &ActionMeta,
        prepared: &dyn PreparedCall,
        arguments: &Value,
    ) -> Result<Option<Rewritten>, Stop> {
        let Some(rewrite) = self.hook(Hook::Rewrite, || prepared.rewrite())? else {
            return Ok(None);
        };
        Ok(match rewrite {
            crate::action::Rewrite::Keep => None,
            crate::action::Rewrite::Arguments(new) => (crate::digest::ArgsDigest::of_value(&new)
                != crate::digest::ArgsDigest::of_value(arguments))
            .then(|| Rewritten {
                action: meta.id.to_string(),
                arguments: new,
            }),
            crate::action::Rewrite::Action {
                action, arguments, ..
            } => Some(Rewritten { action, arguments }),
        })
    }

    /// No approval needed: record why, and hand back the job.
    pub(crate) fn allow(
        &mut self,
        trace: &mut AuditContext,
        decided: Decided,
        reason: Reason,
        by: Decider,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        let consequence = self.hook(Hook::Consequence, || decided.prepared.consequence())?;
        // A grant is a person's earlier approval; nothing else that runs unasked is.
        let approval = reason.grant().map(|grant| super::countersign::Approval {
            by: crate::countersignature::ApprovedBy::Grant,
            card: None,
            grant: Some(grant),
        });
        let call = trace.call;
        let next = (self.task(call, trace.tool_call_id, &decided, approval))
            .map(|task| Next::Perform(call, task));
        let record = (AuditEvent::Allowed, by, reason);
        self.go_live(
            trace,
            decided,
            record,
            next,
            consequence,
            LiveState::Performing,
            now,
        )
    }

    /// A person must approve: draw the card and wait.
    pub(crate) fn ask(
        &mut self,
        trace: &mut AuditContext,
        decided: Decided,
        policy: ApprovalPolicy,
        reason: Reason,
        by: Decider,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        let face = self.draw_card(&decided, policy, 1)?;
        let request = self.card(trace.call, &decided, face, 1, 0, Vec::new(), now);
        // INVARIANT: from the first card on, the trail's `policy` is the level the card
        // asks under (a classifier may have raised the resolved one), never a mix.
        trace.policy = Some(request.policy);
        let consequence = request.consequence.clone();
        let next = Ok(Next::Approval(Box::new(request.clone())));
        let state = LiveState::Approval(Box::new(request));
        self.go_live(
            trace,
            decided,
            (AuditEvent::Asked, by, reason),
            next,
            consequence,
            state,
            now,
        )
    }

    /// The last step is the person's: show it and wait.
    pub(crate) fn hand_off(
        &mut self,
        trace: &mut AuditContext,
        decided: Decided,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        let meta = decided.action.meta();
        let timeout = match decided.deadline {
            Some(deadline) => deadline.saturating_since(now),
            None => meta.handoff.as_ref().map(|h| h.timeout).unwrap_or_default(),
        };
        let steps = meta.handoff.as_ref().map_or(0, |h| h.steps.len());
        let consequence = self.hook(Hook::Consequence, || decided.prepared.consequence())?;
        let state = LiveState::Handoff(HandoffMachine::new(steps, now, timeout));
        let record = (AuditEvent::HandedOff, Decider::Policy, Reason::Handoff);
        let next = Ok(Next::Handoff(trace.call));
        self.go_live(trace, decided, record, next, consequence, state, now)
    }

    /// The person is asked the action's question: show the form and wait.
    pub(crate) fn ask_question(
        &mut self,
        trace: &mut AuditContext,
        decided: Decided,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        let timeout = decided
            .action
            .meta()
            .question
            .as_ref()
            .map(|q| q.timeout)
            .unwrap_or_default();
        let deadline = decided
            .deadline
            .unwrap_or_else(|| now.saturating_add(timeout));
        let consequence = self.hook(Hook::Consequence, || decided.prepared.consequence())?;
        let record = (AuditEvent::Asked, Decider::Policy, Reason::Question);
        let next = Ok(Next::Question(trace.call));
        let state = LiveState::Question(deadline);
        self.go_live(trace, decided, record, next, consequence, state, now)
    }

    /// Records the decision, then, once `next` is ready, makes the call live under the trace's ids.
    #[allow(clippy::too_many_arguments)]
    fn go_live(
        &mut self,
        trace: &mut AuditContext,
        decided: Decided,
        (event, by, reason): (AuditEvent, Decider, Reason),
        next: Result<Next, Stop>,
        consequence: Option<String>,
        state: LiveState,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        self.trail.record(trace, event, by, reason, None, now);
        let next = next?;
        // What the trail has: the card's level once one is drawn, the decided one for a
        // run, else the resolved one.
        let level = trace
            .policy
            .unwrap_or_else(|| self.level(decided.action.meta()).policy);
        let live = Live {
            tool_call_id: std::sync::Arc::clone(trace.tool_call_id),
            trace: trace.trace.map(str::to_owned),
            level,
            decided,
            audit_digest: trace.audit_digest,
            started: trace.started,
            consequence,
            state,
        };
        self.live.insert(trace.call, live);
        Ok(next)
    }
}
