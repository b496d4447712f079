//! What happens to a live call after the pipeline: the person's ticket or denial, a
//! finished run, a handoff's end, an abandoned job.

use super::*;

impl Inner {
    pub(crate) fn approve(&mut self, ticket: Ticket, now: Timestamp) -> Result<Next, TicketError> {
        self.tick(now);
        if ticket.executor != self.executor {
            return Err(TicketError::ForeignExecutor);
        }
        let Some(live) = self.live.get(&ticket.call) else {
            return Err(TicketError::NotPending);
        };
        let LiveState::Approval(request) = &live.state else {
            return Err(TicketError::NotPending);
        };
        if now >= request.deadline {
            self.expire_approval(ticket.call, now);
            return Err(TicketError::Expired);
        }
        // INVARIANT: the ticket is bound to this card's action, exact arguments and nonce.
        if ticket.action != request.action
            || ticket.args_sha256 != request.args_sha256
            || ticket.nonce != request.nonce
            || ticket.args_sha256 != live.digest
        {
            return Err(TicketError::Mismatch);
        }
        if ticket.gesture == Gesture::AllowForSession && !request.offers_session_grant {
            return Err(TicketError::GrantNotOffered);
        }
        let call = ticket.call;
        let action = Rc::clone(&live.action);
        let generation = live.generation;
        let title = request.title.clone();
        let card = (**request).clone();
        let still_registered = self
            .actions
            .get(&action.meta().id)
            .is_some_and(|e| e.generation == generation);
        if !still_registered || !action.is_available() {
            let r = stages::unavailable(
                &action.meta().id,
                "stopped being available before it could run",
            );
            self.settle(
                call,
                Outcome::Refused(r),
                Stage::Availability,
                Decider::Pipeline,
                now,
            );
            return Ok(Next::Settled(self.last_settled_for(call)?));
        }
        let (event, reason) = match ticket.gesture {
            Gesture::AllowOnce => (
                AuditEvent::Approved,
                "the person allowed it once".to_owned(),
            ),
            Gesture::AllowForSession => {
                let rule = request
                    .grant_rule
                    .clone()
                    .unwrap_or_else(|| crate::GrantRule::any(format!("every call of {title}")));
                let id = self.add_grant(&action.meta().id, &title, rule, now, call);
                let reason = format!("the person allowed it for the session (grant {})", id.0);
                (AuditEvent::Granted, reason)
            }
        };
        self.record_live(call, Stage::Approve, event, Decider::Person, reason, now);
        if action.meta().confirm_twice && card.round == 1 {
            // INVARIANT: a double-confirmed action runs only after a second ticket, minted
            // from a second card with its own nonce.
            let mut second = card;
            second.round = 2;
            second.question = self
                .live
                .get(&call)
                .and_then(|l| l.prepared.second_question());
            second.asked_at = now;
            second.deadline = now.saturating_add(self.config.approval_timeout);
            second.nonce = self.nonce(call, 2);
            if let Some(live) = self.live.get_mut(&call) {
                live.state = LiveState::Approval(Box::new(second.clone()));
            }
            let reason = "the action asks a second, differently worded question".to_owned();
            self.record_live(
                call,
                Stage::Approve,
                AuditEvent::Asked,
                Decider::Policy,
                reason,
                now,
            );
            return Ok(Next::Approval(Box::new(second)));
        }
        let fut = self.live.get(&call).and_then(|l| l.prepared.run());
        match fut {
            Some(fut) => {
                if let Some(live) = self.live.get_mut(&call) {
                    live.state = LiveState::Performing;
                }
                Ok(Next::Perform(call, fut))
            }
            None => {
                let r = nothing_to_run(&action.meta().id);
                self.settle(
                    call,
                    Outcome::Refused(r),
                    Stage::Perform,
                    Decider::Action,
                    now,
                );
                Ok(Next::Settled(self.last_settled_for(call)?))
            }
        }
    }

