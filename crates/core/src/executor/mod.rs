//! The executor: each call through resolve, validate, scope, availability, decide, approve,
//! perform and verify, failing closed. Sans-IO: the host passes `now` and drives each [`Job`].

mod approve;
mod card;
mod countersign;
mod decide;
mod levels;
mod live;
mod perform;
mod pipeline;
mod registration;
mod registry;
mod restore;
mod settle;
mod state;
mod trail;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::action::{Action, ActionMeta};
pub use crate::arguments::DEFAULT_MAX_ARGUMENT_BYTES;
use crate::audit::AuditSink;
use crate::call::{Call, CallId};
use crate::mode::Mode;
use crate::outcome::Settled;
use crate::projection::{describe, ToolAnnotations, ToolSpec};
use crate::ticket::{
    ApprovalRequest, Blocked, EditError, Grant, GrantBasis, GrantId, RestoreError, Ticket,
    TicketError,
};
use crate::time::Timestamp;

pub use card::{HandoffView, Step};
pub use perform::{Completion, Job};
pub use registration::Registration;
pub use registry::{RegisterError, MAX_ACTION_ID_LEN};
pub use restore::Pending;
pub use state::{Config, DEFAULT_APPROVAL_TIMEOUT};

use card::{handoff_view, question_view, Next};
use live::LiveState;
use registration::Mailbox;
use state::ExecutorState;

/// The gate. Clones share one registry, one queue and one trail; single-threaded. From a hook
/// (see [`Action`]), commands return [`Blocked::Reentered`], queries nothing, and the hook's
/// tool call is refused (`hook_reentered`).
#[derive(Clone)]
pub struct Executor {
    state: Rc<RefCell<ExecutorState>>,
    /// `state.executor`, which never changes: a job's guard takes it without a borrow.
    id: u64,
    mailbox: Mailbox,
    mode: Rc<Cell<Mode>>,
    reentered: Rc<Cell<bool>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Executor");
        if let Ok(state) = self.state.try_borrow() {
            out.field("session", &state.config.session_id)
                .field("actions", &state.registry.len())
                .field("live_calls", &state.live.len());
        }
        out.finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor with no actions, writing audit records to `audit`.
    pub fn new(config: Config, audit: impl AuditSink + 'static) -> Self {
        let mode = Rc::new(Cell::new(Mode::Default));
        let reentered = Rc::new(Cell::new(false));
        let state = ExecutorState::new(
            config,
            Box::new(audit),
            Rc::clone(&mode),
            Rc::clone(&reentered),
        );
        Self {
            id: state.executor,
            state: Rc::new(RefCell::new(state)),
            mailbox: Rc::default(),
            mode,
            reentered,
        }
    }

    /// Runs `f` on the state as one step (see [`registration::begin`]).
    fn step<R>(&self, f: impl FnOnce(&mut ExecutorState) -> R) -> Result<R, Blocked> {
        let mut state = registration::begin(&self.state, &self.mailbox, &self.reentered)?;
        let out = f(&mut state);
        state.finish();
        Ok(out)
    }

    /// A query: from inside a hook, or once poisoned, it answers nothing.
    fn read<R: Default>(&self, f: impl FnOnce(&mut ExecutorState) -> R) -> R {
        self.step(f).unwrap_or_default()
    }

    /// A step that tells the host what happens next to a call.
    fn next<E: From<Blocked>>(
        &self,
        f: impl FnOnce(&mut ExecutorState) -> Result<Next, E>,
    ) -> Result<Step, E> {
        self.step(|state| f(state).map(|next| self.to_step(state, next)))?
    }

    /// Sets who mints tokens for [`Action::run_countersigned`] actions. Without one they
    /// are still asked, and settle as `NOT_COUNTERSIGNED` once approved.
    pub fn set_countersigner(
        &self,
        signer: Rc<dyn crate::countersignature::Countersigner>,
    ) -> Result<(), Blocked> {
        self.step(|state| state.countersigner = Some(signer))
    }

