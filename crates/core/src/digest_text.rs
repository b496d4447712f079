//! An audit record's `args_digest`: the keyed digest the gate computed, written as hex
//! only when read; or, in a trail an older gateway stored, whatever text it took.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ArgsDigest;

/// A record's `args_digest`: 64 lowercase hex digits when the gate wrote it.
///
/// It reads, compares and serialises as text, whichever way it was made: hex read back
/// from JSON equals the digest it came from. Any other text reads back as it is (an
/// older gateway took any text here, and its trail must still open).
// Equality is the text's: hex is always held as a digest, so two values that read
// alike are held alike.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DigestText(Held);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Held {
    Digest(ArgsDigest),
    /// Anything but 64 lowercase hex digits.
    Text(Box<str>),
}

impl DigestText {
    /// The digest, if this is one (64 lowercase hex digits).
    pub fn digest(&self) -> Option<ArgsDigest> {
        match &self.0 {
            Held::Digest(digest) => Some(*digest),
            Held::Text(_) => None,
        }
    }

    /// The text: borrowed when it is held as text, written out otherwise.
    pub fn as_text(&self) -> Cow<'_, str> {
        match &self.0 {
            Held::Digest(digest) => Cow::Owned(digest.to_hex()),
            Held::Text(text) => Cow::Borrowed(text),
        }
    }

    /// Whether it reads as `text`, without writing it out.
    fn reads_as(&self, text: &str) -> bool {
        match &self.0 {
            Held::Digest(digest) => digest.hex_digits() == text.as_bytes(),
            Held::Text(own) => **own == *text,
        }
    }
}

impl From<ArgsDigest> for DigestText {
    fn from(digest: ArgsDigest) -> Self {
        Self(Held::Digest(digest))
    }
}

impl From<&str> for DigestText {
    /// 64 lowercase hex digits are a digest; any other text is kept as it is.
    fn from(text: &str) -> Self {
        match ArgsDigest::try_from(text) {
            Ok(digest) => Self(Held::Digest(digest)),
            Err(_) => Self(Held::Text(text.into())),
        }
    }
}

impl From<String> for DigestText {
    fn from(text: String) -> Self {
        Self::from(text.as_str())
    }
}

impl fmt::Display for DigestText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Held::Digest(digest) => fmt::Display::fmt(digest, f),
            Held::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for DigestText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_text(), f)
    }
}

impl PartialEq<str> for DigestText {
    fn eq(&self, other: &str) -> bool {
        self.reads_as(other)
    }
}

impl PartialEq<&str> for DigestText {
    fn eq(&self, other: &&str) -> bool {
        self.reads_as(other)
    }
}

impl PartialEq<String> for DigestText {
    fn eq(&self, other: &String) -> bool {
        self.reads_as(other)
    }
}

impl Serialize for DigestText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Held::Digest(digest) => {
                let hex = digest.hex_digits();
                // Hex digits are ASCII: this never falls back.
                serializer.serialize_str(std::str::from_utf8(&hex).unwrap_or_default())
            }
            Held::Text(text) => serializer.serialize_str(text),
        }
    }
}

impl<'de> Deserialize<'de> for DigestText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_reads_compares_and_serialises_as_its_hex() {
        let digest = ArgsDigest::of_bytes(b"x");
        let held = DigestText::from(digest);
        let hex = digest.to_hex();
        assert_eq!(held.to_string(), hex);
        assert_eq!(held.as_text(), hex);
        assert_eq!(held, hex);
        assert_eq!(held.digest(), Some(digest));
        let json = serde_json::to_string(&held).unwrap_or_default();
        assert_eq!(json, format!("\"{hex}\""));
        let back: DigestText = serde_json::from_str(&json).unwrap_or_else(|_| "".into());
        assert_eq!(back, held);
        assert_eq!(DigestText::from(hex.as_str()), held);
    }

    #[test]
    fn other_text_is_kept_as_it_is() {
        let hex = ArgsDigest::of_bytes(b"x").to_hex();
        for text in ["", "LEGACY-NOT-HEX", &hex.to_uppercase(), &hex[1..], "é"] {
            let held = DigestText::from(text);
            assert_eq!(held.digest(), None, "{text}");
            assert_eq!(held, text);
            assert_eq!(held.to_string(), text);
            let json = serde_json::to_string(&held).unwrap_or_default();
            assert_eq!(json, serde_json::to_string(text).unwrap_or_default());
            let back: DigestText = serde_json::from_str(&json).unwrap_or_else(|_| "?".into());
            assert_eq!(back, held);
            assert_ne!(held, DigestText::from(ArgsDigest::of_bytes(b"x")));
        }
    }
}
