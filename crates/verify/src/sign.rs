//! Minting: the gateway's side.

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};

use crate::claims::Claims;
use crate::jwk::{Jwk, JwkSet};
use crate::token::{ALG, B64, TOKEN_TYPE};

/// Signs countersignatures with one Ed25519 key, and publishes it with the retired keys
/// whose tokens may still be in flight. Prints no key material.
pub struct Signer {
    key: SigningKey,
    jwk: Jwk,
    retired: Vec<Jwk>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("kid", &self.jwk.kid)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for the key with this 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = SigningKey::from_bytes(seed);
        let jwk = Jwk::of(&key.verifying_key());
        Self {
            key,
            jwk,
            retired: Vec::new(),
        }
    }

    /// Also publishes `key`, which signed before this one (key rotation): tokens it
    /// signed keep verifying until they expire. Drop it once the longest lifetime has
    /// passed since the switch.
    pub fn publish_retired(mut self, key: &ed25519_dalek::VerifyingKey) -> Self {
        let jwk = Jwk::of(key);
        if jwk != self.jwk && !self.retired.contains(&jwk) {
            self.retired.push(jwk);
        }
        self
    }

    /// The key's id (its RFC 7638 thumbprint), the token header's `kid`.
    pub fn kid(&self) -> &str {
        &self.jwk.kid
    }

    /// The public key, for a [`crate::Verifier`].
    pub fn verifying_key(&self) -> ed25519_dalek::VerifyingKey {
        self.key.verifying_key()
    }

    /// The public JWK set to publish: the signing key first, then the retired ones.
    pub fn jwks(&self) -> JwkSet {
        JwkSet {
            keys: std::iter::once(&self.jwk)
                .chain(&self.retired)
                .cloned()
                .collect(),
        }
    }

    /// A compact JWS of `claims`: `base64url(header).base64url(claims).base64url(sig)`,
    /// header `{"alg":"Ed25519","kid":…,"typ":"countersign-approval+jwt"}`.
    pub fn sign(&self, claims: &Claims) -> Result<String, serde_json::Error> {
        self.sign_as(claims, TOKEN_TYPE)
    }

    /// A compact JWS of a receipt, header `typ` `countersign-receipt+jwt`.
    pub fn sign_receipt(
        &self,
        receipt: &crate::ReceiptClaims,
    ) -> Result<String, serde_json::Error> {
        self.sign_as(receipt, crate::RECEIPT_TYPE)
    }

    /// A compact JWS of a tree head, header `typ` `countersign-tree-head+jwt`.
    pub fn sign_tree_head(&self, head: &crate::log::TreeHead) -> Result<String, serde_json::Error> {
        self.sign_as(head, crate::log::TREE_HEAD_TYPE)
    }

    /// A compact JWS of any `payload` under the header type `typ`.
    fn sign_as(
        &self,
        payload: &impl serde::Serialize,
        typ: &str,
    ) -> Result<String, serde_json::Error> {
        let header = serde_json::json!({ "alg": ALG, "kid": self.jwk.kid, "typ": typ });
        let mut token = B64.encode(serde_json::to_vec(&header)?);
        token.push('.');
        token.push_str(&B64.encode(serde_json::to_vec(payload)?));
        let signature = self.key.sign(token.as_bytes());
        token.push('.');
        token.push_str(&B64.encode(signature.to_bytes()));
        Ok(token)
    }
}
