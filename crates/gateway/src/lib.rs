#![doc = include_str!("../README.md")]
//!
//! The Countersign gateway: one process on loopback that serves the built page, proxies
//! the page's model requests to an OpenAI-compatible upstream with a key the page
//! never sees, and keeps the audit trail keyed and anchored, in a file or (for replicas)
//! in PostgreSQL; traces go out over OTLP when an endpoint is set. Each route is a file
//! in `routes/`; `app()` composes them with the layers below.
//!
//! Routes:
//!
//! | route | what |
//! | --- | --- |
//! | `GET /v1/health` | `{"ok":true,"model":bool,"mcp":bool}`; no auth |
//! | `GET /v1/models` | the configured model, or 503 `not_configured` |
//! | `POST /v1/chat/completions` | forwarded upstream (streaming or not), key added here |
//! | `POST /v1/audit` | a JSON array of audit records, appended durably, idempotent by id |
//! | `GET /v1/audit` | the audit trail (JSON Lines) |
//! | `GET /v1/policy` | the deployment's policy file, or 404 `no_policy` |
//! | `POST /v1/countersign` | mint a countersignature for one approved call (its audit record first) |
//! | `POST /v1/countersign/challenge` | a passkey challenge derived from a call's binding (presence-required mints) |
//! | `GET /v1/passkeys/status/{user}`, `POST /v1/passkeys/register[/finish]` | is a passkey set up; register one (with an enrollment code issued outside the page) |
//! | `GET /.well-known/jwks.json` | the public key that checks countersignatures; no auth |
//! | `GET /v1/relay` | the page's WebSocket for MCP (`--mcp-token-file` only): its pairing code, tools, calls, cancels and results |
//! | `POST/GET/DELETE /mcp` | MCP (Streamable HTTP) for clients with the MCP token, paired with one page by `Countersign-Page` |
//! | `POST /v1/demo/{action}` | the tutorial's backend (`--demo-backend` only): needs a valid countersignature |
//! | `POST /v1/window/requests`, `GET/DELETE /v1/window/requests/{id}` | the approval window ([`window`], when the server declares one): open a call there, wait for its decision, withdraw it |
//! | anything else under `/v1` | 404 `unknown_route` |
//! | other paths | the built page (`--dist`), if configured |
//!
//! With an approval window, a request for the window's host goes to the window's own
//! routes (its page and API) and nothing else; every other request to the routes above.
//!
//! Layers, outermost first: request tracing → `Host` allow-list (every route; 421
//! otherwise, against DNS rebinding) → body size cap (answered as 413 JSON by the
//! handlers) → request timeout → guard (origin allow-list, then token or same-origin)
//! → rate limit (model route only).

pub mod audit_store;
pub mod cli;
pub mod config;
mod error;
pub mod evidence;
mod extract;
mod guard;
pub mod log_check;
mod mcp;
pub mod passkeys;
pub mod redact;
pub mod relay;
pub mod replay;
mod routes;
pub mod summary;
pub mod telemetry;
pub mod window;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use tower_http::services::ServeDir;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use audit_store::{
    head_path, read_postgres, verify_bytes, verify_file, verify_postgres, AuditStore, ChainKey,
    ChainedLine, Completeness, FileStore, Head, Hole, PgStore, StoreError, Trail, Verified,
    MAX_HOLES_LISTED,
};
pub use config::{loopback_hosts, Access, GatewayConfig, Secret, Upstream, DEFAULT_ISSUER};
pub use error::{ApiError, ErrorCode};

use routes::audit::{append_audit, export_audit};
use routes::fallback::{method_not_allowed, unknown_route};
use routes::{chat, countersign, demo, health, models, policy};

/// The countersignature signing seed from `path` (64 hex digits, the audit key file's
/// format), created with a random seed and mode 0600 on first start. Never served.
pub fn load_or_create_signing_seed(path: &std::path::Path) -> Result<[u8; 32], StoreError> {
    ChainKey::load_or_create(path).map(|key| key.0)
}

/// The countersignature signing seed from `path`, which must exist (replicas share one).
pub fn load_signing_seed(path: &std::path::Path) -> Result<[u8; 32], StoreError> {
    ChainKey::load(path).map(|key| key.0)
}

/// Shared state of the routes.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The settings.
    pub config: Arc<GatewayConfig>,
    /// The HTTP client for the upstream.
    pub http: reqwest::Client,
    /// The audit store.
    pub audit: AuditStore,
    /// Mints countersignatures.
    pub signer: Arc<countersign_verify::Signer>,
    /// Checks them (the tutorial's backend).
    pub verifier: Arc<countersign_verify::Verifier>,
    /// The tutorial backend's state.
    pub demo: Arc<DemoState>,
    /// Registered passkeys and ceremonies in flight (when passkeys are on).
    pub passkeys: Option<Arc<passkeys::Passkeys>>,
    /// The pages connected for MCP, and the calls relayed to them.
    pub relay: Arc<relay::Relay>,
    /// Traces over OTLP, when an endpoint is configured.
    pub traces: Option<telemetry::Traces>,
    /// The approval window, when the server declares its actions.
    pub window: Option<Arc<window::ApprovalWindow>>,
}

