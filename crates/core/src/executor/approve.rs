//! A person's decision on a waiting call: a ticket, a denial or an answer. Before
//! anything runs, the card is drawn again; if what the person saw changed, it is shown
//! again (new nonce, "this changed since you looked") instead.

use crate::action::Verdict;
use crate::audit::{AuditEvent, Decider};
use crate::call::CallId;
use crate::countersignature::ApprovedBy;
use crate::outcome::{DoneBy, Settled};
use crate::policy::ApprovalPolicy;
use crate::question::AnswerError;
use crate::reason::{Hook, Reason};
use crate::ticket::{ApprovalRequest, Gesture, Ticket, TicketError};
use crate::time::Timestamp;

use super::card::{CardFace, Next};
use super::countersign::Approval;
use super::live::{Decided, LiveState};
use super::state::{ExecutorState, Stop};

/// How many times one card may be drawn again because the page changed under it.
const MAX_REFRESHES: u8 = 5;

/// The largest answer accepted, in bytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

impl ExecutorState {
    pub(crate) fn approve(&mut self, ticket: Ticket, now: Timestamp) -> Result<Next, TicketError> {
        let now = self.tick(now);
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
        // INVARIANT: the ticket is bound to this card's action, exact arguments, face
        // and nonce.
        if ticket.action != request.action
            || ticket.args_sha256 != request.args_sha256
            || ticket.card_sha256 != request.card_sha256
            || ticket.nonce != request.nonce
        {
            return Err(TicketError::Mismatch);
        }
        if ticket.gesture == Gesture::AllowForSession && !request.offers_session_grant {
            return Err(TicketError::GrantNotOffered);
        }
        // INVARIANT: "allow all in this batch" never covers a card that must be decided
        // on its own, nor one the batch did not list (with its arguments) beside another
        // call's card (which may read alike: the model may ask the same thing twice).
        if ticket.gesture == Gesture::AllowInBatch
            && (!request.batchable()
                || !ticket.batch.contains(&(ticket.call, request.card_sha256))
                || ticket.batch.iter().all(|(call, _)| *call == ticket.call))
        {
            return Err(TicketError::BatchNotOffered);
        }
        let call = ticket.call;
        let card = (**request).clone();
        let decided = live.decided.clone();
        match self.redraw(&decided, &card) {
            Err(stop) => self.settle_refused(call, stop, now),
            Ok(face) => {
                let changed = face.changes_from(&card);
                if changed.is_empty() {
                    self.countersigned(call, decided, card, ticket.gesture, now)
                } else {
                    self.show_again(call, &decided, &card, face, changed, now)
                }
            }
        }
    }

    /// The card drawn again from the state now: the action still registered and
    /// available, the scope still held, the classifier not denying, the level and every
    /// word recomputed.
    fn redraw(&self, decided: &Decided, card: &ApprovalRequest) -> Result<CardFace, Stop> {
        let meta = decided.action.meta();
        if !self.registry.is_current(&meta.id, decided.generation) {
            return Err(Stop::new(Reason::Unregistered, Decider::Host));
        }
        self.scope(meta)?;
        self.availability(decided.action.as_ref())?;
        let verdict = self.hook(Hook::Classify, || decided.prepared.classify())?;
        if let Verdict::Deny(why) = verdict {
            return Err(Stop::new(Reason::ClassifierDenied, Decider::Classifier).with(why));
        }
        let floor = crate::policy::floor(
            self.level(meta).policy,
            &verdict,
            meta.countersigned,
            decided.caller,
            meta.kind,
        );
        let policy = match floor {
            // A level lowered meanwhile to one that runs unasked still shows the card
            // the person is on.
            ApprovalPolicy::None => card.policy,
            // A card raised by untrusted content keeps its raised level.
            ApprovalPolicy::Ask if decided.untrusted.is_some() => card.policy,
            policy => policy,
        };
        self.draw_card(decided, policy, card.round)
    }

