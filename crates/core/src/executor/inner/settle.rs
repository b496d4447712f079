//! Ending calls: settlements with their one terminal audit record, timeouts, handoff
//! outcomes, and the audit records themselves.

use super::*;

impl Inner {
    pub(super) fn expire_approval(&mut self, call: CallId, now: Timestamp) {
        let Some(LiveState::Approval(request)) = self.live.get(&call).map(|l| &l.state) else {
            return;
        };
        let r = refusal(
            Code::ApprovalTimeout,
            Stage::Approve,
            format!(
                "nobody approved {} in time; it was not done. ask the user before trying again",
                with_consequence(&request.action, request.consequence.as_deref())
            ),
        );
        self.settle(
            call,
            Outcome::Refused(r),
            Stage::Approve,
            Decider::Timer,
            now,
        );
    }

    pub(super) fn settle_handoff(&mut self, call: CallId, state: HandoffState, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let meta = live.action.meta();
        let id = meta.id.clone();
        let expect = meta
            .handoff
            .as_ref()
            .map(|h| h.expect.description.clone())
            .unwrap_or_default();
        let timeout_s = meta.handoff.as_ref().map_or(0, |h| h.timeout.as_secs());
        let (outcome, by) = match state {
            HandoffState::Waiting => return,
            HandoffState::Completed => (
                Outcome::Done(Receipt {
                    title: meta.title.clone(),
                    action: id,
                    consequence: live.consequence.clone(),
                    done_by: DoneBy::Person,
                    result: json!({ "handoff": "completed", "expect": expect }),
                }),
                Decider::Person,
            ),
            HandoffState::Cancelled => (
                Outcome::Refused(refusal(
                    Code::HandoffCancelled,
                    Stage::Perform,
                    format!("the person cancelled the handoff for {}; the step was not done. ask the user what to do next", name(&id)),
                )),
                Decider::Person,
            ),
            HandoffState::TimedOut => (
                Outcome::Refused(refusal(
                    Code::HandoffTimeout,
                    Stage::Perform,
                    format!("the handoff for {} timed out after {timeout_s} s; the step was not done. ask the user what to do next", name(&id)),
                )),
                Decider::Timer,
            ),
            HandoffState::Failed => (
                Outcome::Refused(refusal(
                    Code::HandoffFailed,
                    Stage::Verify,
                    format!(
                        "the person said the step for {} was done, but {} does not hold; it did not happen. ask the user what to do next",
                        name(&id),
                        quote(&expect, 200)
                    ),
                )),
                Decider::Action,
            ),
        };
        let stage = match &outcome {
            Outcome::Refused(r) => r.stage,
            Outcome::Done(_) => Stage::Verify,
        };
        self.settle(call, outcome, stage, by, now);
    }

    pub(super) fn last_settled_for(&self, call: CallId) -> Result<Settled, TicketError> {
        self.settled
            .iter()
            .rev()
            .find(|s| s.call == call)
            .cloned()
            .ok_or(TicketError::NotPending)
    }

    /// Ends a live call: removes it, writes its one terminal record, queues the result.
    pub(crate) fn settle(
        &mut self,
        call: CallId,
        outcome: Outcome,
        stage: Stage,
        by: Decider,
        now: Timestamp,
    ) {
        // INVARIANT: a call leaves `live` exactly once, so it settles exactly once.
        let Some(live) = self.live.remove(&call) else {
            return;
        };
        let ctx = Ctx {
            call,
            tool_call_id: &live.tool_call_id,
            action_id: &live.action.meta().id,
            meta: Some(live.action.meta()),
            digest: live.digest,
            started: live.started,
        };
        let reason = reason_of(&outcome);
        self.record(
            &ctx,
            stage,
            AuditEvent::Settled,
            by,
            Some(&outcome),
            reason,
            now,
        );
        self.settled.push_back(Settled {
            call,
            tool_call_id: live.tool_call_id.clone(),
            action: live.action.meta().id.clone(),
            outcome,
        });
    }

    /// Ends a call refused before it became live.
    pub(super) fn refuse_early(
        &mut self,
        ctx: &Ctx<'_>,
        r: Refusal,
        by: Decider,
        now: Timestamp,
    ) -> Settled {
        let outcome = Outcome::Refused(r);
        let stage = match &outcome {
            Outcome::Refused(r) => r.stage,
            Outcome::Done(_) => Stage::Verify,
        };
        self.record(
            ctx,
            stage,
            AuditEvent::Settled,
            by,
            Some(&outcome),
            reason_of(&outcome),
            now,
        );
        let settled = Settled {
            call: ctx.call,
            tool_call_id: ctx.tool_call_id.to_owned(),
            action: ctx
                .action_id
                .chars()
                .take(crate::registry::MAX_ACTION_ID_LEN)
                .collect(),
            outcome,
        };
        self.settled.push_back(settled.clone());
        settled
    }

    /// A non-terminal record for a live call.
    pub(super) fn record_live(
        &mut self,
        call: CallId,
        stage: Stage,
        event: AuditEvent,
        by: Decider,
        reason: String,
        now: Timestamp,
    ) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let action = Rc::clone(&live.action);
        let tool_call_id = live.tool_call_id.clone();
        let ctx = Ctx {
            call,
            tool_call_id: &tool_call_id,
            action_id: &action.meta().id,
            meta: Some(action.meta()),
            digest: live.digest,
            started: live.started,
        };
        self.record(&ctx, stage, event, by, None, reason, now);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        ctx: &Ctx<'_>,
        stage: Stage,
        event: AuditEvent,
        by: Decider,
        outcome: Option<&Outcome>,
        reason: String,
        now: Timestamp,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let duration = now.saturating_since(ctx.started);
        self.audit.record(AuditRecord {
            id: format!("{}-{seq}", self.config.session_id),
            seq,
            session: self.config.session_id.clone(),
            role: self.config.session.role.clone(),
            at_ms: now.as_millis(),
            call: ctx.call.get(),
            tool_call_id: ctx.tool_call_id.chars().take(128).collect(),
            action: truncate_escaped(ctx.action_id, crate::registry::MAX_ACTION_ID_LEN),
            kind: ctx.meta.map(|m| m.kind),
            confirm: ctx.meta.map(|m| m.confirm),
            policy: ctx.meta.map(|m| self.effective_policy(m)),
            mode: self.mode,
            stage,
            event,
            decided_by: by,
            outcome: outcome.map(|o| o.code_str().to_owned()),
            reason,
            args_sha256: ctx.digest.to_hex(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        });
    }
}

fn truncate_escaped(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .flat_map(char::escape_default)
        .collect()
}

fn reason_of(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Done(_) => "done and verified".to_owned(),
        // The message may quote arguments (a consequence, a serde error); the audit
        // keeps only the digest, so it gets the code's fixed sentence.
        Outcome::Refused(r) => r.code.summary().to_owned(),
    }
}