/// What the tutorial's backend has done (it keeps no more than this).
#[derive(Debug, Default)]
pub struct DemoState {
    /// Whether a countersigned archive went through.
    pub archived: std::sync::atomic::AtomicBool,
    /// How many countersigned resets went through.
    pub resets: std::sync::atomic::AtomicU64,
}

impl AppState {
    /// State for `config`, writing audit records to `audit`, minting countersignatures
    /// with a fresh random key (see [`AppState::with_signing_seed`] for a kept one).
    pub fn new(
        config: GatewayConfig,
        audit: impl Into<AuditStore>,
    ) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        let mut seed = [0u8; 32];
        // Without randomness the key is unusable: zero seed would be guessable, so the
        // gateway refuses to start in `main`, which always sets a kept seed.
        let _ = getrandom::fill(&mut seed);
        let state = Self {
            config: Arc::new(config),
            http,
            audit: audit.into(),
            signer: Arc::new(countersign_verify::Signer::from_seed(&seed)),
            verifier: Arc::new(countersign_verify::Verifier::new("")),
            demo: Arc::default(),
            passkeys: None,
            // Replaced below, by the relay whose codes derive from the seed.
            relay: Arc::new(relay::Relay::new()),
            traces: None,
            window: None,
        };
        Ok(state.with_signing_seed(&seed))
    }

    /// Turns passkey presence on, with these passkeys.
    pub fn with_passkeys(mut self, passkeys: impl Into<Arc<passkeys::Passkeys>>) -> Self {
        self.passkeys = Some(passkeys.into());
        self
    }

    /// Serves the approval window `window` at its own origin (add that origin's host
    /// nowhere else: the window's requests never reach the page's routes).
    pub fn with_window(mut self, window: impl Into<Arc<window::ApprovalWindow>>) -> Self {
        self.window = Some(window.into());
        self
    }

    /// Exports traces of model requests and audit batches with `traces`.
    pub fn with_traces(mut self, traces: telemetry::Traces) -> Self {
        self.traces = Some(traces);
        self
    }

    /// Signs countersignatures with the key of this seed (the signing key file's).
    pub fn with_signing_seed(self, seed: &[u8; 32]) -> Self {
        self.with_signing_keys(seed, &[])
    }

    /// Signs with the key of `seed`, and also publishes (and, for the tutorial's
    /// backend, trusts) the keys of `retired` seeds, which signed before a rotation:
    /// their tokens keep verifying until they expire.
    pub fn with_signing_keys(mut self, seed: &[u8; 32], retired: &[[u8; 32]]) -> Self {
        let mut signer = countersign_verify::Signer::from_seed(seed);
        let mut verifier = countersign_verify::Verifier::new(self.config.issuer.clone())
            .audience(self.config.audience.clone())
            .trust(signer.verifying_key());
        for old in retired {
            let key = countersign_verify::Signer::from_seed(old).verifying_key();
            signer = signer.publish_retired(&key);
            verifier = verifier.trust(key);
        }
        self.verifier = Arc::new(verifier);
        self.signer = Arc::new(signer);
        // Pairing codes from the kept seed: a page keeps its code across a restart.
        if let Ok(mut mac) = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(seed) {
            hmac::Mac::update(&mut mac, b"countersign/relay-secret/v1");
            self.relay = Arc::new(
                relay::Relay::with_secret(hmac::Mac::finalize(mac).into_bytes().into())
                    .with_max_bytes(self.config.max_body_bytes)
                    .with_max_pages(
                        self.config.max_relay_pages,
                        self.config.max_relay_pages_per_client,
                    ),
            );
        }
        self
    }
}

