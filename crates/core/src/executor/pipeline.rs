//! The gate pipeline for one call, stage by stage.
//! A stage returns `Err(Stop)` to refuse; the first refusal settles the call, and `run`
//! is never reached.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ActionMeta, ErasedAction, PreparedCall};
use crate::audit::{AuditEvent, Decider};
use crate::call::{Call, CallId};
use crate::outcome::Settled;
use crate::policy::{ApprovalPolicy, Decision};
use crate::reason::{Hook, Reason};
use crate::time::Timestamp;

use super::card::Next;
use super::state::{ExecutorState, Stop};
use super::trail::{AuditContext, Origin};

/// How many times one call may be rewritten before it is refused.
const MAX_REWRITES: u8 = 3;

/// The longest tool call id accepted from the model.
const MAX_TOOL_CALL_ID_LEN: usize = 256;

impl ExecutorState {
    pub(crate) fn submit(&mut self, call: Call, now: Timestamp) -> Next {
        let now = self.tick(now);
        let id = self.new_call_id();
        self.pipeline(id, call, now, now, 0, Origin::default())
    }

    /// Refuses, unread, a call past the host's cap of calls per turn: one record.
    pub(crate) fn refuse_over_cap(&mut self, call: Call, cap: usize, now: Timestamp) -> Settled {
        let now = self.tick(now);
        let id = self.new_call_id();
        let mut trace = AuditContext::arriving(id, &call, now);
        self.unvalidated(&mut trace, &call.arguments);
        let stop = Stop::new(Reason::TooManyCalls { cap }, Decider::Host);
        self.refuse_early(&trace, stop, now)
    }

    /// resolve → validate → scope → availability → decide, then ask, hand off or run.
    /// A rewrite re-enters here with the new call; a person's edit enters here with the
    /// edited arguments, and a call restored after a reload with its old deadline.
    pub(crate) fn pipeline(
        &mut self,
        id: CallId,
        call: Call,
        started: Timestamp,
        now: Timestamp,
        depth: u8,
        origin: Origin,
    ) -> Next {
        let mut trace = AuditContext::arriving(id, &call, started);
        trace.origin = origin;
        match self.gate(&mut trace, &call, now, depth) {
            Ok(next) => next,
            Err(stop) => {
                self.unvalidated(&mut trace, &call.arguments);
                Next::Settled(Box::new(self.refuse_early(&trace, stop, now)))
            }
        }
    }

    /// The untrusted content a call is decided after: the call's it continues, else
    /// what its caller has read.
    pub(crate) fn untrusted_in(&self, trace: &AuditContext) -> Option<std::sync::Arc<str>> {
        trace
            .origin
            .untrusted
            .clone()
            .or_else(|| self.untrusted_for(trace.caller).cloned())
    }

    fn gate(
        &mut self,
        trace: &mut AuditContext,
        call: &Call,
        now: Timestamp,
        depth: u8,
    ) -> Result<Next, Stop> {
        // An outside agent's new call waits its turn while it already has its share
        // live (an edit or a restore continues a call: not new).
        let fresh = depth == 0 && trace.origin.edited.is_none() && trace.origin.restored.is_none();
        if fresh && !call.caller.is_assistant() {
            let live = self
                .live
                .values()
                .filter(|l| l.decided.caller == call.caller)
                .count();
            if live >= self.config.max_live_per_agent {
                return Err(Stop::new(
                    Reason::TooManyLive {
                        caller: call.caller,
                    },
                    Decider::Pipeline,
                )
                .with(format!("{live} of its calls are waiting for the person")));
            }
        }
        let (action, generation) = self.resolve(call)?;
        trace.resolved(&action, self.level(action.meta()).policy);
        let (prepared, arguments) = self.validate(action.as_ref(), call)?;
        trace.validated(&arguments, &self.config.audit_key);
        // The card's original → edited and the model's `edited_by_person` describe what
        // will run (a rewrite may have normalised the person's values), against what
        // the model sent.
        trace.origin.edited = trace
            .origin
            .edited
            .take()
            .and_then(|d| d.rebased(&arguments));
        self.scope(action.meta())?;
        self.availability(action.as_ref())?;
        let facts = self.facts(
            action.meta(),
            prepared.as_ref(),
            &arguments,
            generation,
            trace,
        )?;
        let mut decision = crate::policy::decide(&facts);
        // INVARIANT: a call that runs, or that the mode refuses, is recorded at the level
        // the gate decided it under: a countersigned call is `ask`, never the raw `none`.
        let decided_level = facts.floor();
        if let Decision::Refuse { reason, by, detail } = decision {
            if by == Decider::Mode {
                trace.policy = Some(decided_level);
            }
            return Err(Stop { reason, by, detail });
        }
        // INVARIANT: an edit approves nothing, and nothing runs by itself after a reload.
        // An edited or restored call is always asked, even where a grant, the mode or
        // the level would let it run, and at the level it really has (never lower).
        if let (Decision::Run { .. }, Some(reason)) = (&decision, &trace.origin.forced) {
            // At the level in force, never below `Ask`, and "every time" where the
            // classifier asks for these arguments.
            let policy = match decided_level {
                ApprovalPolicy::None => ApprovalPolicy::Ask,
                policy => policy,
            };
            let by = match reason {
                Reason::Restored => Decider::Host,
                _ => Decider::Person,
            };
            decision = Decision::Ask {
                policy,
                reason: reason.clone(),
                by,
            };
        }
        if let Some(rewrite) = self.rewrite(action.meta(), prepared.as_ref(), &arguments)? {
            if depth >= MAX_REWRITES {
                return Err(Stop::new(Reason::RewriteLoop, Decider::Action));
            }
            // INVARIANT: a rewritten call re-enters the pipeline from resolve, so the new
            // arguments (or the replacement action) pass every stage again, and the card
            // and the ticket are for what will actually run.
            // Only a registered id is written down: a hook that built the id from the
            // arguments must not put argument text into the trail.
            let to = self
                .registry
                .get(&rewrite.action)
                .map(|_| rewrite.action.clone());
            let Some(to) = to else {
                return Err(Stop::new(Reason::Rewritten { to: None }, Decider::Action));
            };
            let reason = Reason::Rewritten { to: Some(to) };
            self.trail.record(
                trace,
                AuditEvent::Rewritten,
                Decider::Action,
                reason,
                None,
                now,
            );
            let next = Call {
                tool_call_id: call.tool_call_id.clone(),
                action: rewrite.action,
                arguments: rewrite.arguments.to_string(),
                caller: call.caller,
                trace: call.trace.clone(),
            };
            let origin = std::mem::take(&mut trace.origin);
            return Ok(self.pipeline(trace.call, next, trace.started, now, depth + 1, origin));
        }
        let decided = super::live::Decided {
            action,
            generation,
            prepared,
            arguments,
            caller: trace.caller,
            edited: trace.origin.edited.clone(),
            deadline: trace.origin.restored,
            untrusted: match &decision {
                Decision::Ask {
                    reason: Reason::AfterUntrusted { .. },
                    ..
                } => self.untrusted_in(trace),
                _ => None,
            },
        };
        match decision {
            Decision::Run { reason, by } => {
                trace.policy = Some(decided_level);
                self.allow(trace, decided, reason, by, now)
            }
            Decision::Ask { policy, reason, by } => {
                self.ask(trace, decided, policy, reason, by, now)
            }
            Decision::Handoff => self.hand_off(trace, decided, now),
            Decision::Question => self.ask_question(trace, decided, now),
            Decision::Refuse { reason, by, detail } => Err(Stop { reason, by, detail }),
        }
    }

