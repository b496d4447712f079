//! The `countersign-gateway` command line: serve the page, proxy the model, keep the
//! audit trail; verify, export and replay it.
//!
//! ```text
//! countersign-gateway serve --dist dist --upstream https://api.openai.com/v1 --model gpt-4o-mini
//! COUNTERSIGN_UPSTREAM_KEY=sk-... (the key is read from the environment only)
//! countersign-gateway verify --audit-file countersign-audit.jsonl --key-file countersign-audit.jsonl.key
//! ```
//!
//! An app's own server is this command with its actions declared
//! ([`main_with`]): it can then serve the approval window (`--window-origin`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::passkeys::{PasskeyConfig, PasskeyError, Passkeys};
use crate::relay::Relay;
use crate::telemetry::Traces;
use crate::window::{ApprovalWindow, WindowConfig};
use crate::{
    app, loopback_hosts, verify_file, verify_postgres, Access, AppState, AuditStore, ChainKey,
    Completeness, GatewayConfig, Secret, StoreError, Upstream, MAX_HOLES_LISTED,
};
use clap::{Args, Parser, Subcommand};

/// The app's declarations for the approval window: an executor for a role with its
/// actions registered (see [`crate::window::Declare`]).
pub type Declarations = fn(&str) -> Result<countersign::Executor, String>;

#[derive(Parser, Debug)]
#[command(
    name = "countersign-gateway",
    version,
    about = "Serve the page, proxy the model with a server-side key, keep a keyed, anchored audit trail"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway.
    Serve(Box<ServeArgs>),
    /// Check an audit trail (a file, or a database with `--audit-url`): with the key,
    /// every mac and the head (a cut tail, a rewritten and re-chained trail, a wrong
    /// key); without it, the structure only.
    Verify {
        #[command(flatten)]
        audit: AuditSource,
        /// The audit key file (64 hex digits). Without it (and without
        /// `COUNTERSIGN_AUDIT_KEY`) only the structure is checked.
        #[arg(long)]
        key_file: Option<PathBuf>,
    },
    /// The trail as an auditor asks for it: one row per call (who asked, the action, its
    /// kind, who decided, how it ended, the countersignature minted, the terminal
    /// record's line in the verifiable log), filtered, as CSV or JSON; or a summary.
    Evidence {
        #[command(flatten)]
        audit: AuditSource,
        #[command(flatten)]
        filter: EvidenceFilter,
        /// `csv`, `json` or `summary` (counts by outcome, decider, action and caller).
        #[arg(long, default_value = "csv", value_parser = ["csv", "json", "summary"])]
        format: String,
    },
    /// What a candidate policy file would have decided for every call the trail
    /// recorded, against the file in force then: per action and role, the calls whose
    /// level it lowers, raises or keeps. Exits non-zero when it lowers any, so it can
    /// gate a policy change in CI.
    Replay {
        #[command(flatten)]
        audit: AuditSource,
        /// The candidate policy file.
        #[arg(long)]
        candidate: PathBuf,
        /// The policy file in force when the trail was written (none: the declarations'
        /// own levels).
        #[arg(long)]
        current: Option<PathBuf>,
    },
    /// Check that a gateway's log still holds, unchanged, everything the signed tree
    /// head kept in `--head-file` covered (a cut, a rewritten record or a forked
    /// history fails), with the gateway's public keys only; then keep its newer head
    /// there. The first run keeps the current head.
    CheckLog {
        /// The gateway's base URL (`https://gateway.example`).
        #[arg(long)]
        gateway: String,
        /// Where the last checked head is kept (created on the first run).
        #[arg(long)]
        head_file: PathBuf,
        /// The gateway's `iss`.
        #[arg(long, default_value = crate::DEFAULT_ISSUER)]
        issuer: String,
        /// The gateway's bearer token, if it has one.
        #[arg(long, env = "COUNTERSIGN_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// The approval window's approvers (`ROLE/PERSON`, each with their passkeys' ids);
    /// with `--revoke ROLE/PERSON`, removes that person's passkeys. Refused while a
    /// gateway serves the window with the same file (stop it first): the file is one
    /// process's at a time.
    Approvers {
        /// The window's origin (its host is the passkeys' relying party).
        #[arg(long, env = "COUNTERSIGN_WINDOW_ORIGIN")]
        window_origin: String,
        /// The window's passkey file.
        #[arg(long, env = "COUNTERSIGN_WINDOW_PASSKEY_FILE")]
        window_passkey_file: PathBuf,
        /// The person whose passkeys to remove.
        #[arg(long)]
        revoke: Option<String>,
    },
}

