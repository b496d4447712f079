//! What "always allow this session" remembers: a pattern over the arguments the person
//! approved, supplied by the action, so a grant covers *those* calls, not every call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A pattern over a call's arguments. Fields are addressed by JSON pointer (`/path`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "match", rename_all = "snake_case")]
pub enum Matcher {
    /// Every call of the action.
    Any,
    /// The field equals this value exactly.
    Exact {
        /// The field, as a JSON pointer (e.g. `/path`).
        pointer: String,
        /// The value it must equal.
        value: Value,
    },
    /// The field is a string starting with `prefix`.
    Prefix {
        /// The field, as a JSON pointer.
        pointer: String,
        /// The prefix.
        prefix: String,
    },
    /// The field is a string matching a glob (`*` within a path segment, `**` across
    /// segments, `?` one character, `{a,b}` alternatives).
    Glob {
        /// The field, as a JSON pointer.
        pointer: String,
        /// The glob.
        pattern: String,
    },
}

impl Matcher {
    /// Whether `arguments` (the call's JSON object) match.
    pub fn matches(&self, arguments: &Value) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Exact { pointer, value } => arguments.pointer(pointer) == Some(value),
            Matcher::Prefix { pointer, prefix } => arguments
                .pointer(pointer)
                .and_then(Value::as_str)
                // A prefix never matches a path that climbs out of it.
                .is_some_and(|s| s.starts_with(prefix.as_str()) && !has_dot_segment(s)),
            Matcher::Glob { pointer, pattern } => arguments
                .pointer(pointer)
                .and_then(Value::as_str)
                .is_some_and(|s| !has_dot_segment(s) && glob_match::glob_match(pattern, s)),
        }
    }
}

/// Whether a path has a `.` or `..` segment in any form a consumer may decode it to:
/// percent-decoded (repeatedly, and IIS's `%u002e`), split at `/` or `\`, or a segment
/// of dots and spaces (`.. `). Invalid UTF-8 once decoded (overlong `%c0%ae`) counts,
/// and so does any character NFKC could fold into ASCII (fullwidth `．`, `‥`).
///
/// INVARIANT: the folder matchers refuse every such path, however the dots are spelt.
pub fn has_dot_segment(path: &str) -> bool {
    let dotted = |text: &str| {
        text.split(['/', '\\']).any(|segment| {
            !segment.is_empty()
                && segment.contains('.')
                && segment.chars().all(|c| c == '.' || c == ' ')
        })
    };
    let mut form = path.to_owned();
    // A path still changing after four rounds is taken as climbing (fail closed).
    for _ in 0..4 {
        if dotted(&form) || form.chars().any(|c| c == '\u{fffd}' || folds_to_ascii(c)) {
            return true;
        }
        let Some(unicode_escapes) = decode_percent_u(&form) else {
            return true;
        };
        let Ok(decoded) = percent_encoding::percent_decode_str(&unicode_escapes).decode_utf8()
        else {
            return true;
        };
        let next = decoded.into_owned();
        if next == form {
            return false;
        }
        form = next;
    }
    true
}

/// Whether NFKC may fold `c` into ASCII: whole blocks of compatibility characters. A
/// small table instead of NFKC's keeps the page's download small, and errs to refusing.
pub(crate) fn folds_to_ascii(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AA | 0x00B2 | 0x00B3 | 0x00B9 | 0x00BA | 0x00BC..=0x00BE
            | 0x02B0..=0x02FF
            | 0x1D2C..=0x1D6A
            | 0x2000..=0x206F
            | 0x2070..=0x209F
            | 0x2100..=0x218F
            | 0x2460..=0x24FF
            | 0x2776..=0x2793
            | 0x3000
            | 0x3200..=0x33FF
            | 0xFB00..=0xFB06
            | 0xFE10..=0xFE1F
            | 0xFE30..=0xFE6F
            | 0xFF00..=0xFFEF
            | 0x1D400..=0x1D7FF
            | 0x1F100..=0x1F1FF
    )
}

/// Decodes `%uXXXX` escapes (IIS's); `None` for a malformed one.
fn decode_percent_u(text: &str) -> Option<String> {
    if !text.contains("%u") && !text.contains("%U") {
        return Some(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['%']) {
        out.push_str(rest.get(..at)?);
        let after = rest.get(at + 1..)?;
        match after.strip_prefix(['u', 'U']) {
            Some(hex) => {
                let code = u32::from_str_radix(hex.get(..4)?, 16).ok()?;
                out.push(char::from_u32(code)?);
                rest = hex.get(4..)?;
            }
            None => {
                out.push('%');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// The rule a grant remembers, with the words the card shows for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrantRule {
    /// What the grant covers, in the action's words ("writing files under `drafts/`").
    /// `None` for the default rule (every call), which the dock words itself.
    pub description: Option<String>,
    /// The pattern later calls must match to skip the card.
    pub matcher: Matcher,
}

impl GrantRule {
    /// A rule covering every call of the action, described as `description`.
    pub fn any(description: impl Into<String>) -> Self {
        Self {
            description: Some(description.into()),
            matcher: Matcher::Any,
        }
    }

    /// The default rule: every call of the action, with no words of its own.
    pub fn every_call() -> Self {
        Self {
            description: None,
            matcher: Matcher::Any,
        }
    }

    /// A rule covering calls whose `pointer` field equals `value`.
    pub fn exact(
        description: impl Into<String>,
        pointer: impl Into<String>,
        value: impl Into<Value>,
    ) -> Self {
        Self {
            description: Some(description.into()),
            matcher: Matcher::Exact {
                pointer: pointer.into(),
                value: value.into(),
            },
        }
    }

    /// A rule covering calls whose `pointer` field starts with `prefix`.
    pub fn prefix(
        description: impl Into<String>,
        pointer: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        Self {
            description: Some(description.into()),
            matcher: Matcher::Prefix {
                pointer: pointer.into(),
                prefix: prefix.into(),
            },
        }
    }
}
