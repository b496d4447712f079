//! Drawing a card from the server's declarations: for the window, and for a backend
//! that checks, when it acts, that the card the person approved still holds.

use countersign::{Call, Caller, Step, Timestamp};
use serde_json::Value;

use super::{now_ms, refused, revealed, revealed_json, ApprovalWindow, Card};
use crate::error::{ApiError, ErrorCode};

/// A card the declarations drew.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// What the window shows.
    pub card: Card,
    /// Its digest: what the token's `card_sha256` says the person approved.
    pub card_sha256: String,
    /// The digest of the arguments, as the token binds them.
    pub args_sha256: String,
}

impl ApprovalWindow {
    /// Draws the card of `role`'s call of `action` with `arguments`, asked by `caller`,
    /// from the declarations and the server's data as they are now.
    pub fn draw(
        &self,
        role: &str,
        action: &str,
        arguments: &Value,
        caller: Caller,
        tool_call_id: &str,
    ) -> Result<Drawn, ApiError> {
        let bad = |why: &str| refused(ErrorCode::InvalidRequest, why);
        let executor = (self.declare)(role).map_err(|e| {
            refused(
                ErrorCode::InvalidRequest,
                format!("the server has no declarations for role `{}` ({e})", role),
            )
        })?;
        if executor.presence_of(action).is_none() {
            return Err(bad("the server declares no such action; the window shows only calls it can draw itself"));
        }
        let arguments =
            serde_json::to_string(arguments).map_err(|_| bad("`arguments` is not JSON"))?;
        let call = Call::new(tool_call_id, action, arguments).by(caller);
        let now = now_ms();
        let request = match executor.submit(call, Timestamp::from_millis(now)) {
            Ok(Step::Approval(request)) => request,
            Ok(Step::Settled(settled)) => {
                let why = match &settled.outcome {
                    countersign::Outcome::Refused(refusal) => refusal.message.clone(),
                    countersign::Outcome::Done(_) => "it ran without asking".into(),
                };
                return Err(refused(
                    ErrorCode::InvalidRequest,
                    format!("the server's declarations do not ask a person for this call: {why}"),
                ));
            }
            Ok(_) => {
                return Err(bad(
                    "the server's declarations do not ask a person to approve this call",
                ))
            }
            Err(blocked) => return Err(refused(ErrorCode::InvalidRequest, blocked.to_string())),
        };
        // Shown as the dock shows them: bidi, invisible and look-alike characters escaped.
        let card = Card {
            action: request.action.clone(),
            title: revealed(&request.title),
            kind: request.kind,
            consequence: request.consequence.as_deref().map(revealed),
            preview: request
                .preview
                .as_ref()
                .map(|p| countersign::text::Preview {
                    diff: p.diff.as_deref().map(revealed),
                    counts: p.counts.iter().map(|(l, n)| (revealed(l), *n)).collect(),
                }),
            arguments: revealed_json(&request.arguments),
            role: role.to_owned(),
        };
        Ok(Drawn {
            card,
            // The card's words, as the page's tokens bind them too.
            card_sha256: request.words_sha256().to_hex(),
            args_sha256: request.args_sha256.to_hex(),
        })
    }

    /// The digest of the card the declarations draw now for `role`'s call of `action`
    /// with `arguments`: a backend that shares them compares it with the token's
    /// `card_sha256` when it acts
    /// (`Expected::with_card`), and refuses when what the person approved no longer holds
    /// (the card said one row; now a hundred would go).
    pub fn card_digest(
        &self,
        role: &str,
        action: &str,
        arguments: &Value,
        caller: Caller,
    ) -> Result<String, ApiError> {
        self.draw(role, action, arguments, caller, "backend")
            .map(|drawn| drawn.card_sha256)
    }
}
