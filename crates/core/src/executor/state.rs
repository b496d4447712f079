//! The executor's state, under one borrow per transition: its config, the registry,
//! the live calls, grants, the policy in force and the clock as the executor has seen it.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::action::{Action, ActionMeta, ErasedAction};
use crate::arguments::DEFAULT_MAX_ARGUMENT_BYTES;
use crate::audit::{AuditSink, Decider};
use crate::call::{CallId, Session};
use crate::digest::AuditKey;
use crate::mode::Mode;
use crate::outcome::Settled;
use crate::reason::{Hook, Level, Reason};
use crate::ticket::Nonce;
use crate::time::Timestamp;

use super::levels::{Grants, PolicyState};
use super::live::LiveCalls;
pub(crate) use super::live::Stop;
use super::trail::Trail;

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
    /// How many calls one agent outside the page (WebMCP, MCP) may have live at once;
    /// more are refused as `UNAVAILABLE` until the person has decided some. Default 3:
    /// an agent cannot bury the dock (or the page's own assistant) under cards.
    pub max_live_per_agent: usize,
    /// Whether a countersigned action an agent outside the page asked for needs the
    /// person's passkey, whatever it declares. Off by default. An agent that drives the
    /// browser (over the DevTools protocol) makes trusted clicks, so a click token for its
    /// own call proves little; a passkey assertion it cannot make.
    pub agents_need_passkey: bool,
    /// Secret randomness for card nonces (the page fills it from `crypto.getRandomValues`).
    pub secret: [u8; 32],
    /// The key of the audit records' argument digests. Default: derived from `secret`,
    /// so it lives only in this page session (see [`AuditKey`] for who can check what).
    pub audit_key: AuditKey,
}

impl Config {
    /// A config with defaults for everything but the session and its secret.
    pub fn new(session_id: impl Into<String>, session: Session, secret: [u8; 32]) -> Self {
        Self {
            session_id: session_id.into(),
            session,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            max_live_per_agent: 3,
            agents_need_passkey: false,
            audit_key: AuditKey::new(prefix(&Sha256::digest([&secret[..], b"audit"].concat()))),
            secret,
        }
    }
}

pub(crate) struct ExecutorState {
    pub(crate) executor: u64,
    pub(crate) policy: PolicyState,
    pub(crate) config: Config,
    pub(crate) registry: Registry,
    pub(crate) live: LiveCalls,
    pub(crate) grants: Grants,
    pub(crate) settled: VecDeque<Settled>,
    /// The latest instant the executor has been told; time never moves back.
    pub(crate) clock: Timestamp,
    /// Shared with the facade so a hook may read the mode while the state is borrowed.
    pub(crate) mode: Rc<Cell<Mode>>,
    /// Set by the facade when a call into it found the state borrowed (a hook re-entered).
    pub(crate) reentered: Rc<Cell<bool>>,
    pub(crate) next_call: u64,
    /// Where the records go.
    pub(crate) trail: Trail,
    /// The tool call ids brought back after a reload in this page session.
    pub(crate) restored_ids: std::collections::HashSet<std::sync::Arc<str>>,
    /// Mints the tokens of actions whose run takes a countersignature.
    pub(crate) countersigner: Option<Rc<dyn crate::countersignature::Countersigner>>,
    /// Set when a panic left a step half made: every later step is refused.
    pub(crate) poisoned: bool,
    /// What untrusted content each caller's model has read: the page's assistant's
    /// until the person speaks again; an outside agent's for the session (the person's
    /// words to the page never reach it).
    pub(crate) untrusted: Vec<(crate::call::Caller, std::sync::Arc<str>)>,
}

impl ExecutorState {
    /// The untrusted content `caller`'s model has read, if any.
    pub(crate) fn untrusted_for(
        &self,
        caller: crate::call::Caller,
    ) -> Option<&std::sync::Arc<str>> {
        self.untrusted
            .iter()
            .find(|(c, _)| *c == caller)
            .map(|(_, source)| source)
    }

    /// `caller`'s model has read untrusted content (the first source is kept).
    pub(crate) fn taint(&mut self, caller: crate::call::Caller, source: &std::sync::Arc<str>) {
        if self.untrusted_for(caller).is_none() {
            self.untrusted.push((caller, std::sync::Arc::clone(source)));
        }
    }

