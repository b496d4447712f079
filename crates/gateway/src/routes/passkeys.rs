//! `/v1/passkeys`: whether a user has a passkey for approvals, and registering one.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::passkeys::{PasskeyError, Passkeys};
use crate::AppState;

/// A user is a role name: 1 to 64 ASCII letters, digits, `_`, `-`, `.`.
pub(crate) fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && user.len() <= 64
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

pub(crate) fn refusal(e: &PasskeyError) -> ApiError {
    let code = match e {
        PasskeyError::NoPasskey => ErrorCode::NoPasskey,
        PasskeyError::Exists => ErrorCode::PasskeyExists,
        PasskeyError::Enrollment => ErrorCode::PasskeyRejected,
        PasskeyError::UnknownCeremony
        | PasskeyError::OtherCall
        | PasskeyError::Rejected(_)
        | PasskeyError::NotVerified => ErrorCode::PasskeyRejected,
        PasskeyError::Config(_) | PasskeyError::Busy | PasskeyError::Store(_) => {
            ErrorCode::PasskeyUnavailable
        }
    };
    ApiError::new(code, e.to_string())
}

pub(crate) fn enabled(state: &AppState) -> Result<&Passkeys, ApiError> {
    state.passkeys.as_deref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::PasskeyUnavailable,
            "passkeys are off on this gateway (start it with --rp-id)",
        )
    })
}

/// `GET /v1/passkeys/status/{user}`: `{"enabled","registered"}`.
pub(crate) async fn status(
    State(state): State<AppState>,
    user: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Ok(Path(user)) = user else {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`user` is invalid",
        ));
    };
    if !valid_user(&user) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`user` is invalid",
        ));
    }
    let registered = state
        .passkeys
        .as_deref()
        .is_some_and(|p| p.registered(&user));
    Ok(Json(
        json!({ "enabled": state.passkeys.is_some(), "registered": registered }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Start {
    user: String,
    /// The enrollment code issued outside the page.
    code: String,
}

/// A ceremony's id and the browser's credential (`toJSON()` form).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Finish {
    pub(crate) ceremony: String,
    pub(crate) credential: Value,
}

/// A JSON body this route takes, or `invalid_request` saying why not.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("the body is not what this route takes ({e})"),
        )
    })
}

/// `POST /v1/passkeys/register`: options for `navigator.credentials.create`.
pub(crate) async fn register(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let start: Start = parse(&body)?;
    if !valid_user(&start.user) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`user` is invalid",
        ));
    }
    let (ceremony, options) = enabled(&state)?
        .start_registration(&start.user, &start.code)
        .map_err(|e| refusal(&e))?;
    Ok(Json(json!({ "ceremony": ceremony, "options": options })))
}

/// `POST /v1/passkeys/register/finish`: the browser's new credential.
pub(crate) async fn finish(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let finish: Finish = parse(&body)?;
    let user = enabled(&state)?
        .finish_registration(&finish.ceremony, &finish.credential)
        .map_err(|e| refusal(&e))?;
    tracing::info!(user, "passkey registered for approvals");
    Ok(Json(json!({ "registered": true, "user": user })))
}
