//! `POST /v1/chat/completions`: forwarded to the configured OpenAI-compatible upstream
//! with the key added here, never echoed, and redacted from the answer at the level a
//! client decodes it (see [`crate::redact`]).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use serde_json::Value;

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::redact::{redact_parsed, StreamRedactor};
use crate::AppState;

/// Upstream error codes (OpenAI's and common compatible servers') the gateway names.
const KNOWN_UPSTREAM_CODES: [&str; 12] = [
    "invalid_api_key",
    "invalid_request_error",
    "insufficient_quota",
    "rate_limit_exceeded",
    "model_not_found",
    "context_length_exceeded",
    "server_error",
    "engine_overloaded",
    "invalid_model",
    "unsupported_parameter",
    "content_filter",
    "timeout",
];

/// The largest non-streaming upstream answer accepted.
const MAX_UPSTREAM_BODY: usize = 8 * 1024 * 1024;

/// `POST /v1/chat/completions`: forwarded as is, but for the model, which the gateway
/// sets. Streaming answers pass through chunk by chunk. Traced when traces are on: a
/// span under the page's `traceparent`, passed on to the upstream.
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let upstream = state
        .config
        .upstream
        .clone()
        .ok_or_else(ApiError::not_configured)?;
    let Some(traces) = &state.traces else {
        // Not recorded here, but passed on: the page's trace still reaches the upstream.
        let traceparent = headers
            .get("traceparent")
            .filter(|v| v.to_str().is_ok_and(countersign::call::is_traceparent))
            .cloned();
        return forward(&state, &upstream, &body, traceparent).await;
    };
    let span = traces.model_request(&headers, &upstream.model);
    let answered = forward(&state, &upstream, &body, span.traceparent()).await;
    match &answered {
        Ok(response) => {
            let streamed = response
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            span.end(response.status().as_u16(), "ok", streamed);
        }
        Err(e) => span.end(e.status.as_u16(), e.code.as_str(), false),
    }
    answered
}

/// The request, with the gateway's model and key, to the upstream; its answer redacted.
async fn forward(
    state: &AppState,
    upstream: &crate::Upstream,
    body: &Bytes,
    traceparent: Option<HeaderValue>,
) -> Result<Response, ApiError> {
    let (request, streaming) = with_model(body, &upstream.model)?;

    let mut call = state
        .http
        .post(format!(
            "{}/chat/completions",
            upstream.base_url.trim_end_matches('/')
        ))
        .header(header::CONTENT_TYPE, "application/json")
        .body(request);
    if let Some(traceparent) = traceparent {
        call = call.header("traceparent", traceparent);
    }
    if let Some(key) = &upstream.key {
        call = call.bearer_auth(key.expose());
    }
    let secret = upstream
        .key
        .as_ref()
        .map(|k| k.expose().to_owned())
        .unwrap_or_default();
    let response = match tokio::time::timeout(state.config.upstream_timeout, call.send()).await {
        Err(_) => {
            tracing::warn!("the model upstream did not answer in time");
            return Err(timed_out());
        }
        Ok(Err(e)) if e.is_timeout() => {
            tracing::warn!("the model upstream did not answer in time");
            return Err(timed_out());
        }
        Ok(Err(e)) => {
            tracing::warn!(
                error = %logged(&e.without_url().to_string(), &secret),
                "the model upstream could not be reached"
            );
            return Err(ApiError::new(
                ErrorCode::UpstreamUnavailable,
                "the model upstream could not be reached",
            ));
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let body = read_limited(response, state.config.upstream_timeout)
            .await
            .unwrap_or_default();
        // Why, for the operator: the upstream's own words, the key taken out.
        tracing::warn!(
            status = status.as_u16(),
            body = %logged(&String::from_utf8_lossy(&body), &secret),
            "the model upstream refused the request"
        );
        return Err(upstream_error(status.as_u16(), &body));
    }
    if streaming {
        let is_sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Err(ApiError::new(
                ErrorCode::UpstreamMalformed,
                "the model upstream did not answer with an event stream",
            ));
        }
        return Ok(stream_through(
            response,
            secret,
            state.config.stream_idle_timeout,
        ));
    }
    let body = read_limited(response, state.config.upstream_timeout).await?;
    // Parsed once: checked here, redacted as the same value.
    let parsed: Value = serde_json::from_slice(&body).map_err(|_| {
        ApiError::new(
            ErrorCode::UpstreamMalformed,
            "the model upstream answered with something that is not JSON",
        )
    })?;
    if !parsed.get("choices").is_some_and(Value::is_array) {
        return Err(ApiError::new(
            ErrorCode::UpstreamMalformed,
            "the model upstream's answer has no `choices`",
        ));
    }
    let redacted = if secret.is_empty() {
        Ok(Bytes::from(body))
    } else {
        redact_parsed(&secret, parsed)
    };
    let redacted = redacted.map_err(|_| {
        ApiError::new(
            ErrorCode::UpstreamMalformed,
            "the model upstream's answer held the provider key in a form that cannot be redacted",
        )
    })?;
    let mut out = Response::new(Body::from(redacted));
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(out)
}