    pub(crate) fn deny(
        &mut self,
        call: CallId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Settled, NotPending> {
        self.tick(now);
        let live = self.live.get(&call).ok_or(NotPending)?;
        let LiveState::Approval(request) = &live.state else {
            return Err(NotPending);
        };
        let mut message = format!(
            "the person declined {}; it was not done",
            with_consequence(&request.action, request.consequence.as_deref())
        );
        if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
            message.push_str(&format!(". their reason: {}", quote(reason, 500)));
        }
        message.push_str(". do not retry without asking the user");
        let r = refusal(Code::PermissionDenied, Stage::Approve, message);
        self.settle(
            call,
            Outcome::Refused(r),
            Stage::Approve,
            Decider::Person,
            now,
        );
        self.last_settled_for(call).map_err(|_| NotPending)
    }

    /// Settles a finished `run`: `EXECUTION_FAILED`, `VERIFY_FAILED` or a receipt.
    pub(crate) fn complete(
        &mut self,
        call: CallId,
        result: Result<Value, String>,
        now: Timestamp,
    ) -> Option<Settled> {
        self.tick(now);
        let live = self.live.get(&call)?;
        if !matches!(live.state, LiveState::Performing) {
            return None;
        }
        let id = live.action.meta().id.clone();
        let (outcome, stage, by) = match result {
            Err(e) => (
                Outcome::Refused(refusal(
                    Code::ExecutionFailed,
                    Stage::Perform,
                    format!("{} failed: {}", name(&id), quote(&e, 500)),
                )),
                Stage::Perform,
                Decider::Action,
            ),
            Ok(output) => match live.prepared.verify(&output) {
                Err(e) => (
                    Outcome::Refused(refusal(
                        Code::VerifyFailed,
                        Stage::Verify,
                        format!(
                            "{} ran, but the check found it did not take effect: {}. tell the user; do not claim it was done",
                            name(&id),
                            quote(&e, 500)
                        ),
                    )),
                    Stage::Verify,
                    Decider::Action,
                ),
                Ok(()) => (
                    Outcome::Done(Receipt {
                        title: live.action.meta().title.clone(),
                        action: id,
                        consequence: live.consequence.clone(),
                        done_by: DoneBy::Assistant,
                        result: output,
                    }),
                    Stage::Verify,
                    Decider::Action,
                ),
            },
        };
        self.settle(call, outcome, stage, by, now);
        self.last_settled_for(call).ok()
    }

    pub(crate) fn abandon(&mut self, call: CallId) {
        if self
            .live
            .get(&call)
            .is_some_and(|l| matches!(l.state, LiveState::Performing))
        {
            let id = self
                .live
                .get(&call)
                .map(|l| l.action.meta().id.clone())
                .unwrap_or_default();
            let r = refusal(
                Code::ExecutionFailed,
                Stage::Perform,
                format!("{} was interrupted before it finished; whether it took effect is unknown. ask the user", name(&id)),
            );
            let now = self.last_now;
            self.settle(
                call,
                Outcome::Refused(r),
                Stage::Perform,
                Decider::Host,
                now,
            );
        }
    }

    /// The person says the handoff is done, or cancels it.
    pub(crate) fn handoff_event(
        &mut self,
        call: CallId,
        done: bool,
        now: Timestamp,
    ) -> Result<Settled, NotPending> {
        self.tick(now);
        let live = self.live.get_mut(&call).ok_or(NotPending)?;
        let LiveState::Handoff(machine) = &mut live.state else {
            return Err(NotPending);
        };
        let state = if done {
            let holds = live
                .action
                .meta()
                .handoff
                .as_ref()
                .is_some_and(|h| h.expect.holds());
            machine.done(now, holds)
        } else {
            machine.cancel(now)
        };
        self.settle_handoff(call, state, now);
        self.last_settled_for(call).map_err(|_| NotPending)
    }

    pub(crate) fn show_step(&mut self, call: CallId, index: usize) -> Result<(), NotPending> {
        match self.live.get_mut(&call).map(|l| &mut l.state) {
            Some(LiveState::Handoff(machine)) if !machine.state().is_terminal() => {
                machine.show_step(index);
                Ok(())
            }
            _ => Err(NotPending),
        }
    }
}
