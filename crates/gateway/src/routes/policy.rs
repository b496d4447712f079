//! `GET /v1/policy`: the deployment's policy file, validated when the gateway started.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::Response;

use crate::error::{ApiError, ErrorCode};
use crate::AppState;

/// `GET /v1/policy`: the policy file the gateway was started with (validated then).
pub(crate) async fn policy(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = state
        .config
        .policy
        .clone()
        .ok_or_else(|| ApiError::new(ErrorCode::NoPolicy, "this gateway has no policy file"))?;
    let mut response = Response::new(axum::body::Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
