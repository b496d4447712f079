//! The SHA-256 digest of a call's arguments over their canonical JSON text. Tickets bind
//! it; audit records store a keyed digest ([`AuditKey`]), since a plain hash of a guess
//! could confirm low-entropy arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ArgsDigest([u8; 32]);

impl ArgsDigest {
    /// The digest of a value over its canonical (RFC 8785) text, so `{"a":1,"b":2.0}`
    /// and `{ "b": 2, "a": 1 }` have one digest.
    pub fn of_value(value: &Value) -> Self {
        let mut hasher = Sha256::new();
        crate::canonical::write(value, &mut hasher);
        Self(hasher.finalize().into())
    }

    /// A placeholder of zeros, replaced before any record uses it.
    pub(crate) const fn default_empty() -> Self {
        Self([0; 32])
    }

    /// The digest of some bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for ArgsDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArgsDigest({})", self.to_hex())
    }
}

impl std::fmt::Display for ArgsDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl From<ArgsDigest> for String {
    fn from(digest: ArgsDigest) -> Self {
        digest.to_hex()
    }
}

/// The key of the audit trail's argument digests: it hides arguments from all but its
/// holder; it does not authenticate records. By default it never leaves the page; a
/// deployment that must settle disputes sets
/// [`Config::audit_key`](crate::executor::Config::audit_key) from a key it keeps.
#[derive(Clone)]
pub struct AuditKey(Sha256);

impl AuditKey {
    /// A key from 32 secret bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        // A label and the key, padded to one 64-byte block: its state is computed once.
        let mut block = [0u8; 64];
        let label = b"countersign-audit-key-v1";
        for (slot, byte) in block.iter_mut().zip(label.iter().chain(bytes.iter())) {
            *slot = *byte;
        }
        Self(Sha256::new_with_prefix(block))
    }

    /// The keyed digest of parsed arguments, over the canonical form of [`ArgsDigest::of_value`].
    pub fn digest(&self, value: &Value) -> ArgsDigest {
        let mut hasher = self.0.clone();
        crate::canonical::write(value, &mut hasher);
        ArgsDigest(hasher.finalize().into())
    }

    /// The keyed digest of raw arguments: canonical when the gate reads them, the bytes
    /// otherwise.
    pub fn digest_raw(&self, raw: &str) -> ArgsDigest {
        match crate::canonical::read(raw) {
            Ok(value) => self.digest(&value),
            Err(_) => self.digest_bytes(raw.as_bytes()),
        }
    }

    /// The keyed digest of some bytes.
    pub fn digest_bytes(&self, bytes: &[u8]) -> ArgsDigest {
        let mut hasher = self.0.clone();
        hasher.update(bytes);
        ArgsDigest(hasher.finalize().into())
    }
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

/// The error for a string that is not 64 hex digits.
#[derive(Debug, thiserror::Error)]
#[error("a digest is 64 lowercase hex digits")]
pub struct BadDigest;

impl TryFrom<String> for ArgsDigest {
    type Error = BadDigest;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(BadDigest);
        }
        let mut out = [0u8; 32];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let [high, low] = pair else {
                return Err(BadDigest);
            };
            *slot = (nibble(*high)? << 4) | nibble(*low)?;
        }
        Ok(Self(out))
    }
}

fn nibble(c: u8) -> Result<u8, BadDigest> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(BadDigest),
    }
}
