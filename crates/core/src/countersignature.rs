//! Countersignatures: a token the host's [`Countersigner`] mints for one approved call, sent
//! to the backend as proof a person approved it. No token, no run: `NOT_COUNTERSIGNED`.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::ticket::{CardDigest, GrantId};

/// A boxed future that need not be `Send`: page code runs on one thread.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A countersignature: a compact JWS (claims in `countersign-verify`'s README) and the
/// arguments it was minted for. `Debug` prints only its length, to keep it out of logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Countersignature {
    pub(crate) token: String,
    pub(crate) arguments: serde_json::Value,
}

impl Countersignature {
    /// Wraps a token as the countersigner received it.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            arguments: serde_json::Value::Null,
        }
    }

    /// The token, to send in the backend request (e.g. a `Countersignature` header).
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// The approved arguments exactly as digested: send these, not re-encoded params.
    pub fn arguments(&self) -> &serde_json::Value {
        &self.arguments
    }
}

impl std::fmt::Debug for Countersignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Countersignature({} bytes)", self.token.len())
    }
}

/// How the person decided the call the token is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedBy {
    /// "Allow once" on this call's card.
    Once,
    /// "Allow all in this batch" on a panel listing this call (`card_sha256`: its card).
    Batch,
    /// A session grant the person made ("always allow"); the token names it.
    Grant,
}

/// What must prove the person was there before a token is minted.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// The person's trusted click on the card, in the page session (the page's word).
    #[default]
    Click,
    /// Also a user-verified WebAuthn assertion with the person's passkey, checked by the gateway.
    Passkey,
    /// Approved in the gateway's window, on an origin the page cannot script, from a card of
    /// the server's own declarations, with a passkey registered there. The page cannot mint it.
    Window,
}

/// What to sign for one approved call; the signer adds the issuer, times, token id and presence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MintRequest {
    /// The call, as the executor numbers it.
    pub call: CallId,
    /// The model's id for the tool call.
    pub tool_call_id: String,
    /// The action's id.
    pub action: String,
    /// The action's declared risk.
    pub kind: crate::Kind,
    /// The SHA-256 of the canonical arguments that will run (hex).
    pub args_sha256: ArgsDigest,
    /// The digest of the card the person approved; `None` when a grant covered the call.
    pub card_sha256: Option<CardDigest>,
    /// How the person decided.
    pub approved_by: ApprovedBy,
    /// The grant, for [`ApprovedBy::Grant`] (and for the card that made one).
    pub grant: Option<GrantId>,
    /// The page session the person approved in.
    pub session: String,
    /// The session's role.
    pub role: String,
    /// What must prove the person was there.
    pub presence: Presence,
    /// Who asked for the call: omitted for the page's own assistant.
    #[serde(skip_serializing_if = "crate::call::Caller::is_assistant")]
    pub caller: crate::call::Caller,
    /// The arguments that will run, for the approval window's card; only their digest is signed.
    #[serde(skip)]
    pub arguments: serde_json::Value,
}

/// Mints countersignatures for the executor (the page asks its gateway). An `Err` says
/// why, in words for the dock and the model; the call settles as `NOT_COUNTERSIGNED`.
pub trait Countersigner {
    /// Mints a token for `request`.
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>>;
}
