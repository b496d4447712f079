//! Who may call: a `Host` allow-list on every route, then, on the API, an origin
//! allow-list and a bearer token or same-origin.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorCode};
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

/// The `Host` check in front of every route, static files and `/v1/health` included.
/// A request without `Host` (HTTP/1.0, tests) carries no rebinding risk: browsers always
/// send one.
pub(crate) async fn host_guard(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}").to_owned())
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    match host {
        Some(host) if !host_allowed(&state.config.access.allowed_hosts, &host) => ApiError::new(
            ErrorCode::HostNotAllowed,
            format!(
                "host `{}` is not served here",
                host.chars().take(100).collect::<String>()
            ),
        )
        .into_response(),
        _ => next.run(request).await,
    }
}

/// Whether `host` (`name` or `name:port`) is on the list: an entry with a port must
/// match exactly; an entry without one matches the name on any port.
fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.rsplit_once(':') {
        // `[::1]:8787` → `[::1]`; a bare IPv6 literal has no port after `]`.
        Some((name, port)) if !port.contains(']') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name.to_owned()
        }
        _ => host.clone(),
    };
    allowed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        entry == host || entry == name
    })
}

fn check(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let access = &state.config.access;
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if let Some(origin) = origin {
        if !access.allowed_origins.iter().any(|o| o == origin) {
            let origin: String = origin.chars().take(100).collect();
            // A page served from elsewhere (`trunk serve` on another port) is refused on
            // every call: its operator hears it here, not only in a browser console.
            tracing::warn!(%origin, "refused a request from an origin not allowed (--allowed-origin)");
            return Err(ApiError::new(ErrorCode::OriginNotAllowed, {
                format!(
                        "origin `{origin}` is not allowed; start the gateway with `--allowed-origin {origin}` (or COUNTERSIGN_ALLOWED_ORIGINS) to serve a page from there"
                    )
            }));
        }
    }
    match &access.token {
        Some(token) => {
            if bears(headers, token) {
                Ok(())
            } else {
                Err(ApiError::new(
                    ErrorCode::Unauthorized,
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
            ErrorCode::Unauthorized,
                    "this gateway accepts only same-origin requests from its page; configure a token for other clients",
                ))
            }
        }
    }
}

/// Whether the request's `Authorization: Bearer …` is `token` (compared in constant time).
pub(crate) fn bears(headers: &HeaderMap, token: &crate::Secret) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    constant_time_eq(given.as_bytes(), token.expose().as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::{constant_time_eq, host_allowed};

    #[test]
    fn hosts_match_by_name_or_exactly() {
        let allowed = vec![
            "localhost".to_owned(),
            "127.0.0.1".into(),
            "[::1]".into(),
            "app.example:443".into(),
        ];
        for ok in [
            "localhost",
            "localhost:8787",
            "127.0.0.1:1",
            "[::1]:8787",
            "LOCALHOST:80",
            "app.example:443",
        ] {
            assert!(host_allowed(&allowed, ok), "{ok}");
        }
        for bad in [
            "attacker.example:8787",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:8787",
            "app.example:8443",
            "app.example",
            "",
            "localhost:80x",
        ] {
            assert!(!host_allowed(&allowed, bad), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
