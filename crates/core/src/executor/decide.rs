//! decide: the level in force, session grants, the action's classifier and the mode
//! turn a call into run / ask / hand off, or refuse it. Then the rewrite hook, and the
//! call's way onward: straight to perform, to an approval card, or to the person.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ActionMeta, ErasedAction, PreparedCall, Verdict};
use crate::audit::{AuditEvent, Decider};
use crate::handoff::HandoffMachine;
use crate::mode::Mode;
use crate::policy::ApprovalPolicy;
use crate::reason::{Hook, Reason};
use crate::time::Timestamp;

use super::settle::Trace;
use super::state::{ExecutorState, Live, LiveState, Stop};
use super::Next;

/// What the decide stage concluded (a refusal is `Err(Stop)`).
#[derive(Debug)]
pub(crate) enum Decision {
    /// Go straight to perform.
    Run(Reason, Decider),
    /// Wait for a person's ticket under this policy.
    Ask(ApprovalPolicy, Reason, Decider),
    /// Hand the last step to the person.
    Handoff,
    /// Ask the person the action's question.
    Question,
}

/// A call that passed decide, with what the next stages need.
pub(crate) struct Decided {
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
    pub(crate) prepared: Rc<dyn PreparedCall>,
    pub(crate) arguments: Value,
    /// Who asked.
    pub(crate) caller: crate::Caller,
    /// The person's edit, when the call came from one.
    pub(crate) edited: Option<crate::EditDiff>,
    /// A deadline the card or handoff keeps (a call restored after a reload).
    pub(crate) deadline: Option<Timestamp>,
}

/// A rewrite hook's request: run this instead.
pub(crate) struct Rewritten {
    pub(crate) action: String,
    pub(crate) arguments: Value,
}