    /// Registers an action. Dropping the [`Registration`] removes it, revokes its grants
    /// and settles its waiting calls as `UNAVAILABLE`.
    pub fn register<P>(&self, action: Action<P>) -> Result<Registration, RegisterError>
    where
        P: DeserializeOwned + JsonSchema + Clone + 'static,
    {
        registry::check_declaration(&action)?;
        let erased = action.into_erased();
        let id = erased.meta().id.to_string();
        // INVARIANT: serde and the schema check pick the same alternative: overlaps never register.
        if let Some(why) = crate::alternatives::ambiguity(&erased.meta().schema) {
            return Err(RegisterError::Ambiguous(id, why));
        }
        let generation = self.step(|state| state.registry.insert(erased))??;
        Ok(Registration {
            id,
            generation,
            to: self.post(),
            done: false,
        })
    }

    /// The assistant's tools: available, in scope, by name (only reversals under a broken file).
    pub fn projection(&self) -> Vec<ToolSpec> {
        self.projection_for(crate::call::Caller::Assistant)
            .unwrap_or_default()
    }

    /// The tools `caller` sees (see [`Action::only_for`]); from a hook, [`Blocked::Reentered`].
    pub fn projection_for(&self, caller: crate::call::Caller) -> Result<Vec<ToolSpec>, Blocked> {
        self.step(|state| {
            // In id order already: the registry is keyed by id.
            state
                .registry
                .entries()
                .filter(|e| {
                    let meta = e.action.meta();
                    meta.callers.contains(&caller)
                        && state.policy.blocked(meta).is_none()
                        && meta.scope.as_ref().is_none_or(|s| state.holds(s))
                        && state
                            .hook(crate::reason::Hook::Available, || e.action.is_available())
                            .unwrap_or(false)
                })
                .map(|e| {
                    let meta = e.action.meta();
                    // As decided, before the classifier has seen any arguments.
                    let policy = crate::policy::floor(
                        state.level(meta).policy,
                        &crate::action::Verdict::Allow,
                        meta.countersigned,
                        caller,
                        meta.kind,
                    );
                    ToolSpec {
                        name: meta.id.to_string(),
                        description: describe(
                            &meta.description,
                            meta.kind,
                            policy,
                            meta.handoff.is_some(),
                        ),
                        parameters: meta.schema.clone(),
                        annotations: ToolAnnotations {
                            title: meta.title.to_string(),
                            read_only_hint: meta.kind == crate::policy::Kind::Read,
                            destructive_hint: meta.kind == crate::policy::Kind::Danger,
                            approval: policy,
                            handoff: meta.handoff.is_some(),
                            untrusted_content_hint: meta.returns_untrusted,
                        },
                    }
                })
                .collect()
        })
    }

    /// Takes one model call through the stages up to decide; a refusal stops it before `run`.
    pub fn submit(&self, call: Call, now: Timestamp) -> Result<Step, Blocked> {
        self.next(|state| Ok(state.submit(call, now)))
    }

    /// Refuses, unread, a call past the host's `cap` per turn (`INVALID_ARGS`, `too_many_calls`).
    /// The trail still names it: one terminal record, and a settlement queued like any other.
    pub fn refuse_over_cap(
        &self,
        call: Call,
        cap: usize,
        now: Timestamp,
    ) -> Result<CallId, Blocked> {
        self.step(|state| state.refuse_over_cap(call, cap, now).call)
    }

    /// Applies a person's ticket. The card is drawn again first: if it changed, nothing
    /// runs and the new card comes back ([`Step::Approval`]); otherwise the call may run.
    pub fn approve(&self, ticket: Ticket, now: Timestamp) -> Result<Step, TicketError> {
        self.next(|state| state.approve(ticket, now))
    }

    /// The person edited a waiting call's arguments (raw JSON); this approves nothing. Invalid
    /// ones change nothing ([`EditError::Invalid`]); valid ones supersede the call with a new,
    /// linked call that passes the pipeline again and is always asked (original → edited).
    pub fn edit(&self, call: CallId, arguments: &str, now: Timestamp) -> Result<Step, EditError> {
        self.next(|state| state.edit(call, arguments, now))
    }

    /// Brings back a call waiting for a person before a reload, always asked again: only with the
    /// same declaration, available, in time; else `APPROVAL_EXPIRED` (handoff: `HANDOFF_TIMEOUT`).
    pub fn restore_pending(&self, pending: Pending, now: Timestamp) -> Result<Step, Blocked> {
        self.next(|state| Ok(state.restore(pending, now)))
    }

