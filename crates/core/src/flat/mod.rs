//! Flat arguments: a JSON object of at most [`MAX_FLAT_FIELDS`] fields whose values are
//! all strings, booleans or null, read from the model's text without building a
//! `serde_json::Value`. Most calls' arguments look like this, and for them the validate
//! stage reads the typed params, checks the schema and hashes the canonical arguments
//! from these fields; the value is parsed from the same text only when a later stage
//! asks for it (a card, a grant's rule, a rewrite, an edit).
//!
//! Anything else does not read as flat, and the validate stage parses a value as it
//! always did: a number (a `u128` read from the text would be exact where the value
//! rounds it through `f64`, and the card and `run` would disagree), an array, an object,
//! a repeated key (the value keeps the last, serde a duplicate error), more fields, a
//! key of serde_json's own (see [`is_serde_json_token`]), or text that is not a JSON
//! object. The fields are sorted by key, the order of the value's map in serde_json's
//! default build (with its `preserve_order` feature the value keeps the text's order;
//! the params a derived `Deserialize` reads do not depend on it, and no key repeats).
//!
//! [`FlatArgs`] is a serde `Deserializer` that answers as `&serde_json::Value` does for
//! the same object, method by method; where that would take work it does not mirror (a
//! number key, a raw value), it fails, and the validate stage reads the value instead.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::Value;

mod deserializer;
#[cfg(test)]
mod tests;

/// The most fields flat arguments have; more are read as a value.
pub(crate) const MAX_FLAT_FIELDS: usize = 8;

/// One field's value in flat arguments.
#[derive(Debug)]
pub(crate) enum Scalar<'a> {
    /// A string, unescaped (borrowed from the text when it had no escapes).
    Str(Cow<'a, str>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl Scalar<'_> {
    /// This scalar as a JSON value.
    fn to_value(&self) -> Value {
        match self {
            Scalar::Str(text) => Value::String(text.clone().into_owned()),
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Null => Value::Null,
        }
    }

    /// Whether `value` is this scalar.
    pub(crate) fn is(&self, value: &Value) -> bool {
        match (self, value) {
            (Scalar::Str(s), Value::String(v)) => **s == **v,
            (Scalar::Bool(b), Value::Bool(v)) => b == v,
            (Scalar::Null, Value::Null) => true,
            _ => false,
        }
    }
}

/// A flat JSON object's fields, sorted by key, each key once.
pub(crate) struct FlatArgs<'a> {
    fields: [(Cow<'a, str>, Scalar<'a>); MAX_FLAT_FIELDS],
    len: usize,
}

impl<'a> FlatArgs<'a> {
    /// No fields yet: room for [`FlatArgs::read`] to fill.
    pub(crate) fn new() -> Self {
        Self {
            fields: [const { (Cow::Borrowed(""), Scalar::Null) }; MAX_FLAT_FIELDS],
            len: 0,
        }
    }

    /// Reads `raw` as a flat object into these (empty) fields: false if it is anything
    /// else (see the module), and then the fields are not to be read. Filled in place,
    /// not returned: they are a few hundred bytes, and copies of them cost more than the
    /// read.
    pub(crate) fn read(&mut self, raw: &'a str) -> bool {
        let mut de = serde_json::Deserializer::from_str(raw);
        if de::Deserializer::deserialize_map(&mut de, Reader(self)).is_err() || de.end().is_err() {
            return false;
        }
        let Some(fields) = self.fields.get_mut(..self.len) else {
            return false;
        };
        fields.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        !fields.windows(2).any(|w| matches!(w, [a, b] if a.0 == b.0))
    }

    /// The fields, sorted by key.
    pub(crate) fn fields(&self) -> &[(Cow<'a, str>, Scalar<'a>)] {
        self.fields.get(..self.len).unwrap_or_default()
    }

    /// The object as a JSON value (the value serde_json parses the same text to: a test
    /// holds the two together).
    pub(crate) fn to_value(&self) -> Value {
        let mut map = serde_json::Map::new();
        for (key, scalar) in self.fields() {
            map.insert(key.clone().into_owned(), scalar.to_value());
        }
        Value::Object(map)
    }

    /// The value of `key`, if the object has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Scalar<'a>> {
        let fields = self.fields();
        let at = fields.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        fields.get(at).map(|(_, v)| v)
    }
}

/// Reads the object's fields from serde_json into the fields it holds, stopping at the
/// first that is not flat.
struct Reader<'b, 'de>(&'b mut FlatArgs<'de>);

impl<'de> Visitor<'de> for Reader<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a flat JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let flat = self.0;
        while let Some(key) = map.next_key_seed(Text)? {
            if is_serde_json_token(&key) {
                return Err(de::Error::custom("a key of serde_json's own"));
            }
            let value = map.next_value_seed(ScalarSeed)?;
            let slot = flat
                .fields
                .get_mut(flat.len)
                .ok_or_else(|| de::Error::custom("too many fields"))?;
            *slot = (key, value);
            flat.len += 1;
        }
        Ok(())
    }
}

/// Whether a key is one serde_json gives a meaning of its own when it parses a value
/// (with its `raw_value` feature, an object whose first key is
/// `$serde_json::private::RawValue` parses to the value its string holds; with
/// `arbitrary_precision`, `$serde_json::private::Number` to a number). Another crate in
/// the build may switch either on, so such text is never read as flat: its fields would
/// say one thing and the value, which the card, grants and `run` read, another.
fn is_serde_json_token(key: &str) -> bool {
    key.starts_with("$serde_json::")
}

/// A string, borrowed from the text when it has no escapes.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s))
    }
}

/// A string, a boolean or null; anything else fails the read.
struct ScalarSeed;

impl<'de> DeserializeSeed<'de> for ScalarSeed {
    type Value = Scalar<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, a boolean or null")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(s)))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(b))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
}
