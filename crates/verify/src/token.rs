//! Checking a countersignature: the compact JWS, then what it states, then single use.

use base64::alphabet::URL_SAFE;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use countersign::audit::ArgsDigest;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::Deserialize;

use crate::claims::{Claims, Presence};
use crate::jwk::{JwkSet, JwksError};
use crate::replay::{MemorySpentTokens, Spent, SpentTokens};

/// base64url without padding, canonical only (no padding, no stray bits).
pub(crate) const B64: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// The header's `typ` (RFC 8725 explicit typing): a countersignature is not a login
/// token, an access token or another project's approval, and none of those is a
/// countersignature.
pub const TOKEN_TYPE: &str = "countersign-approval+jwt";

/// The signature algorithm the gateway names (RFC 9864's fully specified `Ed25519`).
/// The verifier also reads the deprecated, polymorphic `EdDSA` with an Ed25519 key.
pub const ALG: &str = "Ed25519";

/// The longest token accepted, in bytes; anything longer is refused unread.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// What the backend is about to do: the token must be for exactly this.
#[derive(Clone, Debug)]
pub struct Expected<'a> {
    action: &'a str,
    args_sha256: String,
    passkey: bool,
    window: bool,
    role: Option<&'a str>,
    card: Option<String>,
}

impl<'a> Expected<'a> {
    /// The action `action` with these arguments (digested over their canonical JSON, as
    /// the page does).
    pub fn call(action: &'a str, arguments: &serde_json::Value) -> Self {
        Self {
            action,
            args_sha256: ArgsDigest::of_value(arguments).to_hex(),
            passkey: false,
            window: false,
            role: None,
            card: None,
        }
    }

    /// Also require the token's `role` to be `role` (the user your backend's own session
    /// says is signed in): a passkey proves the person registered for that role.
    pub fn with_role(mut self, role: &'a str) -> Self {
        self.role = Some(role);
        self
    }

    /// Also require a passkey: `presence: "passkey"`, or the approval window's (which
    /// is a passkey too).
    pub fn with_passkey(mut self) -> Self {
        self.passkey = true;
        self
    }

    /// Also require `presence: "window"`: the person approved in the gateway's approval
    /// window, on a card drawn from the server's declarations, with their passkey.
    pub fn with_window(mut self) -> Self {
        self.window = true;
        self
    }

    /// Also require the card the person approved to be `card_sha256`: the digest of the
    /// words your declarations draw for this call now (`ApprovalRequest::words_sha256`,
    /// or the gateway's `ApprovalWindow::card_digest`). What the person read must still
    /// hold when the backend acts: "1 row" approved is refused once 101 would go.
    ///
    /// It binds the words only: pair it with [`Expected::with_role`] for the role you drew
    /// the card for. Only the window's card is drawn by the server; a page's card digest
    /// is the page's word, so this catches an honest page's stale card, not a forged one.
    pub fn with_card(mut self, card_sha256: impl Into<String>) -> Self {
        self.card = Some(card_sha256.into());
        self
    }
}

/// Why a token was refused. [`VerifyError::code`] is stable, for JSON errors.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Longer than [`MAX_TOKEN_BYTES`].
    #[error("the token is longer than {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    /// Not three base64url parts with a JSON header and payload.
    #[error("the token is malformed: {0}")]
    Malformed(&'static str),
    /// A header other than `{"alg":"Ed25519","kid":…,"typ":"countersign-approval+jwt"}`
    /// (`EdDSA` is read too; `none`, HS256, an embedded key, `crit`… are not).
    #[error("the token's header is not Ed25519 with a key id and type countersign-approval+jwt")]
    Header,
    /// A `kid` not among the keys.
    #[error("the token was signed with a key this backend does not trust")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// Another issuer.
    #[error("the token was issued by someone else")]
    WrongIssuer,
    /// A log that does not hold what an earlier signed head said it held.
    #[error(
        "the log is not consistent with the earlier signed head: lines were removed or changed"
    )]
    Inconsistent,
    /// A receipt for another approval than the one given.
    #[error("the receipt is for another approval")]
    WrongApproval,
    /// For another backend (`aud`).
    #[error("the token is for another backend")]
    WrongAudience,
    /// Past `exp`.
    #[error("the token has expired")]
    Expired,
    /// `iat` in the future.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// A lifetime that is empty or longer than the verifier allows.
    #[error("the token's lifetime is empty or too long")]
    Lifetime,
    /// For another action.
    #[error("the token is for another action")]
    WrongAction,
    /// For other arguments.
    #[error("the token is for other arguments")]
    WrongArguments,
    /// The card the person approved is not the one the call's card is now.
    #[error("the card the person approved no longer holds for this call")]
    WrongCard,
    /// Without the passkey presence this call needs.
    #[error(
        "the token does not carry the presence this call needs (a passkey, or the approval window)"
    )]
    Presence,
    /// For another role than the one the backend expects.
    #[error("the token was approved for another role")]
    WrongRole,
    /// Used before.
    #[error("the token was already used")]
    Replayed,
    /// The in-memory store of spent ids is full of unexpired ones: refused rather than
    /// forgetting one.
    #[error("too many tokens in flight; try again shortly")]
    Busy,
    /// The store of spent ids cannot be reached (the cause follows): the token was not
    /// accepted, and not spent.
    #[error("the record of spent tokens is unavailable, so the token was not accepted: {0}")]
    Unavailable(String),
}