    /// Settles a stored call that will not come back here: `APPROVAL_EXPIRED` with `why`.
    pub fn drop_pending(
        &self,
        pending: Pending,
        why: crate::reason::RestoreMiss,
        now: Timestamp,
    ) -> Result<Settled, Blocked> {
        self.step(|state| state.drop_pending(pending, why, now))
    }

    /// A script, not a person, pressed a control of this waiting call: recorded, nothing changes.
    pub fn refuse_synthetic(
        &self,
        call: CallId,
        control: crate::reason::Control,
        now: Timestamp,
    ) -> Result<(), TicketError> {
        self.step(|state| {
            let now = state.tick(now);
            let waiting = state
                .live
                .get(&call)
                .is_some_and(|l| !matches!(l.state, live::LiveState::Performing));
            if !waiting {
                return Err(TicketError::NotPending);
            }
            state.record_live(
                call,
                crate::audit::AuditEvent::GestureRefused,
                crate::audit::Decider::Host,
                &crate::reason::Reason::SyntheticGesture { control },
                now,
            );
            Ok(())
        })?
    }

    /// The person declines a pending call: `PERMISSION_DENIED`, with their reason for the model.
    pub fn deny(
        &self,
        call: CallId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Settled, TicketError> {
        self.step(|state| state.decline(call, false, reason, now))?
    }

    /// The caller withdrew `tool_call_id`: what of it waits on a card or a question
    /// settles as `CANCELLED`; a run or a handoff under way goes on. Returns what settled.
    pub fn withdraw(
        &self,
        caller: crate::call::Caller,
        tool_call_id: &str,
        now: Timestamp,
    ) -> Vec<Settled> {
        self.step(|state| state.withdraw(caller, tool_call_id, now))
            .unwrap_or_default()
    }

    /// Verifies and settles a finished job's call (queued for [`Executor::next_settled`]).
    /// `false` if already settled or busy; the dropped completion then settles it as interrupted.
    pub fn complete(&self, mut completion: Completion, now: Timestamp) -> bool {
        let (call, executor) = (completion.guard.call, completion.guard.executor);
        let result = std::mem::replace(
            &mut completion.result,
            Err(countersign::RunError::Failed(String::new())),
        );
        let settled = self
            .step(|state| state.executor == executor && state.complete(call, result, now))
            .unwrap_or(false);
        completion.guard.armed = !settled;
        settled
    }

    /// The person says the handoff is done: the receipt if `expect` holds now; else `None`, and it
    /// waits ([`HandoffView::tries`]) until Cancel or the deadline (`HANDOFF_FAILED` after a try).
    pub fn handoff_done(
        &self,
        call: CallId,
        now: Timestamp,
    ) -> Result<Option<Settled>, TicketError> {
        self.step(|state| state.handoff_event(call, true, now))?
    }

    /// The person cancels the handoff: `HANDOFF_CANCELLED`.
    pub fn handoff_cancel(&self, call: CallId, now: Timestamp) -> Result<Settled, TicketError> {
        self.step(|state| state.handoff_event(call, false, now))?
            .and_then(|settled| settled.ok_or(TicketError::NotPending))
    }

    /// Moves a handoff's highlight to step `index`.
    pub fn show_step(&self, call: CallId, index: usize) -> Result<(), TicketError> {
        self.step(|state| state.show_step(call, index))?
    }

    /// Pending approval cards, oldest first.
    pub fn approvals(&self) -> Vec<ApprovalRequest> {
        self.read(|state| {
            state
                .live
                .values()
                .filter_map(|l| match &l.state {
                    LiveState::Approval(r) => Some((**r).clone()),
                    _ => None,
                })
                .collect()
        })
    }

    /// Handoffs waiting for the person, oldest first.
    pub fn handoffs(&self) -> Vec<HandoffView> {
        self.read(|state| {
            state
                .live
                .keys()
                .filter_map(|c| handoff_view(state, *c))
                .collect()
        })
    }

    /// Calls waiting on a card or a handoff, oldest first, to store across a reload.
    pub fn waiting(&self, now: Timestamp) -> Vec<(CallId, Pending)> {
        self.read(|state| {
            state
                .live
                .iter()
                .filter_map(|(call, live)| {
                    let (handoff, deadline) = match &live.state {
                        LiveState::Approval(card) => (false, card.deadline),
                        LiveState::Handoff(machine) => (true, machine.deadline),
                        LiveState::Performing | LiveState::Question(_) => return None,
                    };
                    let meta = live.decided.action.meta();
                    let pending = Pending {
                        call: Call::new(
                            live.tool_call_id.to_string(),
                            meta.id.to_string(),
                            live.decided.arguments.to_string(),
                        )
                        .by(live.decided.caller),
                        declaration: meta.declaration.clone(),
                        handoff,
                        remaining: deadline.saturating_since(now),
                        edited: live.decided.edited.clone(),
                        untrusted: live
                            .decided
                            .untrusted
                            .as_ref()
                            .or_else(|| state.untrusted_for(live.decided.caller))
                            .map(|source| source.to_string()),
                    };
                    Some((*call, pending))
                })
                .collect()
        })
    }

    /// Questions waiting for the person's answer, oldest first.
    pub fn questions(&self) -> Vec<crate::question::QuestionView> {
        self.read(|state| {
            state
                .live
                .keys()
                .filter_map(|c| question_view(state, *c))
                .collect()
        })
    }

    /// The person answers a question (raw JSON): a valid one is the result; others change nothing.
    pub fn answer(
        &self,
        call: CallId,
        answer: &str,
        now: Timestamp,
    ) -> Result<Settled, crate::question::AnswerError> {
        self.step(|state| state.answer(call, answer, now))?
    }

    /// The person declines the question: `QUESTION_DECLINED`.
    pub fn decline_question(&self, call: CallId, now: Timestamp) -> Result<Settled, TicketError> {
        self.step(|state| state.decline(call, true, None, now))?
    }

    /// Checks a raw answer to a question action, as the form does while typing; records nothing.
    pub fn check_answer(&self, action: &str, answer: &str) -> Result<Value, String> {
        self.step(|state| state.check_answer(action, answer))
            .unwrap_or_else(|blocked| Err(blocked.to_string()))
    }

    /// The session grants in force.
    pub fn grants(&self) -> Vec<Grant> {
        self.read(|state| state.grants.list().to_vec())
    }

    /// Restores a grant from an earlier page session's [`GrantBasis`] (its rule derived again):
    /// only for the same declaration and role, where a person could make it now.
    pub fn restore_grant(
        &self,
        basis: &GrantBasis,
        now: Timestamp,
    ) -> Result<GrantId, RestoreError> {
        self.step(|state| state.restore_grant(basis, now))?
    }

    /// Revokes a grant; later calls are asked again. `false` if there was none.
    pub fn revoke(&self, grant: GrantId) -> Result<bool, Blocked> {
        self.step(|state| state.grants.revoke(grant))
    }

    /// The earliest deadline of any waiting call: call [`Executor::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.read(|state| state.poll_timeout())
    }