    /// The page changed under the card: run nothing, show the card again.
    fn show_again(
        &mut self,
        call: CallId,
        decided: &Decided,
        card: &ApprovalRequest,
        face: CardFace,
        changed: Vec<crate::codes::CardChange>,
        now: Timestamp,
    ) -> Result<Next, TicketError> {
        if card.refresh >= MAX_REFRESHES {
            let stop = Stop::new(Reason::CardKeptChanging, Decider::Pipeline);
            return self.settle_refused(call, stop, now);
        }
        let fresh = self.card(
            call,
            decided,
            face,
            card.round,
            card.refresh + 1,
            changed.clone(),
            now,
        );
        if let Some(live) = self.live.get_mut(&call) {
            live.consequence = fresh.consequence.clone();
            // The redrawn card may carry a new level (the policy file changed): what the
            // trail says applied, from this redraw's record on, is what the person sees.
            live.level = fresh.policy;
            live.state = LiveState::Approval(Box::new(fresh.clone()));
        }
        self.record_live(
            call,
            AuditEvent::Asked,
            Decider::Pipeline,
            &Reason::StaleCard { changed },
            now,
        );
        Ok(Next::Approval(Box::new(fresh)))
    }

    /// The person countersigned the card as it still is: record it, then ask the second
    /// question or let the call run.
    fn countersigned(
        &mut self,
        call: CallId,
        decided: Decided,
        card: ApprovalRequest,
        gesture: Gesture,
        now: Timestamp,
    ) -> Result<Next, TicketError> {
        // INVARIANT: the ticket is spent before anything else, so the same ticket finds
        // nothing pending: nothing is approved, granted or run twice.
        if let Some(live) = self.live.get_mut(&call) {
            live.state = LiveState::Performing;
        }
        let (event, reason, by, grant) = match gesture {
            Gesture::AllowOnce => (
                AuditEvent::Approved,
                Reason::AllowedOnce,
                ApprovedBy::Once,
                None,
            ),
            Gesture::AllowInBatch => (
                AuditEvent::Approved,
                Reason::AllowedInBatch,
                ApprovedBy::Batch,
                None,
            ),
            Gesture::AllowForSession => {
                let rule = card
                    .grant_rule
                    .clone()
                    .unwrap_or_else(crate::grant_rule::GrantRule::every_call);
                let role = &self.config.session.role;
                let grant = self.grants.new_grant(&decided, role, rule, now, call);
                (
                    AuditEvent::Granted,
                    Reason::Granted { grant: grant.id },
                    ApprovedBy::Grant,
                    Some(grant),
                )
            }
        };
        let approval = Approval {
            by,
            card: Some(card.words_sha256()),
            grant: reason.grant(),
        };
        self.record_live(call, event, Decider::Person, &reason, now);
        if let Some(grant) = grant {
            self.grants.put_in_force(grant);
        }
        if decided.action.meta().confirm_twice && card.round == 1 {
            // INVARIANT: a double-confirmed action runs only after a second ticket, minted
            // from a second card with its own nonce.
            let face = match self.draw_card(&decided, card.policy, 2) {
                Ok(face) => face,
                Err(stop) => return self.settle_refused(call, stop, now),
            };
            let second = self.card(call, &decided, face, 2, 0, Vec::new(), now);
            self.record_live(
                call,
                AuditEvent::Asked,
                Decider::Policy,
                &Reason::SecondQuestion,
                now,
            );
            if let Some(live) = self.live.get_mut(&call) {
                live.state = LiveState::Approval(Box::new(second.clone()));
            }
            return Ok(Next::Approval(Box::new(second)));
        }
        let tool_call_id = self
            .live
            .get(&call)
            .map(|live| std::sync::Arc::clone(&live.tool_call_id))
            .unwrap_or_else(|| "".into());
        match self.task(call, &tool_call_id, &decided, Some(approval)) {
            Ok(task) => Ok(Next::Perform(call, task)),
            Err(stop) => self.settle_refused(call, stop, now),
        }
    }

