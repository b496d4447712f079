//! Public keys as JWKs (RFC 7517, OKP/Ed25519 per RFC 8037), named by their RFC 7638
//! thumbprint.

use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::token::B64;

/// One public key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// Always `OKP`.
    pub kty: String,
    /// Always `Ed25519`.
    pub crv: String,
    /// The 32-byte public key, base64url without padding.
    pub x: String,
    /// The key id: its RFC 7638 thumbprint.
    pub kid: String,
    /// `Ed25519` (RFC 9864); a set that says `EdDSA` is read too.
    pub alg: String,
    /// Always `sig`.
    #[serde(rename = "use")]
    pub use_: String,
}

/// A JWK set, as served at `/.well-known/jwks.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwkSet {
    /// The keys.
    pub keys: Vec<Jwk>,
}

/// Why a JWK set could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// Not a JWK set.
    #[error("not a JWK set: {0}")]
    Json(#[from] serde_json::Error),
    /// A key that is not an Ed25519 signing key.
    #[error("key {0} is not an OKP/Ed25519 signing key")]
    NotEd25519(usize),
    /// A key whose `x` is not 32 bytes of base64url, or not a valid point.
    #[error("key {0} has an invalid public key")]
    BadKey(usize),
    /// A key whose `kid` is not its thumbprint.
    #[error("key {0}'s kid is not its RFC 7638 thumbprint")]
    BadKid(usize),
    /// No usable key.
    #[error("the set has no keys")]
    Empty,
}

impl Jwk {
    /// The JWK of `key`.
    pub fn of(key: &VerifyingKey) -> Self {
        let x = B64.encode(key.as_bytes());
        Self {
            kid: thumbprint(&x),
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x,
            alg: crate::token::ALG.into(),
            use_: "sig".into(),
        }
    }

    pub(crate) fn key(&self, index: usize) -> Result<VerifyingKey, JwksError> {
        let alg = matches!(self.alg.as_str(), "Ed25519" | "EdDSA");
        if self.kty != "OKP" || self.crv != "Ed25519" || !alg || self.use_ != "sig" {
            return Err(JwksError::NotEd25519(index));
        }
        let bytes: [u8; 32] = B64
            .decode(&self.x)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(JwksError::BadKey(index))?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| JwksError::BadKey(index))?;
        if self.kid != thumbprint(&self.x) {
            return Err(JwksError::BadKid(index));
        }
        Ok(key)
    }
}

/// RFC 7638: the SHA-256 of the required members in lexical order, base64url.
fn thumbprint(x: &str) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    B64.encode(Sha256::digest(canonical.as_bytes()))
}