/// The request with the gateway's model in place of the page's, and whether it asks for
/// a stream. Its fields are read as raw JSON and written back as they came (no value tree
/// is built for the conversation); a field given twice is sent once, the last, as a JSON
/// parser reads it, and the fields go in name order, as the value tree wrote them. The raw values are checked for syntax and nesting (at most 128
/// levels), not parsed: a number out of `f64`'s range or a lone surrogate escape inside
/// them is the upstream's to refuse, and the page then sees its error.
fn with_model(body: &[u8], model: &str) -> Result<(String, bool), ApiError> {
    use serde_json::value::RawValue;
    // A map keeps the last of a field given twice, as a JSON parser reads it.
    let mut fields = match serde_json::from_slice::<BTreeMap<String, &RawValue>>(body) {
        Ok(fields) => fields,
        // JSON, but not an object (a syntax error after a leading `[` is still one).
        Err(e) if e.is_data() && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "the body must be a JSON object",
            ))
        }
        Err(e) => {
            return Err(ApiError::new(
                ErrorCode::InvalidJson,
                format!("the body is not valid JSON ({e})"),
            ))
        }
    };
    // The raw values are scanned, not parsed: their nesting is bounded here as a parser
    // would bound it, so an upstream is never sent what the gateway would not parse.
    if nests_deeper_than(body, MAX_DEPTH) {
        return Err(ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    if !fields
        .get("messages")
        .is_some_and(|v| v.get().starts_with('['))
    {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`messages` must be a list",
        ));
    }
    let streaming = fields.get("stream").map(|v| v.get()) == Some("true");
    fields.remove("model");
    let mut out = String::with_capacity(body.len() + model.len() + 16);
    out.push('{');
    for (key, value) in fields {
        out.push_str(&Value::from(key).to_string());
        out.push(':');
        out.push_str(value.get());
        out.push(',');
    }
    out.push_str("\"model\":");
    out.push_str(&Value::from(model).to_string());
    out.push('}');
    Ok((out, streaming))
}

/// The deepest nesting a request may have (`serde_json`'s own limit when it parses).
const MAX_DEPTH: usize = 128;

