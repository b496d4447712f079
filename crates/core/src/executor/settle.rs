//! settle: every call ends in exactly one terminal outcome and one terminal audit
//! record, whatever path it took. Also what the records say of a call (its [`Trace`]),
//! timeouts and shutdown; the records are written by [`super::trail::Trail`].

use crate::audit::{AuditEvent, Decider};
use crate::call::{Call, CallId};
use crate::digest::{ArgsDigest, AuditKey};
use crate::outcome::{Outcome, Refusal, Settled};
use crate::policy::{ApprovalPolicy, Confirm, Kind};
use crate::reason::{Reason, Said};
use crate::ticket::TicketError;
use crate::time::Timestamp;
use std::borrow::Cow;
use std::sync::Arc;

use super::state::{ExecutorState, Live, LiveState, Stop};

/// A call's identity in audit records, whether or not it got far enough to be live.
pub(crate) struct Trace<'a> {
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
    /// The person's edit the call carries.
    pub(crate) edited: Option<crate::edit::EditDiff>,
    /// The deadline of a call restored after a reload.
    pub(crate) restored: Option<Timestamp>,
    /// Why the call must be asked whatever decide says (a person's edit, a restore).
    pub(crate) forced: Option<Reason>,
    /// The ids as the records show them, escaped at the first record (a live call's
    /// own, borrowed).
    pub(crate) shown: std::cell::OnceCell<Cow<'a, Shown>>,
}

/// A call's tool call id and action id as its audit records show them: escaped once,
/// then shared by every record of the call.
#[derive(Clone, Debug)]
pub(crate) struct Shown {
    pub(crate) tool_call_id: Arc<str>,
    pub(crate) action: Arc<str>,
}

impl<'a> Trace<'a> {
    /// A call as it arrives; its digests are set once its arguments validate (or, for a
    /// refusal before that, from the raw text: see [`Trace::unvalidated`]).
    pub(crate) fn arriving(call: CallId, raw: &'a Call, started: Timestamp) -> Self {
        Self {
            call,
            tool_call_id: &raw.tool_call_id,
            caller: raw.caller,
            trace: raw.trace.as_deref(),
            action_id: &raw.action,
            started,
            declared: None,
            policy: None,
            audit_digest: ArgsDigest::default_empty(),
            validated: false,
            edited: None,
            restored: None,
            forced: None,
            shown: std::cell::OnceCell::new(),
        }
    }

    /// A record no call of the model's made (call 0, no tool call id): `no_call` is the
    /// empty id it shows.
    pub(crate) fn without_call(no_call: &'a Arc<str>, action_id: &'a str, now: Timestamp) -> Self {
        Self {
            call: CallId::default(),
            tool_call_id: no_call,
            caller: crate::call::Caller::default(),
            trace: None,
            action_id,
            started: now,
            declared: None,
            policy: None,
            audit_digest: ArgsDigest::of_bytes(&[]),
            validated: false,
            edited: None,
            restored: None,
            forced: None,
            shown: std::cell::OnceCell::new(),
        }
    }

    /// A refusal before the arguments validated records the keyed digest of the raw
    /// text (an oversized text hashed as bytes, never parsed; empty text as the `{}` it
    /// validates to). Computed only then: the path that runs pays for one digest.
    pub(crate) fn unvalidated(&mut self, raw: &str, state: &ExecutorState) {
        if self.validated {
            return;
        }
        let key = &state.config.audit_key;
        self.audit_digest = if raw.len() > state.config.max_argument_bytes {
            key.digest_bytes(raw.as_bytes())
        } else if crate::arguments::means_no_arguments(raw) {
            key.digest(&serde_json::Value::Object(serde_json::Map::new()))
        } else {
            key.digest_raw(raw)
        };
    }

    pub(crate) fn resolved(
        &mut self,
        action: &std::rc::Rc<dyn crate::action::ErasedAction>,
        policy: ApprovalPolicy,
    ) {
        let meta = action.meta();
        self.declared = Some((meta.kind, meta.confirm));
        self.policy = Some(policy);
        // The id resolved is the registered one, letter for letter: its records share
        // the registration's copy unless it needs escaping.
        if self.shown.get().is_none() && is_plain(&meta.id, crate::executor::MAX_ACTION_ID_LEN) {
            let _ = self.shown.set(Cow::Owned(Shown {
                tool_call_id: shared_or_escaped(self.tool_call_id, 128),
                action: Arc::clone(&meta.id),
            }));
        }
    }

