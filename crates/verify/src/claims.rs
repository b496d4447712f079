//! What a countersignature states (the JWS payload): registered JWT claims first, and
//! the approved call as one RFC 9396 `authorization_details` entry of our own type.

use countersign::{Caller, Kind};
use serde::{Deserialize, Serialize};

/// The `type` of the `authorization_details` entry that describes the approved call.
pub const ACTION_DETAIL_TYPE: &str = "countersign_action";

/// The audience a gateway names and a verifier expects unless told otherwise. Set your
/// deployment's own on both sides (`--audience`, [`crate::Verifier::audience`]). One
/// gateway names one audience: backends behind it tell their tokens apart by action id.
pub const DEFAULT_AUDIENCE: &str = "countersign-backend";

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
    /// Approved in the gateway's approval window, on its own origin: the card drawn from
    /// the server's declarations, confirmed with the approver's passkey; `sub` names them.
    Window,
}

/// Who asked for the call (RFC 8693 `act`): the party acting, with the person's consent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `assistant` (the page's own), `webmcp` (a browser agent) or `mcp` (an MCP client
    /// through the gateway).
    pub sub: Caller,
}

/// The approved call, as an `authorization_details` entry (RFC 9396) of type
/// [`ACTION_DETAIL_TYPE`]. A passkey ceremony's challenge binds this entry as it is
/// before `passkey` is filled in: the decision, the grant and the digests included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionDetail {
    /// Always [`ACTION_DETAIL_TYPE`].
    #[serde(rename = "type")]
    pub type_: String,
    /// The action's id.
    pub action: String,
    /// The action's declared risk: `read`, `write` or `danger`.
    pub kind: Kind,
    /// The page executor's call id.
    pub call: u64,
    /// The model's id for the tool call.
    pub tool_call_id: String,
    /// SHA-256 (lowercase hex) of the RFC 8785 canonical JSON of the arguments that run.
    pub args_sha256: String,
    /// SHA-256 (hex) of the card's words the person approved (`ApprovalRequest::words_sha256`);
    /// `null` when a grant covered it.
    pub card_sha256: Option<String>,
    /// How the person decided: `once`, `batch` or `grant`.
    pub decision: ApprovedBy,
    /// The grant's id, for `grant` (and for a card that made one).
    pub grant: Option<u64>,
    /// The page session the person approved in.
    pub session: String,
    /// The session's role (the page's word; `sub` is what a passkey proved).
    pub role: String,
    /// What proves the person was there.
    pub presence: Presence,
    /// For `passkey`: the id (base64url) of the registered credential that verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passkey: Option<String>,
}

/// The claims of a countersignature. Unknown claims are ignored, so the format can
/// grow. `sub` is present only when a passkey showed who approved; `amr` likewise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Who minted it (the gateway's configured issuer).
    pub iss: String,
    /// Who approved: the passkey's user, when a passkey verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// The backend that will act (the gateway's `--audience`).
    pub aud: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Not before (the same as `iat`).
    pub nbf: u64,
    /// Expires at, seconds since the Unix epoch (default two minutes after `iat`).
    pub exp: u64,
    /// The token's id: 32 lowercase hex digits, unique; spend it once.
    pub jti: String,
    /// Who asked for the call.
    pub act: Actor,
    /// How presence was shown (RFC 8176): `["pop", "mfa"]` for a user-verified passkey;
    /// absent for a click, which is the page's word.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amr: Vec<String>,
    /// The entries of type [`ACTION_DETAIL_TYPE`] (a valid token has exactly one: the
    /// approved call). Entries of other types are passed over when read, so the format
    /// can grow.
    #[serde(deserialize_with = "ours")]
    pub authorization_details: Vec<ActionDetail>,
    /// Where the gateway's record of this approval is in its verifiable log (the line's
    /// index, from 0): `GET /v1/log/inclusion?index=…` proves it is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_index: Option<u64>,
}

/// The `authorization_details` entries of our type; one of our type that does not read
/// makes the whole token unreadable.
fn ours<'de, D: serde::Deserializer<'de>>(reader: D) -> Result<Vec<ActionDetail>, D::Error> {
    Vec::<serde_json::Value>::deserialize(reader)?
        .into_iter()
        .filter(|entry| entry.get("type").and_then(|t| t.as_str()) == Some(ACTION_DETAIL_TYPE))
        .map(|entry| serde_json::from_value(entry).map_err(serde::de::Error::custom))
        .collect()
}

impl Claims {
    /// The approved call: the one entry of our type (a verified token always has it).
    pub fn detail(&self) -> Option<&ActionDetail> {
        let mut ours = self
            .authorization_details
            .iter()
            .filter(|d| d.type_ == ACTION_DETAIL_TYPE);
        match (ours.next(), ours.next()) {
            (Some(detail), None) => Some(detail),
            _ => None,
        }
    }
}
