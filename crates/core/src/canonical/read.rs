//! Reading arguments so each number is what its canonical text says (what is digested runs):
//! an integer within ±(2^53 − 1), never `-0`, never `0.10000000000000001` (run as `0.1`).

use serde_json::{Number, Value};

use super::number::Decimal;
use crate::codes::quote;

/// The largest integer every JSON reader holds exactly: 2^53 − 1.
const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

#[derive(Debug)]
pub(crate) enum Unread {
    /// It is not JSON.
    NotJson(serde_json::Error),
    /// A number in it is not exactly what its canonical text says.
    Inexact(String),
}

/// Reads raw JSON, each number checked against its own text and corrected if misread ([`exact`]).
pub(crate) fn read(raw: &str) -> Result<Value, Unread> {
    let mut value: Value = serde_json::from_str(raw).map_err(Unread::NotJson)?;
    // Each double as serde_json read it, and as its text says exactly.
    let mut doubles: Vec<(u64, u64)> = Vec::new();
    let mut rest = raw;
    while let Some(text) = next_number(&mut rest) {
        let read = match serde_json::from_str::<Value>(text) {
            Ok(Value::Number(read)) => read,
            _ => {
                return Err(Unread::Inexact(format!(
                    "{} is not a number",
                    quote(text, 40)
                )))
            }
        };
        let exact = exact(text, &read).map_err(Unread::Inexact)?;
        if let (true, Some(read), Some(exact)) = (read.is_f64(), read.as_f64(), exact.as_f64()) {
            doubles.push((read.to_bits(), exact.to_bits()));
        }
    }
    let misread: Vec<(u64, u64)> = doubles.iter().copied().filter(|(r, e)| r != e).collect();
    for (read, exact) in &misread {
        // Two numbers serde_json read alike, one of them exact: which is which is lost.
        if doubles.iter().any(|(r, e)| r == read && e != exact) {
            return Err(Unread::Inexact(
                "two numbers read as one double; send them as strings".to_owned(),
            ));
        }
    }
    if !misread.is_empty() {
        correct(&mut value, &misread);
    }
    Ok(value)
}

/// The next number's text in `rest`, past strings (a key is a string).
fn next_number<'t>(rest: &mut &'t str) -> Option<&'t str> {
    let bytes = rest.as_bytes();
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
                let text = rest.get(i..i + len)?;
                *rest = rest.get(i + len..)?;
                return Some(text);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Puts the exact double in place of each misread one.
fn correct(value: &mut Value, misread: &[(u64, u64)]) {
    match value {
        Value::Number(number) => {
            let bits = number
                .as_f64()
                .filter(|_| number.is_f64())
                .map(f64::to_bits);
            if let Some((_, exact)) = misread.iter().find(|(read, _)| Some(*read) == bits) {
                if let Some(exact) = Number::from_f64(f64::from_bits(*exact)) {
                    *number = exact;
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| correct(item, misread)),
        Value::Object(map) => map.values_mut().for_each(|item| correct(item, misread)),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// The number `text` names, when it is exactly what its canonical text says; `read` is
/// serde_json's reading of it, which may be a neighbour of that number.
fn exact(text: &str, read: &Number) -> Result<Number, String> {
    let negative = text.starts_with('-');
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        if negative && read.as_f64() == Some(0.0) {
            return Err(negative_zero(text));
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
    // std's reading is exact (and in the page already); serde_json's can be an ulp or two off
    // for long or far-exponent numbers (its exact `float_roundtrip` costs ~11 KB of gzip).
    let double = text.parse::<f64>().unwrap_or_default();
    let Some(wanted) = Decimal::parse(text) else {
        return Err(inexact(text, double));
    };
    if wanted.is_zero() {
        return if negative {
            Err(negative_zero(text))
        } else {
            Ok(read.clone())
        };
    }
    match Number::from_f64(double) {
        Some(exact) if Decimal::of_f64(double) == wanted => Ok(exact),
        _ => Err(inexact(text, double)),
    }
}

fn negative_zero(text: &str) -> String {
    format!(
        "the number {} is negative zero, which the canonical form writes as 0; send 0",
        quote(text, 40)
    )
}

fn inexact(text: &str, double: f64) -> String {
    let mut runs = Vec::new();
    Decimal::of_f64(double).write(&mut runs);
    let runs = String::from_utf8(runs).unwrap_or_default();
    format!(
        "the number {} is not exactly what would run ({runs}); send {runs}, or the number \
         as a string",
        quote(text, 40)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json may misread a far-exponent number by an ulp or two; the exact double wins.
    #[test]
    fn a_misread_double_is_corrected_from_its_text() {
        let text = "1.0715660391465826e-75";
        let exact: f64 = text.parse().unwrap_or_default();
        for step in [-2_i64, -1, 0, 1, 2] {
            let near = f64::from_bits(exact.to_bits().wrapping_add_signed(step));
            let read = Number::from_f64(near).unwrap_or_else(|| Number::from(0));
            let got = super::exact(text, &read).ok().and_then(|n| n.as_f64());
            assert_eq!(got.map(f64::to_bits), Some(exact.to_bits()), "{step}");
        }
    }
}
