//! What the host is shown next of a call: approval cards (computed from the registry, the
//! arguments and the page state, with the digest a ticket binds), handoffs and questions.

use serde::Serialize;
use serde_json::json;

use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::grant_rule::GrantRule;
use crate::handoff::HandoffStep;
use crate::outcome::{Outcome, Refusal, Settled};
use crate::policy::ApprovalPolicy;
use crate::reason::{CardChange, Hook, Reason};
use crate::ticket::{ApprovalRequest, CardDigest};
use crate::time::Timestamp;

use super::live::{Decided, LiveState};
use super::perform::{Guard, Job};
use super::state::{ExecutorState, Stop};

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

/// What a call the host cannot be shown settles as (`UNAVAILABLE`).
fn lost(call: CallId) -> Settled {
    Settled {
        call,
        tool_call_id: "".into(),
        caller: crate::call::Caller::Assistant,
        action: "".into(),
        outcome: Outcome::Refused(Refusal::of(Reason::Unavailable, "", None)),
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
        tries: machine.tries,
        deadline: machine.deadline,
    })
}

/// The parts of a card that come from hooks and state, drawn fresh each time.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CardFace {
    pub(crate) policy: ApprovalPolicy,
    pub(crate) consequence: Option<String>,
    pub(crate) preview: Option<crate::preview::Preview>,
    pub(crate) question: Option<String>,
    pub(crate) grant_rule: Option<GrantRule>,
}

impl CardFace {
    /// What differs between the card the person saw and this face.
    pub(crate) fn changes_from(&self, seen: &ApprovalRequest) -> Vec<CardChange> {
        [
            (
                self.consequence != seen.consequence,
                CardChange::Consequence,
            ),
            (self.preview != seen.preview, CardChange::Preview),
            (self.policy != seen.policy, CardChange::Level),
            (self.question != seen.question, CardChange::Question),
            (self.grant_rule != seen.grant_rule, CardChange::GrantRule),
        ]
        .into_iter()
        .filter_map(|(differs, change)| differs.then_some(change))
        .collect()
    }
}

impl ExecutorState {
    /// Draws a card's face for `round` from the current state.
    pub(crate) fn draw_card(
        &self,
        decided: &Decided,
        policy: ApprovalPolicy,
        round: u8,
    ) -> Result<CardFace, Stop> {
        let meta = decided.action.meta();
        let prepared = decided.prepared.as_ref();
        // INVARIANT: a card raised by untrusted content offers no grant: a habit's
        // "always allow" must not follow an injected instruction.
        let offers =
            policy.offers_session_grant() && !meta.confirm_twice && decided.untrusted.is_none();
        let grant_rule = if offers {
            let rule = self.hook(Hook::Remember, || prepared.grant_rule())?;
            Some(rule.unwrap_or_else(GrantRule::every_call))
        } else {
            None
        };
        let question = if round > 1 {
            self.hook(Hook::SecondQuestion, || prepared.second_question())?
        } else {
            None
        };
        Ok(CardFace {
            policy,
            consequence: self.hook(Hook::Consequence, || prepared.consequence())?,
            preview: self.hook(Hook::Preview, || prepared.preview())?,
            question,
            grant_rule,
        })
    }

    /// The card for a face: fresh nonce and deadline, and the digest a ticket binds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn card(
        &self,
        call: CallId,
        decided: &Decided,
        face: CardFace,
        round: u8,
        refresh: u8,
        changed: Vec<crate::codes::CardChange>,
        now: Timestamp,
    ) -> ApprovalRequest {
        let meta = decided.action.meta();
        let mut card = ApprovalRequest {
            call,
            action: meta.id.to_string(),
            caller: decided.caller,
            title: meta.title.to_string(),
            kind: meta.kind,
            policy: face.policy,
            consequence: face.consequence,
            arguments: decided.arguments.clone(),
            args_sha256: ArgsDigest::of_value(&decided.arguments),
            offers_session_grant: face.grant_rule.is_some(),
            grant_rule: face.grant_rule,
            preview: face.preview,
            round,
            question: face.question,
            asked_at: now,
            deadline: decided.deadline.unwrap_or_else(|| {
                now.saturating_add(
                    meta.approval_timeout
                        .unwrap_or(self.config.approval_timeout),
                )
            }),
            changed,
            asks_twice: meta.confirm_twice,
            edited: decided.edited.clone(),
            restored: decided.deadline.is_some(),
            untrusted: decided.untrusted.as_deref().map(str::to_owned),
            card_sha256: CardDigest(ArgsDigest::default_empty()),
            nonce: self.nonce(call, round, refresh),
            refresh,
            executor: self.executor,
        };
        // Everything the person reads: the card's words, and what else it says.
        card.card_sha256 = CardDigest(ArgsDigest::of_value(&json!({
            "words": card.words_sha256(),
            "caller": card.caller,
            "policy": card.policy,
            "round": card.round,
            "question": card.question,
            "grant_rule": card.grant_rule,
            "asks_twice": card.asks_twice,
            "edited": card.edited,
            "restored": card.restored,
            "untrusted": card.untrusted,
        })));
        card
    }
}