/// Whether the JSON in `body` (already checked to be JSON) nests deeper than `max`.
fn nests_deeper_than(body: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Upstream text as the gateway's log may hold it: the key replaced, control and
/// invisible characters escaped, at most 500 characters.
fn logged(text: &str, secret: &str) -> String {
    let text = if secret.is_empty() {
        text.to_owned()
    } else {
        // JSON is redacted as the page's answers are (escaped forms too).
        let redacted = serde_json::from_str::<Value>(text).ok().and_then(|mut v| {
            crate::redact::redact_value(&mut v, secret).ok()?;
            Some(v.to_string())
        });
        let text = redacted.unwrap_or_else(|| text.replace(secret, "[redacted]"));
        // A piece of the key in some other form (JSON escapes included, a string
        // escaped inside JSON text too): nothing is logged of it.
        let piece: String = secret.chars().take(8).collect();
        let once = crate::redact::lenient_unescape(&text);
        let twice = crate::redact::lenient_unescape(&once);
        if secret.len() >= 8 && [&text, &once, &twice].iter().any(|t| t.contains(&piece)) {
            return "[withheld: it may hold a piece of the provider key]".to_owned();
        }
        text
    };
    let mut out = String::new();
    for c in text.chars().take(500) {
        if c.is_control() || countersign::text::is_format_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn timed_out() -> ApiError {
    ApiError::new(
        ErrorCode::UpstreamTimeout,
        "the model upstream did not answer in time",
    )
}

/// An upstream refusal, without echoing its message (which may quote the key); its
/// code is named only when it is one of the known codes.
fn upstream_error(status: u16, body: &[u8]) -> ApiError {
    let code = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/code")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        // Only codes from a known list are named: a free-form code could carry pieces of
        // the key, one request at a time.
        .filter(|c| KNOWN_UPSTREAM_CODES.contains(&c.as_str()));
    let detail = code.map(|c| format!(" (`{c}`)")).unwrap_or_default();
    let gateway_status = if status == 429 {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::BAD_GATEWAY
    };
    ApiError::new(
        ErrorCode::UpstreamError,
        format!("the model upstream answered HTTP {status}{detail}"),
    )
    .with_status(gateway_status)
}

async fn read_limited(response: reqwest::Response, limit: Duration) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    let read = async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|_| {
                ApiError::new(
                    ErrorCode::UpstreamUnavailable,
                    "the model upstream's answer broke off",
                )
            })?;
            if body.len() + chunk.len() > MAX_UPSTREAM_BODY {
                return Err(ApiError::new(
                    ErrorCode::UpstreamMalformed,
                    "the model upstream's answer is too large",
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(())
    };
    tokio::time::timeout(limit, read)
        .await
        .map_err(|_| timed_out())??;
    Ok(body)
}

/// The event that ends a stream whose upstream fell silent or broke off.
const STREAM_STOPPED: &[u8] = b"\n\ndata: {\"error\":{\"code\":\"upstream_timeout\",\"message\":\"the model upstream stopped answering\",\"type\":\"countersign_gateway\"}}\n\n";

/// The event for a stream that closed before the upstream said anything.
const STREAM_EMPTY: &[u8] = b"data: {\"error\":{\"code\":\"upstream_malformed\",\"message\":\"the model upstream's stream ended without an answer\",\"type\":\"countersign_gateway\"}}\n\n";

/// Passes an SSE stream through, redacting the key and ending with an error event if
/// the upstream falls silent for longer than `idle`.
fn stream_through(response: reqwest::Response, secret: String, idle: Duration) -> Response {
    let upstream = response.bytes_stream();
    // (upstream, redactor, done, whether the upstream said anything at all)
    let state = (upstream, StreamRedactor::new(&secret), false, false);
    let body = stream::unfold(
        state,
        move |(mut upstream, mut redactor, done, said)| async move {
            if done {
                return None;
            }
            match tokio::time::timeout(idle, upstream.next()).await {
                Ok(Some(Ok(chunk))) => {
                    let said = said || chunk.iter().any(|b| !b.is_ascii_whitespace());
                    let out = redactor.push(&chunk);
                    // A cut stream (a leak, a malformed upstream) ends here.
                    let stopped = redactor.is_stopped();
                    Some((
                        Ok::<Bytes, std::io::Error>(out),
                        (upstream, redactor, stopped, said),
                    ))
                }
                Ok(None) => {
                    let mut tail = redactor.finish().to_vec();
                    if !said {
                        // An answer that never started is no answer: said, not passed
                        // on as a successful empty one.
                        tracing::warn!("the model upstream's stream ended with nothing in it");
                        tail.extend_from_slice(STREAM_EMPTY);
                    }
                    Some((Ok(Bytes::from(tail)), (upstream, redactor, true, said)))
                }
                Ok(Some(Err(_))) | Err(_) => {
                    tracing::warn!("the model upstream's stream broke off or fell silent");
                    let mut tail = redactor.finish().to_vec();
                    tail.extend_from_slice(STREAM_STOPPED);
                    Some((Ok(Bytes::from(tail)), (upstream, redactor, true, said)))
                }
            }
        },
    );
    let mut out = Response::new(Body::from_stream(body));
    let headers = out.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.into_response()
}
