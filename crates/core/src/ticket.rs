//! Tickets and grants: the only ways past the approve stage, both minted by a person.

use serde::Serialize;
use serde_json::Value;

pub use crate::grant_rule::{GrantRule, Matcher};

pub use crate::codes::GrantId;

use crate::call::CallId;
use crate::codes::CardChange;
use crate::digest::ArgsDigest;
use crate::policy::{ApprovalPolicy, Kind};
use crate::time::Timestamp;

/// The SHA-256 of a card: of everything it shows ([`ApprovalRequest::card_sha256`], which
/// a ticket binds), or of its words ([`ApprovalRequest::words_sha256`], which a token binds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CardDigest(pub(crate) ArgsDigest);

impl CardDigest {
    /// The digest as 64 lowercase hex digits, as tokens carry it.
    pub fn to_hex(&self) -> String {
        self.0.to_hex()
    }
}

/// What the person pressed on an approval card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gesture {
    /// "Allow once": this call only.
    AllowOnce,
    /// "Always allow this session": this call and later ones of the action; only for `Ask`.
    AllowForSession,
    /// "Allow all in this batch": this call once, as one of a turn's listed cards (see
    /// [`ApprovalRequest::batchable`]); minted only by [`ApprovalRequest::countersign_batch`].
    AllowInBatch,
}

/// A value the executor puts on each card, binding a ticket to one card of one executor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Nonce(pub(crate) [u8; 16]);

impl std::fmt::Debug for Nonce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nonce(..)")
    }
}

/// A pending approval as the dock's card shows it: every word from the registry and arguments,
/// not the model's prose. Serialised without its nonce: nothing the model reads can mint a ticket.
#[derive(Clone, Debug, Serialize)]
pub struct ApprovalRequest {
    /// The call waiting.
    pub call: CallId,
    /// The action's id.
    pub action: String,
    /// Who asked (the card names an agent outside the page).
    pub caller: crate::call::Caller,
    /// The action's title.
    pub title: String,
    /// The action's kind (the card's risk colour).
    pub kind: Kind,
    /// `Ask` or `AskAlways`.
    pub policy: ApprovalPolicy,
    /// What will happen, computed from the arguments and current state.
    pub consequence: Option<String>,
    /// The exact arguments that will run.
    pub arguments: Value,
    /// Their digest; a ticket carries it.
    pub args_sha256: ArgsDigest,
    /// Whether the card may offer "always allow this session".
    pub offers_session_grant: bool,
    /// What that grant would remember, when offered.
    pub grant_rule: Option<crate::grant_rule::GrantRule>,
    /// The dry run's preview of the effect, if the action has one.
    pub preview: Option<crate::preview::Preview>,
    /// 1 for the first question; 2 for a double-confirmed action's second one.
    pub round: u8,
    /// The second question's words (round 2 only), from the action.
    pub question: Option<String>,
    /// When the request was made.
    pub asked_at: Timestamp,
    /// When it times out as `APPROVAL_TIMEOUT`.
    pub deadline: Timestamp,
    /// What changed since the person last saw this call's card (empty on a first card).
    pub changed: Vec<CardChange>,
    /// Whether the action asks twice (a second, differently worded card follows this one).
    pub asks_twice: bool,
    /// The person's edit this call carries: the card shows original → edited.
    pub edited: Option<crate::edit::EditDiff>,
    /// Whether the call was brought back after a reload (the card says so).
    pub restored: bool,
    /// The untrusted content read before asking (shown); the card offers no grant and no batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<String>,
    /// The digest of everything above that the person reads; the ticket binds it.
    pub card_sha256: CardDigest,
    #[serde(skip)]
    pub(crate) nonce: Nonce,
    /// How many times this round's card was drawn again because the page changed.
    #[serde(skip)]
    pub(crate) refresh: u8,
    #[serde(skip)]
    pub(crate) executor: u64,
}

impl ApprovalRequest {
    /// Whether "allow all in this batch" may cover this card: a plain `Ask`, asked once,
    /// not raised by untrusted content.
    pub fn batchable(&self) -> bool {
        self.policy == ApprovalPolicy::Ask
            && !self.asks_twice
            && self.round == 1
            && self.untrusted.is_none()
    }

    /// The digest of the card's words: SHA-256 over the canonical JSON (RFC 8785) of
    /// `{"action", "title", "kind", "consequence", "preview", "arguments"}`. It is the
    /// token's `card_sha256`, so a backend that draws the same card from its own data
    /// can check that what the person read still holds when it acts.
    pub fn words_sha256(&self) -> CardDigest {
        CardDigest(ArgsDigest::of_value(&serde_json::json!({
            "action": self.action,
            "title": self.title,
            "kind": self.kind,
            "consequence": self.consequence,
            "preview": self.preview,
            "arguments": self.arguments,
        })))
    }

    /// Mints this card's [`Ticket`] (the only way to make one); call it only on a person's gesture.
    pub fn countersign(&self, gesture: Gesture) -> Ticket {
        Ticket {
            call: self.call,
            action: self.action.clone(),
            args_sha256: self.args_sha256,
            card_sha256: self.card_sha256,
            nonce: self.nonce,
            executor: self.executor,
            gesture,
            batch: Vec::new(),
        }
    }

