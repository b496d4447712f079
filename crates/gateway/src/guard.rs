//! Who may call the API: an origin allow-list, then a bearer token or same-origin.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// The guard in front of every API route except `/v1/health`.
///
/// 1. A request carrying an `Origin` not on the allow-list is refused (403).
/// 2. With a token configured: `Authorization: Bearer <token>` is required (401).
/// 3. Without one: only same-origin browser requests are accepted — an allowed
///    `Origin`, or `Sec-Fetch-Site: same-origin` (401 otherwise).
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn check(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let access = &state.config.access;
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if let Some(origin) = origin {
        if !access.allowed_origins.iter().any(|o| o == origin) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "origin `{}` is not allowed",
                    origin.chars().take(100).collect::<String>()
                ),
            ));
        }
    }
    match &access.token {
        Some(token) => {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("");
            if constant_time_eq(given.as_bytes(), token.expose().as_bytes()) {
                Ok(())
            } else {
                Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "a valid bearer token is required",
                ))
            }
        }
        None => {
            let same_site =
                headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("same-origin");
            if origin.is_some() || same_site {
                Ok(())
            } else {
                Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "this gateway accepts only same-origin requests from its page; configure a token for other clients",
                ))
            }
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
