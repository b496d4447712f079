//! The gateway's settings, from flags and environment (see `main.rs`).

use std::path::PathBuf;
use std::time::Duration;

/// A secret that never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The OpenAI-compatible model server the gateway forwards to.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// The API base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model to use; the page's choice is replaced by it.
    pub model: String,
    /// The provider key, added by the gateway; `None` for servers that take none.
    pub key: Option<Secret>,
}

/// Who may call the API routes.
#[derive(Clone, Debug)]
pub struct Access {
    /// If set, every API call needs `Authorization: Bearer <token>`. If not, only
    /// same-origin requests from the page are accepted.
    pub token: Option<Secret>,
    /// Origins whose browser requests are accepted (exact `scheme://host:port`).
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted on every route (`host:port`, or `host` for any port):
    /// anything else is refused with 421, so a DNS-rebinding page served from
    /// `attacker.example:8787` cannot read the API. Default: the loopback names.
    pub allowed_hosts: Vec<String>,
}

/// The `Host` values a gateway on loopback accepts by default: `localhost`,
/// `127.0.0.1` and `[::1]`, on any port.
pub fn loopback_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
}

/// The default `iss` of countersignatures.
pub const DEFAULT_ISSUER: &str = "countersign-gateway";

/// All the gateway's settings.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The model upstream, if one is configured.
    pub upstream: Option<Upstream>,
    /// Who may call.
    pub access: Access,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The most records one audit batch may hold.
    pub max_audit_batch: usize,
    /// How long the upstream may take to start answering.
    pub upstream_timeout: Duration,
    /// How long a stream may stay silent before it is cut.
    pub stream_idle_timeout: Duration,
    /// Requests per minute per client address on the model route; `None` turns it off.
    pub rate_per_minute: Option<u32>,
    /// The built page to serve at `/`, if any.
    pub dist: Option<PathBuf>,
    /// The deployment's policy file (validated at start), served to the page at
    /// `GET /v1/policy`.
    pub policy: Option<String>,
    /// The `iss` of the countersignatures this gateway mints (backends check it).
    pub issuer: String,
    /// The `aud` of the countersignatures: the backend that will act (it checks it).
    pub audience: String,
    /// How long a countersignature is valid after it is minted.
    pub countersign_ttl: Duration,
    /// Serve the tutorial's backend (`POST /v1/demo/{action}`), which refuses a
    /// mutation without a valid countersignature for exactly that call.
    pub demo_backend: bool,
    /// The bearer token MCP clients send to `/mcp`; `None` turns MCP (and the page
    /// relay) off. Separate from the page's token: it lets a client act in a page.
    pub mcp_token: Option<Secret>,
    /// The most pages connected to the MCP relay at once.
    pub max_relay_pages: usize,
    /// The most relay pages one client (peer address, [`crate::relay::Client`]) may
    /// have connected at once.
    pub max_relay_pages_per_client: usize,
}

impl GatewayConfig {
    /// Settings for tests and embedding: no upstream, no token, the given origins.
    pub fn local(allowed_origins: Vec<String>) -> Self {
        Self {
            upstream: None,
            access: Access {
                token: None,
                allowed_origins,
                allowed_hosts: loopback_hosts(),
            },
            max_body_bytes: 1024 * 1024,
            max_audit_batch: 1000,
            upstream_timeout: Duration::from_secs(60),
            stream_idle_timeout: Duration::from_secs(60),
            rate_per_minute: None,
            dist: None,
            policy: None,
            issuer: DEFAULT_ISSUER.into(),
            audience: countersign_verify::DEFAULT_AUDIENCE.into(),
            countersign_ttl: Duration::from_secs(120),
            demo_backend: false,
            mcp_token: None,
            max_relay_pages: crate::relay::DEFAULT_MAX_PAGES,
            max_relay_pages_per_client: crate::relay::DEFAULT_MAX_PAGES_PER_CLIENT,
        }
    }
}
