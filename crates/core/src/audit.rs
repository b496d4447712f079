//! Audit records: one per decision, arguments only as a digest.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

pub use crate::digest::{ArgsDigest, AuditKey, BadDigest};

use crate::codes::GrantId;
use crate::codes::Stage;
use crate::policy::{ApprovalPolicy, Confirm, Kind};
use crate::reason::Reason;

/// What a record says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditEvent {
    /// The gate let the call through to `run` without asking anyone.
    Allowed,
    /// The gate asked a person; the call waits for a ticket.
    Asked,
    /// A person countersigned this one call.
    Approved,
    /// A person countersigned and granted "always allow this session".
    Granted,
    /// The last step was handed to the person.
    HandedOff,
    /// The action rewrote the call (normalised arguments, or a safer action); the call
    /// re-entered the pipeline.
    Rewritten,
    /// The call ended; `outcome` says how. Exactly one per call, unless the call was
    /// superseded.
    Settled,
    /// A person edited the call's arguments on its card: the call ended here, without an
    /// outcome of its own, and continues as the new call `reason` names. Terminal.
    Superseded,
    /// This call holds a person's edit of the call `reason` names: the first record of
    /// the new call, before the pipeline decides it again.
    Edited,
    /// A control was pressed by a script, not a person (an untrusted event): refused,
    /// and the call waits as it was.
    GestureRefused,
    /// The call was waiting for a person when the page reloaded; it was brought back in
    /// this page session (the first record of its new call id) and is decided again.
    /// With reason `granted` and call 0: a session grant a person made before the page
    /// reloaded was derived again from what the page stored (the records of the calls
    /// it lets run cite its id).
    Restored,
    /// The gateway minted a countersignature for the call after the person approved it
    /// (written by the gateway, not the page: `countersignature` names the token, and
    /// `args_digest` is the plain SHA-256 the token binds).
    Countersigned,
    /// Not a call's: records before this one were pushed out of the page's bounded
    /// trail before the gateway acknowledged them; `reason` ([`crate::reason::Reason::TrailGap`])
    /// names their `seq`s. The page writes it when its shipping skips them.
    TrailGap,
}

/// Who made the decision a record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decider {
    /// The pipeline's own checks (resolve, validate, scope, availability).
    Pipeline,
    /// The resolved approval policy.
    Policy,
    /// The action's classification of these arguments.
    Classifier,
    /// A session grant ("always allow this session") made earlier by a person.
    SessionGrant,
    /// A person, in the dock or the page.
    Person,
    /// A deadline passing.
    Timer,
    /// The session's mode (away, unattended, bypass).
    Mode,
    /// The host: the action was unregistered, the page closed, a run was abandoned.
    Host,
    /// The action itself (`run`, `verify`, a handoff's `expect`).
    Action,
    /// The caller: an agent that withdrew its call.
    Caller,
}

/// One line of the audit trail. Arguments appear only as `args_digest`, a keyed digest
/// (see [`crate::digest::AuditKey`] for who can check a claimed argument against it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Unique and stable: `{session_id}-{seq}`. Stores deduplicate by it.
    pub id: String,
    /// The record's position in this executor's trail, from 1.
    pub seq: u64,
    /// The executor's session id.
    pub session: String,
    /// The session's role.
    pub role: String,
    /// When, in the host's milliseconds.
    pub at_ms: u64,
    /// The executor's call id.
    pub call: u64,
    /// The model's tool call id (truncated to 128 chars).
    pub tool_call_id: String,
    /// Who asked: omitted for the page's own assistant.
    #[serde(default, skip_serializing_if = "crate::call::Caller::is_assistant")]
    pub caller: crate::call::Caller,
    /// The action id as asked (truncated and escaped if hostile).
    pub action: String,
    /// The action's kind, once resolved.
    pub kind: Option<Kind>,
    /// The declaration's confirm override, once resolved (`off` is recorded as such).
    pub confirm: Option<Confirm>,
    /// The approval level the call is decided under: the resolved level (declaration or
    /// policy file) until a card is drawn, then the level that card asks under (a
    /// classifier may raise it; a redrawn card may change it). Never a mix of the two.
    pub policy: Option<ApprovalPolicy>,
    /// The session's mode when the decision was made.
    #[serde(default)]
    pub mode: crate::mode::Mode,
    /// The stage that made the decision.
    pub stage: Stage,
    /// What happened.
    pub event: AuditEvent,
    /// Who decided.
    pub decided_by: Decider,
    /// `OK` or a refusal code, on the terminal `settled` record only.
    pub outcome: Option<String>,
    /// The rule that decided (typed; never the arguments themselves).
    pub reason: Reason,
    /// The grant that allowed the call or that the person made, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantId>,
    /// The reason in words, for people reading the trail (derived from `reason`).
    pub summary: String,
    /// The keyed SHA-256 of the canonical arguments under the session's
    /// [`crate::digest::AuditKey`], as 64 lowercase hex digits.
    pub args_digest: String,
    /// Milliseconds since the call arrived.
    pub duration_ms: u64,
    /// The id (`jti`) of the countersignature minted, on `countersigned` records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub countersignature: Option<String>,
    /// The W3C `traceparent` the call came with ([`crate::call::Call::trace`]), if traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl AuditRecord {
    /// Whether this is the call's terminal record (`settled`, or `superseded` by an edit).
    pub fn is_terminal(&self) -> bool {
        matches!(self.event, AuditEvent::Settled | AuditEvent::Superseded)
    }
}

