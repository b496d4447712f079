#![doc = include_str!("../README.md")]
//!
//! The Countersign gateway: one process on loopback that serves the built page, proxies
//! the page's model requests to an OpenAI-compatible upstream with a key the page
//! never sees, and keeps the audit trail in a hash-chained file.
//!
//! Routes:
//!
//! | route | what |
//! | --- | --- |
//! | `GET /v1/health` | `{"ok":true,"model":bool}`; no auth |
//! | `GET /v1/models` | the configured model, or 503 `not_configured` |
//! | `POST /v1/chat/completions` | forwarded upstream (streaming or not), key added here |
//! | `POST /v1/audit` | a JSON array of audit records, appended durably, idempotent by id |
//! | `GET /v1/audit` | the audit file (JSON Lines) |
//! | `GET /v1/policy` | the deployment's policy file, or 404 `no_policy` |
//! | anything else under `/v1` | 404 `unknown_route` |
//! | other paths | the built page (`--dist`), if configured |
//!
//! Layers, outermost first: request tracing → `Host` allow-list (every route; 421
//! otherwise, against DNS rebinding) → body size cap (answered as 413 JSON by the
//! handlers) → request timeout → guard (origin allow-list, then token or same-origin)
//! → rate limit (model route only).

pub mod audit_store;
pub mod config;
mod error;
mod guard;
mod proxy;
pub mod redact;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::AuditRecord;
use serde_json::{json, Value};
use tower_http::services::ServeDir;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use audit_store::{
    head_path, verify_bytes, verify_file, AuditStore, ChainKey, Head, StoreError, Verified,
};
pub use config::{loopback_hosts, Access, GatewayConfig, Secret, Upstream};
pub use error::ApiError;

/// Shared state of the routes.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The settings.
    pub config: Arc<GatewayConfig>,
    /// The HTTP client for the upstream.
    pub http: reqwest::Client,
    /// The audit store.
    pub audit: AuditStore,
}

impl AppState {
    /// State for `config`, writing audit records to `audit`.
    pub fn new(config: GatewayConfig, audit: AuditStore) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            config: Arc::new(config),
            http,
            audit,
        })
    }
}

/// The whole app, as a value: test it with `oneshot`, serve it with `axum::serve`.
pub fn app(state: AppState) -> Router {
    let config = Arc::clone(&state.config);
    let mut model = Router::new().route("/v1/chat/completions", post(proxy::chat_completions));
    if let Some(per_minute) = config.rate_per_minute.filter(|n| *n > 0) {
        let period =
            Duration::from_millis(60_000 / u64::from(per_minute)).max(Duration::from_millis(1));
        let governor = tower_governor::governor::GovernorConfigBuilder::default()
            .period(period)
            .burst_size(per_minute.clamp(1, 30))
            .finish();
        if let Some(governor) = governor {
            let layer = tower_governor::GovernorLayer::new(governor).error_handler(|e| {
                let message = match e {
                    tower_governor::GovernorError::TooManyRequests { wait_time, .. } => {
                        format!("too many requests; try again in {wait_time} s")
                    }
                    _ => "the client could not be identified for rate limiting".to_owned(),
                };
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
                    .into_response()
            });
            model = model.layer(layer);
        }
    }
    let api = Router::new()
        .route("/v1/models", get(proxy::models))
        .route("/v1/audit", post(append_audit).get(export_audit))
        .route("/v1/policy", get(policy))
        .merge(model)
        .route("/v1/{*rest}", axum::routing::any(unknown_route))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::guard,
        ));
    let mut router = Router::new()
        .route("/v1/health", get(health))
        .merge(api)
        .method_not_allowed_fallback(method_not_allowed);
    router = match &config.dist {
        Some(dist) => {
            router.fallback_service(ServeDir::new(dist).append_index_html_on_directories(true))
        }
        None => router.fallback(unknown_route),
    };
    router
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            config.upstream_timeout + Duration::from_secs(5),
        ))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::host_guard,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// `GET /v1/policy`: the policy file the gateway was started with (validated then).
async fn policy(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = state.config.policy.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_policy",
            "this gateway has no policy file",
        )
    })?;
    let mut response = Response::new(axum::body::Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "ok": true, "model": state.config.upstream.is_some() }))
}

async fn unknown_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_route",
        "there is no such route",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// `POST /v1/audit`: a JSON array of audit records. The whole batch is validated first;
/// one bad record refuses the batch and nothing is written.
async fn append_audit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    proxy::require_json(&headers)?;
    let body = proxy::body_or_413(body, state.config.max_body_bytes)?;
    let values: Vec<Value> = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("the body must be a JSON array of audit records ({e})"),
        )
    })?;
    if values.len() > state.config.max_audit_batch {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            format!(
                "a batch holds at most {} records; this one has {}",
                state.config.max_audit_batch,
                values.len()
            ),
        ));
    }
    let records = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<AuditRecord>(v).map_err(|e| {
                ApiError::bad_request(
                    "invalid_audit_record",
                    format!("record {i} is invalid: {e}"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((i, _)) = records
        .iter()
        .enumerate()
        .find(|(_, r)| r.id.is_empty() || r.id.len() > 200)
    {
        return Err(ApiError::bad_request(
            "invalid_audit_record",
            format!("record {i} has no usable id"),
        ));
    }
    let appended = state.audit.append(records).await.map_err(|e| {
        tracing::error!(error = %e, "audit append failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "audit_unavailable",
            "the audit store could not record the batch; nothing was acknowledged",
        )
    })?;
    Ok(Json(
        json!({ "appended": appended.appended, "duplicates": appended.duplicates, "last_seq": appended.last_seq }),
    ))
}

/// `GET /v1/audit`: the chained file as JSON Lines.
async fn export_audit(State(state): State<AppState>) -> Result<Response, ApiError> {
    let bytes = state.audit.export().await.map_err(|e| {
        tracing::error!(error = %e, "audit export failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "audit_unavailable",
            "the audit file could not be read",
        )
    })?;
    let mut response = Response::new(axum::body::Body::from(bytes));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(response)
}
