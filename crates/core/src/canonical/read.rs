//! Reading arguments so that each number is exactly what its canonical text says: what
//! is digested is what runs.
//!
//! A number is read only when its text names exactly one double, as the canonical form
//! writes it:
//! - written as an integer (no fraction, no exponent), it lies within ±(2^53 − 1),
//!   where a double holds every integer and every JCS library agrees;
//! - otherwise its exact decimal value is that of the canonical form of the double
//!   nearest to it: `0.1`, `1.50`, `1e21` and `0.00001` are read; `0.10000000000000001`
//!   (which would run as `0.1`) and `1e-400` (which would run as `0`) are not;
//! - it is not negative zero (`-0`, `-0.0`), which the canonical form writes as `0`.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::number::Decimal;
use crate::codes::quote;

/// The largest integer every JSON reader holds exactly: 2^53 − 1.
const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// Why raw text was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    /// It is not JSON.
    NotJson(serde_json::Error),
    /// A number in it is not exactly what its canonical text says.
    Inexact(String),
}

/// Reads raw JSON text into a value, each number checked against its own text.
pub(crate) fn read(raw: &str) -> Result<Value, Unread> {
    let mut numbers = Numbers {
        rest: raw,
        refusal: None,
    };
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let read = Exact(&mut numbers)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (read, numbers.refusal) {
        (_, Some(refusal)) => Err(Unread::Inexact(refusal)),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(Unread::NotJson(e)),
    }
}

/// The number texts of a JSON text, in order, and the first refusal.
struct Numbers<'t> {
    rest: &'t str,
    refusal: Option<String>,
}

impl<'t> Numbers<'t> {
    /// The next number's text, past strings (a key is a string).
    fn next_text(&mut self) -> Option<&'t str> {
        let bytes = self.rest.as_bytes();
        let mut i = 0;
        let mut in_string = false;
        while let Some(&byte) = bytes.get(i) {
            match byte {
                b'\\' if in_string => i += 1,
                b'"' => in_string = !in_string,
                b'-' | b'0'..=b'9' if !in_string => {
                    let len = bytes
                        .get(i..)?
                        .iter()
                        .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                        .count();
                    let text = self.rest.get(i..i + len)?;
                    self.rest = self.rest.get(i + len..)?;
                    return Some(text);
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// The number serde_json read, checked against its text; the refusal is kept.
    fn check<E: de::Error>(&mut self, read: Number) -> Result<Value, E> {
        let checked = match self.next_text() {
            Some(text) => exact(text, &read),
            None => Err("a number could not be found in the text".to_owned()),
        };
        checked.map(Value::Number).map_err(|refusal| {
            self.refusal = Some(refusal);
            E::custom("an inexact number")
        })
    }
}

/// The number `text` names, when it is exactly what its canonical text says; `read` is
/// serde_json's reading of it.
fn exact(text: &str, read: &Number) -> Result<Number, String> {
    let negative_zero = || {
        format!(
            "the number {} is negative zero, which the canonical form writes as 0; send 0",
            quote(text, 40)
        )
    };
    if !text.contains(['.', 'e', 'E']) {
        if text.starts_with('-') && read.as_f64() == Some(0.0) {
            return Err(negative_zero());
        }
        let magnitude = read.as_i64().map(i64::unsigned_abs).or(read.as_u64());
        return match magnitude {
            Some(m) if m <= MAX_EXACT_INTEGER => Ok(read.clone()),
            _ => Err(format!(
                "the integer {} is beyond ±{MAX_EXACT_INTEGER} (2^53 - 1), past which a double \
                 cannot hold every integer; send it as a string",
                quote(text, 40)
            )),
        };
    }
    let near = read.as_f64().unwrap_or_default();
    let inexact = || {
        let mut runs = Vec::new();
        let _ = Decimal::of_f64(near).write(&mut runs);
        let runs = String::from_utf8_lossy(&runs).into_owned();
        format!(
            "the number {} is not exactly what would run ({runs}); send {runs}, or the \
             number as a string",
            quote(text, 40)
        )
    };
    let wanted = Decimal::parse(text).ok_or_else(inexact)?;
    if wanted.is_zero() {
        return if text.starts_with('-') {
            Err(negative_zero())
        } else {
            Ok(read.clone())
        };
    }
    nearest(near, &wanted)
        .and_then(Number::from_f64)
        .ok_or_else(inexact)
}

/// The double whose canonical form is `wanted`, near serde_json's reading `near`.
///
/// serde_json's default reading of a long or far-exponent number can be a unit or two in
/// the last place off the nearest double (its exact reading, `float_roundtrip`, costs
/// the page 11 KB). A number that is some double's canonical form is that double, and
/// no other: it is found among the neighbours, or the number is refused.
fn nearest(near: f64, wanted: &Decimal) -> Option<f64> {
    let bits = near.to_bits();
    [0, 1, -1, 2, -2, 3, -3]
        .into_iter()
        .filter_map(|step: i64| bits.checked_add_signed(step))
        .map(f64::from_bits)
        .find(|candidate| candidate.is_finite() && Decimal::of_f64(*candidate) == *wanted)
}

/// A JSON value read with every number checked against its text.
struct Exact<'n, 't>(&'n mut Numbers<'t>);

impl<'de> DeserializeSeed<'de> for Exact<'_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Exact<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        self.0.check(value.into())
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        self.0.check(value.into())
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        match Number::from_f64(value) {
            Some(number) => self.0.check(number),
            // serde_json reads only finite numbers.
            None => Err(E::custom("a number that is not finite")),
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Exact(&mut *self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // A repeated key keeps its last value, as serde_json's own reading does.
            let value = map.next_value_seed(Exact(&mut *self.0))?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}
