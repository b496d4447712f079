//! The audit trail as the executor writes it: one record per decision, numbered in
//! order, each sharing the session's id and role and its call's ids.
//!
//! Its own piece of the state, so a record can be written while a live call is
//! borrowed (the call is read where it is, never moved out and back).
//!
//! The sink is the host's code, and one that fails (a panic a native host catches) must
//! not leave a step half done, with a ticket still usable, a grant unrevoked or a call
//! never answered. So its panic is caught where the record is handed over, the step
//! goes on to the end, and [`Trail::finish_step`] raises it again.

use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
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
    /// Records written while a panic unwound (handing them over then could panic
    /// again, which aborts), and any after them, oldest first, until the next step ends.
    waiting: VecDeque<AuditRecord>,
    /// The sink's panic during this step, raised again when the step is done.
    failed: Option<Box<dyn Any + Send>>,
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
            waiting: VecDeque::new(),
            failed: None,
            sink,
        }
    }

    /// Called when a step has made all its changes: hands over what waited, then raises
    /// again a panic the sink made during the step. Not while a panic unwinds.
    pub(crate) fn finish_step(&mut self) {
        if std::thread::panicking() {
            return;
        }
        while let Some(record) = self.waiting.pop_front() {
            self.hand_over(record);
        }
        if let Some(panic) = self.failed.take() {
            std::panic::resume_unwind(panic);
        }
    }

    /// Gives one record to the sink now, catching its panic for
    /// [`Trail::finish_step`]; or keeps it waiting, behind any that wait already.
    fn deliver(&mut self, record: AuditRecord) {
        if self.waiting.is_empty() && !std::thread::panicking() {
            self.hand_over(record);
        } else {
            self.waiting.push_back(record);
        }
    }

    fn hand_over(&mut self, record: AuditRecord) {
        let sink = &mut self.sink;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| sink.record(record))) {
            self.failed.get_or_insert(panic);
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
        self.deliver(AuditRecord {
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
    /// What waited is still handed over (a panic the sink makes now is dropped: there is
    /// no step left to raise it from).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            while let Some(record) = self.waiting.pop_front() {
                self.hand_over(record);
            }
        }
    }
}
