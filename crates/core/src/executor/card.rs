//! Approval cards: what the person reads, computed from the registry, the arguments and
//! the current page state, and the digest of it that a ticket binds.

use serde_json::json;

use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::grant_rule::GrantRule;
use crate::policy::ApprovalPolicy;
use crate::reason::{CardChange, Hook};
use crate::ticket::{ApprovalRequest, CardDigest};
use crate::time::Timestamp;

use super::live::Decided;
use super::state::{ExecutorState, Stop};

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
    /// What differs between the face the person saw and this one.
    pub(crate) fn changes_from(&self, seen: &CardFace) -> Vec<CardChange> {
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

    pub(crate) fn of(card: &ApprovalRequest) -> Self {
        Self {
            policy: card.policy,
            consequence: card.consequence.clone(),
            preview: card.preview.clone(),
            question: card.question.clone(),
            grant_rule: card.grant_rule.clone(),
        }
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
        let args_sha256 = ArgsDigest::of_value(&decided.arguments);
        let card_sha256 = CardDigest(ArgsDigest::of_value(&json!({
            "action": meta.id,
            "caller": decided.caller,
            "title": meta.title,
            "kind": meta.kind,
            "policy": face.policy,
            "consequence": face.consequence,
            "preview": face.preview,
            "arguments": args_sha256,
            "round": round,
            "question": face.question,
            "grant_rule": face.grant_rule,
            "asks_twice": meta.confirm_twice,
            "edited": decided.edited,
            "restored": decided.deadline.is_some(),
            "untrusted": decided.untrusted,
        })));
        ApprovalRequest {
            call,
            action: meta.id.to_string(),
            caller: decided.caller,
            title: meta.title.to_string(),
            kind: meta.kind,
            policy: face.policy,
            consequence: face.consequence,
            arguments: decided.arguments.clone(),
            args_sha256,
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
            card_sha256,
            nonce: self.nonce(call, round, refresh),
            refresh,
            executor: self.executor,
        }
    }
}