    /// Settles every call whose deadline is at or before `now`; returns them.
    pub fn handle_timeout(&self, now: Timestamp) -> Vec<Settled> {
        self.settling(|state| state.handle_timeout(now))
    }

    /// Settles every live call as `UNAVAILABLE` (the page is closing or navigating away).
    pub fn shutdown(&self, now: Timestamp) -> Vec<Settled> {
        self.settling(|state| state.shutdown(now))
    }

    /// A step's settlements, copied (they stay queued).
    fn settling(&self, f: impl FnOnce(&mut ExecutorState)) -> Vec<Settled> {
        self.read(|state| {
            let before = state.settled.len();
            f(state);
            state.settled.iter().skip(before).cloned().collect()
        })
    }

    /// Records a [`crate::audit::AuditEvent::TrailGap`]: `first_seq..=last_seq` left a bounded
    /// sink unkept (`unconfirmed` sent unanswered), so the loss is on record. Returns its `seq`.
    pub fn record_trail_gap(
        &self,
        first_seq: u64,
        last_seq: u64,
        unconfirmed: u64,
        now: crate::time::Timestamp,
    ) -> Result<u64, Blocked> {
        self.step(|state| state.record_trail_gap(first_seq, last_seq, unconfirmed, now))
    }

    /// The oldest settlement not yet read, taken off the queue.
    pub fn next_settled(&self) -> Option<Settled> {
        self.read(|state| state.settled.pop_front())
    }