    pub(crate) fn new(
        config: Config,
        audit: Box<dyn AuditSink>,
        mode: Rc<Cell<Mode>>,
        reentered: Rc<Cell<bool>>,
    ) -> Self {
        // INVARIANT: two executors never share an id (nor card nonces), even when they
        // are given the same secret: a ticket or a completion of one is foreign to the
        // other.
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let instance = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let executor = u64::from_le_bytes(prefix(&Sha256::digest(
            [&config.secret[..], b"executor", &instance.to_le_bytes()].concat(),
        )));
        Self {
            executor,
            policy: PolicyState::Declared,
            trail: Trail::new(
                &config.session_id,
                &config.session.role,
                Rc::clone(&mode),
                audit,
            ),
            config,
            registry: Registry::new(),
            live: LiveCalls::default(),
            grants: Grants::default(),
            settled: VecDeque::new(),
            clock: Timestamp::default(),
            mode,
            reentered,
            next_call: 1,
            restored_ids: std::collections::HashSet::new(),
            countersigner: None,
            poisoned: false,
            untrusted: Vec::new(),
        }
    }

    /// Moves the clock to `now` unless it has already seen a later instant, and returns
    /// the clock. INVARIANT: the executor's time only moves forward, so a stale or
    /// backwards `now` from a caller can never approve an expired card.
    pub(crate) fn tick(&mut self, now: Timestamp) -> Timestamp {
        self.clock = self.clock.max(now);
        self.clock
    }

    /// Runs an action's hook, refusing the call if the hook called back into the
    /// executor (its answer was made without the executor and cannot be trusted).
    pub(crate) fn hook<T>(&self, hook: Hook, f: impl FnOnce() -> T) -> Result<T, Stop> {
        self.reentered.set(false);
        let out = f();
        if self.reentered.replace(false) {
            Err(Stop::new(Reason::HookReentered { hook }, Decider::Action))
        } else {
            Ok(out)
        }
    }

    /// The level this session's calls of an action get now, and where it comes from.
    pub(crate) fn level(&self, meta: &ActionMeta) -> Level {
        self.policy.level(meta, &self.config.session.role)
    }

    /// Whether the session holds `scope` under the policy in force.
    pub(crate) fn holds(&self, scope: &str) -> bool {
        self.policy.holds(scope, &self.config.session)
    }

    pub(crate) fn nonce(&self, call: CallId, round: u8, refresh: u8) -> Nonce {
        let digest = Sha256::digest(
            [
                &self.config.secret[..],
                b"nonce",
                &self.executor.to_le_bytes(),
                &call.0.to_le_bytes(),
                &[round, refresh],
            ]
            .concat(),
        );
        Nonce(prefix(&digest))
    }
}

/// The first `N` bytes of `bytes` (zero-padded if shorter).
pub(crate) fn prefix<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (slot, byte) in out.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    out
}

/// The longest action id accepted (OpenAI's function-name limit).
pub const MAX_ACTION_ID_LEN: usize = 64;

/// Why a declaration was refused at registration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The id is empty, too long, or has characters other than ASCII letters, digits, `_`, `-`.
    #[error("action id `{0}` must be 1 to 64 ASCII letters, digits, `_` or `-`")]
    InvalidId(String),
    /// Another live registration has the id.
    #[error("action `{0}` is already registered")]
    Duplicate(String),
    /// The action has neither `run` nor a handoff: it could never do anything.
    #[error("action `{0}` has neither a run nor a handoff")]
    NothingToDo(String),
    /// The action needs a passkey but its run takes no countersignature (use
    /// `run_countersigned`): nothing would ever check the passkey.
    #[error("action `{0}` needs a passkey but its run takes no countersignature")]
    PasskeyWithoutCountersignature(String),
    /// The action has both: a handoff is the person's step, so the executor never runs one.
    #[error("action `{0}` has both a run and a handoff; a handoff action is done by the person")]
    RunAndHandoff(String),
    /// A question nobody could answer: its timeout is zero, or its answer type is not
    /// an object (a form answers with fields; wrap a choice in a struct).
    #[error("the question of action `{0}` could never be answered (zero timeout, or an answer type that is not a struct)")]
    Unanswerable(String),
    /// A question is the person's to answer: it has no run and no handoff.
    #[error("action `{0}` is a question and also has a run or a handoff")]
    QuestionAndMore(String),
    /// The handoff lists no steps for the person.
    #[error("the handoff of action `{0}` has no steps")]
    HandoffWithoutSteps(String),
    /// The action's approval timeout is zero: its cards would expire as they are drawn,
    /// so nobody could ever approve it.
    #[error("action `{0}` has an approval timeout of zero; nobody could approve it")]
    ZeroApprovalTimeout(String),
    /// The params offer alternatives the arguments alone cannot tell apart (an untagged
    /// enum whose variants overlap): the card could show one and `run` get another.
    #[error("the params of action `{0}` are ambiguous: {1}")]
    Ambiguous(String, String),
    /// The executor took no step (see [`crate::ticket::Blocked`]).
    #[error(transparent)]
    Blocked(#[from] crate::ticket::Blocked),
}

