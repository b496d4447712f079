//! Canonical JSON (RFC 8785), so a backend in any language computes the same digest. But an
//! integer beyond ±2^53 keeps its digits: `9007199254740993` never matches `9007199254740992`.

mod number;
mod read;

use std::io;

use serde_json::Value;

pub(crate) use read::{read, Unread};

/// The canonical text of a value, whose SHA-256 is its [`ArgsDigest`](crate::audit::ArgsDigest).
pub fn canonical_json(value: &Value) -> String {
    let mut text = Vec::new();
    write(value, &mut text);
    // The writer writes only whole UTF-8 characters.
    String::from_utf8(text).unwrap_or_default()
}

/// Writes the canonical text to `out`: a hasher or a buffer, which never refuse a write.
pub(crate) fn write<W: io::Write>(value: &Value, out: &mut W) {
    match value {
        Value::Object(map) => {
            // Sorted here, whatever order serde_json's map keeps (any crate's feature changes it).
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            let _ = out.write_all(b"{");
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *out, key);
                let _ = out.write_all(b":");
                write(item, out);
            }
            let _ = out.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = out.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                write(item, out);
            }
            let _ = out.write_all(b"]");
        }
        Value::Number(number) if number.is_f64() => {
            number::Decimal::of_f64(number.as_f64().unwrap_or_default()).write(out);
        }
        // An integer as its digits (within ±2^53, as ECMAScript writes its double too).
        Value::Number(integer) => {
            let _ = serde_json::to_writer(out, integer);
        }
        // serde_json escapes strings exactly as RFC 8785 does.
        Value::String(text) => {
            let _ = serde_json::to_writer(out, text);
        }
        Value::Bool(b) => {
            let _ = out.write_all(if *b { b"true" } else { b"false" });
        }
        Value::Null => {
            let _ = out.write_all(b"null");
        }
    }
}
