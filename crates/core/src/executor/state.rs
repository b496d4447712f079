//! The executor's config, and its state: borrowed once per transition.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::action::ActionMeta;
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
use super::registry::Registry;
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
    /// How many calls one agent outside the page (WebMCP, MCP) may have live; more are
    /// `UNAVAILABLE` until the person decides some, so it cannot bury the dock. Default 3.
    pub max_live_per_agent: usize,
    /// Whether a countersigned action an outside agent asked for needs a passkey, whatever it
    /// declares. Off by default. An agent driving the browser (DevTools protocol) makes trusted
    /// clicks, so a click token proves little; a passkey assertion it cannot make.
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
    pub(crate) trail: Trail,
    /// The tool call ids brought back after a reload in this page session.
    pub(crate) restored_ids: Vec<std::sync::Arc<str>>,
    pub(crate) countersigner: Option<Rc<dyn crate::countersignature::Countersigner>>,
    /// Set when a panic left a step half made: every later step is refused.
    pub(crate) poisoned: bool,
    /// Untrusted content each caller's model has read: the assistant's until the person
    /// speaks again, an outside agent's for the session (the person's words never reach it).
    pub(crate) untrusted: Vec<(crate::call::Caller, std::sync::Arc<str>)>,
}

impl ExecutorState {
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
        // INVARIANT: two executors never share an id (nor card nonces), even given the same
        // secret: a ticket or a completion of one is foreign to the other.
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
            registry: Registry::default(),
            live: LiveCalls::default(),
            grants: Grants::default(),
            settled: VecDeque::new(),
            clock: Timestamp::default(),
            mode,
            reentered,
            next_call: 1,
            restored_ids: Vec::new(),
            countersigner: None,
            poisoned: false,
            untrusted: Vec::new(),
        }
    }

    /// Moves the clock to `now` unless it has seen later, and returns it. INVARIANT: time
    /// only moves forward, so a stale or backwards `now` can never approve an expired card.
    pub(crate) fn tick(&mut self, now: Timestamp) -> Timestamp {
        self.clock = self.clock.max(now);
        self.clock
    }

    /// Runs a hook, refusing the call if it re-entered the executor (its answer is untrusted).
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