impl VerifyError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::TooLarge => "too_large",
            VerifyError::Malformed(_) => "malformed",
            VerifyError::Header => "bad_header",
            VerifyError::UnknownKey => "unknown_key",
            VerifyError::BadSignature => "bad_signature",
            VerifyError::WrongIssuer => "wrong_issuer",
            VerifyError::WrongAudience => "wrong_audience",
            VerifyError::WrongApproval => "wrong_approval",
            VerifyError::Inconsistent => "inconsistent",
            VerifyError::Expired => "expired",
            VerifyError::NotYetValid => "not_yet_valid",
            VerifyError::Lifetime => "bad_lifetime",
            VerifyError::WrongAction => "wrong_action",
            VerifyError::WrongArguments => "wrong_arguments",
            VerifyError::WrongCard => "wrong_card",
            VerifyError::Presence => "no_presence",
            VerifyError::WrongRole => "wrong_role",
            VerifyError::Replayed => "replayed",
            VerifyError::Busy => "busy",
            VerifyError::Unavailable(_) => "unavailable",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    alg: String,
    kid: String,
    typ: String,
}

/// Checks countersignatures: the keys it trusts, the issuer, the clock leeway, the
/// longest lifetime, and the store of spent ids `S` that makes each token single use
/// (this process's memory unless [`Verifier::spent_tokens`] says otherwise). Share one
/// (`Arc`) across requests.
#[derive(Debug)]
pub struct Verifier<S = MemorySpentTokens> {
    keys: std::sync::RwLock<Vec<(String, VerifyingKey)>>,
    issuer: String,
    audience: String,
    leeway_secs: u64,
    max_lifetime_secs: u64,
    spent: S,
}

impl Verifier {
    /// A verifier for tokens from `issuer`, trusting no key yet. Defaults: the audience
    /// [`crate::DEFAULT_AUDIENCE`], 5 s of clock leeway, lifetimes up to 10 minutes,
    /// spent ids kept in memory (up to 100,000 unexpired ones).
    pub fn new(issuer: impl Into<String>) -> Self {
        Self {
            keys: std::sync::RwLock::default(),
            issuer: issuer.into(),
            audience: crate::DEFAULT_AUDIENCE.into(),
            leeway_secs: 5,
            max_lifetime_secs: 600,
            spent: MemorySpentTokens::default(),
        }
    }

    /// Remembers at most `n` unexpired token ids; past that, new tokens are refused
    /// ([`VerifyError::Busy`]) rather than an id forgotten early.
    pub fn remember_at_most(mut self, n: usize) -> Self {
        self.spent = MemorySpentTokens::new(n);
        self
    }

    /// How many token ids are remembered now.
    pub fn remembered(&self) -> usize {
        self.spent.len()
    }
}

impl<S> Verifier<S> {
    /// Keeps spent token ids in `store` instead: a store shared by every replica makes a
    /// token single use across all of them, and across restarts.
    pub fn spent_tokens<T: SpentTokens>(self, store: T) -> Verifier<T> {
        Verifier {
            keys: self.keys,
            issuer: self.issuer,
            audience: self.audience,
            leeway_secs: self.leeway_secs,
            max_lifetime_secs: self.max_lifetime_secs,
            spent: store,
        }
    }

    /// Also trusts `key` (its id is its RFC 7638 thumbprint).
    pub fn trust(self, key: VerifyingKey) -> Self {
        let jwk = crate::Jwk::of(&key);
        self.keys_mut().push((jwk.kid, key));
        self
    }

    /// Trusts every key of a JWK set (the gateway's `/.well-known/jwks.json`).
    pub fn trust_jwks(self, jwks: &str) -> Result<Self, JwksError> {
        let keys = read_jwks(jwks)?;
        self.keys_mut().extend(keys);
        Ok(self)
    }