/// Which calls `evidence` lists (every one, when none is given).
#[derive(Args, Debug)]
struct EvidenceFilter {
    /// From this day on (`2026-12-01`, UTC, inclusive).
    #[arg(long, value_parser = day_ms)]
    from: Option<u64>,
    /// Before this day (`2027-01-01`, UTC, exclusive).
    #[arg(long, value_parser = day_ms)]
    to: Option<u64>,
    /// Only this action (repeatable).
    #[arg(long = "action")]
    actions: Vec<String>,
    /// Only this kind: `read`, `write`, `danger` (repeatable).
    #[arg(long = "kind")]
    kinds: Vec<String>,
    /// Only this outcome: `OK`, `PERMISSION_DENIED`, `APPROVAL_TIMEOUT`… (repeatable).
    #[arg(long = "outcome")]
    outcomes: Vec<String>,
    /// Only calls decided by: `person`, `session_grant`, `policy`, `mode`… (repeatable).
    #[arg(long = "decided-by")]
    decided_by: Vec<String>,
    /// Only calls from: `assistant`, `webmcp`, `mcp` (repeatable).
    #[arg(long = "caller")]
    callers: Vec<String>,
}

/// Milliseconds since the Unix epoch at the start (UTC) of the day `YYYY-MM-DD`.
fn day_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a day (YYYY-MM-DD)");
    let mut parts = text.split('-').map(str::parse::<i64>);
    let (Some(Ok(y)), Some(Ok(m)), Some(Ok(d)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400_000).map_err(|_| bad())
}