/// Checks a declaration before it is registered.
pub(crate) fn check_declaration<P>(action: &Action<P>) -> Result<(), RegisterError> {
    let meta = &action.meta;
    let id = &meta.id.to_string();
    let id_ok = !id.is_empty()
        && id.len() <= MAX_ACTION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        let shown: String = id.chars().take(MAX_ACTION_ID_LEN).collect();
        return Err(RegisterError::InvalidId(shown.escape_default().to_string()));
    }
    if meta.approval_timeout.is_some_and(|t| t.is_zero()) {
        return Err(RegisterError::ZeroApprovalTimeout(id.clone()));
    }
    if let Some(question) = &meta.question {
        if action.run.is_some() || action.run_signed.is_some() || meta.handoff.is_some() {
            return Err(RegisterError::QuestionAndMore(id.clone()));
        }
        // An answer is a form's object; a question nobody could answer is refused.
        let object = question.schema.get("type").and_then(|t| t.as_str()) == Some("object");
        if question.timeout.is_zero() || !object {
            return Err(RegisterError::Unanswerable(id.clone()));
        }
        return Ok(());
    }
    if meta.presence == crate::countersignature::Presence::Passkey && action.run_signed.is_none() {
        return Err(RegisterError::PasskeyWithoutCountersignature(id.clone()));
    }
    let runs = action.run.is_some() || action.run_signed.is_some();
    match (runs, &meta.handoff) {
        (false, None) => Err(RegisterError::NothingToDo(id.clone())),
        (true, Some(_)) => Err(RegisterError::RunAndHandoff(id.clone())),
        (false, Some(handoff)) if handoff.steps.is_empty() => {
            Err(RegisterError::HandoffWithoutSteps(id.clone()))
        }
        _ => Ok(()),
    }
}

/// One registration: the action and the generation that tells it from an earlier or a
/// later registration under the same id.
pub(crate) struct Entry {
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
}

/// The registered actions by id.
pub(crate) struct Registry {
    actions: BTreeMap<String, Entry>,
    next_generation: u64,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Self {
            actions: BTreeMap::new(),
            next_generation: 1,
        }
    }

    /// Adds an action; its generation is new.
    pub(crate) fn insert(&mut self, action: Rc<dyn ErasedAction>) -> Result<u64, RegisterError> {
        let id = action.meta().id.to_string();
        if self.actions.contains_key(&id) {
            return Err(RegisterError::Duplicate(id));
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        self.actions.insert(id, Entry { action, generation });
        Ok(generation)
    }

    /// Removes the registration `generation` of `id`; a later one under the same id stays.
    pub(crate) fn remove(&mut self, id: &str, generation: u64) -> Option<Entry> {
        if self.is_current(id, generation) {
            self.actions.remove(id)
        } else {
            None
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Entry> {
        self.actions.get(id)
    }

    /// Whether `generation` is still the registration of `id`.
    pub(crate) fn is_current(&self, id: &str, generation: u64) -> bool {
        self.actions
            .get(id)
            .is_some_and(|e| e.generation == generation)
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.actions.values()
    }

    pub(crate) fn len(&self) -> usize {
        self.actions.len()
    }

    /// The registered ids, sorted.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.actions.keys().cloned().collect()
    }
}
