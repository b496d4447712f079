//! answer: the person answers the action's question (or declines it). The answer must
//! be of the declared type; only then is it the call's result.

use crate::audit::Decider;
use crate::call::CallId;
use crate::outcome::{DoneBy, Outcome, Receipt, Settled};
use crate::question::AnswerError;
use crate::reason::Reason;
use crate::ticket::TicketError;
use crate::time::Timestamp;

use super::live::LiveState;
use super::state::{ExecutorState, Stop};

/// The largest answer accepted, in bytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

impl ExecutorState {
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
        let meta = live.decided.action.meta();
        let question = meta.question.clone().ok_or(TicketError::NotPending)?;
        let value =
            crate::arguments::parse_object(raw, MAX_ANSWER_BYTES).map_err(AnswerError::Invalid)?;
        // Like every hook: a check that calls back into the executor is not trusted.
        let answer = self
            .hook(crate::reason::Hook::Validate, || (question.check)(&value))
            .map_err(|_| {
                AnswerError::Invalid("the answer's check called back into the gate".into())
            })?
            .map_err(AnswerError::Invalid)?;
        let receipt = Receipt {
            action: meta.id.clone(),
            title: meta.title.clone(),
            consequence: live.consequence.clone(),
            done_by: DoneBy::Answer,
            result: answer,
            untrusted: false,
        };
        self.settle(call, Outcome::Done(receipt), Decider::Person, now);
        Ok(self.last_settled_for(call)?)
    }

    pub(crate) fn decline_question(
        &mut self,
        call: CallId,
        now: Timestamp,
    ) -> Result<Settled, TicketError> {
        let now = self.tick(now);
        let live = self.live.get(&call).ok_or(TicketError::NotPending)?;
        if !matches!(live.state, LiveState::Question(_)) {
            return Err(TicketError::NotPending);
        }
        self.settle_stop(
            call,
            Stop::new(Reason::QuestionDeclined, Decider::Person),
            now,
        );
        self.last_settled_for(call)
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