/// Where the audit trail is: a file, or a PostgreSQL database instead. The same flags
/// for `serve` and `verify`.
#[derive(Args, Debug)]
struct AuditSource {
    /// The audit file (JSON Lines, chained with the audit key).
    #[arg(
        long,
        env = "COUNTERSIGN_AUDIT_FILE",
        default_value = "countersign-audit.jsonl"
    )]
    audit_file: PathBuf,
    /// The trail in PostgreSQL instead of the file (`postgres://user:pw@host/db`),
    /// shared by replicas behind a load balancer. `serve` migrates it on start and
    /// creates no key (the audit and signing keys must exist already: replicas share
    /// them); `verify` only reads it.
    #[arg(
        long,
        env = "COUNTERSIGN_AUDIT_URL",
        hide_env_values = true,
        conflicts_with = "audit_file"
    )]
    audit_url: Option<String>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, env = "COUNTERSIGN_LISTEN", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// The built page to serve at `/` (trunk's `dist/`).
    #[arg(long, env = "COUNTERSIGN_DIST")]
    dist: Option<PathBuf>,
    /// The upstream API base, e.g. `https://api.openai.com/v1`. Without it the page
    /// uses its offline assistant.
    #[arg(long, env = "COUNTERSIGN_UPSTREAM_URL")]
    upstream: Option<String>,
    /// The upstream model name.
    #[arg(
        long,
        env = "COUNTERSIGN_UPSTREAM_MODEL",
        default_value = "gpt-4o-mini"
    )]
    model: String,
    #[command(flatten)]
    audit: AuditSource,
    /// The audit key file (64 hex digits), created with a random key if missing.
    /// Default: `<audit-file>.key`. Keep it apart from the trail in a real deployment;
    /// `COUNTERSIGN_AUDIT_KEY` (hex) takes precedence.
    #[arg(long)]
    audit_key_file: Option<PathBuf>,
    /// A `Host` this gateway answers to (repeatable; `name` for any port, or
    /// `name:port`). Default: `localhost`, `127.0.0.1` and `[::1]`. Anything else gets
    /// 421, so a DNS-rebinding page cannot read the API.
    #[arg(
        long = "allowed-host",
        env = "COUNTERSIGN_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// An origin whose browser requests are accepted (repeatable). Defaults to this
    /// gateway's own address and trunk's dev server on 127.0.0.1:8080.
    #[arg(
        long = "allowed-origin",
        env = "COUNTERSIGN_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
    /// Seconds the upstream may take to start answering.
    #[arg(long, default_value_t = 60)]
    upstream_timeout_secs: u64,
    /// The deployment's policy file (JSON: roles, scopes, per-role levels), served to the
    /// page; a malformed file stops the gateway at start, naming the line.
    #[arg(long, env = "COUNTERSIGN_POLICY_FILE")]
    policy_file: Option<PathBuf>,
    /// Model requests per minute per client address (0 turns the limit off).
    #[arg(long, default_value_t = 60)]
    rate_per_minute: u32,
    /// The Ed25519 seed that signs countersignatures (64 hex digits), created with a
    /// random seed if missing. Default: `<audit-file>.signing.key`. Never served; the
    /// public key is at `/.well-known/jwks.json`.
    #[arg(long, env = "COUNTERSIGN_SIGNING_KEY_FILE")]
    signing_key_file: Option<PathBuf>,
    /// Seed files of signing keys retired by a rotation (repeatable): their public keys
    /// stay in `/.well-known/jwks.json`, so tokens they signed verify until they expire.
    /// Drop one once the longest token lifetime has passed since the switch.
    #[arg(
        long = "retired-signing-key-file",
        env = "COUNTERSIGN_RETIRED_SIGNING_KEY_FILES",
        value_delimiter = ','
    )]
    retired_signing_key_files: Vec<PathBuf>,
    /// The `iss` of the countersignatures (backends check it).
    #[arg(long, env = "COUNTERSIGN_ISSUER", default_value = crate::DEFAULT_ISSUER)]
    issuer: String,
    /// The `aud` of the countersignatures: the backend that acts on them (it checks it).
    #[arg(long, env = "COUNTERSIGN_AUDIENCE", default_value = countersign_verify::DEFAULT_AUDIENCE)]
    audience: String,
    /// Seconds a countersignature stays valid (1 to 600).
    #[arg(long, env = "COUNTERSIGN_TTL_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=600))]
    countersign_ttl_secs: u64,
    /// The WebAuthn relying party id for passkey presence: the host name the page is
    /// opened at (WebAuthn takes no IP addresses: open the page at `localhost`).
    #[arg(long, env = "COUNTERSIGN_RP_ID", default_value = "localhost")]
    rp_id: String,
    /// The page's exact origin for passkeys, port included: an assertion made on another
    /// port of the same host is refused. Default: `http://<rp-id>:<listen port>`.
    #[arg(long, env = "COUNTERSIGN_RP_ORIGIN")]
    rp_origin: Option<String>,
    /// Where registered passkeys are kept (JSON, 0600). Default:
    /// `<audit-file>.passkeys.json`.
    #[arg(long, env = "COUNTERSIGN_PASSKEY_FILE")]
    passkey_file: Option<PathBuf>,
    /// Print a one-time passkey enrollment code for this user (a role name) at start,
    /// good for 15 minutes (repeatable). Registering a passkey in the dock needs it.
    #[arg(long = "enroll-user")]
    enroll_users: Vec<String>,
    /// Serve the approval window at this origin (`http://approve.localhost:8787`): a host
    /// name of its own on this listener, which the page's origin cannot script. Only a
    /// server built with its app's declarations has one (`cli::main_with`).
    #[arg(long, env = "COUNTERSIGN_WINDOW_ORIGIN")]
    window_origin: Option<String>,
    /// Where the approval window's passkeys are kept (JSON, 0600). Default:
    /// `<audit-file>.window-passkeys.json`.
    #[arg(long, env = "COUNTERSIGN_WINDOW_PASSKEY_FILE")]
    window_passkey_file: Option<PathBuf>,
    /// Print a one-time enrollment code for `ROLE/PERSON` to approve in the window, good
    /// for 15 minutes (repeatable). The person types it into the window's `/enroll`.
    #[arg(long = "enroll-approver")]
    enroll_approvers: Vec<String>,
    /// Serve the tutorial's backend at `POST /v1/demo/{archive_workspace,reset_workspace}`,
    /// which refuses the mutation without a valid countersignature for that exact call.
    #[arg(long, env = "COUNTERSIGN_DEMO_BACKEND")]
    demo_backend: bool,
    /// Serve MCP at `/mcp` (and the page relay at `/v1/relay`): MCP clients send the
    /// token in this file (created with a random one, 0600, if missing) as
    /// `Authorization: Bearer <token>`. `COUNTERSIGN_MCP_TOKEN` takes precedence. Off
    /// without either.
    #[arg(long, env = "COUNTERSIGN_MCP_TOKEN_FILE")]
    mcp_token_file: Option<PathBuf>,
    /// The most pages connected to the MCP relay at once (each open tab of the app is
    /// one); a page beyond it is refused, and told so.
    #[arg(
        long,
        env = "COUNTERSIGN_MAX_RELAY_PAGES",
        default_value_t = crate::relay::DEFAULT_MAX_PAGES,
        value_parser = pages()
    )]
    max_relay_pages: usize,
    /// The most relay pages one client may have connected at once: one peer address (an
    /// IPv6 address counts by its /64), so no one client holds every slot. Behind a
    /// reverse proxy every page comes from the proxy: raise it to `--max-relay-pages`.
    #[arg(
        long,
        env = "COUNTERSIGN_MAX_RELAY_PAGES_PER_CLIENT",
        default_value_t = crate::relay::DEFAULT_MAX_PAGES_PER_CLIENT,
        value_parser = pages()
    )]
    max_relay_pages_per_client: usize,
    /// Export traces over OTLP/HTTP (protobuf) to this collector (its base URL:
    /// `/v1/traces` is added): a span per model request and per audit batch, under the
    /// page's `traceparent`. Off without it. `OTEL_EXPORTER_OTLP_HEADERS` adds headers
    /// (a collector's key).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// The service name the traces carry.
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "countersign-gateway")]
    service_name: String,
}

/// A count of relay pages: 1 to 100,000.
fn pages() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=100_000)
}

