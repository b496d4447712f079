//! An audit record's id: `{session}-{seq}` for the records a gate writes, kept as its two
//! parts and written as text only when read; any other text for records from elsewhere
//! (the gateway's countersignature records, or a trail read back).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An audit record's id: unique and stable, and the key stores deduplicate by.
///
/// It reads, compares and serialises as text (`{session}-{seq}` for the gate's own
/// records), whichever way it was made: an id read back from JSON equals the one the
/// gate made. The gate keeps the parts and writes no text, so a call through the gate
/// does not pay for two strings nobody may ever read.
#[derive(Clone)]
pub struct RecordId(Parts);

#[derive(Clone)]
enum Parts {
    /// `{session}-{seq}`.
    Seq { session: Arc<str>, seq: u64 },
    /// Any other id, as it is.
    Text(Box<str>),
}

impl RecordId {
    /// The id `{session}-{seq}`, written when it is read.
    pub fn of_seq(session: Arc<str>, seq: u64) -> Self {
        Self(Parts::Seq { session, seq })
    }

    /// The id as text: borrowed when it is held as text, written out otherwise.
    pub fn as_text(&self) -> Cow<'_, str> {
        match &self.0 {
            Parts::Text(text) => Cow::Borrowed(text),
            Parts::Seq { .. } => Cow::Owned(self.to_string()),
        }
    }

    /// Whether the id reads as `text`, without writing it out.
    fn reads_as(&self, text: &str) -> bool {
        match &self.0 {
            Parts::Text(own) => **own == *text,
            Parts::Seq { session, seq } => text
                .strip_prefix(&**session)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|digits| digits == Decimal::of(*seq).as_str()),
        }
    }
}

/// A `u64` in decimal, on the stack.
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn of(mut value: u64) -> Self {
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            if let Some(slot) = digits.get_mut(start) {
                *slot = b'0' + (value % 10) as u8;
            }
            value /= 10;
            if value == 0 {
                break;
            }
        }
        Self { digits, start }
    }

    fn as_str(&self) -> &str {
        // Decimal digits are ASCII: this never falls back.
        std::str::from_utf8(self.digits.get(self.start..).unwrap_or_default()).unwrap_or_default()
    }
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Parts::Text(text) => f.write_str(text),
            Parts::Seq { session, seq } => {
                f.write_str(session)?;
                f.write_str("-")?;
                f.write_str(Decimal::of(*seq).as_str())
            }
        }
    }
}

impl fmt::Debug for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_text(), f)
    }
}

impl PartialEq for RecordId {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Parts::Seq { session, seq }, Parts::Seq { session: s, seq: q }) => {
                seq == q && session == s
            }
            (_, Parts::Text(text)) => self.reads_as(text),
            (Parts::Text(text), _) => other.reads_as(text),
        }
    }
}

impl Eq for RecordId {}

impl std::hash::Hash for RecordId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As the text, so ids equal as text hash alike however they were made.
        self.as_text().hash(state);
    }
}

impl PartialEq<str> for RecordId {
    fn eq(&self, other: &str) -> bool {
        self.reads_as(other)
    }
}

impl PartialEq<&str> for RecordId {
    fn eq(&self, other: &&str) -> bool {
        self.reads_as(other)
    }
}

impl PartialEq<String> for RecordId {
    fn eq(&self, other: &String) -> bool {
        self.reads_as(other)
    }
}

impl From<String> for RecordId {
    fn from(text: String) -> Self {
        Self(Parts::Text(text.into_boxed_str()))
    }
}

impl From<&str> for RecordId {
    fn from(text: &str) -> Self {
        Self(Parts::Text(text.into()))
    }
}

impl From<RecordId> for String {
    fn from(id: RecordId) -> Self {
        match id.0 {
            Parts::Text(text) => text.into_string(),
            Parts::Seq { .. } => id.to_string(),
        }
    }
}

impl Serialize for RecordId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Parts::Text(text) => serializer.serialize_str(text),
            Parts::Seq { .. } => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for RecordId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_of_parts_reads_compares_and_serialises_as_its_text() {
        for (session, seq) in [("s-1", 0), ("s-1", 7), ("a\"b", 12_345), ("", u64::MAX)] {
            let id = RecordId::of_seq(session.into(), seq);
            let text = format!("{session}-{seq}");
            assert_eq!(id.to_string(), text);
            assert_eq!(id.as_text(), text);
            assert_eq!(id, text);
            assert_eq!(id, RecordId::from(text.clone()));
            assert_eq!(RecordId::from(text.clone()), id);
            let json = serde_json::to_string(&id).unwrap_or_default();
            assert_eq!(json, serde_json::to_string(&text).unwrap_or_default());
            let back: RecordId = serde_json::from_str(&json).unwrap_or_else(|_| "".into());
            assert_eq!(back, id);
            assert_eq!(String::from(id), text);
        }
    }

    #[test]
    fn ids_of_other_parts_or_other_text_differ() {
        let id = RecordId::of_seq("s".into(), 12);
        for other in ["s-1", "s-012", "s-12 ", "s12", "-12", "s-", "t-12", "s-123"] {
            assert_ne!(id, other, "{other}");
            assert_ne!(id, RecordId::from(other), "{other}");
        }
        assert_ne!(id, RecordId::of_seq("s".into(), 13));
        assert_ne!(id, RecordId::of_seq("s-1".into(), 2));
        // The last `-` splits a gate's id: different parts never read alike.
        assert_ne!(
            RecordId::of_seq("a-1".into(), 2),
            RecordId::of_seq("a".into(), 12)
        );
    }
}
