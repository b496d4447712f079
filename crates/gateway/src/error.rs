//! Every error the gateway answers with: a stable code (with its status) and a sentence.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A stable code for every way a request can fail, as clients see it (`not_configured`).
/// Exhaustive on purpose, as the core's `Code` is: adding one breaks every `match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No model upstream is configured (503); the page uses its offline assistant.
    NotConfigured,
    /// The body is not JSON (400).
    InvalidJson,
    /// The body is JSON but not a request this route takes (400).
    InvalidRequest,
    /// The body could not be read (400).
    UnreadableBody,
    /// The body is over the cap (413).
    PayloadTooLarge,
    /// The body is not declared `application/json` (415).
    UnsupportedMediaType,
    /// An audit batch holds more records than allowed (413).
    BatchTooLarge,
    /// An audit record in the batch is invalid; nothing was written (400).
    InvalidAuditRecord,
    /// The audit store could not record or read (503: nothing was acknowledged; send it
    /// again).
    AuditUnavailable,
    /// A record with the same id is stored with other contents; nothing of the batch was
    /// written (409).
    AuditConflict,
    /// The gateway has no policy file (404).
    NoPolicy,
    /// No such route (404).
    UnknownRoute,
    /// The route does not take that method (405).
    MethodNotAllowed,
    /// The request's `Host` is not one the gateway answers to (421).
    HostNotAllowed,
    /// The browser origin is not allowed (403).
    OriginNotAllowed,
    /// A token is required, or only same-origin page requests are accepted (401).
    Unauthorized,
    /// Too many model requests from this client (429).
    RateLimited,
    /// The upstream answered with an error (502, or 429 when it rate-limits).
    UpstreamError,
    /// The upstream's answer is malformed, too large, or holds the key in a form that
    /// cannot be redacted (502).
    UpstreamMalformed,
    /// The upstream did not answer in time (504).
    UpstreamTimeout,
    /// The upstream could not be reached, or its answer broke off (502).
    UpstreamUnavailable,
    /// The user has no passkey for approvals (409): register one in the dock.
    NoPasskey,
    /// The user already has a passkey (409).
    PasskeyExists,
    /// A passkey assertion or registration did not verify, was for another call, or
    /// lacked user verification (403).
    PasskeyRejected,
    /// Passkeys are off on this gateway, busy, or their file failed (503).
    PasskeyUnavailable,
    /// No page with that relay key is connected, or no such relayed call waits (404).
    RelayGone,
    /// Too many pages are connected, or the page has too many calls waiting (503).
    RelayBusy,
    /// The action is approved only in the approval window; the page cannot mint for it (403).
    WindowRequired,
    /// No such approval request in the window (unknown, or gone after its deadline) (404).
    WindowGone,
    /// The approval request was decided already, or has expired (409).
    WindowDecided,
    /// Too many approvals wait in the window, overall or for this page session (503).
    WindowBusy,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 31] = [
        ErrorCode::NotConfigured,
        ErrorCode::InvalidJson,
        ErrorCode::InvalidRequest,
        ErrorCode::UnreadableBody,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::BatchTooLarge,
        ErrorCode::InvalidAuditRecord,
        ErrorCode::AuditUnavailable,
        ErrorCode::AuditConflict,
        ErrorCode::NoPolicy,
        ErrorCode::UnknownRoute,
        ErrorCode::MethodNotAllowed,
        ErrorCode::HostNotAllowed,
        ErrorCode::OriginNotAllowed,
        ErrorCode::Unauthorized,
        ErrorCode::RateLimited,
        ErrorCode::UpstreamError,
        ErrorCode::UpstreamMalformed,
        ErrorCode::UpstreamTimeout,
        ErrorCode::UpstreamUnavailable,
        ErrorCode::NoPasskey,
        ErrorCode::PasskeyExists,
        ErrorCode::PasskeyRejected,
        ErrorCode::PasskeyUnavailable,
        ErrorCode::RelayGone,
        ErrorCode::RelayBusy,
        ErrorCode::WindowRequired,
        ErrorCode::WindowGone,
        ErrorCode::WindowDecided,
        ErrorCode::WindowBusy,
    ];

    /// The code as clients see it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotConfigured => "not_configured",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnreadableBody => "unreadable_body",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::BatchTooLarge => "batch_too_large",
            ErrorCode::InvalidAuditRecord => "invalid_audit_record",
            ErrorCode::AuditUnavailable => "audit_unavailable",
            ErrorCode::AuditConflict => "audit_conflict",
            ErrorCode::NoPolicy => "no_policy",
            ErrorCode::UnknownRoute => "unknown_route",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::HostNotAllowed => "host_not_allowed",
            ErrorCode::OriginNotAllowed => "origin_not_allowed",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::UpstreamMalformed => "upstream_malformed",
            ErrorCode::UpstreamTimeout => "upstream_timeout",
            ErrorCode::UpstreamUnavailable => "upstream_unavailable",
            ErrorCode::NoPasskey => "no_passkey",
            ErrorCode::PasskeyExists => "passkey_exists",
            ErrorCode::PasskeyRejected => "passkey_rejected",
            ErrorCode::PasskeyUnavailable => "passkey_unavailable",
            ErrorCode::RelayGone => "relay_gone",
            ErrorCode::RelayBusy => "relay_busy",
            ErrorCode::WindowRequired => "window_required",
            ErrorCode::WindowGone => "window_gone",
            ErrorCode::WindowDecided => "window_decided",
            ErrorCode::WindowBusy => "window_busy",
        }
    }

    /// The HTTP status the code is answered with (see [`ApiError::with_status`] for the
    /// one exception, an upstream's 429).
    pub const fn status(self) -> StatusCode {
        match self {
            ErrorCode::NotConfigured => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::InvalidJson
            | ErrorCode::InvalidRequest
            | ErrorCode::UnreadableBody
            | ErrorCode::InvalidAuditRecord => StatusCode::BAD_REQUEST,
            ErrorCode::PayloadTooLarge | ErrorCode::BatchTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::AuditUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NoPolicy | ErrorCode::UnknownRoute => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::HostNotAllowed => StatusCode::MISDIRECTED_REQUEST,
            ErrorCode::OriginNotAllowed => StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::UpstreamError
            | ErrorCode::UpstreamMalformed
            | ErrorCode::UpstreamUnavailable => StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::NoPasskey | ErrorCode::PasskeyExists | ErrorCode::AuditConflict => {
                StatusCode::CONFLICT
            }
            ErrorCode::PasskeyRejected => StatusCode::FORBIDDEN,
            ErrorCode::PasskeyUnavailable | ErrorCode::RelayBusy => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RelayGone | ErrorCode::WindowGone => StatusCode::NOT_FOUND,
            ErrorCode::WindowRequired => StatusCode::FORBIDDEN,
            ErrorCode::WindowDecided => StatusCode::CONFLICT,
            ErrorCode::WindowBusy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error response: `{"error":{"code","message","type":"countersign_gateway"}}`,
/// shaped like OpenAI's so SDKs show the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status (the code's, unless set otherwise).
    pub status: StatusCode,
    /// The stable code.
    pub code: ErrorCode,
    /// A sentence for people. Never contains a key.
    pub message: String,
}

impl ApiError {
    /// An error with `code` (and its status) and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status(),
            code,
            message: message.into(),
        }
    }

    /// The same error answered with another status.
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// 503 `not_configured`: the page takes this as "use the offline assistant".
    pub fn not_configured() -> Self {
        Self::new(
            ErrorCode::NotConfigured,
            "no model is configured on this gateway; the page uses its offline assistant",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code.as_str(), "message": self.message, "type": "countersign_gateway" } });
        (self.status, Json(body)).into_response()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_lowercase_words() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code}");
            assert!(code
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'));
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }
}
