//! Signed outcomes: the gateway's statement of how a call it relayed ended, whether it
//! ran, was refused, was withdrawn or was never answered, tied to the approval (if any)
//! by the approval token's hash.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::claims::Actor;

/// The header's `typ` of a receipt: never taken for a countersignature, nor one for it.
pub const RECEIPT_TYPE: &str = "countersign-receipt+jwt";

/// How the call ended, as the gateway saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// The call's id as the gateway relayed it (the page's `tool_call_id`).
    pub call: String,
    /// The action (tool) asked for.
    pub action: String,
    /// SHA-256 (hex) of the RFC 8785 canonical JSON of the arguments the caller sent.
    pub args_sha256: String,
    /// Whether it ran and its checks passed.
    pub ok: bool,
    /// `OK`, or the refusal's code: `PERMISSION_DENIED`, `APPROVAL_TIMEOUT`,
    /// `CANCELLED`, `PAGE_GONE`, `TIMEOUT`…
    pub code: String,
    /// Who said so: `page` (the page's answer: its word) or `gateway` (the gateway
    /// ended the call: the page went away, or did not answer in time).
    pub said_by: String,
    /// SHA-256 (hex) of the result exactly as the caller got it (its JSON text).
    pub result_sha256: String,
    /// SHA-256 (hex) of the countersignature the page presented for this call, if any.
    pub approval_sha256: Option<String>,
    /// That countersignature's `jti`, if any.
    pub approval_jti: Option<String>,
}

/// The claims of a receipt. A receipt is a statement, not a permission: it has no
/// expiry and is never spent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptClaims {
    /// Who signed it (the gateway's issuer).
    pub iss: String,
    /// When, seconds since the Unix epoch.
    pub iat: u64,
    /// The receipt's id (32 hex digits).
    pub jti: String,
    /// Who asked for the call.
    pub act: Actor,
    /// How it ended.
    pub outcome: CallOutcome,
}

/// SHA-256 (lowercase hex) of a token's text: how a receipt names its approval.
pub fn token_sha256(token: &str) -> String {
    crate::log::to_hex(&Sha256::digest(token.as_bytes()).into())
}
