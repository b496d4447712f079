//! Audit records: one per decision, arguments only as a digest.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

pub use crate::canonical::canonical_json;
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
    /// The person said a handoff's step was done, but its expectation does not hold yet.
    NotYet,
    /// The action rewrote the call, which went through the pipeline again.
    Rewritten,
    /// The call ended; `outcome` says how. One per call, unless it was superseded.
    Settled,
    /// A person's edit ended the call; it goes on as the call `reason` names. Terminal.
    Superseded,
    /// The first record of a call made by a person's edit of the call `reason` names.
    Edited,
    /// A script, not a person, pressed a control: refused; the call still waits.
    GestureRefused,
    /// A call waiting when the page reloaded was brought back under a new call id. With
    /// reason `granted` and call 0: a stored session grant was derived again.
    Restored,
    /// The gateway (not the page) minted a countersignature, named in `countersignature`, and
    /// keyed `args_digest` itself (only the token carries the plain SHA-256 it binds).
    Countersigned,
    /// Not a call's: records left the page's trail unacknowledged; `reason` names their `seq`s.
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
    /// The approval level: the resolved one; for a call that runs or that the mode refuses,
    /// the one the gate decided under (never below `ask` for a countersigned call or an
    /// outside agent's write); from the first card on, the card's.
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
    /// A sentence for `reason`, written by the gateway into the trail it keeps;
    /// records fresh from an executor leave it empty (the page does not carry the sentences).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// The keyed SHA-256 of the canonical arguments ([`AuditKey`]), as 64 lowercase hex digits.
    pub args_digest: String,
    /// Milliseconds since the call arrived.
    pub duration_ms: u64,
    /// The id (`jti`) of the countersignature minted, on `countersigned` records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub countersignature: Option<String>,
    /// Who approved: the person whose passkey confirmed the call in the gateway's
    /// approval window. Only the gateway writes it; a page's record with one is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
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
    /// Takes one record, in order, once per decision. It must not call back into the executor.
    fn record(&mut self, record: AuditRecord);
}

impl<F: FnMut(AuditRecord)> AuditSink for F {
    fn record(&mut self, record: AuditRecord) {
        self(record)
    }
}

/// The most records a [`MemoryAudit`] holds unless made [`MemoryAudit::with_capacity`].
pub const DEFAULT_MEMORY_AUDIT_CAPACITY: usize = 4_096;

/// An in-memory sink; clones share one trail. Positions are absolute (the first record ever
/// is 0); when full, a new record pushes out the oldest ([`MemoryAudit::dropped`] counts it).
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

/// What a full [`MemoryAudit`] pushed out; the range may span records kept elsewhere.
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
    /// An empty trail holding at most [`DEFAULT_MEMORY_AUDIT_CAPACITY`] records. A host
    /// that must keep every record uses its own [`AuditSink`], or ships and forgets.
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

    /// Up to `max` held records from absolute position `from` on, for shipping.
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

    /// Lets go of the records before absolute `position`, kept elsewhere (not dropped).
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
