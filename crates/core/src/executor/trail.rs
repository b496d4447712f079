//! The audit trail as the executor writes it: one record per decision, numbered in
//! order. Its own piece of the state, so a record can be written while a live call is
//! borrowed.

use std::cell::Cell;
use std::rc::Rc;

use std::sync::Arc;

use crate::audit::{AuditEvent, AuditRecord, AuditSink, Decider};
use crate::call::{Call, CallId};
use crate::digest::{ArgsDigest, AuditKey};
use crate::mode::Mode;
use crate::outcome::Outcome;
use crate::policy::{ApprovalPolicy, Confirm, Kind};
use crate::reason::Reason;
use crate::time::Timestamp;

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
        trace: &AuditContext,
        event: AuditEvent,
        by: Decider,
        reason: Reason,
        outcome: Option<&Outcome>,
        now: Timestamp,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let duration = now.saturating_since(trace.started);
        self.sink.record(AuditRecord {
            id: format!("{}-{seq}", self.session_id),
            seq,
            session: self.session_id.clone(),
            role: self.role.clone(),
            at_ms: now.as_millis(),
            call: trace.call.get(),
            tool_call_id: escaped(trace.tool_call_id, 128),
            caller: trace.caller,
            action: escaped(trace.action_id, crate::executor::MAX_ACTION_ID_LEN),
            kind: trace.declared.map(|d| d.0),
            confirm: trace.declared.map(|d| d.1),
            policy: trace.policy,
            mode: self.mode.get(),
            stage: reason.stage(),
            event,
            decided_by: by,
            outcome: outcome.map(|o| o.code_str().to_owned()),
            grant: reason.grant(),
            // Words are written where the trail is kept and read (the gateway), not in
            // the page: the reason says it all.
            summary: String::new(),
            reason,
            args_digest: trace.audit_digest.to_hex(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            countersignature: None,
            approver: None,
            trace: trace.trace.map(str::to_owned),
        });
        seq
    }
}

/// A call's identity in audit records, whether or not it got far enough to be live.
pub(crate) struct AuditContext<'a> {
    pub(crate) call: CallId,
    pub(crate) tool_call_id: &'a Arc<str>,
    pub(crate) caller: crate::call::Caller,
    /// The call's `traceparent`, if traced.
    pub(crate) trace: Option<&'a str>,
    pub(crate) action_id: &'a str,
    pub(crate) started: Timestamp,
    pub(crate) declared: Option<(Kind, Confirm)>,
    pub(crate) policy: Option<ApprovalPolicy>,
    /// The keyed digest the audit records.
    pub(crate) audit_digest: ArgsDigest,
    /// Whether the digests are of validated arguments.
    pub(crate) validated: bool,
    /// What the call continues, besides the model's call.
    pub(crate) origin: Origin,
}

/// Where a call entering the pipeline comes from, besides the model.
#[derive(Default)]
pub(crate) struct Origin {
    /// A person's edit of a waiting call.
    pub(crate) edited: Option<crate::edit::EditDiff>,
    /// A call restored after a reload: it keeps this deadline.
    pub(crate) restored: Option<Timestamp>,
    /// Why it is asked whatever decide says: a person's edit or a restore.
    pub(crate) forced: Option<Reason>,
    /// The untrusted content that raised the call it continues (an edit, a restore).
    pub(crate) untrusted: Option<Arc<str>>,
}

impl<'a> AuditContext<'a> {
    /// A context with these ids; nothing resolved or validated yet.
    fn new(
        call: CallId,
        tool_call_id: &'a Arc<str>,
        caller: crate::call::Caller,
        trace: Option<&'a str>,
        action_id: &'a str,
        started: Timestamp,
    ) -> Self {
        Self {
            call,
            tool_call_id,
            caller,
            trace,
            action_id,
            started,
            declared: None,
            policy: None,
            audit_digest: ArgsDigest::default_empty(),
            validated: false,
            origin: Origin::default(),
        }
    }

    /// A call as it arrives; its digests are set once its arguments validate (or, for a
    /// refusal before that, from the raw text: see `ExecutorState::unvalidated`).
    pub(crate) fn arriving(call: CallId, raw: &'a Call, started: Timestamp) -> Self {
        let (id, caller, trace) = (&raw.tool_call_id, raw.caller, raw.trace.as_deref());
        Self::new(call, id, caller, trace, &raw.action, started)
    }

    /// A record no call of the model's made (call 0, no tool call id): `no_call` is the
    /// empty id it shows.
    pub(crate) fn without_call(no_call: &'a Arc<str>, action_id: &'a str, now: Timestamp) -> Self {
        let caller = crate::call::Caller::default();
        Self {
            audit_digest: ArgsDigest::of_bytes(&[]),
            ..Self::new(CallId::default(), no_call, caller, None, action_id, now)
        }
    }

    /// A live call's context: resolved and validated.
    pub(crate) fn live(call: CallId, live: &'a super::live::Live) -> Self {
        let meta = live.decided.action.meta();
        let (id, caller, trace) = (
            &live.tool_call_id,
            live.decided.caller,
            live.trace.as_deref(),
        );
        Self {
            declared: Some((meta.kind, meta.confirm)),
            policy: Some(live.level),
            audit_digest: live.audit_digest,
            validated: true,
            ..Self::new(call, id, caller, trace, &meta.id, live.started)
        }
    }

    pub(crate) fn resolved(
        &mut self,
        action: &std::rc::Rc<dyn crate::action::ErasedAction>,
        policy: ApprovalPolicy,
    ) {
        let meta = action.meta();
        self.declared = Some((meta.kind, meta.confirm));
        self.policy = Some(policy);
    }

    /// The arguments validated: their keyed digest is recorded from now on.
    pub(crate) fn validated(&mut self, arguments: &serde_json::Value, key: &AuditKey) {
        self.audit_digest = key.digest(arguments);
        self.validated = true;
    }
}

/// At most `max` characters of text from outside, escaped (control characters, quotes
/// and anything outside ASCII), so a hostile id cannot break a log line.
fn escaped(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .flat_map(char::escape_default)
        .collect()
}
