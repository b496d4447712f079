//! Countersignatures: a signed token, minted for one approved call before it runs, that
//! the action sends with its own backend request so the backend can check for itself
//! that a person approved exactly this call.
//!
//! The core does no I/O: the host gives the executor a [`Countersigner`] (the page's
//! asks the gateway), and an action declared with
//! [`Action::run_countersigned`](crate::action::Action::run_countersigned) runs only once its
//! token has arrived. No token, no run: the call settles as `NOT_COUNTERSIGNED`.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::ticket::{CardDigest, GrantId};

/// A boxed future that need not be `Send`: page code runs on one thread.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A countersignature: a compact JWS (see `countersign-verify`'s README for its
/// claims), and the exact arguments it was minted for. Opaque to the core; prints only
/// its length, so it never lands whole in a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Countersignature {
    token: String,
    arguments: serde_json::Value,
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

    /// The arguments the person approved, exactly as digested into the token: send
    /// these (not the params re-encoded) so the backend's digest matches.
    pub fn arguments(&self) -> &serde_json::Value {
        &self.arguments
    }

    pub(crate) fn for_arguments(mut self, arguments: serde_json::Value) -> Self {
        self.arguments = arguments;
        self
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
    /// "Allow all in this batch": the batch panel listed this call (title and
    /// consequence) among the turn's calls; `card_sha256` is the digest of its card.
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
    /// Also a user-verified WebAuthn assertion with the person's registered passkey,
    /// over a challenge derived from this call's binding, checked by the gateway.
    Passkey,
}

/// What the host asks to be signed for one approved call: everything the token binds
/// that the page knows. The signer adds the issuer, the times, the token id and the
/// presence method.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MintRequest {
    /// The call, as the executor numbers it.
    pub call: CallId,
    /// The model's id for the tool call.
    pub tool_call_id: String,
    /// The action's id.
    pub action: String,
    /// The SHA-256 of the canonical arguments that will run (hex).
    pub args_sha256: ArgsDigest,
    /// The digest of the card the person approved; `None` when a grant covered the call
    /// (the grant's own card was approved earlier).
    pub card_sha256: Option<CardDigest>,
    /// How the person decided.
    pub approved_by: ApprovedBy,
    /// The grant, for [`ApprovedBy::Grant`] (and for the card that made one).
    pub grant: Option<GrantId>,
    /// The page session the person approved in.
    pub session: String,
    /// The session's role.
    pub role: String,
    /// What must prove the person was there ([`Presence::Passkey`] for an action
    /// declared with [`crate::action::Action::needs_passkey`]).
    pub presence: Presence,
    /// Who asked for the call: omitted for the page's own assistant.
    #[serde(skip_serializing_if = "crate::call::Caller::is_assistant")]
    pub caller: crate::call::Caller,
}

/// Mints countersignatures for the executor: the host's side of the bargain (the page
/// asks its gateway over HTTP). An `Err` says why none could be minted, in words the
/// dock and the model can be shown; the call then settles as `NOT_COUNTERSIGNED` and its
/// run is never reached.
pub trait Countersigner {
    /// Mints a token for `request`.
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>>;
}
