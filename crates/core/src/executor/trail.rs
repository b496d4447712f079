//! The audit trail as the executor writes it: one record per decision, numbered in
//! order, each sharing the session's id and role and its call's ids.
//!
//! Its own piece of the state, so a record can be written while a live call is
//! borrowed (the call is read where it is, never moved out and back).
//!
//! A step's records reach the sink only once the step has made all its changes
//! ([`Trail::flush`]): the sink is the host's code, and one that fails (a panic a native
//! host catches) must not leave a step half done, with a ticket still usable, a grant
//! unrevoked or a call never answered.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use crate::audit::{AuditEvent, AuditRecord, AuditSink, Decider};
use crate::mode::Mode;
use crate::outcome::Outcome;
use crate::reason::Reason;
use crate::time::Timestamp;

use super::settle::Trace;

/// Where the executor's records go, and what every record shares.
pub(crate) struct Trail {
    /// The session id and role every record carries, shared instead of copied.
    session_id: Arc<str>,
    role: Arc<str>,
    /// The next record's `seq` (the first is 1).
    next_seq: u64,
    /// Shared with the facade (a hook may read it while the state is borrowed).
    mode: Rc<Cell<Mode>>,
    /// Records of the step under way, oldest first, until [`Trail::flush`].
    outbox: VecDeque<AuditRecord>,
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
            session_id: session_id.into(),
            role: role.into(),
            next_seq: 1,
            mode,
            outbox: VecDeque::new(),
            sink,
        }
    }

    /// Hands the records written so far to the sink, oldest first. Called when a step
    /// has made all its changes. One at a time: if the sink panics, the records after
    /// the one it failed on wait for the next step. Never while a panic unwinds (a drop
    /// that settles a call then): a second panic would abort the process.
    pub(crate) fn flush(&mut self) {
        if std::thread::panicking() {
            return;
        }
        while let Some(record) = self.outbox.pop_front() {
            self.sink.record(record);
        }
    }

    /// Writes one record of the call `trace` describes, and returns its `seq`. It
    /// reaches the sink at the next [`Trail::flush`].
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
        self.outbox.push_back(AuditRecord {
            id: crate::RecordId::of_seq(Arc::clone(&self.session_id), seq),
            seq,
            session: Arc::clone(&self.session_id),
            role: Arc::clone(&self.role),
            at_ms: now.as_millis(),
            call: trace.call.get(),
            tool_call_id: Arc::clone(&shown.tool_call_id),
            caller: trace.caller,
            action: Arc::clone(&shown.action),
            kind: trace.declared.map(|d| d.0),
            confirm: trace.declared.map(|d| d.1),
            policy: trace.policy,
            mode: self.mode.get(),
            stage: reason.stage(),
            event,
            decided_by: by,
            outcome: outcome.map(|o| o.code_str().into()),
            grant: reason.grant(),
            summary: reason.summary(),
            reason,
            args_digest: trace.audit_digest.into(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            countersignature: None,
            trace: trace.trace.map(str::to_owned),
        });
        seq
    }
}

impl Drop for Trail {
    /// What a failed sink left waiting is still handed over.
    fn drop(&mut self) {
        self.flush();
    }
}