/// Why the gateway stopped, or `verify` could not check: printed once, by `main`.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot read the policy file `{}`: {source}", .path.display())]
    PolicyUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{}`: {source}", .path.display())]
    Policy {
        path: PathBuf,
        source: countersign::policy::PolicyError,
    },
    #[error("the MCP token: {0}")]
    McpTokenFile(StoreError),
    #[error("the MCP token: cannot read `{}`: {source}", .path.display())]
    McpTokenUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the MCP token: it must be at least 32 printable ASCII characters")]
    McpTokenWeak,
    #[error(
        "the signing key file `{}` must be outside `--dist` and apart from the audit key file",
        .path.display()
    )]
    SigningKeyPlace { path: PathBuf },
    #[error("the countersignature signing key{}: {source}", shared_hint(*.shared))]
    SigningKey { shared: bool, source: StoreError },
    #[error("the audit key{}: {source}", shared_hint(*.shared))]
    AuditKey { shared: bool, source: StoreError },
    #[error("no audit key")]
    NoAuditKey,
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Passkeys(PasskeyError),
    #[error("{0}")]
    Window(String),
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(reqwest::Error),
    #[error("{0}")]
    Traces(String),
    #[error("the OTLP exporter: {0}")]
    TracesStart(tokio::task::JoinError),
    #[error("cannot listen on `{addr}`: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
}

/// What a key error adds when the keys must come from outside (replicas on a database).
fn shared_hint(shared: bool) -> &'static str {
    if shared {
        " (replicas on one database share it: create it once, give every replica the same)"
    } else {
        ""
    }
}

/// The command line of a server without declarations (`countersign-gateway`).
pub fn main() -> ExitCode {
    main_with(None)
}

/// The command line of an app's server: with `declarations`, `serve --window-origin`
/// serves the approval window, drawing its cards with them.
pub fn main_with(declarations: Option<Declarations>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let ran = match Cli::parse().command {
        Command::Verify { audit, key_file } => verify(&audit, key_file.as_deref()),
        Command::Evidence {
            audit,
            filter,
            format,
        } => evidence(&audit, filter, &format),
        Command::Replay {
            audit,
            candidate,
            current,
        } => replay(&audit, &candidate, current.as_deref()),
        Command::CheckLog {
            gateway,
            head_file,
            issuer,
            token,
        } => check_log(&gateway, &head_file, &issuer, token.as_deref()),
        Command::Approvers {
            window_origin,
            window_passkey_file,
            revoke,
        } => approvers(&window_origin, window_passkey_file, revoke.as_deref()),
        Command::Serve(args) => runtime()
            .and_then(|rt| rt.block_on(serve(*args, declarations)))
            .map(|()| ExitCode::SUCCESS),
    };
    ran.unwrap_or_else(|e| {
        eprintln!("countersign-gateway: {e}");
        ExitCode::FAILURE
    })
}

/// `approvers`: lists the window's people, or revokes one.
fn approvers(origin: &str, file: PathBuf, revoke: Option<&str>) -> Result<ExitCode, Error> {
    if !file.exists() {
        return Err(Error::Window(format!(
            "no passkey file at {} (nobody has enrolled)",
            file.display()
        )));
    }
    let mut config = WindowConfig::new(origin);
    config.passkeys_file = Some(file);
    let window =
        ApprovalWindow::new(&config, |_| Err("not serving".into())).map_err(Error::Passkeys)?;
    let Some(approver) = revoke else {
        for (who, keys) in window.approvers() {
            println!("{who}\t{}", keys.join(","));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some((role, person)) = approver.split_once('/') else {
        return Err(Error::Window(format!(
            "`--revoke {approver}`: write it ROLE/PERSON"
        )));
    };
    if window.revoke(role, person).map_err(Error::Passkeys)? {
        println!("countersign-gateway: {person} ({role}) can no longer approve in the window");
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::Window(format!("{person} ({role}) is not enrolled")))
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Runtime::new().map_err(Error::Runtime)
}

/// `serve`: each step in order; the first that fails stops the gateway.
async fn serve(args: ServeArgs, declarations: Option<Declarations>) -> Result<(), Error> {
    let config = configuration(&args)?;
    let keys = keys(&args)?;
    let stores = stores(&args, keys.audit, declarations).await?;
    let gateway = router(&args, config, (&keys.signing_seed, &keys.retired), stores).await?;
    listen(&args, gateway).await
}

/// The settings from the flags and the environment: the page's origins and hosts, the
/// upstream and its key, the policy file (checked here: a broken one stops the
/// gateway), the MCP token.
fn configuration(args: &ServeArgs) -> Result<GatewayConfig, Error> {
    let mut origins = args.allowed_origins.clone();
    if origins.is_empty() {
        let port = args.listen.port();
        origins = vec![
            format!("http://{}", args.listen),
            format!("http://localhost:{port}"),
            "http://127.0.0.1:8080".into(),
            "http://localhost:8080".into(),
        ];
    }
    let policy = args.policy_file.as_deref().map(policy).transpose()?;
    let upstream_key = non_empty_env("COUNTERSIGN_UPSTREAM_KEY").map(Secret::new);
    Ok(GatewayConfig {
        upstream: args.upstream.clone().map(|base_url| Upstream {
            base_url,
            model: args.model.clone(),
            key: upstream_key,
        }),
        access: Access {
            // Secrets are never flags: the bearer token comes from the environment only.
            token: non_empty_env("COUNTERSIGN_TOKEN").map(Secret::new),
            allowed_origins: origins,
            allowed_hosts: if args.allowed_hosts.is_empty() {
                loopback_hosts()
            } else {
                args.allowed_hosts.clone()
            },
        },
        max_body_bytes: args.max_body_bytes,
        max_audit_batch: 1000,
        upstream_timeout: Duration::from_secs(args.upstream_timeout_secs),
        stream_idle_timeout: Duration::from_secs(args.upstream_timeout_secs),
        rate_per_minute: Some(args.rate_per_minute).filter(|n| *n > 0),
        dist: args.dist.clone(),
        policy,
        issuer: args.issuer.clone(),
        audience: args.audience.clone(),
        countersign_ttl: Duration::from_secs(args.countersign_ttl_secs),
        demo_backend: args.demo_backend,
        mcp_token: mcp_token(args.mcp_token_file.as_deref())?,
        max_relay_pages: args.max_relay_pages,
        max_relay_pages_per_client: args.max_relay_pages_per_client,
    })
}

/// An environment variable's value, unless it is unset or empty.
fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The policy file's text, served to the page as it is once it parses.
fn policy(path: &Path) -> Result<String, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::PolicyUnreadable {
        path: path.to_owned(),
        source,
    })?;
    countersign::policy::PolicyFile::from_json(&text).map_err(|source| Error::Policy {
        path: path.to_owned(),
        source,
    })?;
    Ok(text)
}

/// The MCP token: `COUNTERSIGN_MCP_TOKEN` if set, else the file's content (the file is
/// created with a random token if missing); `None` when neither is given (MCP off).
fn mcp_token(file: Option<&Path>) -> Result<Option<Secret>, Error> {
    let token = match std::env::var("COUNTERSIGN_MCP_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        Some(token) => token.trim().to_owned(),
        None => match file {
            None => return Ok(None),
            Some(path) => {
                if !path.exists() {
                    ChainKey::load_or_create(path).map_err(Error::McpTokenFile)?;
                }
                std::fs::read_to_string(path)
                    .map_err(|source| Error::McpTokenUnreadable {
                        path: path.to_owned(),
                        source,
                    })?
                    .trim()
                    .to_owned()
            }
        },
    };
    let plain = token.bytes().all(|b| b.is_ascii_graphic());
    if token.len() < 32 || !plain {
        return Err(Error::McpTokenWeak);
    }
    Ok(Some(Secret::new(token)))
}

/// The keys a gateway holds: the audit key, the seed that signs countersignatures, and
/// the seeds of retired signing keys (only their public keys are used).
struct Keys {
    audit: ChainKey,
    signing_seed: [u8; 32],
    retired: Vec<[u8; 32]>,
}

/// The keys, from their files (or the environment). With a file trail a missing key is
/// created; replicas on one database share theirs, so there one made here would differ
/// from its neighbours' and a missing key stops the gateway instead.
fn keys(args: &ServeArgs) -> Result<Keys, Error> {
    let audit_file = &args.audit.audit_file;
    let key_file = args
        .audit_key_file
        .clone()
        .unwrap_or_else(|| beside(audit_file, ".key"));
    let signing_key_file = args
        .signing_key_file
        .clone()
        .unwrap_or_else(|| beside(audit_file, ".signing.key"));
    // A seed (the signing one, or a retired one that could still sign what its public
    // key verifies) must never be served or mistaken for the audit key.
    let inside_dist = |file: &Path| {
        args.dist.as_ref().is_some_and(|dist| {
            let dist = dist.canonicalize().unwrap_or_else(|_| dist.clone());
            let folder = file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            folder.canonicalize().is_ok_and(|f| f.starts_with(&dist))
        })
    };
    let seeds = std::iter::once(&signing_key_file).chain(&args.retired_signing_key_files);
    for file in seeds {
        if inside_dist(file) || *file == key_file {
            return Err(Error::SigningKeyPlace { path: file.clone() });
        }
    }
    let shared = args.audit.audit_url.is_some();
    let signing_seed = if shared {
        crate::load_signing_seed(&signing_key_file)
    } else {
        crate::load_or_create_signing_seed(&signing_key_file)
    }
    .map_err(|source| Error::SigningKey { shared, source })?;
    let audit = audit_key(Some(&key_file), !shared)
        .map_err(|source| Error::AuditKey { shared, source })?
        .ok_or(Error::NoAuditKey)?;
    let retired = args
        .retired_signing_key_files
        .iter()
        .map(|path| crate::load_signing_seed(path))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::SigningKey {
            shared: false,
            source,
        })?;
    Ok(Keys {
        audit,
        signing_seed,
        retired,
    })
}

/// `<audit file><suffix>`: where a file that goes with the trail is kept by default.
fn beside(audit_file: &Path, suffix: &str) -> PathBuf {
    let mut name = audit_file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The audit key: `COUNTERSIGN_AUDIT_KEY` if set, else the key file (created if
/// `create`).
fn audit_key(file: Option<&Path>, create: bool) -> Result<Option<ChainKey>, StoreError> {
    if let Some(hex) = std::env::var("COUNTERSIGN_AUDIT_KEY")
        .ok()
        .filter(|k| !k.trim().is_empty())
    {
        return ChainKey::from_hex(&hex).map(Some);
    }
    match file {
        Some(path) if create => ChainKey::load_or_create(path).map(Some),
        Some(path) => ChainKey::load(path).map(Some),
        None => Ok(None),
    }
}

/// What the gateway keeps: the audit trail and the registered passkeys.
struct Stores {
    audit: AuditStore,
    passkeys: Passkeys,
    window: Option<ApprovalWindow>,
}

/// The trail (the file, locked for this process, or the database, migrated) and the
/// passkeys; then an enrollment code printed for each `--enroll-user` without one.
async fn stores(
    args: &ServeArgs,
    audit_key: ChainKey,
    declarations: Option<Declarations>,
) -> Result<Stores, Error> {
    let audit = match &args.audit.audit_url {
        None => AuditStore::open(&args.audit.audit_file, audit_key),
        Some(url) => AuditStore::connect(url, audit_key).await,
    }
    .map_err(Error::Store)?;
    let passkeys = Passkeys::open(&PasskeyConfig {
        rp_origin: args
            .rp_origin
            .clone()
            .unwrap_or_else(|| format!("http://{}:{}", args.rp_id, args.listen.port())),
        rp_id: args.rp_id.clone(),
        file: Some(
            args.passkey_file
                .clone()
                .unwrap_or_else(|| beside(&args.audit.audit_file, ".passkeys.json")),
        ),
    })
    .map_err(Error::Passkeys)?;
    for user in &args.enroll_users {
        if passkeys.registered(user) {
            println!("countersign-gateway: {user} already has a passkey for approvals");
            continue;
        }
        let code = passkeys
            .issue_enrollment_code(user)
            .map_err(Error::Passkeys)?;
        println!(
            "countersign-gateway: passkey enrollment code for {user}: {code} (once, 15 minutes; type it into the dock's settings, under \"Set up a passkey\")"
        );
    }
    let window = match (&args.window_origin, declarations) {
        (None, _) => {
            if !args.enroll_approvers.is_empty() {
                return Err(Error::Window(
                    "`--enroll-approver` needs the approval window (`--window-origin`)".into(),
                ));
            }
            None
        }
        (Some(_), None) => {
            return Err(Error::Window(
                "this server declares no actions, so it has no approval window: build your app's server with `countersign_gateway::cli::main_with`".into(),
            ))
        }
        (Some(origin), Some(declare)) => {
            let mut config = WindowConfig::new(origin);
            config.passkeys_file = Some(
                args.window_passkey_file
                    .clone()
                    .unwrap_or_else(|| beside(&args.audit.audit_file, ".window-passkeys.json")),
            );
            let window = ApprovalWindow::new(&config, declare).map_err(Error::Passkeys)?;
            for approver in &args.enroll_approvers {
                let Some((role, person)) = approver.split_once('/') else {
                    return Err(Error::Window(format!(
                        "`--enroll-approver {approver}`: write it ROLE/PERSON"
                    )));
                };
                let code = window
                    .issue_enrollment_code(role, person)
                    .map_err(Error::Passkeys)?;
                println!(
                    "countersign-gateway: approval window enrollment code for {person} ({role}): {code} (once, 15 minutes; open {}/enroll)",
                    window.origin()
                );
            }
            Some(window)
        }
    };
    Ok(Stores {
        audit,
        passkeys,
        window,
    })
}

/// The app to serve, and what stopping it cleanly takes.
struct Gateway {
    /// Every route, with its layers.
    app: axum::Router,
    /// The pages' relays: upgraded connections a graceful shutdown would not end.
    relay: Arc<Relay>,
    /// The trace exporter, flushed once the last request is done.
    traces: Option<Traces>,
    /// Whether MCP is on (the start-up line says where).
    mcp: bool,
}

/// The routes over the state: the configuration, the stores, the signing key and,
/// with `--otlp-endpoint`, the trace exporter.
async fn router(
    args: &ServeArgs,
    config: GatewayConfig,
    (signing_seed, retired): (&[u8; 32], &[[u8; 32]]),
    stores: Stores,
) -> Result<Gateway, Error> {
    let mut state = AppState::new(config, stores.audit)
        .map_err(Error::HttpClient)?
        .with_signing_keys(signing_seed, retired)
        .with_passkeys(stores.passkeys);
    if let Some(window) = stores.window {
        state = state.with_window(window);
    }
    if let Some(endpoint) = args.otlp_endpoint.clone().filter(|e| !e.is_empty()) {
        let service = args.service_name.clone();
        // The exporter's blocking client is built off the async threads.
        let traces = tokio::task::spawn_blocking(move || Traces::otlp(&endpoint, &service))
            .await
            .map_err(Error::TracesStart)?
            .map_err(Error::Traces)?;
        state = state.with_traces(traces);
    }
    Ok(Gateway {
        relay: Arc::clone(&state.relay),
        traces: state.traces.clone(),
        mcp: state.config.mcp_token.is_some(),
        app: app(state),
    })
}

/// Binds the address, says where the gateway is, and serves until Ctrl-C; then the
/// last spans go out.
async fn listen(args: &ServeArgs, gateway: Gateway) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| Error::Listen {
            addr: args.listen,
            source,
        })?;
    let model = if args.upstream.is_some() {
        args.model.as_str()
    } else {
        "none (offline assistant)"
    };
    let trail = match &args.audit.audit_url {
        Some(url) => without_password(url),
        None => args.audit.audit_file.display().to_string(),
    };
    println!(
        "countersign-gateway: http://{} (model: {model}; audit: {trail})",
        args.listen
    );
    if gateway.mcp {
        let token = args
            .mcp_token_file
            .as_ref()
            .map_or("COUNTERSIGN_MCP_TOKEN".into(), |f| f.display().to_string());
        println!(
            "countersign-gateway: MCP at http://{}/mcp (token: {token}; pair with the code in the page's dock)",
            args.listen
        );
    }
    let relay = gateway.relay;
    let service = gateway
        .app
        .into_make_service_with_connect_info::<SocketAddr>();
    let shutdown = async move {
        let _ = tokio::signal::ctrl_c().await;
        // Pages' relays are upgraded connections a graceful shutdown would not end.
        relay.stop();
    };
    let served = axum::serve(listener, service)
        .with_graceful_shutdown(shutdown)
        .await;
    if let Some(traces) = gateway.traces {
        // The spans of the last requests go out before the process ends.
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
    }
    served.map_err(Error::Serve)
}

/// The database URL to print: the password (and the query, which may hold one) left out.
fn without_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.to_string()
        }
        Err(_) => "a database (its URL does not parse)".into(),
    }
}

/// `verify`: checks the trail and prints what it found. A broken trail is a finding,
/// not an error: it is printed here and the exit status says it.
fn verify(audit: &AuditSource, key_file: Option<&Path>) -> Result<ExitCode, Error> {
    let key = audit_key(key_file, false).map_err(|source| Error::AuditKey {
        shared: false,
        source,
    })?;
    let verified = match &audit.audit_url {
        None => verify_file(&audit.audit_file, key.as_ref()),
        Some(url) => runtime()?.block_on(verify_postgres(url, key.as_ref())),
    };
    match verified {
        Ok(v) if v.keyed => {
            println!(
                "ok: {} records, every mac and the head check out under the key",
                v.lines
            );
            if v.unanchored_lines > 0 {
                println!("note: {} genuine lines after the head were written but never acknowledged; the gateway anchors them at start", v.unanchored_lines);
            }
            if v.torn_tail_bytes > 0 {
                println!("note: an incomplete final line ({} bytes) was never acknowledged; the gateway cuts it off at start", v.torn_tail_bytes);
            }
            print_completeness(&v.completeness);
            Ok(ExitCode::SUCCESS)
        }
        Ok(v) => {
            println!(
                "structure only: {} records, lines parse, seq runs on and each links to the previous line's mac",
                v.lines
            );
            println!("without the audit key (--key-file or COUNTERSIGN_AUDIT_KEY) a rewritten and re-chained trail, or a cut tail, cannot be detected");
            print_completeness(&v.completeness);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("broken: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `evidence`: reads the trail (no key needed) and prints the rows or the summary.
fn evidence(audit: &AuditSource, f: EvidenceFilter, format: &str) -> Result<ExitCode, Error> {
    use crate::evidence;
    let bytes = read_trail(audit);
    let filter = evidence::Filter {
        from_ms: f.from,
        to_ms: f.to,
        actions: f.actions,
        kinds: f.kinds,
        outcomes: f.outcomes,
        decided_by: f.decided_by,
        callers: f.callers,
    };
    let rows = match bytes.and_then(|b| evidence::rows(&b, &filter).map_err(|e| e.to_string())) {
        Ok(rows) => rows,
        Err(why) => {
            eprintln!("unreadable: {why}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match format {
        "json" => println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        ),
        "summary" => print!("{}", evidence::summary(&rows)),
        _ => print!("{}", evidence::csv(&rows)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The trail's bytes, read without the key (a file, or the database).
fn read_trail(audit: &AuditSource) -> Result<Vec<u8>, String> {
    match &audit.audit_url {
        None => std::fs::read(&audit.audit_file)
            .map_err(|e| format!("{}: {e}", audit.audit_file.display())),
        Some(url) => runtime()
            .map_err(|e| e.to_string())?
            .block_on(crate::read_postgres(url))
            .map_err(|e| e.to_string()),
    }
}

/// `replay`: prints the decision diff; exits non-zero when any level is lowered.
fn replay(
    audit: &AuditSource,
    candidate: &Path,
    current: Option<&Path>,
) -> Result<ExitCode, Error> {
    use countersign::policy::PolicyFile;
    let load = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| PolicyFile::from_json(&text).map_err(|e| e.to_string()))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let run = || -> Result<crate::replay::Report, String> {
        let candidate = load(candidate)?;
        let current = current.map(load).transpose()?.unwrap_or_default();
        let bytes = read_trail(audit)?;
        crate::replay::replay(&bytes, &candidate, &current).map_err(|e| e.to_string())
    };
    match run() {
        Ok(report) => {
            print!("{}", report.to_text());
            Ok(if report.lowers() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(why) => {
            eprintln!("unreadable: {why}");
            Ok(ExitCode::from(2))
        }
    }
}

/// `check-log`: prints what the check found; a failure exits non-zero.
fn check_log(
    gateway: &str,
    head_file: &Path,
    issuer: &str,
    token: Option<&str>,
) -> Result<ExitCode, Error> {
    use crate::log_check::LogCheck;
    let checked = runtime()?.block_on(crate::log_check::check_log(
        gateway, head_file, issuer, token,
    ));
    match checked {
        Ok(LogCheck::First { size }) => {
            println!("kept: the log's signed head at {size} lines; later runs check against it");
            Ok(ExitCode::SUCCESS)
        }
        Ok(LogCheck::Consistent { from, to }) => {
            println!("ok: the log holds the {from} lines of the kept head unchanged, and {to} now; the newer head is kept");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("broken: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Whether each page session's records are all there, or named as lost: a line for the
/// whole, and one per hole listed.
fn print_completeness(c: &Completeness) {
    if c.holes.is_empty() {
        println!(
            "complete: every record of the {} page sessions is in the trail, or named by a trail_gap record ({} named)",
            c.sessions, c.named
        );
        return;
    }
    println!(
        "incomplete: {} records of the {} page sessions are neither in the trail nor named by a trail_gap record ({} named); a browser may still keep them for its next page load, or they were lost unseen",
        c.unexplained, c.sessions, c.named
    );
    for hole in &c.holes {
        println!(
            "hole: session {:?}, seq {}-{}",
            hole.session, hole.first_seq, hole.last_seq
        );
    }
    let listed: u64 = c
        .holes
        .iter()
        .map(|h| h.last_seq - h.first_seq + 1)
        .fold(0, u64::saturating_add);
    if listed < c.unexplained {
        println!("(the first {MAX_HOLES_LISTED} holes are listed)");
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use clap::{CommandFactory as _, Parser as _};

    use super::Cli;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// A retired signing seed is kept like the signing one: never inside `--dist`, where
    /// it would be served, nor the audit key file.
    #[test]
    fn a_retired_signing_seed_must_be_placed_like_the_signing_one() {
        let dir = tempfile::tempdir().unwrap();
        let dist = dir.path().join("dist");
        std::fs::create_dir_all(&dist).unwrap();
        let audit = dir.path().join("audit.jsonl");
        let retired = dist.join("old.signing.key");
        std::fs::write(&retired, "2c".repeat(32)).unwrap();
        let serve = |retired: &std::path::Path| {
            let cli = Cli::try_parse_from([
                OsStr::new("countersign-gateway"),
                OsStr::new("serve"),
                OsStr::new("--dist"),
                dist.as_os_str(),
                OsStr::new("--audit-file"),
                audit.as_os_str(),
                OsStr::new("--retired-signing-key-file"),
                retired.as_os_str(),
            ])
            .unwrap();
            match cli.command {
                super::Command::Serve(args) => super::keys(&args).map(|_| ()),
                _ => unreachable!(),
            }
        };
        assert!(matches!(
            serve(&retired),
            Err(super::Error::SigningKeyPlace { .. })
        ));
        let outside = dir.path().join("old.signing.key");
        std::fs::write(&outside, "2c".repeat(32)).unwrap();
        assert!(serve(&outside).is_ok());
    }

    /// `serve` and `verify` name the trail alike: the flags, variables and default in the
    /// README's table.
    #[test]
    fn serve_and_verify_take_the_same_trail_flags() {
        let cli = Cli::command();
        for name in ["serve", "verify"] {
            let command = cli.find_subcommand(name).unwrap();
            let arg = |id: &str| {
                command
                    .get_arguments()
                    .find(|a| a.get_id() == id)
                    .unwrap_or_else(|| panic!("{name} has no {id}"))
            };
            let file = arg("audit_file");
            assert_eq!(file.get_long(), Some("audit-file"), "{name}");
            assert_eq!(
                file.get_env(),
                Some(OsStr::new("COUNTERSIGN_AUDIT_FILE")),
                "{name}"
            );
            let default: Vec<&OsStr> = file.get_default_values().iter().map(|v| &**v).collect();
            assert_eq!(default, [OsStr::new("countersign-audit.jsonl")], "{name}");
            let url = arg("audit_url");
            assert_eq!(url.get_long(), Some("audit-url"), "{name}");
            assert_eq!(
                url.get_env(),
                Some(OsStr::new("COUNTERSIGN_AUDIT_URL")),
                "{name}"
            );
            assert!(url.get_default_values().is_empty(), "{name}");
            let both = [
                "--audit-file",
                "a.jsonl",
                "--audit-url",
                "postgres://db/trail",
            ];
            assert!(
                Cli::try_parse_from([&["countersign-gateway", name][..], &both].concat()).is_err(),
                "{name} took both --audit-file and --audit-url"
            );
        }
    }
}