/// The whole app, as a value: test it with `oneshot`, serve it with `axum::serve`.
pub fn app(state: AppState) -> Router {
    let config = Arc::clone(&state.config);
    let model = rate_limited(
        Router::new().route("/v1/chat/completions", post(chat::chat_completions)),
        config.rate_per_minute.unwrap_or(0),
    );
    let mut api = Router::new()
        .route("/v1/models", get(models::models))
        .route("/v1/countersign", post(countersign::mint))
        .route("/v1/countersign/challenge", post(countersign::challenge))
        .route("/v1/passkeys/status/{user}", get(routes::passkeys::status))
        .route("/v1/passkeys/register", post(routes::passkeys::register))
        .route(
            "/v1/passkeys/register/finish",
            post(routes::passkeys::finish),
        )
        .route("/v1/audit", post(append_audit).get(export_audit))
        .route("/v1/log/head", get(routes::log::head))
        .route("/v1/log/proof", get(routes::log::proof))
        .route("/v1/log/inclusion", get(routes::log::inclusion))
        .route("/v1/policy", get(policy::policy))
        .route("/v1/relay", get(routes::relay::connect))
        .route("/v1/window/requests", post(routes::window::open))
        .route(
            "/v1/window/requests/{id}",
            get(routes::window::outcome).delete(routes::window::withdraw),
        )
        .merge(model);
    if config.demo_backend {
        api = api.route("/v1/demo/{action}", post(demo::perform));
    }
    let api = api
        .route("/v1/{*rest}", axum::routing::any(unknown_route))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::guard,
        ));
    let mut router = Router::new()
        .route("/v1/health", get(health::health))
        .route("/.well-known/jwks.json", get(countersign::jwks))
        .merge(api)
        .method_not_allowed_fallback(method_not_allowed);
    router = match &config.dist {
        Some(dist) => {
            router.fallback_service(ServeDir::new(dist).append_index_html_on_directories(true))
        }
        None => router.fallback(unknown_route),
    };
    let router = router
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            config.upstream_timeout + Duration::from_secs(5),
        ))
        // A tool call waits as long as the person takes: no request timeout on MCP.
        .merge(mcp_routes(&state))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::host_guard,
        ))
        .layer(TraceLayer::new_for_http());
    let router = match state.window.clone() {
        Some(window) => {
            let surface = routes::window::routes(state.clone())
                .layer(DefaultBodyLimit::max(config.max_body_bytes))
                .layer(TraceLayer::new_for_http());
            router.layer(axum::middleware::from_fn_with_state(
                (window, surface),
                by_host,
            ))
        }
        None => router,
    };
    router.with_state(state)
}

/// Sends a request for the approval window's host to the window's routes, any other on.
async fn by_host(
    axum::extract::State((window, surface)): axum::extract::State<(
        Arc<window::ApprovalWindow>,
        Router,
    )>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok());
    if host.is_some_and(|h| window.is_window_host(h)) {
        use tower::ServiceExt as _;
        match surface.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    } else {
        next.run(request).await
    }
}

/// `/mcp`: the MCP endpoint, behind its own guard (no browser requests, the MCP token),
/// with the body cap; stateless for 2026-07-28 clients, sessions for earlier ones (at
/// most [`mcp::MAX_SESSIONS`]).
fn mcp_routes(state: &AppState) -> Router<AppState> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let relay = Arc::clone(&state.relay);
    let receipts = mcp::Receipts {
        signer: Arc::clone(&state.signer),
        issuer: state.config.issuer.clone(),
    };
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = state.config.access.allowed_hosts.clone();
    config.sse_keep_alive = Some(Duration::from_secs(15));
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = Arc::new(mcp::Sessions::new(Arc::clone(&manager)));
    let service = StreamableHttpService::new(
        move || {
            Ok(mcp::McpServer {
                relay: Arc::clone(&relay),
                receipts: receipts.clone(),
                listening: Arc::default(),
            })
        },
        manager,
        config,
    );
    let max_bytes = state.config.max_body_bytes;
    Router::new()
        .route_service("/mcp", service)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(max_bytes))
        .layer(axum::middleware::from_fn_with_state(
            (sessions, max_bytes),
            mcp::session_cap,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            mcp::mcp_guard,
        ))
}

/// `routes` with the per-client rate limit of the model route: `per_minute` requests,
/// bursts up to 30; unchanged for 0 (off). Over the limit: 429 `rate_limited`.
fn rate_limited(routes: Router<AppState>, per_minute: u32) -> Router<AppState> {
    if per_minute == 0 {
        return routes;
    }
    let period =
        Duration::from_millis(60_000 / u64::from(per_minute)).max(Duration::from_millis(1));
    let Some(governor) = tower_governor::governor::GovernorConfigBuilder::default()
        .period(period)
        .burst_size(per_minute.clamp(1, 30))
        .finish()
    else {
        return routes;
    };
    routes.layer(
        tower_governor::GovernorLayer::new(governor).error_handler(|e| {
            let message = match e {
                tower_governor::GovernorError::TooManyRequests { wait_time, .. } => {
                    format!("too many requests; try again in {wait_time} s")
                }
                _ => "the client could not be identified for rate limiting".to_owned(),
            };
            ApiError::new(ErrorCode::RateLimited, message).into_response()
        }),
    )
}
