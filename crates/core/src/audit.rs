//! Audit records: one per decision, arguments only as a digest.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::outcome::Stage;
use crate::policy::{ApprovalPolicy, Confirm, Kind};
use crate::reason::Reason;
use crate::ticket::GrantId;

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
    Restored,
    /// The gateway minted a countersignature for the call after the person approved it
    /// (written by the gateway, not the page: `countersignature` names the token, and
    /// `args_digest` is the plain SHA-256 the token binds).
    Countersigned,
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
/// (see [`crate::AuditKey`] for who can check a claimed argument against it).
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
    #[serde(default, skip_serializing_if = "crate::Caller::is_assistant")]
    pub caller: crate::Caller,
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
    pub mode: crate::Mode,
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
    /// The keyed SHA-256 of the canonical arguments under the session's [`crate::AuditKey`].
    pub args_digest: String,
    /// Milliseconds since the call arrived.
    pub duration_ms: u64,
    /// The id (`jti`) of the countersignature minted, on `countersigned` records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub countersignature: Option<String>,
    /// The W3C `traceparent` the call came with ([`crate::Call::trace`]), if traced.
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
    /// Takes one record. Called in order, once per decision.
    fn record(&mut self, record: AuditRecord);
}

impl<F: FnMut(AuditRecord)> AuditSink for F {
    fn record(&mut self, record: AuditRecord) {
        self(record)
    }
}

/// An in-memory sink; clones share one trail. For tests and for the dock's view.
#[derive(Clone, Debug, Default)]
pub struct MemoryAudit(Rc<RefCell<Vec<AuditRecord>>>);

impl MemoryAudit {
    /// An empty trail.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.0.borrow().clone()
    }

    /// The records of one call, in order.
    pub fn for_call(&self, call: crate::CallId) -> Vec<AuditRecord> {
        self.0
            .borrow()
            .iter()
            .filter(|r| r.call == call.get())
            .cloned()
            .collect()
    }

    /// Up to `max` records starting at position `from` (for shipping in batches).
    pub fn slice(&self, from: usize, max: usize) -> Vec<AuditRecord> {
        self.0
            .borrow()
            .iter()
            .skip(from)
            .take(max)
            .cloned()
            .collect()
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }

    /// Removes and returns every record (e.g. to send a batch to the gateway).
    pub fn take(&self) -> Vec<AuditRecord> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}

impl AuditSink for MemoryAudit {
    fn record(&mut self, record: AuditRecord) {
        self.0.borrow_mut().push(record);
    }
}
