//! The audit trail as the executor writes it: one record per decision, numbered in
//! order, each sharing the session's id and role and its call's ids.
//!
//! Its own piece of the state, so a record can be written while a live call is
//! borrowed (the call is read where it is, never moved out and back).

use std::cell::Cell;
use std::rc::Rc;

use crate::audit::{AuditEvent, AuditRecord, AuditSink, Decider};
use crate::mode::Mode;
use crate::outcome::Outcome;
use crate::reason::Reason;
use crate::time::Timestamp;

use super::settle::Trace;

/// Where the executor's records go, and what every record shares.
pub(crate) struct Trail {
    /// The session id and role every record carries.
    session_id: String,
    role: String,
    /// The next record's `seq` (the first is 1).
    next_seq: u64,
    /// Shared with the facade (a hook may read it while the state is borrowed).
    mode: Rc<Cell<Mode>>,
    sink: Box<dyn AuditSink>,
}

impl Trail {
    pub(crate) fn new(
        session_id: &str,
        role: &str,
        mode: Rc<Cell<Mode>>,
        sink: Box<dyn AuditSink>,
    ) -> Self {
        Self {
            session_id: session_id.to_owned(),
            role: role.to_owned(),
            next_seq: 1,
            mode,
            sink,
        }
    }

    /// Writes one record of the call `trace` describes, and returns its `seq`.
    pub(crate) fn record(
        &mut self,
        trace: &Trace,
        event: AuditEvent,
        by: Decider,
        reason: Reason,
        outcome: Option<&Outcome>,
        now: Timestamp,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let duration = now.saturating_since(trace.started);
        let shown = trace.shown();
        self.sink.record(AuditRecord {
            id: format!("{}-{seq}", self.session_id),
            seq,
            session: self.session_id.clone(),
            role: self.role.clone(),
            at_ms: now.as_millis(),
            call: trace.call.get(),
            tool_call_id: shown.tool_call_id.to_string(),
            caller: trace.caller,
            action: shown.action.to_string(),
            kind: trace.declared.map(|d| d.0),
            confirm: trace.declared.map(|d| d.1),
            policy: trace.policy,
            mode: self.mode.get(),
            stage: reason.stage(),
            event,
            decided_by: by,
            outcome: outcome.map(|o| o.code_str().to_owned()),
            grant: reason.grant(),
            summary: reason.summary().into_owned(),
            reason,
            args_digest: trace.audit_digest.to_hex(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            countersignature: None,
            trace: trace.trace.map(str::to_owned),
        });
        seq
    }
}
