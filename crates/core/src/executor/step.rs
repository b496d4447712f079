//! What happens next to a call, as the host sees it.

use serde::Serialize;

use crate::call::CallId;
use crate::handoff::HandoffStep;
use crate::outcome::Settled;
use crate::ticket::ApprovalRequest;
use crate::time::Timestamp;

use super::job::{Guard, Job};
use super::live::LiveState;
use super::state::ExecutorState;

/// What happens next to a call.
// The waiting steps are boxed: a step is moved on its way out, and the common ones (a
// call that runs, one refused) are small; a card is drawn for a person anyway.
#[derive(Debug)]
pub enum Step {
    /// It ended (refused, or done); the same value is queued for
    /// [`super::Executor::next_settled`].
    Settled(Settled),
    /// It waits for a person's ticket; show this card.
    Approval(Box<ApprovalRequest>),
    /// It waits for the person to do the last step; show this handoff.
    Handoff(Box<HandoffView>),
    /// It waits for the person's answer; show this question.
    Question(Box<crate::question::QuestionView>),
    /// It may run: drive the job and hand its completion to [`super::Executor::complete`].
    Perform(Job),
}

/// A handoff waiting for the person, as the dock shows it.
#[derive(Clone, Debug, Serialize)]
pub struct HandoffView {
    /// The call waiting.
    pub call: CallId,
    /// Who asked.
    pub caller: crate::call::Caller,
    /// The action's id.
    pub action: String,
    /// The action's title.
    pub title: String,
    /// Why the person must do it.
    pub reason: String,
    /// The steps.
    pub steps: Vec<HandoffStep>,
    /// The step whose target is highlighted now.
    pub current_step: Option<usize>,
    /// What will be checked when the person says done.
    pub expect: String,
    /// How many times the person said done while it did not hold yet.
    pub tries: u32,
    /// When it times out.
    pub deadline: Timestamp,
}

/// What `submit` / `approve` tell the facade to do next.
pub(crate) enum Next {
    Settled(Box<Settled>),
    Approval(Box<ApprovalRequest>),
    Handoff(CallId),
    Question(CallId),
    Perform(CallId, super::countersign::Task),
}

impl super::Executor {
    pub(super) fn to_step(&self, state: &ExecutorState, next: Next) -> Step {
        match next {
            Next::Settled(s) => Step::Settled(*s),
            Next::Approval(r) => Step::Approval(r),
            // Not reachable: a handoff or question just started is live. Kept total.
            Next::Handoff(call) => handoff_view(state, call)
                .map(|view| Step::Handoff(Box::new(view)))
                .unwrap_or_else(|| Step::Settled(lost(call))),
            Next::Question(call) => question_view(state, call)
                .map(|view| Step::Question(Box::new(view)))
                .unwrap_or_else(|| Step::Settled(lost(call))),
            Next::Perform(call, task) => Step::Perform(Job {
                task,
                guard: Guard {
                    call,
                    executor: self.id,
                    to: self.post(),
                    armed: true,
                },
            }),
        }
    }
}

pub(crate) fn lost(call: CallId) -> Settled {
    let reason = crate::reason::Reason::Unavailable;
    Settled {
        call,
        tool_call_id: "".into(),
        caller: crate::call::Caller::Assistant,
        action: "".into(),
        outcome: crate::outcome::Outcome::Refused(crate::outcome::Refusal::new(
            reason,
            crate::reason::Said::default(),
        )),
        edited: None,
        untrusted: None,
    }
}

pub(crate) fn question_view(
    state: &ExecutorState,
    call: CallId,
) -> Option<crate::question::QuestionView> {
    let live = state.live.get(&call)?;
    let LiveState::Question(deadline) = &live.state else {
        return None;
    };
    let meta = live.decided.action.meta();
    let question = meta.question.as_ref()?;
    Some(crate::question::QuestionView {
        call,
        caller: live.decided.caller,
        action: meta.id.to_string(),
        title: meta.title.to_string(),
        prompt: question.prompt.clone(),
        schema: question.schema.clone(),
        deadline: *deadline,
    })
}

pub(crate) fn handoff_view(state: &ExecutorState, call: CallId) -> Option<HandoffView> {
    let live = state.live.get(&call)?;
    let LiveState::Handoff(machine) = &live.state else {
        return None;
    };
    let meta = live.decided.action.meta();
    let handoff = meta.handoff.as_ref()?;
    Some(HandoffView {
        call,
        caller: live.decided.caller,
        action: meta.id.to_string(),
        title: meta.title.to_string(),
        reason: handoff.reason.clone(),
        steps: handoff.steps.clone(),
        current_step: machine.current_step(),
        expect: handoff.expect.description.clone(),
        tries: machine.tries(),
        deadline: machine.deadline(),
    })
}