    /// Trusts exactly the keys of `jwks` from now on, in place of every key trusted so
    /// far (a shared verifier, while it serves requests). Fetch the gateway's set again
    /// every few minutes, or when a token names a key not trusted yet
    /// ([`VerifyError::UnknownKey`]): a key rotation then needs no restart, and a key
    /// the gateway stopped publishing stops verifying. A set that does not read changes
    /// nothing.
    pub fn refresh_jwks(&self, jwks: &str) -> Result<(), JwksError> {
        let keys = read_jwks(jwks)?;
        *self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
        Ok(())
    }

    fn keys_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<(String, VerifyingKey)>> {
        self.keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Accepts only tokens whose `aud` is `audience` (the gateway's `--audience`).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }

    /// Sets the clock leeway.
    pub fn leeway_secs(mut self, secs: u64) -> Self {
        self.leeway_secs = secs;
        self
    }
}

impl<S: SpentTokens> Verifier<S> {
    /// Checks `token` for `expected` at `now` (seconds since the Unix epoch) and, if it
    /// holds, spends it: the same token is refused from then on, as far as the store of
    /// spent ids reaches.
    pub async fn verify(
        &self,
        token: &str,
        expected: &Expected<'_>,
        now: u64,
    ) -> Result<Claims, VerifyError> {
        let claims = self.check(token, expected, now)?;
        let until = claims.exp.saturating_add(self.leeway_secs);
        self.spent
            .take(&claims.jti, until, now)
            .await
            .map_err(|spent| match spent {
                Spent::Replayed => VerifyError::Replayed,
                Spent::Expired => VerifyError::Expired,
                Spent::Full => VerifyError::Busy,
                Spent::Unavailable(cause) => VerifyError::Unavailable(cause),
            })?;
        Ok(claims)
    }

    /// [`Verifier::verify`] at the system clock's now.
    pub async fn verify_now(
        &self,
        token: &str,
        expected: &Expected<'_>,
    ) -> Result<Claims, VerifyError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.verify(token, expected, now).await
    }

    /// Checks a receipt the gateway signed (see [`crate::ReceiptClaims`]): the compact
    /// form, its header (`typ` [`crate::RECEIPT_TYPE`]), the signature and the issuer,
    /// and, when `approval` is given, that the receipt is for exactly that
    /// countersignature. A receipt is a statement, not a permission: it does not expire
    /// and is not spent.
    pub fn check_receipt(
        &self,
        receipt: &str,
        approval: Option<&str>,
    ) -> Result<crate::ReceiptClaims, VerifyError> {
        let claims: crate::ReceiptClaims = self.open(receipt, crate::RECEIPT_TYPE)?;
        if claims.iss != self.issuer {
            return Err(VerifyError::WrongIssuer);
        }
        if let Some(token) = approval {
            let named = claims.outcome.approval_sha256.as_deref();
            if named != Some(crate::token_sha256(token).as_str()) {
                return Err(VerifyError::WrongApproval);
            }
            // The approval is the gateway's too, and for the action the receipt names.
            let approved: Claims = self.open(token, TOKEN_TYPE)?;
            if approved.detail().map(|d| d.action.as_str()) != Some(&claims.outcome.action) {
                return Err(VerifyError::WrongApproval);
            }
        }
        Ok(claims)
    }

    /// Checks a signed tree head (see [`crate::log`]): its header, signature and issuer.
    pub fn check_tree_head(&self, head: &str) -> Result<crate::log::TreeHead, VerifyError> {
        let head: crate::log::TreeHead = self.open(head, crate::log::TREE_HEAD_TYPE)?;
        if head.iss != self.issuer {
            return Err(VerifyError::WrongIssuer);
        }
        Ok(head)
    }

    /// Checks that the log whose signed head was `old` still holds, unchanged, every line
    /// it held then, now that its signed head is `new` with the consistency `proof` (hex
    /// hashes, as `GET /v1/log/proof` serves them): both heads signed by a trusted key
    /// and issuer, and the proof taking the old root to the new. A log cut shorter, a
    /// line rewritten, or another history fails ([`VerifyError::Inconsistent`]).
    pub fn check_log_consistency(
        &self,
        old: &str,
        new: &str,
        proof: &[String],
    ) -> Result<crate::log::TreeHead, VerifyError> {
        let old = self.check_tree_head(old)?;
        self.check_log_extends(&old, new, proof)
    }

    /// [`Verifier::check_log_consistency`] from an earlier head already checked (and
    /// kept as its claims): a key rotation since, which drops the key that signed it,
    /// does not stop the check; only `new` must be signed by a key trusted now.
    pub fn check_log_extends(
        &self,
        old: &crate::log::TreeHead,
        new: &str,
        proof: &[String],
    ) -> Result<crate::log::TreeHead, VerifyError> {
        use crate::log::{from_hex, verify_consistency};
        let new = self.check_tree_head(new)?;
        let roots = from_hex(&old.root_hash).zip(from_hex(&new.root_hash));
        let proof: Option<Vec<_>> = proof.iter().map(|h| from_hex(h)).collect();
        let holds = match (roots, proof) {
            (Some((first, second)), Some(proof)) => {
                verify_consistency(old.tree_size, new.tree_size, &first, &second, &proof)
            }
            _ => false,
        };
        if holds {
            Ok(new)
        } else {
            Err(VerifyError::Inconsistent)
        }
    }

    /// The payload of a compact JWS of header type `typ`, once its size, form, header
    /// and signature (under a trusted key) hold.
    fn open<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        typ: &str,
    ) -> Result<T, VerifyError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(VerifyError::TooLarge);
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(VerifyError::Malformed(
                "a token is three dot-separated parts",
            ));
        };
        let header: Header = decode_json(header, "the header")?;
        if !matches!(header.alg.as_str(), ALG | "EdDSA") || header.typ != typ {
            return Err(VerifyError::Header);
        }
        let key = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(kid, _)| *kid == header.kid)
            .map(|(_, key)| *key)
            .ok_or(VerifyError::UnknownKey)?;
        let signature: [u8; 64] = B64
            .decode(signature)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(VerifyError::Malformed(
                "the signature is not 64 bytes of base64url",
            ))?;
        let signed = token
            .rsplit_once('.')
            .map_or(token, |(signed, _)| signed)
            .as_bytes();
        key.verify_strict(signed, &Signature::from_bytes(&signature))
            .map_err(|_| VerifyError::BadSignature)?;
        decode_json(payload, "the claims")
    }

    /// Everything but single use.
    fn check(&self, token: &str, expected: &Expected<'_>, now: u64) -> Result<Claims, VerifyError> {
        let claims: Claims = self.open(token, TOKEN_TYPE)?;
        if claims.iss != self.issuer {
            return Err(VerifyError::WrongIssuer);
        }
        if claims.aud != self.audience {
            return Err(VerifyError::WrongAudience);
        }
        if claims.exp <= claims.iat || claims.exp - claims.iat > self.max_lifetime_secs {
            return Err(VerifyError::Lifetime);
        }
        if claims.iat.max(claims.nbf) > now.saturating_add(self.leeway_secs) {
            return Err(VerifyError::NotYetValid);
        }
        if now >= claims.exp.saturating_add(self.leeway_secs) {
            return Err(VerifyError::Expired);
        }
        let detail = claims.detail().ok_or(VerifyError::Malformed(
            "the claims hold no single countersign_action entry",
        ))?;
        if detail.action != expected.action {
            return Err(VerifyError::WrongAction);
        }
        if detail.args_sha256 != expected.args_sha256 {
            return Err(VerifyError::WrongArguments);
        }
        let passkey = matches!(detail.presence, Presence::Passkey | Presence::Window)
            && detail.passkey.is_some()
            && claims.sub.is_some();
        if (expected.passkey || expected.window) && !passkey {
            return Err(VerifyError::Presence);
        }
        if expected.window && detail.presence != Presence::Window {
            return Err(VerifyError::Presence);
        }
        if let Some(card) = &expected.card {
            if detail.card_sha256.as_deref() != Some(card.as_str()) {
                return Err(VerifyError::WrongCard);
            }
        }
        if expected.role.is_some_and(|role| role != detail.role) {
            return Err(VerifyError::WrongRole);
        }
        Ok(claims)
    }
}

/// The keys of a JWK set, each checked.
fn read_jwks(jwks: &str) -> Result<Vec<(String, VerifyingKey)>, JwksError> {
    let set: JwkSet = serde_json::from_str(jwks)?;
    if set.keys.is_empty() {
        return Err(JwksError::Empty);
    }
    set.keys
        .iter()
        .enumerate()
        .map(|(i, jwk)| Ok((jwk.kid.clone(), jwk.key(i)?)))
        .collect()
}

fn decode_json<T: serde::de::DeserializeOwned>(
    part: &str,
    what: &'static str,
) -> Result<T, VerifyError> {
    let bytes = B64.decode(part).map_err(|_| {
        VerifyError::Malformed(match what {
            "the header" => "the header is not base64url",
            _ => "the claims are not base64url",
        })
    })?;
    serde_json::from_slice(&bytes).map_err(|_| {
        VerifyError::Malformed(match what {
            "the header" => "the header is not the expected JSON",
            _ => "the claims are not the expected JSON",
        })
    })
}