    /// Loads the [`crate::policy::PolicyFile`]; one that is bad or lacks the session's role and
    /// a `default_role` is refused with its line, and only reversals run until a valid one loads.
    pub fn load_policy(&self, text: &str) -> Result<(), crate::policy::PolicyError> {
        self.step(|state| state.policy.load(text, &state.config.session.role))
            .unwrap_or_else(|blocked| Err(crate::policy::PolicyError::whole(blocked.to_string())))
    }

    /// Marks the policy unusable (not fetched): only reversals run until a valid file loads.
    pub fn fail_policy(&self, error: crate::policy::PolicyError) -> Result<(), Blocked> {
        self.step(|state| state.policy.break_with(error))
    }

    /// Switches the mode for later decisions (waiting calls keep waiting); not from a hook.
    pub fn set_mode(&self, mode: Mode) -> Result<(), Blocked> {
        self.step(|_| self.mode.set(mode))
    }

    /// The page put untrusted content (`source`, named on the card) into its assistant's
    /// context. Until [`Executor::person_spoke`], every `Write` or `Danger` call is asked
    /// one level higher and no grant covers it (as after [`Action::returns_untrusted`]).
    pub fn read_untrusted(&self, source: &str) -> Result<(), Blocked> {
        self.step(|state| state.taint(crate::call::Caller::Assistant, &source.into()))
    }

    /// The person messaged the page's assistant: its later calls are decided as before any
    /// untrusted content. An outside agent's is not cleared (the person's words never reach it).
    pub fn person_spoke(&self) -> Result<(), Blocked> {
        self.step(|state| state.untrusted.retain(|(caller, _)| !caller.is_assistant()))
    }

    /// The session's mode. The one query a hook may make.
    pub fn mode(&self) -> Mode {
        self.mode.get()
    }

    /// How many calls have not settled yet.
    pub fn live_calls(&self) -> usize {
        self.read(|state| state.live.len())
    }

    /// The title of a registered action, if it is registered.
    pub fn title_of(&self, action: &str) -> Option<String> {
        self.meta_of(action, |meta| meta.title.to_string())
    }

    /// The digest of a registered action's declaration: what a grant's basis binds.
    pub fn registration(&self, action: &str) -> Option<String> {
        self.meta_of(action, |meta| meta.declaration.clone())
    }

    /// The presence a registered action declares (a policy file may raise it).
    pub fn presence_of(&self, action: &str) -> Option<crate::countersignature::Presence> {
        self.meta_of(action, |meta| meta.presence)
    }

    /// A registered action's params schema (what its edit form is built from).
    pub fn params_schema(&self, action: &str) -> Option<Value> {
        self.meta_of(action, |meta| meta.schema.clone())
    }

    fn meta_of<R>(&self, action: &str, f: impl FnOnce(&ActionMeta) -> R) -> Option<R> {
        self.read(|state| state.registry.get(action).map(|e| f(e.action.meta())))
    }

    /// Checks raw arguments against an action's params, as an edit form does; records nothing.
    pub fn check_arguments(&self, action: &str, arguments: &str) -> Result<Value, String> {
        self.step(|state| {
            let (action, _) = state
                .resolve(&Call::new("", action, ""))
                .map_err(|_| "no such action".to_owned())?;
            let call = Call::new("", action.meta().id.to_string(), arguments);
            state
                .validate(action.as_ref(), &call)
                .map(|(_, value)| value)
                .map_err(|stop| stop.detail.unwrap_or_default())
        })
        .unwrap_or_else(|blocked| Err(blocked.to_string()))
    }

    /// The cap on a call's raw arguments, in bytes (what the gate refuses above).
    pub fn max_argument_bytes(&self) -> usize {
        self.read(|state| state.config.max_argument_bytes)
    }

    /// The ids of the registered actions, sorted.
    pub fn action_ids(&self) -> Vec<String> {
        self.read(|state| state.registry.ids())
    }

    fn post(&self) -> registration::Post {
        registration::Post {
            state: Rc::downgrade(&self.state),
            mailbox: Rc::downgrade(&self.mailbox),
            reentered: Rc::downgrade(&self.reentered),
        }
    }
}