    /// Mints "allow all in this batch" for `cards` as the person saw them listed: one ticket
    /// per card, each binding the call and digest of every listed card and no other.
    pub fn countersign_batch(cards: &[ApprovalRequest]) -> Vec<Ticket> {
        let listed: Vec<(CallId, CardDigest)> =
            cards.iter().map(|c| (c.call, c.card_sha256)).collect();
        cards
            .iter()
            .map(|card| Ticket {
                batch: listed.clone(),
                ..card.countersign(Gesture::AllowInBatch)
            })
            .collect()
    }
}

/// A person's approval of one call, bound to its action, argument and card digests and nonce.
/// Consumed by [`crate::executor::Executor::approve`]; neither `Clone` nor `Deserialize`.
#[derive(Debug)]
pub struct Ticket {
    pub(crate) call: CallId,
    pub(crate) action: String,
    pub(crate) args_sha256: ArgsDigest,
    pub(crate) card_sha256: CardDigest,
    pub(crate) nonce: Nonce,
    pub(crate) executor: u64,
    pub(crate) gesture: Gesture,
    /// The cards a batch listed, by call and digest (two may read alike); else empty.
    pub(crate) batch: Vec<(CallId, CardDigest)>,
}

/// Why a ticket or another gesture was refused. The call stays pending, except after
/// [`TicketError::Expired`], which settles it as `APPROVAL_TIMEOUT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// The ticket was minted by another executor.
    #[error("the ticket belongs to another session")]
    ForeignExecutor,
    /// The call is not waiting for the person's decision.
    #[error("the call is not waiting for the person")]
    NotPending,
    /// The ticket's action, arguments, card or nonce differ from the pending call's.
    #[error("the ticket does not match the pending call")]
    Mismatch,
    /// The executor took no step (see [`Blocked`]).
    #[error(transparent)]
    Blocked(#[from] Blocked),
    /// The approval deadline had passed.
    #[error("the approval came after its deadline")]
    Expired,
    /// "Always allow" was asked for a call whose policy never offers it.
    #[error("this action cannot be allowed for the session")]
    GrantNotOffered,
    /// "Allow all in this batch" on a card that must be decided alone, or not listed with another.
    #[error("this call must be decided on its own")]
    BatchNotOffered,
}

/// Why the executor took no step at all: the operation did nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Blocked {
    /// An action's hook called back into the executor; the hook's call is refused.
    #[error("the executor is busy: an action's hook called back into it")]
    Reentered,
    /// A step was left half made; the executor refuses everything from then on.
    #[error("the executor is poisoned: a panic left a step half made")]
    Poisoned,
}

/// Why a stored grant was not restored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// No action with the id is registered.
    #[error("no action `{0}` is registered")]
    UnknownAction(String),
    /// The action registered now is not the declaration the grant was made for.
    #[error("the action `{0}` was declared differently when the grant was made")]
    RegistrationChanged(String),
    /// The grant was made for another role.
    #[error("the grant was made for another role")]
    OtherRole,
    /// A person could not make this grant now (not `Ask`, asks twice, a handoff), or it
    /// would run a countersigned action on a grant nobody made in this session.
    #[error("the action `{0}` cannot be allowed for the session")]
    NotOffered(String),
    /// The stored arguments are no longer valid params of the action.
    #[error("the stored arguments are not valid for the action `{0}`")]
    InvalidArguments(String),
    /// The executor took no step (see [`Blocked`]).
    #[error(transparent)]
    Blocked(#[from] Blocked),
}

/// What a grant is derived from, and all a page may store to restore it. On restore the
/// rule is derived again with the action's `remember` hook; a stored rule is never trusted.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantBasis {
    /// The action's id.
    pub action: String,
    /// The digest of the action's declaration when the grant was made.
    pub registration: String,
    /// The role the grant was made for.
    pub role: String,
    /// The arguments of the call the person approved with "always allow".
    pub arguments: Value,
    /// The caller the grant trusts: it covers only that caller's calls.
    #[serde(default, skip_serializing_if = "crate::call::Caller::is_assistant")]
    pub caller: crate::call::Caller,
}

/// "Always allow this session" for one `Ask` action, made by a person; revocable.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Grant {
    /// Its id, to revoke it.
    pub id: GrantId,
    /// The action it covers.
    pub action: String,
    /// The action's title, for the dock's list.
    pub title: String,
    /// When it was made.
    pub granted_at: Timestamp,
    /// The call whose card the person pressed it on.
    pub from_call: CallId,
    /// Which later calls it covers.
    pub rule: crate::grant_rule::GrantRule,
    /// What it was derived from (for storing it across page loads).
    pub basis: GrantBasis,
    /// The registration it belongs to: unregistering the action revokes the grant.
    #[serde(skip)]
    pub(crate) generation: u64,
}

/// Why an edit was not taken; the card still waits, except after [`TicketError::Expired`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The call is not waiting on a card, or the card expired.
    #[error(transparent)]
    Ticket(#[from] TicketError),
    /// The edited arguments are not the action's params; the form shows why.
    #[error("{0}")]
    Invalid(String),
    /// The edited arguments are the call's own.
    #[error("nothing was changed")]
    Unchanged,
}

impl From<Blocked> for EditError {
    fn from(blocked: Blocked) -> Self {
        EditError::Ticket(TicketError::Blocked(blocked))
    }
}