    /// Settles a call refused after the person's gesture.
    fn settle_refused(
        &mut self,
        call: CallId,
        stop: Stop,
        now: Timestamp,
    ) -> Result<Next, TicketError> {
        Ok(Next::Settled(Box::new(self.refuse(call, stop, now)?)))
    }

    /// The person declines a waiting card (their reason goes to the model) or, with
    /// `question`, a waiting question.
    pub(crate) fn decline(
        &mut self,
        call: CallId,
        question: bool,
        why: Option<&str>,
        now: Timestamp,
    ) -> Result<Settled, TicketError> {
        let now = self.tick(now);
        let waits = match self.live.get(&call).map(|l| &l.state) {
            Some(LiveState::Approval(_)) => !question,
            Some(LiveState::Question(_)) => question,
            _ => false,
        };
        if !waits {
            return Err(TicketError::NotPending);
        }
        let reason = if question {
            Reason::QuestionDeclined
        } else {
            Reason::Declined
        };
        let stop = Stop {
            reason,
            by: Decider::Person,
            detail: why.map(str::to_owned),
        };
        self.refuse(call, stop, now)
    }

    /// Settles as `CANCELLED` every call of `caller`'s with `tool_call_id` that waits for
    /// a person's decision (a card or a question). One already running is left to finish:
    /// its effect cannot be taken back, so its own outcome is recorded; so is a handoff,
    /// whose step the person may already have done.
    pub(crate) fn withdraw(
        &mut self,
        caller: crate::call::Caller,
        tool_call_id: &str,
        now: Timestamp,
    ) -> Vec<Settled> {
        let now = self.tick(now);
        let waiting: Vec<CallId> = self
            .live
            .iter()
            .filter(|(_, live)| {
                live.decided.caller == caller
                    && *live.tool_call_id == *tool_call_id
                    && matches!(live.state, LiveState::Approval(_) | LiveState::Question(_))
            })
            .map(|(call, _)| *call)
            .collect();
        waiting
            .into_iter()
            .filter_map(|call| {
                let stop = Stop::new(Reason::Withdrawn { caller }, Decider::Caller);
                self.refuse(call, stop, now).ok()
            })
            .collect()
    }

    pub(crate) fn answer(
        &mut self,
        call: CallId,
        raw: &str,
        now: Timestamp,
    ) -> Result<Settled, AnswerError> {
        let now = self.tick(now);
        let live = self.live.get(&call).ok_or(TicketError::NotPending)?;
        let LiveState::Question(deadline) = live.state else {
            return Err(TicketError::NotPending.into());
        };
        if now >= deadline {
            self.expire_approval(call, now);
            return Err(TicketError::Expired.into());
        }
        let question = live
            .decided
            .action
            .meta()
            .question
            .clone()
            .ok_or(TicketError::NotPending)?;
        let value =
            crate::arguments::parse_object(raw, MAX_ANSWER_BYTES).map_err(AnswerError::Invalid)?;
        // Like every hook: a check that calls back into the executor is not trusted.
        let answer = self
            .hook(Hook::Validate, || (question.check)(&value))
            .map_err(|_| {
                AnswerError::Invalid("the answer's check called back into the gate".into())
            })?
            .map_err(AnswerError::Invalid)?;
        self.settle_done(call, DoneBy::Answer, answer, Decider::Person, now);
        Ok(self.last_settled_for(call)?)
    }

    pub(crate) fn check_answer(
        &self,
        action: &str,
        raw: &str,
    ) -> Result<serde_json::Value, String> {
        let entry = self.registry.get(action).ok_or("no such action")?;
        let question = entry
            .action
            .meta()
            .question
            .clone()
            .ok_or("the action asks no question")?;
        let value = crate::arguments::parse_object(raw, MAX_ANSWER_BYTES)?;
        (question.check)(&value)
    }
}