impl ExecutorState {
    pub(crate) fn decide(
        &self,
        meta: &ActionMeta,
        prepared: &dyn PreparedCall,
        arguments: &Value,
        generation: u64,
        caller: crate::Caller,
    ) -> Result<Decision, Stop> {
        // The mode is read before any hook runs (and no hook may switch it).
        let mode = self.mode.get();
        let verdict = self.hook(Hook::Classify, || prepared.classify())?;
        if let Verdict::Deny(why) = verdict {
            return Err(Stop::new(Reason::ClassifierDenied, Decider::Classifier).with(why));
        }
        let refused = |mode| Stop::new(Reason::ModeRefused { mode }, Decider::Mode);
        // An agent outside the page (WebMCP, MCP): no mode speaks for the person to it,
        // and it is asked for anything more than a read whatever the declared level.
        let outside = !caller.is_assistant();
        let outside_write = outside && meta.kind != crate::Kind::Read;
        if meta.handoff.is_some() {
            // INVARIANT: a handoff is never also put behind an approval, and no mode turns
            // it into a run.
            return match mode {
                Mode::Default | Mode::Bypass => Ok(Decision::Handoff),
                Mode::Away | Mode::Unattended => Err(refused(mode)),
            };
        }
        if meta.question.is_some() {
            // A question needs the person; no mode answers it for them.
            return match mode {
                Mode::Default | Mode::Bypass => Ok(Decision::Question),
                Mode::Away | Mode::Unattended => Err(refused(mode)),
            };
        }
        let level = self.level(meta);
        let (policy, reason, by) = match (verdict, level.policy) {
            // A classifier can only raise the bar: its `Ask` is `AskAlways`, because a
            // grant for the whole action must not cover the arguments it flagged.
            (Verdict::Ask, _) => (
                ApprovalPolicy::AskAlways,
                Reason::ClassifierAsked,
                Decider::Classifier,
            ),
            (_, ApprovalPolicy::None) if !meta.countersigned && !outside_write => {
                return Ok(Decision::Run(Reason::Level(level), Decider::Policy))
            }
            // INVARIANT: a countersignature states a person's approval: an action that
            // takes one is never below `Ask`; only the person's own grant runs it unasked.
            // Nor is anything but a read asked for by an agent outside the page: a level
            // of `None` was declared for the page's own assistant.
            (_, ApprovalPolicy::None) => {
                if !meta.confirm_twice {
                    if let Some(grant) = self.grant_covering(meta, generation, arguments, caller) {
                        return Ok(Decision::Run(
                            Reason::Grant { grant },
                            Decider::SessionGrant,
                        ));
                    }
                }
                let reason = if meta.countersigned {
                    Reason::NeedsCountersignature
                } else {
                    Reason::OutsideCaller { caller }
                };
                (ApprovalPolicy::Ask, reason, Decider::Policy)
            }
            (_, policy) => {
                // INVARIANT: a grant covers only `Ask`, only the registration and the
                // caller it was made for, and never an action that asks twice.
                if policy == ApprovalPolicy::Ask && !meta.confirm_twice {
                    if let Some(grant) = self.grant_covering(meta, generation, arguments, caller) {
                        let reason = Reason::Grant { grant };
                        return Ok(Decision::Run(reason, Decider::SessionGrant));
                    }
                }
                (policy, Reason::Level(level), Decider::Policy)
            }
        };
        // The mode decides what "ask" means right now. No mode lowers a level where a
        // person is needed and absent: away refuses; unattended stands in only for `Ask`.
        // INVARIANT: unattended stands in for a person only on a plain `Ask`: never on
        // `AskAlways`, a classifier's ask, or a double confirmation.
        let plain_ask =
            policy == ApprovalPolicy::Ask && !meta.confirm_twice && !meta.countersigned && !outside;
        // INVARIANT: no mode lowers a reversal's level, not even bypass: an undo that
        // needs a person asks one, or is refused when nobody is there.
        match mode {
            Mode::Default => Ok(Decision::Ask(policy, reason, by)),
            // Nor a countersigned action's: its token must state a person's approval.
            // Nor an outside agent's: a mode speaks for the page's own assistant only.
            Mode::Bypass if meta.reversal || meta.countersigned || outside => {
                Ok(Decision::Ask(policy, reason, by))
            }
            Mode::Bypass => Ok(Decision::Run(Reason::ModeAllowed { mode }, Decider::Mode)),
            Mode::Unattended if plain_ask => {
                Ok(Decision::Run(Reason::ModeAllowed { mode }, Decider::Mode))
            }
            Mode::Away | Mode::Unattended => Err(refused(mode)),
        }
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
            crate::Rewrite::Keep => None,
            crate::Rewrite::Arguments(new) => (crate::ArgsDigest::of_value(&new)
                != crate::ArgsDigest::of_value(arguments))
            .then(|| Rewritten {
                action: meta.id.to_string(),
                arguments: new,
            }),
            crate::Rewrite::Action {
                action, arguments, ..
            } => Some(Rewritten { action, arguments }),
        })
    }

    /// No approval needed: record why, and hand back the job.
    pub(crate) fn allow(
        &mut self,
        trace: &mut Trace,
        decided: Decided,
        reason: Reason,
        by: Decider,
        now: Timestamp,
    ) -> Result<Next, Stop> {
        let consequence = self.hook(Hook::Consequence, || decided.prepared.consequence())?;
        // A grant is a person's earlier approval; nothing else that runs unasked is.
        let approval = reason.grant().map(|grant| super::countersign::Approval {
            by: crate::ApprovedBy::Grant,
            card: None,
            grant: Some(grant),
        });
        let work = self.work(trace.call, trace.tool_call_id, &decided, approval);
        self.trail
            .record(trace, AuditEvent::Allowed, by, reason, None, now);
        let work = work?;
        self.live.insert(
            trace.call,
            self.live_call(trace, decided, consequence, None, LiveState::Performing),
        );
        Ok(Next::Perform(trace.call, work))
    }

    /// A person must approve: draw the card and wait.
    pub(crate) fn ask(
        &mut self,
        trace: &mut Trace,
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
        self.trail
            .record(trace, AuditEvent::Asked, by, reason, None, now);
        let consequence = request.consequence.clone();
        let digest = Some(request.args_sha256);
        let state = LiveState::Approval(Box::new(request.clone()));
        let mut live = self.live_call(trace, decided, consequence, digest, state);
        live.level = request.policy;
        self.live.insert(trace.call, live);
        Ok(Next::Approval(Box::new(request)))
    }

    /// The last step is the person's: show it and wait.
    pub(crate) fn hand_off(
        &mut self,
        trace: &mut Trace,
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
        self.trail.record(
            trace,
            AuditEvent::HandedOff,
            Decider::Policy,
            Reason::Handoff,
            None,
            now,
        );
        let machine = HandoffMachine::new(steps, now, timeout);
        let live = self.live_call(
            trace,
            decided,
            consequence,
            None,
            LiveState::Handoff(machine),
        );
        self.live.insert(trace.call, live);
        Ok(Next::Handoff(trace.call))
    }

    /// The person is asked the action's question: show the form and wait.
    pub(crate) fn ask_question(
        &mut self,
        trace: &mut Trace,
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
        self.trail.record(
            trace,
            AuditEvent::Asked,
            Decider::Policy,
            Reason::Question,
            None,
            now,
        );
        let live = self.live_call(
            trace,
            decided,
            consequence,
            None,
            LiveState::Question(deadline),
        );
        self.live.insert(trace.call, live);
        Ok(Next::Question(trace.call))
    }

    /// The live call, taking the ids the trace's records showed (its records are
    /// written: the live call's own records share them from here on).
    fn live_call(
        &self,
        trace: &mut Trace,
        decided: Decided,
        consequence: Option<String>,
        digest: Option<crate::ArgsDigest>,
        state: LiveState,
    ) -> Box<Live> {
        Box::new(Live {
            tool_call_id: std::sync::Arc::clone(trace.tool_call_id),
            shown: trace.take_shown(),
            caller: trace.caller,
            trace: trace.trace.map(str::to_owned),
            level: self.level(decided.action.meta()).policy,
            action: decided.action,
            generation: decided.generation,
            prepared: decided.prepared,
            digest,
            audit_digest: trace.audit_digest,
            arguments: decided.arguments,
            started: trace.started,
            consequence,
            edited: decided.edited,
            deadline: decided.deadline,
            state,
        })
    }

    /// The grant covering this call, if any.
    fn grant_covering(
        &self,
        meta: &ActionMeta,
        generation: u64,
        arguments: &Value,
        caller: crate::Caller,
    ) -> Option<crate::GrantId> {
        self.grants
            .iter()
            .find(|g| {
                *g.action == *meta.id
                    && g.generation == generation
                    && g.basis.registration == meta.declaration
                    && g.basis.caller == caller
                    && g.rule.matcher.matches(arguments)
            })
            .map(|g| g.id)
    }
}
