//! The executor: every call through the fixed pipeline, failing closed.
//!
//! ```text
//! call ─► resolve ─► validate ─► scope ─► availability ─► decide ─► approve ─► perform ─► verify ─► receipt
//! ```
//!
//! Sans-IO: the executor never reads a clock and does no I/O. The host passes `now`
//! in, asks [`Executor::poll_timeout`] when to call [`Executor::handle_timeout`], and
//! drives each [`Job`]'s future itself, handing the [`Completion`] back.

mod inner;
mod stages;

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::action::{Action, LocalBoxFuture};
use crate::arguments::DEFAULT_MAX_ARGUMENT_BYTES;
use crate::audit::AuditSink;
use crate::call::{Call, CallId, Session};
use crate::handoff::HandoffStep;
use crate::outcome::Settled;
use crate::projection::{describe, ToolAnnotations, ToolSpec};
use crate::registry::RegisterError;
use crate::ticket::{ApprovalRequest, Grant, GrantId, NotPending, Ticket, TicketError};
use crate::time::Timestamp;
use inner::{Inner, LiveState, Next};

/// How long an approval card waits unless configured otherwise.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How an executor is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// A unique id for this session; audit record ids start with it.
    pub session_id: String,
    /// The role and scopes the assistant acts for.
    pub session: Session,
    /// How long an approval waits before `APPROVAL_TIMEOUT`. Default five minutes.
    pub approval_timeout: Duration,
    /// The cap on a call's raw arguments, in bytes. Default 16 KiB.
    pub max_argument_bytes: usize,
    /// Secret randomness for card nonces (the page fills it from `crypto.getRandomValues`).
    pub secret: [u8; 32],
}

impl Config {
    /// A config with defaults for everything but the session and its secret.
    pub fn new(session_id: impl Into<String>, session: Session, secret: [u8; 32]) -> Self {
        Self {
            session_id: session_id.into(),
            session,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            secret,
        }
    }
}

/// What happens next to a call.
#[derive(Debug)]
pub enum Step {
    /// It ended (refused, or done); the same value is queued for [`Executor::drain_settled`].
    Settled(Settled),
    /// It waits for a person's ticket; show this card.
    Approval(ApprovalRequest),
    /// It waits for the person to do the last step; show this handoff.
    Handoff(HandoffView),
    /// It may run: drive the job and hand its completion to [`Executor::complete`].
    Perform(Job),
}

/// A handoff waiting for the person, as the dock shows it.
#[derive(Clone, Debug, Serialize)]
pub struct HandoffView {
    /// The call waiting.
    pub call: CallId,
    /// The action's id.
    pub action: String,
    /// The action's title.
    pub title: String,
    /// Why the person must do it.
    pub reason: String,
    /// The steps.
    pub steps: Vec<HandoffStep>,
    /// The step whose target is highlighted now.
    pub current_step: Option<usize>,
    /// What will be checked when the person says done.
    pub expect: String,
    /// When it times out.
    pub deadline: Timestamp,
}

enum Deferred {
    Unregister { id: String, generation: u64 },
    Abandoned(CallId),
}

type Mailbox = Rc<RefCell<Vec<Deferred>>>;

