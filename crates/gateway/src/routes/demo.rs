//! `POST /v1/demo/{action}`: the tutorial's backend (with `--demo-backend`). It does what
//! an app's own backend would: refuse the mutation unless the request carries a valid
//! countersignature for exactly this action and these arguments, used once.

use std::sync::atomic::Ordering;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use countersign_verify::{CountersignatureHeader, Expected};
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::AppState;

/// The role the tutorial's page signs in as.
const TUTORIAL_ROLE: &str = "admin";

/// The actions the tutorial's backend performs.
const ACTIONS: [&str; 2] = ["archive_workspace", "reset_workspace"];

pub(crate) async fn perform(
    State(state): State<AppState>,
    action: Result<Path<String>, PathRejection>,
    CountersignatureHeader(token): CountersignatureHeader,
    JsonBody(body): JsonBody,
) -> Response {
    let Ok(Path(action)) = action else {
        return ApiError::new(ErrorCode::UnknownRoute, "no such route").into_response();
    };
    if !ACTIONS.contains(&action.as_str()) {
        return ApiError::new(ErrorCode::UnknownRoute, "no such route").into_response();
    }
    let arguments: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return ApiError::new(
                ErrorCode::InvalidJson,
                format!("the arguments are not JSON ({e})"),
            )
            .into_response()
        }
    };
    // Reset loses data: it takes only a token minted with the passkey of the tutorial's
    // signed-in user (a real backend takes the role from its own session).
    let mut expected = Expected::call(&action, &arguments);
    if action == "reset_workspace" {
        expected = expected.with_passkey().with_role(TUTORIAL_ROLE);
    }
    // Where the server's declarations (or the policy file) put the action in the approval
    // window, only the window's token does.
    if super::countersign::window_only(&state, TUTORIAL_ROLE, &action) {
        // The card is drawn for this role: the token must be for it too (the card's
        // digest is of its words, which two roles may share).
        expected = expected.with_window().with_role(TUTORIAL_ROLE);
        // What the person approved in the window must still be the card now: drawn again
        // from the same declarations and this server's data.
        let now = state
            .window
            .as_deref()
            // The tutorial's actions take every caller: drawn as its assistant asks.
            .map(|w| {
                w.card_digest(
                    TUTORIAL_ROLE,
                    &action,
                    &arguments,
                    countersign::Caller::Assistant,
                )
            });
        match now {
            Some(Ok(card)) => expected = expected.with_card(card),
            _ => return countersign_verify::VerifyError::WrongCard.into_response(),
        }
    }
    let claims = match state.verifier.verify_now(&token, &expected).await {
        Ok(claims) => claims,
        Err(refused) => return refused.into_response(),
    };
    let done = if action == "archive_workspace" {
        state.demo.archived.store(true, Ordering::SeqCst);
        "archived"
    } else {
        state.demo.resets.fetch_add(1, Ordering::SeqCst);
        "reset"
    };
    tracing::info!(action, jti = %claims.jti, "tutorial backend: countersigned mutation done");
    Json(json!({
        "ok": true,
        "done": done,
        "countersignature": {
            "id": claims.jti,
            "approved_by": claims.detail().map(|d| d.decision),
            "presence": claims.detail().map(|d| d.presence),
            "session": claims.detail().map(|d| &d.session),
        },
    }))
    .into_response()
}