    /// A live call's identity, borrowing its ids.
    pub(crate) fn of_live(call: CallId, live: &'a Live) -> Self {
        let meta = live.action.meta();
        Self {
            call,
            tool_call_id: &live.tool_call_id,
            caller: live.caller,
            trace: live.trace.as_deref(),
            action_id: &meta.id,
            started: live.started,
            declared: Some((meta.kind, meta.confirm)),
            policy: Some(live.level),
            audit_digest: live.audit_digest,
            validated: true,
            edited: None,
            restored: None,
            forced: None,
            shown: std::cell::OnceCell::from(Cow::Borrowed(&live.shown)),
        }
    }

    /// The ids as the call's records show them (escaped the first time).
    pub(crate) fn shown(&self) -> &Shown {
        self.shown.get_or_init(|| Cow::Owned(self.escape_ids()))
    }

    fn escape_ids(&self) -> Shown {
        Shown {
            tool_call_id: shared_or_escaped(self.tool_call_id, 128),
            action: escaped(self.action_id, crate::executor::MAX_ACTION_ID_LEN),
        }
    }

    /// The ids as the call's records show them, taken (a later record writes them
    /// again).
    pub(crate) fn take_shown(&mut self) -> Shown {
        match self.shown.take() {
            Some(shown) => shown.into_owned(),
            None => self.escape_ids(),
        }
    }

    pub(crate) fn validated(&mut self, arguments: &serde_json::Value, key: &AuditKey) {
        self.validated_as(key.digest(arguments));
    }

    /// The arguments validated, with this keyed digest.
    pub(crate) fn validated_as(&mut self, audit_digest: ArgsDigest) {
        self.audit_digest = audit_digest;
        self.validated = true;
    }
}

impl ExecutorState {
    /// Ends a live call with a refusal.
    pub(crate) fn settle_stop(&mut self, call: CallId, stop: Stop, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let refusal = Refusal::new(
            stop.reason,
            Said {
                action: &live.action.meta().id,
                consequence: live.consequence.as_deref(),
                detail: stop.detail.as_deref(),
            },
        );
        self.settle(call, Outcome::Refused(refusal), stop.by, now);
    }

    /// Ends a live call: removes it, queues the result, writes its one terminal record.
    pub(crate) fn settle(&mut self, call: CallId, outcome: Outcome, by: Decider, now: Timestamp) {
        // INVARIANT: a call leaves `live` exactly once, so it settles exactly once.
        let Some(mut live) = self.live.remove(&call) else {
            return;
        };
        let reason = outcome.reason();
        self.settled.push_back(Settled {
            call,
            action: live.action.meta().id.clone(),
            tool_call_id: Arc::clone(&live.tool_call_id),
            caller: live.caller,
            outcome,
            edited: live.edited.take(),
        });
        // The outcome as queued (the record reads it where it is).
        self.trail.record(
            &Trace::of_live(call, &live),
            AuditEvent::Settled,
            by,
            reason,
            self.settled.back().map(|s| &s.outcome),
            now,
        );
    }

    /// Ends a call refused before it became live.
    pub(crate) fn refuse_early(&mut self, trace: &Trace, stop: Stop, now: Timestamp) -> Settled {
        let outcome = Outcome::Refused(Refusal::new(
            stop.reason,
            Said {
                action: trace.action_id,
                consequence: None,
                detail: stop.detail.as_deref(),
            },
        ));
        let reason = outcome.reason();
        let settled = Settled {
            call: trace.call,
            tool_call_id: Arc::clone(trace.tool_call_id),
            caller: trace.caller,
            action: shown_id(trace.action_id).into(),
            outcome,
            edited: trace.edited.clone(),
        };
        // Queued before its record, as in `settle`.
        self.settled.push_back(settled.clone());
        self.trail.record(
            trace,
            AuditEvent::Settled,
            stop.by,
            reason,
            Some(&settled.outcome),
            now,
        );
        settled
    }

    /// A record of records lost from a bounded sink (no call's: call 0, no action).
    pub(crate) fn record_trail_gap(
        &mut self,
        first_seq: u64,
        last_seq: u64,
        unconfirmed: u64,
        now: Timestamp,
    ) -> u64 {
        let no_call: Arc<str> = Arc::from("");
        let trace = Trace::without_call(&no_call, "", now);
        let reason = Reason::TrailGap {
            first_seq,
            last_seq,
            unconfirmed,
        };
        self.trail.record(
            &trace,
            AuditEvent::TrailGap,
            Decider::Host,
            reason,
            None,
            now,
        )
    }

