//! settle: every call ends in exactly one terminal outcome and one terminal audit
//! record, whatever path it took. Also what the records say of a call (its [`AuditContext`]),
//! timeouts and shutdown; the records are written by [`super::trail::Trail`].

use std::sync::Arc;

use serde_json::Value;

use crate::audit::{AuditEvent, Decider};
use crate::call::CallId;
use crate::outcome::{DoneBy, Outcome, Receipt, Refusal, Settled};
use crate::reason::{MessageContext, Reason};
use crate::ticket::TicketError;
use crate::time::Timestamp;

use super::live::LiveState;
use super::state::{ExecutorState, Stop};
use super::trail::AuditContext;

impl ExecutorState {
    /// Ends a live call with a refusal.
    pub(crate) fn settle_stop(&mut self, call: CallId, stop: Stop, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let refusal = Refusal::new(
            stop.reason,
            MessageContext {
                action: &live.decided.action.meta().id,
                consequence: live.consequence.as_deref(),
                detail: stop.detail.as_deref(),
            },
        );
        self.settle(call, Outcome::Refused(refusal), stop.by, now);
    }

    /// Ends a live call with a refusal, and returns its settlement.
    pub(crate) fn refuse(
        &mut self,
        call: CallId,
        stop: Stop,
        now: Timestamp,
    ) -> Result<Settled, TicketError> {
        self.settle_stop(call, stop, now);
        self.last_settled_for(call)
    }

    /// Ends a live call with its receipt.
    pub(crate) fn settle_done(
        &mut self,
        call: CallId,
        done_by: DoneBy,
        result: Value,
        by: Decider,
        now: Timestamp,
    ) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let meta = live.decided.action.meta();
        let receipt = Receipt {
            action: meta.id.clone(),
            title: meta.title.clone(),
            consequence: live.consequence.clone(),
            // Marked where the call settles, with the rest of what it brings in.
            untrusted: false,
            done_by,
            result,
        };
        self.settle(call, Outcome::Done(receipt), by, now);
    }

    /// Ends a live call: removes it, queues the result, writes its one terminal record.
    pub(crate) fn settle(
        &mut self,
        call: CallId,
        mut outcome: Outcome,
        by: Decider,
        now: Timestamp,
    ) {
        // INVARIANT: a call leaves `live` exactly once, so it settles exactly once.
        let Some(mut live) = self.live.remove(&call) else {
            return;
        };
        let meta = live.decided.action.meta();
        // What an untrusted source's run said (its result, or the words it failed
        // with) is now in the caller's context (unless the deployment trusts it).
        let said = match &outcome {
            Outcome::Done(r) => r.done_by == DoneBy::Assistant,
            Outcome::Refused(r) => matches!(r.reason, Reason::RunFailed | Reason::VerifyFailed),
        };
        let trusted = self
            .policy
            .file()
            .is_some_and(|f| f.untrusted.trust.contains(&*meta.id));
        if said && meta.returns_untrusted && !trusted {
            let title = Arc::clone(&meta.title);
            self.taint(live.decided.caller, &title);
            // The model is told, on a result as on a failure's words.
            match &mut outcome {
                Outcome::Done(receipt) => receipt.untrusted = true,
                Outcome::Refused(refusal) => refusal.untrusted = true,
            }
        }
        let settled = Settled {
            call,
            action: meta.id.clone(),
            tool_call_id: Arc::clone(&live.tool_call_id),
            caller: live.decided.caller,
            outcome,
            edited: live.decided.edited.take(),
            untrusted: live.decided.untrusted.as_deref().map(str::to_owned),
        };
        self.queue(&AuditContext::live(call, &live), settled, by, now);
    }

    /// Queues a settlement, then writes its terminal record (reading the outcome queued).
    fn queue(&mut self, trace: &AuditContext, settled: Settled, by: Decider, now: Timestamp) {
        let reason = settled.outcome.reason();
        self.settled.push_back(settled);
        let outcome = self.settled.back().map(|s| &s.outcome);
        self.trail
            .record(trace, AuditEvent::Settled, by, reason, outcome, now);
    }

    /// Ends a call refused before it became live.
    pub(crate) fn refuse_early(
        &mut self,
        trace: &AuditContext,
        stop: Stop,
        now: Timestamp,
    ) -> Settled {
        let outcome = Outcome::Refused(Refusal::new(
            stop.reason,
            MessageContext {
                action: trace.action_id,
                consequence: None,
                detail: stop.detail.as_deref(),
            },
        ));
        let settled = Settled {
            call: trace.call,
            tool_call_id: Arc::clone(trace.tool_call_id),
            caller: trace.caller,
            action: shown_id(trace.action_id).into(),
            outcome,
            edited: trace.origin.edited.clone(),
            untrusted: None,
        };
        self.queue(trace, settled.clone(), stop.by, now);
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
        let trace = AuditContext::without_call(&no_call, "", now);
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
            &AuditContext::live(call, live),
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
            } else if let Some(LiveState::Handoff(m)) =
                self.live.get_mut(&call).map(|l| &mut l.state)
            {
                let state = m.handle_timeout(now);
                self.settle_handoff(call, state, now);
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
        self.grants.revoke_registration(id, generation);
        let waiting: Vec<CallId> = self
            .live
            .iter()
            .filter(|(_, l)| {
                l.decided.generation == generation
                    && &*l.decided.action.meta().id == id
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
