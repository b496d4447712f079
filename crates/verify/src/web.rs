//! The `Countersignature` request header as an axum extractor, and refusals as JSON.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::token::{VerifyError, MAX_TOKEN_BYTES};

/// The header an action's backend request carries the token in.
pub const HEADER: &str = "countersignature";

/// The raw token from the `Countersignature` header. Missing, repeated, non-ASCII or
/// oversized: 401 with a JSON error, before the handler runs. Check it with
/// [`crate::Verifier::verify`] against what the handler is about to do.
#[derive(Debug, Clone)]
pub struct CountersignatureHeader(pub String);

impl<S: Send + Sync> FromRequestParts<S> for CountersignatureHeader {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let mut values = parts.headers.get_all(HEADER).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(refusal(
                StatusCode::UNAUTHORIZED,
                "no_countersignature",
                "this request needs exactly one Countersignature header",
            ));
        };
        if value.len() > MAX_TOKEN_BYTES {
            return Err(VerifyError::TooLarge.into_response());
        }
        value
            .to_str()
            .map(|token| Self(token.trim().to_owned()))
            .map_err(|_| VerifyError::Malformed("the header is not ASCII").into_response())
    }
}

impl IntoResponse for VerifyError {
    /// 401 for a token that is not a valid countersignature, 403 for a valid one that
    /// does not cover this request, 409 for one already used, 503 when busy or when the
    /// store of spent ids is unavailable (its cause is not sent: log the error first).
    fn into_response(self) -> Response {
        let status = match self {
            VerifyError::WrongAction
            | VerifyError::WrongArguments
            | VerifyError::WrongCard
            | VerifyError::Presence
            | VerifyError::WrongRole => StatusCode::FORBIDDEN,
            VerifyError::Replayed => StatusCode::CONFLICT,
            VerifyError::Busy | VerifyError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        };
        let message = match self {
            VerifyError::Unavailable(_) => {
                "the record of spent tokens is unavailable, so the token was not accepted; try again shortly".to_owned()
            }
            _ => self.to_string(),
        };
        refusal(status, self.code(), &message)
    }
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": { "code": code, "message": message } });
    (status, Json(body)).into_response()
}