/// Where audit records go. Implemented for closures, like tower's `Predicate`.
pub trait AuditSink {
    /// Takes one record. Called in order, once per decision. A sink that panics poisons
    /// the executor (see [`crate::executor::Executor::is_poisoned`]). Calling back into the
    /// executor from here is refused ([`crate::ticket::Blocked::Reentered`]).
    fn record(&mut self, record: AuditRecord);
}

impl<F: FnMut(AuditRecord)> AuditSink for F {
    fn record(&mut self, record: AuditRecord) {
        self(record)
    }
}

/// The most records a [`MemoryAudit`] holds unless told otherwise
/// ([`MemoryAudit::with_capacity`]).
pub const DEFAULT_MEMORY_AUDIT_CAPACITY: usize = 4_096;

/// An in-memory sink; clones share one trail. For tests and for the dock's view, and
/// the page's buffer of records not yet shipped to a gateway.
///
/// Bounded: it holds at most its capacity. Positions are absolute (the first record
/// ever taken is position 0, whatever was let go since), so a reader that remembers a
/// position is never confused by what went before it. Two ways records leave:
/// - [`MemoryAudit::forget_before`]: the owner says they are kept elsewhere (a gateway
///   acknowledged them). Not a loss.
/// - A record taken while full pushes out the oldest one. That *is* a loss, and it is
///   counted: [`MemoryAudit::dropped`] says how many and which `seq`s, so the gap is
///   on record (and visible in any shipped trail as a jump in `seq`).
#[derive(Clone, Debug)]
pub struct MemoryAudit(Rc<RefCell<Trail>>);

#[derive(Debug)]
struct Trail {
    held: std::collections::VecDeque<AuditRecord>,
    /// The absolute position of `held[0]`.
    first: usize,
    capacity: usize,
    dropped: Dropped,
}

/// What a full [`MemoryAudit`] pushed out. The range spans from the first to the last
/// record ever pushed out: over several episodes, or when some had already been sent,
/// it can include records kept elsewhere (the page's shipping counts exactly what it
/// skipped, in `ShippingStatus`, and writes a `trail_gap` record for each gap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// How many records.
    pub count: usize,
    /// The `seq` of the first one dropped (0 when none).
    pub first_seq: u64,
    /// The `seq` of the last one dropped (0 when none).
    pub last_seq: u64,
}

impl Default for MemoryAudit {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_MEMORY_AUDIT_CAPACITY)
    }
}

impl MemoryAudit {
    /// An empty trail holding at most [`DEFAULT_MEMORY_AUDIT_CAPACITY`] records (past
    /// that the oldest are pushed out and counted in [`MemoryAudit::dropped`]; a host
    /// that must keep every record uses its own [`AuditSink`], or ships and forgets).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty trail holding at most `capacity` records (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        Self(Rc::new(RefCell::new(Trail {
            held: std::collections::VecDeque::new(),
            first: 0,
            capacity: capacity.max(1),
            dropped: Dropped::default(),
        })))
    }

    /// A copy of every record held.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.0.borrow().held.iter().cloned().collect()
    }

    /// The held records of one call, in order.
    pub fn for_call(&self, call: crate::call::CallId) -> Vec<AuditRecord> {
        self.0
            .borrow()
            .held
            .iter()
            .filter(|r| r.call == call.get())
            .cloned()
            .collect()
    }

    /// Up to `max` held records from absolute position `from` on (for shipping in
    /// batches). Records before the first one held are skipped.
    pub fn slice(&self, from: usize, max: usize) -> Vec<AuditRecord> {
        let trail = self.0.borrow();
        trail
            .held
            .iter()
            .skip(from.saturating_sub(trail.first))
            .take(max)
            .cloned()
            .collect()
    }

    /// The absolute position of the first record held (how many were let go before it).
    pub fn first(&self) -> usize {
        self.0.borrow().first
    }

    /// How many records were ever taken: the absolute position the next one gets.
    pub fn len(&self) -> usize {
        let trail = self.0.borrow();
        trail.first + trail.held.len()
    }

    /// Whether no record was ever taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most records it holds.
    pub fn capacity(&self) -> usize {
        self.0.borrow().capacity
    }

    /// How many records are held now.
    pub fn held(&self) -> usize {
        self.0.borrow().held.len()
    }

    /// Lets go of the records before absolute position `position`: they are kept
    /// elsewhere. Not counted as dropped.
    pub fn forget_before(&self, position: usize) {
        let mut trail = self.0.borrow_mut();
        let n = position.saturating_sub(trail.first).min(trail.held.len());
        trail.held.drain(..n);
        trail.first += n;
    }

    /// What was pushed out because the trail was full.
    pub fn dropped(&self) -> Dropped {
        self.0.borrow().dropped
    }

    /// Removes and returns every record held: they are the caller's to keep now. Not
    /// for a trail the page ships ([`MemoryAudit::forget_before`] is how shipping lets
    /// go); positions go on counting from where they were.
    pub fn take(&self) -> Vec<AuditRecord> {
        let mut trail = self.0.borrow_mut();
        trail.first += trail.held.len();
        trail.held.drain(..).collect()
    }
}

impl AuditSink for MemoryAudit {
    fn record(&mut self, record: AuditRecord) {
        let mut trail = self.0.borrow_mut();
        if trail.held.len() >= trail.capacity {
            if let Some(old) = trail.held.pop_front() {
                trail.first += 1;
                let dropped = &mut trail.dropped;
                if dropped.count == 0 {
                    dropped.first_seq = old.seq;
                }
                dropped.count += 1;
                dropped.last_seq = old.seq;
            }
        }
        trail.held.push_back(record);
    }
}