    /// resolve: the registered action the call names, and its generation. Nothing is
    /// guessed.
    pub(crate) fn resolve(&self, call: &Call) -> Result<(Rc<dyn ErasedAction>, u64), Stop> {
        if call.tool_call_id.len() > MAX_TOOL_CALL_ID_LEN {
            return Err(
                Stop::new(Reason::ToolCallIdTooLong, Decider::Pipeline).with(format!(
                    "{} bytes, over the limit of {MAX_TOOL_CALL_ID_LEN}",
                    call.tool_call_id.len()
                )),
            );
        }
        // No registered id is longer: not even hashed.
        if call.action.len() > crate::executor::MAX_ACTION_ID_LEN {
            return Err(Stop::new(Reason::UnknownAction, Decider::Pipeline));
        }
        // INVARIANT: an action kept from a caller does not exist for it: the same
        // refusal as an id nobody registered, so the caller learns nothing more.
        self.registry
            .get(&call.action)
            .filter(|entry| entry.action.meta().callers.contains(&call.caller))
            .map(|entry| (Rc::clone(&entry.action), entry.generation))
            .ok_or_else(|| Stop::new(Reason::UnknownAction, Decider::Pipeline))
    }

    /// validate: parses the arguments once and reads them into the action's params (checked
    /// against the schema the model saw); the trace digests the same value.
    pub(crate) fn validate(
        &self,
        action: &dyn ErasedAction,
        call: &Call,
    ) -> Result<(Rc<dyn PreparedCall>, Value), Stop> {
        let invalid =
            |detail: String| Stop::new(Reason::InvalidArguments, Decider::Pipeline).with(detail);
        let value = crate::arguments::parse_object(&call.arguments, self.config.max_argument_bytes)
            .map_err(invalid)?;
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&value))?
            .map_err(invalid)?;
        Ok((prepared, value))
    }

    /// A refusal before the arguments validated records the keyed digest of the raw
    /// text (an oversized text hashed as bytes, never parsed; empty text as the `{}` it
    /// validates to). Computed only then: the path that runs pays for one digest.
    pub(crate) fn unvalidated(&self, trace: &mut AuditContext, raw: &str) {
        if trace.validated {
            return;
        }
        let key = &self.config.audit_key;
        trace.audit_digest = if raw.len() > self.config.max_argument_bytes {
            key.digest_bytes(raw.as_bytes())
        } else if crate::arguments::means_no_arguments(raw) {
            key.digest(&Value::Object(serde_json::Map::new()))
        } else {
            key.digest_raw(raw)
        };
    }

    /// scope: the session's role must hold the action's scope (from the policy file in
    /// force, else the session's own); a broken policy file stops all but reversals.
    pub(crate) fn scope(&self, meta: &ActionMeta) -> Result<(), Stop> {
        if let Some(stop) = self.policy.blocked(meta) {
            return Err(stop);
        }
        match &meta.scope {
            Some(scope) if !self.holds(scope) => Err(Stop::new(
                Reason::ScopeMissing {
                    scope: scope.clone(),
                },
                Decider::Pipeline,
            )
            .with(self.config.session.role.clone())),
            _ => Ok(()),
        }
    }

    /// availability: the action's own check against live page state.
    pub(crate) fn availability(&self, action: &dyn ErasedAction) -> Result<(), Stop> {
        if self.hook(Hook::Available, || action.is_available())? {
            Ok(())
        } else {
            Err(Stop::new(Reason::Unavailable, Decider::Pipeline))
        }
    }
}
