//! The executor's state: the registry, the live calls, grants, the policy in force and
//! the clock as the executor has seen it. Every transition runs under one borrow of it.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use sha2::{Digest as _, Sha256};

use super::registry::Registry;
use super::Config;
use crate::action::{ActionMeta, ErasedAction, PreparedCall};
use crate::audit::{AuditSink, Decider};
use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::handoff::HandoffMachine;
use crate::mode::Mode;
use crate::outcome::Settled;
use crate::policy::ApprovalPolicy;
use crate::reason::{Hook, Level, LevelSource, Reason};
use crate::ticket::{ApprovalRequest, Grant, Nonce};
use crate::time::Timestamp;

/// Where a live call is.
pub(crate) enum LiveState {
    Approval(Box<ApprovalRequest>),
    Performing,
    Handoff(HandoffMachine),
    /// Waiting for the person's answer until this deadline.
    Question(Timestamp),
}

/// A call past the decide stage that has not settled.
/// The calls not yet settled, in call-id order. A vector: few calls are live at once,
/// ids only grow (a new call goes last), and it keeps its room from one call to the next.
/// Each call is boxed: a live call is a few hundred bytes, put in and taken out whole,
/// and a box is built where it stays and moved as a pointer, not copied in and out.
#[derive(Default)]
pub(crate) struct LiveCalls(Vec<(CallId, Box<Live>)>);