/// The gate. Cheap to clone: clones share one registry, one queue, one audit trail.
///
/// Single-threaded by design (page code runs on one thread). Action hooks
/// (`available`, `consequence`, `classify`, `verify`, `expect`) run while the executor
/// is busy and must not call back into it.
#[derive(Clone)]
pub struct Executor {
    inner: Rc<RefCell<Inner>>,
    mailbox: Mailbox,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("Executor")
            .field("session", &inner.config.session_id)
            .field("actions", &inner.actions.len())
            .field("live_calls", &inner.live.len())
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor with no actions, writing audit records to `audit`.
    pub fn new(config: Config, audit: impl AuditSink + 'static) -> Self {
        Self {
            inner: Rc::new(RefCell::new(Inner::new(config, Box::new(audit)))),
            mailbox: Rc::default(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.inner.borrow_mut();
        let deferred = std::mem::take(&mut *self.mailbox.borrow_mut());
        apply(&mut inner, deferred);
        f(&mut inner)
    }

    /// Registers an action. Dropping the returned [`Registration`] (or calling
    /// [`Registration::unregister`]) removes it and settles its waiting calls as `UNAVAILABLE`.
    pub fn register<P>(&self, action: Action<P>) -> Result<Registration, RegisterError>
    where
        P: DeserializeOwned + JsonSchema + Clone + 'static,
    {
        let erased = action.into_erased()?;
        let id = erased.meta().id.clone();
        let generation = self.with(|inner| inner.insert_action(erased))?;
        Ok(Registration {
            id,
            generation,
            inner: Rc::downgrade(&self.inner),
            mailbox: Rc::downgrade(&self.mailbox),
            done: false,
        })
    }

    /// The projection: registered actions that are available and within the session's
    /// scopes, as tools, sorted by name.
    pub fn projection(&self) -> Vec<ToolSpec> {
        self.with(|inner| {
            if matches!(inner.policy, inner::PolicyState::Broken(_)) {
                // Fail closed: with a broken policy file the model is offered nothing.
                return Vec::new();
            }
            let scopes = inner.scopes();
            let mut tools: Vec<ToolSpec> = inner
                .actions
                .values()
                .filter(|e| {
                    let meta = e.action.meta();
                    meta.scope.as_ref().is_none_or(|s| scopes.contains(s))
                        && e.action.is_available()
                })
                .map(|e| {
                    let meta = e.action.meta();
                    ToolSpec {
                        name: meta.id.clone(),
                        description: describe(
                            &meta.description,
                            meta.kind,
                            inner.effective_policy(meta),
                            meta.handoff.is_some(),
                        ),
                        parameters: meta.schema.clone(),
                        annotations: ToolAnnotations {
                            title: meta.title.clone(),
                            read_only_hint: meta.kind == crate::Kind::Read,
                            destructive_hint: meta.kind == crate::Kind::Danger,
                            approval: inner.effective_policy(meta),
                            handoff: meta.handoff.is_some(),
                        },
                    }
                })
                .collect();
            tools.sort_unstable_by(|a, b| a.name.cmp(&b.name));
            tools
        })
    }

    /// Takes one call from the model through resolve, validate, scope, availability and
    /// decide. Stops at the first refusal; `run` is never reached then.
    pub fn submit(&self, call: Call, now: Timestamp) -> Step {
        let next = self.with(|inner| inner.submit(call, now));
        self.step(next)
    }

    /// Applies a person's ticket. On success the call may run ([`Step::Perform`]), or
    /// settles `UNAVAILABLE` if the action went away meanwhile.
    pub fn approve(&self, ticket: Ticket, now: Timestamp) -> Result<Step, TicketError> {
        let next = self.with(|inner| inner.approve(ticket, now))?;
        Ok(self.step(next))
    }

    /// The person declines a pending call: `PERMISSION_DENIED`, with their reason for the model.
    pub fn deny(
        &self,
        call: CallId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Settled, NotPending> {
        self.with(|inner| inner.deny(call, reason, now))
    }

    /// Hands back a finished job: verifies and settles the call. `None` if the call was
    /// already settled (e.g. by [`Executor::shutdown`]).
    pub fn complete(&self, mut completion: Completion, now: Timestamp) -> Option<Settled> {
        completion.guard.armed = false;
        if completion.guard.executor != self.with(|inner| inner.executor) {
            return None;
        }
        let call = completion.guard.call;
        let result = std::mem::replace(&mut completion.result, Err(String::new()));
        self.with(|inner| inner.complete(call, result, now))
    }

    /// The person says the handoff is done: the `expect` check reads the page now;
    /// a receipt if it holds, `HANDOFF_FAILED` if not.
    pub fn handoff_done(&self, call: CallId, now: Timestamp) -> Result<Settled, NotPending> {
        self.with(|inner| inner.handoff_event(call, true, now))
    }

    /// The person cancels the handoff: `HANDOFF_CANCELLED`.
    pub fn handoff_cancel(&self, call: CallId, now: Timestamp) -> Result<Settled, NotPending> {
        self.with(|inner| inner.handoff_event(call, false, now))
    }

    /// Moves a handoff's highlight to step `index`.
    pub fn show_step(&self, call: CallId, index: usize) -> Result<(), NotPending> {
        self.with(|inner| inner.show_step(call, index))
    }

    /// Pending approval cards, oldest first.
    pub fn approvals(&self) -> Vec<ApprovalRequest> {
        self.with(|inner| {
            inner
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
        self.with(|inner| {
            inner
                .live
                .keys()
                .filter_map(|c| handoff_view(inner, *c))
                .collect()
        })
    }

    /// The session grants in force.
    pub fn grants(&self) -> Vec<Grant> {
        self.with(|inner| inner.grants.clone())
    }

    /// Restores a grant a person made in an earlier page session (e.g. from the page's
    /// storage). Refused unless the action is registered, its level for this session is
    /// `Ask`, and it does not ask twice: a stored grant can never cover more than a fresh
    /// "always allow" could. Storage is trusted like the page's own script.
    pub fn restore_grant(
        &self,
        action: &str,
        rule: crate::GrantRule,
        now: Timestamp,
    ) -> Result<GrantId, TicketError> {
        self.with(|inner| {
            let meta = inner
                .actions
                .get(action)
                .map(|e| e.action.meta().clone())
                .ok_or(TicketError::NotPending)?;
            if inner.effective_policy(&meta) != crate::ApprovalPolicy::Ask
                || meta.confirm_twice
                || meta.handoff.is_some()
            {
                return Err(TicketError::GrantNotOffered);
            }
            Ok(inner.add_grant(action, &meta.title, rule, now, CallId(0)))
        })
    }

    /// Revokes a grant; later calls are asked again. `false` if there was none.
    pub fn revoke(&self, grant: GrantId) -> bool {
        self.with(|inner| inner.revoke(grant))
    }

    /// The earliest deadline of any waiting call: call [`Executor::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.with(|inner| inner.poll_timeout())
    }

    /// Settles every call whose deadline is at or before `now`; returns them.
    pub fn handle_timeout(&self, now: Timestamp) -> Vec<Settled> {
        self.with(|inner| {
            let before = inner.settled.len();
            inner.handle_timeout(now);
            inner.settled.iter().skip(before).cloned().collect()
        })
    }

    /// Settles every live call as `UNAVAILABLE` (the page is closing or navigating away).
    pub fn shutdown(&self, now: Timestamp) -> Vec<Settled> {
        self.with(|inner| {
            let before = inner.settled.len();
            inner.shutdown(now);
            inner.settled.iter().skip(before).cloned().collect()
        })
    }

    /// Every settlement since the last drain, in order: the one place a host needs to
    /// watch to answer the model (timeouts and unregistering settle calls too).
    pub fn drain_settled(&self) -> Vec<Settled> {
        self.with(|inner| inner.settled.drain(..).collect())
    }

    /// Loads the deployment's policy file (JSON; see [`crate::PolicyFile`]): the session's
    /// role then gets the file's scopes and per-action levels. A malformed file is refused
    /// with its line, and the executor then refuses every call (fail closed) until a valid
    /// file is loaded: it never runs with no policy after being told to use one.
    pub fn load_policy(&self, text: &str) -> Result<(), crate::PolicyError> {
        let parsed = crate::PolicyFile::from_json(text);
        self.with(|inner| {
            inner.policy = match &parsed {
                Ok(file) => inner::PolicyState::Loaded(file.clone()),
                Err(e) => inner::PolicyState::Broken(e.clone()),
            }
        });
        parsed.map(|_| ())
    }

    /// Marks the policy as unusable (e.g. the file could not be fetched): every call is
    /// refused with `error` until a valid file is loaded.
    pub fn fail_policy(&self, error: crate::PolicyError) {
        self.with(|inner| inner.policy = inner::PolicyState::Broken(error));
    }

    /// The error of the last policy file, while the executor refuses everything because of it.
    pub fn policy_error(&self) -> Option<crate::PolicyError> {
        self.with(|inner| match &inner.policy {
            inner::PolicyState::Broken(e) => Some(e.clone()),
            _ => None,
        })
    }

    /// Switches the session's mode; later decisions use (and record) it. Calls already
    /// waiting for a person keep waiting.
    pub fn set_mode(&self, mode: crate::Mode) {
        self.with(|inner| inner.mode = mode);
    }

    /// The session's mode.
    pub fn mode(&self) -> crate::Mode {
        self.with(|inner| inner.mode)
    }

    /// How many calls have not settled yet.
    pub fn live_calls(&self) -> usize {
        self.with(|inner| inner.live.len())
    }

    /// The title of a registered action (available or not), if it is registered.
    pub fn title_of(&self, action: &str) -> Option<String> {
        self.with(|inner| {
            inner
                .actions
                .get(action)
                .map(|e| e.action.meta().title.clone())
        })
    }

    /// The ids of the registered actions, sorted.
    pub fn action_ids(&self) -> Vec<String> {
        self.with(|inner| {
            let mut ids: Vec<String> = inner.actions.keys().cloned().collect();
            ids.sort_unstable();
            ids
        })
    }

    fn step(&self, next: Next) -> Step {
        match next {
            Next::Settled(s) => Step::Settled(s),
            Next::Approval(r) => Step::Approval(*r),
            Next::Handoff(call) => match self.with(|inner| handoff_view(inner, call)) {
                Some(view) => Step::Handoff(view),
                None => Step::Settled(
                    self.with(|inner| inner.settled.iter().rev().find(|s| s.call == call).cloned())
                        .unwrap_or_else(|| lost(call)),
                ),
            },
            Next::Perform(call, future) => Step::Perform(Job {
                future,
                guard: Guard {
                    call,
                    executor: self.with(|inner| inner.executor),
                    inner: Rc::downgrade(&self.inner),
                    mailbox: Rc::downgrade(&self.mailbox),
                    armed: true,
                },
            }),
        }
    }
}

// Not reachable: a handoff just started is live. Kept total rather than panicking.
fn lost(call: CallId) -> Settled {
    Settled {
        call,
        tool_call_id: String::new(),
        action: String::new(),
        outcome: crate::Outcome::Refused(stages::unavailable("", "was lost")),
    }
}

fn handoff_view(inner: &Inner, call: CallId) -> Option<HandoffView> {
    let live = inner.live.get(&call)?;
    let LiveState::Handoff(machine) = &live.state else {
        return None;
    };
    let meta = live.action.meta();
    let handoff = meta.handoff.as_ref()?;
    Some(HandoffView {
        call,
        action: meta.id.clone(),
        title: meta.title.clone(),
        reason: handoff.reason.clone(),
        steps: handoff.steps.clone(),
        current_step: machine.current_step(),
        expect: handoff.expect.description.clone(),
        deadline: machine.deadline(),
    })
}

fn apply(inner: &mut Inner, deferred: Vec<Deferred>) {
    for item in deferred {
        match item {
            Deferred::Unregister { id, generation } => inner.unregister(&id, generation),
            Deferred::Abandoned(call) => inner.abandon(call),
        }
    }
}

fn post(inner: &Weak<RefCell<Inner>>, mailbox: &Weak<RefCell<Vec<Deferred>>>, item: Deferred) {
    let (Some(inner), Some(mailbox)) = (inner.upgrade(), mailbox.upgrade()) else {
        return;
    };
    mailbox.borrow_mut().push(item);
    // Apply now if the executor is idle; if it is busy (a drop inside a hook), the
    // next operation applies it before doing anything else.
    if let Ok(mut busy) = inner.try_borrow_mut() {
        let deferred = std::mem::take(&mut *mailbox.borrow_mut());
        apply(&mut busy, deferred);
    };
}

/// A live registration. Dropping it unregisters the action.
#[must_use = "dropping a Registration unregisters the action at once"]
pub struct Registration {
    id: String,
    generation: u64,
    inner: Weak<RefCell<Inner>>,
    mailbox: Weak<RefCell<Vec<Deferred>>>,
    done: bool,
}

impl Registration {
    /// The action's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Removes the action now; its waiting calls settle as `UNAVAILABLE`.
    pub fn unregister(mut self) {
        self.release();
    }

    /// Keeps the action registered for the executor's whole life.
    pub fn forget(mut self) {
        self.done = true;
    }

    fn release(&mut self) {
        if !self.done {
            self.done = true;
            let item = Deferred::Unregister {
                id: self.id.clone(),
                generation: self.generation,
            };
            post(&self.inner, &self.mailbox, item);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

struct Guard {
    call: CallId,
    executor: u64,
    inner: Weak<RefCell<Inner>>,
    mailbox: Weak<RefCell<Vec<Deferred>>>,
    armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A job or completion dropped before `complete`: settle instead of hanging.
        if self.armed {
            post(&self.inner, &self.mailbox, Deferred::Abandoned(self.call));
        }
    }
}

/// A call allowed to run. Await [`Job::run`] and pass its [`Completion`] to
/// [`Executor::complete`]. Dropping either first settles the call as `EXECUTION_FAILED`.
#[must_use = "a job does nothing until run; dropping it settles the call as failed"]
pub struct Job {
    future: LocalBoxFuture<Result<Value, String>>,
    guard: Guard,
}

impl Job {
    /// The call this job runs.
    pub fn call(&self) -> CallId {
        self.guard.call
    }

    /// Runs the action's `run`.
    pub async fn run(self) -> Completion {
        let Job { future, guard } = self;
        let result = future.await;
        Completion { result, guard }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("call", &self.guard.call)
            .finish_non_exhaustive()
    }
}

/// A finished run, only obtainable from [`Job::run`].
#[must_use = "hand the completion to Executor::complete"]
pub struct Completion {
    result: Result<Value, String>,
    guard: Guard,
}

impl Completion {
    /// The call it belongs to.
    pub fn call(&self) -> CallId {
        self.guard.call
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("call", &self.guard.call)
            .field("ok", &self.result.is_ok())
            .finish()
    }
}
