//! What a countersignature states (the JWS payload).

use serde::{Deserialize, Serialize};

/// How the person decided the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedBy {
    /// "Allow once" on the call's own card.
    Once,
    /// "Allow all in this batch", over the call's own card.
    Batch,
    /// A session grant the person made; `grant` names it.
    Grant,
}

/// What proves a person was there when the call was approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// A trusted click in the page session (`Event.isTrusted`): the page's word.
    Click,
    /// A user-verified WebAuthn assertion over this call's binding, checked by the
    /// gateway against the person's registered passkey.
    Passkey,
}

/// The claims of a countersignature. Unknown claims are ignored, so the format can
/// grow; every claim here is required (`card_sha256` and `grant` may be `null`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Who minted it (the gateway's configured issuer).
    pub iss: String,
    /// The token's id: 32 lowercase hex digits, unique; the replay cache keys on it.
    pub jti: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Expires at, seconds since the Unix epoch (default two minutes after `iat`).
    pub exp: u64,
    /// The page executor's call id.
    pub call: u64,
    /// The model's tool call id.
    pub tool_call_id: String,
    /// The action's id.
    pub action: String,
    /// SHA-256 (lowercase hex) of the canonical JSON of the exact arguments that run.
    pub args_sha256: String,
    /// SHA-256 (hex) of the card the person approved; `null` when a grant covered it.
    pub card_sha256: Option<String>,
    /// How the person decided.
    pub approved_by: ApprovedBy,
    /// The grant's id, for `grant` (and for a card that made one).
    pub grant: Option<u64>,
    /// The page session the person approved in.
    pub session: String,
    /// The session's role.
    pub role: String,
    /// What proves the person was there.
    pub presence: Presence,
    /// For `passkey`: the id (base64url) of the registered credential that verified.
    #[serde(default)]
    pub passkey: Option<String>,
    /// Who asked for the call: `webmcp` (a browser agent) or `mcp` (an MCP client
    /// through the gateway); omitted for the page's own assistant. A person approved it
    /// either way; a backend may refuse calls agents asked for.
    #[serde(default, skip_serializing_if = "countersign::Caller::is_assistant")]
    pub caller: countersign::Caller,
}
