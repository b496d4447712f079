//! How an executor is set up.

use std::time::Duration;

use sha2::Digest as _;

use crate::arguments::DEFAULT_MAX_ARGUMENT_BYTES;
use crate::call::Session;
use crate::digest::AuditKey;

/// How long an approval card waits unless configured otherwise.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How an executor is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// A unique id for this session; audit record ids start with it.
    pub session_id: String,
    /// The role and scopes the assistant acts for.
    pub session: Session,
    /// How long an approval waits before `APPROVAL_TIMEOUT`. Default five minutes.
    pub approval_timeout: Duration,
    /// The cap on a call's raw arguments, in bytes. Default 16 KiB.
    pub max_argument_bytes: usize,
    /// How many calls one agent outside the page (WebMCP, MCP) may have live at once;
    /// more are refused as `UNAVAILABLE` until the person has decided some. Default 3:
    /// an agent cannot bury the dock (or the page's own assistant) under cards.
    pub max_live_per_agent: usize,
    /// Whether a countersigned action an agent outside the page asked for needs the
    /// person's passkey, whatever it declares. Off by default. An agent that drives the
    /// browser (over the DevTools protocol) makes trusted clicks, so a click token for its
    /// own call proves little; a passkey assertion it cannot make.
    pub agents_need_passkey: bool,
    /// Secret randomness for card nonces (the page fills it from `crypto.getRandomValues`).
    pub secret: [u8; 32],
    /// The key of the audit records' argument digests. Default: derived from `secret`,
    /// so it lives only in this page session (see [`AuditKey`] for who can check what).
    pub audit_key: AuditKey,
}

impl Config {
    /// A config with defaults for everything but the session and its secret.
    pub fn new(session_id: impl Into<String>, session: Session, secret: [u8; 32]) -> Self {
        Self {
            session_id: session_id.into(),
            session,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            max_live_per_agent: 3,
            agents_need_passkey: false,
            audit_key: AuditKey::new(super::state::prefix(&sha2::Sha256::digest(
                [&secret[..], b"audit"].concat(),
            ))),
            secret,
        }
    }
}