    /// A non-terminal record for a live call.
    pub(crate) fn record_live(
        &mut self,
        call: CallId,
        event: AuditEvent,
        by: Decider,
        reason: &Reason,
        now: Timestamp,
    ) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        self.trail.record(
            &Trace::of_live(call, live),
            event,
            by,
            reason.clone(),
            None,
            now,
        );
    }

    pub(crate) fn expire_approval(&mut self, call: CallId, now: Timestamp) {
        if let Some(LiveState::Approval(_) | LiveState::Question(_)) =
            self.live.get(&call).map(|l| &l.state)
        {
            self.settle_stop(
                call,
                Stop::new(Reason::ApprovalTimeout, Decider::Timer),
                now,
            );
        }
    }

    pub(crate) fn last_settled_for(&self, call: CallId) -> Result<Settled, TicketError> {
        self.settled
            .iter()
            .rev()
            .find(|s| s.call == call)
            .cloned()
            .ok_or(TicketError::NotPending)
    }

    pub(crate) fn poll_timeout(&self) -> Option<Timestamp> {
        self.live
            .values()
            .filter_map(|l| match &l.state {
                LiveState::Approval(r) => Some(r.deadline),
                LiveState::Handoff(m) => m.poll_timeout(),
                LiveState::Question(deadline) => Some(*deadline),
                LiveState::Performing => None,
            })
            .min()
    }

    /// Settles every call whose deadline is at or before `now`.
    pub(crate) fn handle_timeout(&mut self, now: Timestamp) {
        let now = self.tick(now);
        let due: Vec<(CallId, bool)> = self
            .live
            .iter()
            .filter_map(|(c, l)| match &l.state {
                LiveState::Approval(r) if now >= r.deadline => Some((*c, true)),
                LiveState::Question(deadline) if now >= *deadline => Some((*c, true)),
                LiveState::Handoff(m) if m.poll_timeout().is_some_and(|d| now >= d) => {
                    Some((*c, false))
                }
                _ => None,
            })
            .collect();
        for (call, approval) in due {
            if approval {
                self.expire_approval(call, now);
            } else {
                self.handoff_timed_out(call, now);
            }
        }
    }

    /// Settles every live call: the page is going away.
    pub(crate) fn shutdown(&mut self, now: Timestamp) {
        let now = self.tick(now);
        let calls: Vec<CallId> = self.live.keys().copied().collect();
        for call in calls {
            self.settle_stop(call, Stop::new(Reason::PageClosed, Decider::Host), now);
        }
    }

    /// Removes one registration (if still the same generation), revokes its grants and
    /// settles its calls that wait for a person: the page no longer offers them.
    pub(crate) fn unregister(&mut self, id: &str, generation: u64) {
        self.registry.remove(id, generation);
        self.revoke_registration(id, generation);
        let waiting: Vec<CallId> = self
            .live
            .iter()
            .filter(|(_, l)| {
                l.generation == generation
                    && &*l.action.meta().id == id
                    && !matches!(l.state, LiveState::Performing)
            })
            .map(|(c, _)| *c)
            .collect();
        let now = self.clock;
        for call in waiting {
            self.settle_stop(call, Stop::new(Reason::Unregistered, Decider::Host), now);
        }
    }
}

/// The id as a host shows it: at most 64 characters, with control, format and bidi
/// characters escaped (a look-alike letter stays, for the dock to mark).
fn shown_id(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(crate::executor::MAX_ACTION_ID_LEN) {
        if c.is_control() || crate::reveal::is_format_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether [`escaped`] leaves `text` as it is: at most `max` bytes of printable ASCII
/// without quotes or backslashes.
fn is_plain(text: &str, max: usize) -> bool {
    let plain = |b: u8| b.is_ascii_graphic() && !matches!(b, b'\\' | b'\'' | b'"');
    text.len() <= max && text.bytes().all(plain)
}

/// `text` itself where [`escaped`] would leave it as it is; its escaped copy otherwise.
fn shared_or_escaped(text: &Arc<str>, max: usize) -> Arc<str> {
    if is_plain(text, max) {
        Arc::clone(text)
    } else {
        escaped(text, max)
    }
}

/// At most `max` characters of text from outside, escaped (control characters, quotes
/// and anything outside ASCII), so a hostile id cannot break a log line.
fn escaped(text: &str, max: usize) -> Arc<str> {
    // The common case, an id of plain printable ASCII, is copied as it is.
    if is_plain(text, max) {
        return text.into();
    }
    let escaped: String = text
        .chars()
        .take(max)
        .flat_map(char::escape_default)
        .collect();
    escaped.into()
}
