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
    /// The first panic of the host's code caught during this step (the sink's, or the
    /// drop of a call's params), raised again when the step is done.
    failed: Option<Caught>,
    /// Whether the sink failed during this step.
    sink_failed: bool,
    sink: Box<dyn AuditSink>,
}

/// A panic of the page's code the executor caught, on its way to the host: raised again
/// when its step is done, and forgotten, never dropped, if it is let go of unraised (a
/// payload's drop is the page's code too, and one that panics while another panic
/// unwinds aborts the process: the executor may be dropped during a hook's panic, a
/// step may keep only one panic, a job carrying one may be dropped unrun).
pub(crate) struct Caught(Option<Box<dyn Any + Send>>);

impl Caught {
    pub(crate) fn new(payload: Box<dyn Any + Send>) -> Self {
        Self(Some(payload))
    }

    /// Raises the panic again; while another one unwinds, that one reaches the host
    /// instead, and this one is forgotten.
    fn raise(mut self) {
        if let Some(payload) = self.0.take() {
            if std::thread::panicking() {
                std::mem::forget(payload);
            } else {
                std::panic::resume_unwind(payload);
            }
        }
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        std::mem::forget(self.0.take());
    }
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
            failed: None,
            sink_failed: false,
            sink,
        }
    }

    /// Called when a step has made all its changes: raises again a panic the sink made
    /// during it. While a panic unwinds (the host's own, or a hook's), that one reaches
    /// the host instead, and the sink's is forgotten (not dropped: its drop could panic).
    pub(crate) fn finish_step(&mut self) {
        self.sink_failed = false;
        if let Some(panic) = self.failed.take() {
            panic.raise();
        }
    }

    /// Whether the sink failed during this step (so far).
    pub(crate) fn failing(&self) -> bool {
        self.sink_failed
    }

    /// Forgets a sink's panic a step left when it stopped half way (a hook panicked
    /// after the sink did).
    pub(crate) fn forget_failure(&mut self) {
        self.sink_failed = false;
        self.failed = None;
    }

    /// For a step that hands out a job: the panic kept from something let go of (not
    /// the sink's), taken to travel with the job and be raised when it is handed back
    /// (see `Job`). Raised now, it would drop the job, and a call allowed to run (its
    /// `run` already called to make the job) would end interrupted by a failure not its
    /// own. A sink's panic stays, to be raised as ever (its record may be lost: the job
    /// must not run).
    pub(crate) fn take_for_job(&mut self) -> Option<Caught> {
        if self.sink_failed {
            None
        } else {
            self.failed.take()
        }
    }

    /// Keeps a panic of the host's code caught during this step, to be raised when the
    /// step is done: the first one; a later one is forgotten.
    pub(crate) fn keep(&mut self, panic: Caught) {
        if self.failed.is_none() {
            self.failed = Some(panic);
        }
    }

    /// Gives one record to the sink, keeping its panic for [`Trail::finish_step`].
    /// Also while a panic unwinds (a drop that settles a call then): a panic caught
    /// inside it does not abort.
    fn deliver(&mut self, record: AuditRecord) {
        let sink = &mut self.sink;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| sink.record(record))) {
            // The sink's panic is the one the host must see (a record may be lost): it
            // replaces one kept from a drop, which is forgotten.
            if !self.sink_failed {
                self.failed = None;
            }
            self.sink_failed = true;
            self.keep(Caught::new(panic));
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