impl LiveCalls {
    fn position(&self, call: &CallId) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(call))
    }

    pub(crate) fn get(&self, call: &CallId) -> Option<&Live> {
        let at = self.position(call).ok()?;
        self.0.get(at).map(|(_, live)| &**live)
    }

    pub(crate) fn get_mut(&mut self, call: &CallId) -> Option<&mut Live> {
        let at = self.position(call).ok()?;
        self.0.get_mut(at).map(|(_, live)| &mut **live)
    }

    pub(crate) fn contains_key(&self, call: &CallId) -> bool {
        self.position(call).is_ok()
    }

    /// Adds a call, or replaces the one with its id.
    pub(crate) fn insert(&mut self, call: CallId, live: Box<Live>) {
        match self.position(&call) {
            Ok(at) => {
                if let Some(slot) = self.0.get_mut(at) {
                    slot.1 = live;
                }
            }
            Err(at) => self.0.insert(at, (call, live)),
        }
    }

    pub(crate) fn remove(&mut self, call: &CallId) -> Option<Box<Live>> {
        let at = self.position(call).ok()?;
        Some(self.0.remove(at).1)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The calls in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&CallId, &Live)> {
        self.0.iter().map(|(call, live)| (call, &**live))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &CallId> {
        self.0.iter().map(|(call, _)| call)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Live> {
        self.0.iter().map(|(_, live)| &**live)
    }
}

pub(crate) struct Live {
    /// The id the model gave the call, as it sent it (shared with the settlement, and
    /// with `shown` when it needs no escaping).
    pub(crate) tool_call_id: std::sync::Arc<str>,
    /// The tool call id and action id as the call's audit records show them (escaped
    /// once, shared by every record).
    pub(crate) shown: super::settle::Shown,
    /// Who asked.
    pub(crate) caller: crate::call::Caller,
    /// The call's `traceparent`, if traced.
    pub(crate) trace: Option<String>,
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
    pub(crate) prepared: Rc<dyn PreparedCall>,
    /// The arguments (parsed to a value when first asked for).
    pub(crate) arguments: serde_json::Value,
    /// The plain digest a ticket binds (calls waiting for a card only: the path that
    /// needs no approval does not pay for it).
    pub(crate) digest: Option<ArgsDigest>,
    /// The keyed digest the audit records.
    pub(crate) audit_digest: ArgsDigest,
    pub(crate) started: Timestamp,
    pub(crate) level: ApprovalPolicy,
    /// What the card showed last (or, without a card, what the decision computed); the
    /// receipt repeats it.
    pub(crate) consequence: Option<String>,
    /// The person's edit this call carries (its card shows it; the model is told).
    pub(crate) edited: Option<crate::edit::EditDiff>,
    /// The deadline a restored call keeps across redraws.
    pub(crate) deadline: Option<Timestamp>,
    pub(crate) state: LiveState,
}

/// Where the levels and scopes come from.
#[derive(Debug, Clone)]
pub(crate) enum PolicyState {
    /// No policy file: the declarations and the session's own scopes.
    Declared,
    /// A valid policy file.
    Loaded(crate::policy::PolicyFile),
    /// A policy file that failed to load: only reversals run, under `last_good` (the
    /// last file that loaded), or asked every time if none did.
    Broken {
        error: crate::policy::PolicyError,
        last_good: Option<crate::policy::PolicyFile>,
    },
}

/// A refusal on its way to becoming a settlement: why, who decided, and the detail the
/// model's sentence may quote.
#[derive(Debug)]
pub(crate) struct Stop {
    pub(crate) reason: Reason,
    pub(crate) by: Decider,
    pub(crate) detail: Option<String>,
}

impl Stop {
    pub(crate) fn new(reason: Reason, by: Decider) -> Self {
        Self {
            reason,
            by,
            detail: None,
        }
    }

    /// A refusal the decision made.
    pub(crate) fn refusing(reason: Reason, by: Decider, detail: Option<String>) -> Self {
        Self { reason, by, detail }
    }

    pub(crate) fn with(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

pub(crate) struct ExecutorState {
    pub(crate) executor: u64,
    pub(crate) policy: PolicyState,
    pub(crate) config: Config,
    pub(crate) registry: Registry,
    pub(crate) live: LiveCalls,
    pub(crate) grants: Vec<Grant>,
    pub(crate) settled: VecDeque<Settled>,
    /// The latest instant the executor has been told; time never moves back.
    pub(crate) clock: Timestamp,
    /// Shared with the facade so a hook may read the mode while the state is borrowed.
    pub(crate) mode: Rc<Cell<Mode>>,
    /// Set by the facade when a call into it found the state borrowed (a hook re-entered).
    pub(crate) reentered: Rc<Cell<bool>>,
    pub(crate) next_grant: u64,
    pub(crate) next_call: u64,
    /// Where the records go.
    pub(crate) trail: super::trail::Trail,
    /// The tool call ids brought back after a reload in this page session.
    pub(crate) restored_ids: std::collections::HashSet<std::sync::Arc<str>>,
    /// Mints the tokens of actions whose run takes a countersignature.
    pub(crate) countersigner: Option<Rc<dyn crate::countersignature::Countersigner>>,
    /// Set when a panic left a step half made: every later step is refused.
    pub(crate) poisoned: bool,
}

impl ExecutorState {
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
            trail: super::trail::Trail::new(
                &config.session_id,
                &config.session.role,
                Rc::clone(&mode),
                audit,
            ),
            config,
            registry: Registry::new(),
            live: LiveCalls::default(),
            grants: Vec::new(),
            settled: VecDeque::new(),
            clock: Timestamp::default(),
            mode,
            reentered,
            next_grant: 1,
            next_call: 1,
            restored_ids: std::collections::HashSet::new(),
            countersigner: None,
            poisoned: false,
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
        let role = &self.config.session.role;
        let from_file =
            |file: &crate::policy::PolicyFile| file.level(role, &meta.id, meta.kind, meta.confirm);
        match &self.policy {
            PolicyState::Declared => Level {
                policy: meta.policy,
                source: LevelSource::Declared,
            },
            PolicyState::Loaded(file) => match from_file(file) {
                (policy, Some((role, line))) => Level {
                    policy,
                    source: LevelSource::RoleOverride { role, line },
                },
                (policy, None) => Level {
                    policy,
                    source: LevelSource::Declared,
                },
            },
            PolicyState::Broken {
                last_good: Some(file),
                ..
            } => Level {
                policy: from_file(file).0,
                source: LevelSource::BrokenFileFallback { last_good: true },
            },
            PolicyState::Broken {
                last_good: None, ..
            } => Level {
                policy: ApprovalPolicy::AskAlways,
                source: LevelSource::BrokenFileFallback { last_good: false },
            },
        }
    }

    /// Whether the session holds `scope`: its role's scopes in the file in force (the
    /// last good one while broken), else the session's own.
    pub(crate) fn holds(&self, scope: &str) -> bool {
        let role = &self.config.session.role;
        match &self.policy {
            PolicyState::Loaded(file)
            | PolicyState::Broken {
                last_good: Some(file),
                ..
            } => file
                .role_for(role)
                .is_some_and(|(_, r)| r.scopes.contains(scope)),
            PolicyState::Declared
            | PolicyState::Broken {
                last_good: None, ..
            } => self.config.session.holds(scope),
        }
    }

    /// Whether calls of this action are refused outright: a broken file stops all but
    /// reversals.
    pub(crate) fn blocked_by_broken_file(&self, meta: &ActionMeta) -> Option<Stop> {
        match &self.policy {
            PolicyState::Broken { error, .. } if !meta.reversal => Some(
                Stop::new(
                    Reason::PolicyFileBroken { line: error.line },
                    Decider::Policy,
                )
                .with(error.to_string()),
            ),
            _ => None,
        }
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
