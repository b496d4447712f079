//! The offline assistant's phrase matching.
//!
//! Matching rules (what a person can type):
//! - case-insensitive for ASCII; a phrase matches only at ASCII word boundaries
//!   (`archive` does not match inside `unarchived`); Chinese has no word boundaries;
//! - a phrase may hold one `{slot}`: its text is what follows the words before it, up to
//!   the words after it, or (for a trailing slot) up to the next clause separator
//!   (` and `, ` then `, `,`, `;`, `，`, `、`, `；`, `。`, `然后`, `并且`) or the end;
//! - the captured text is trimmed of spaces and punctuation at both ends (quotes,
//!   brackets, full stops, in either script), and an empty capture does not match;
//! - one message may hold several phrases; they become calls in the order typed.

use serde_json::Value;

/// Where `phrase` occurs in `text` (ASCII case-insensitive, on word boundaries so
/// "publish" does not match "published") and what fills its slot.
pub(super) fn match_phrase(phrase: &str, text: &str) -> Option<(usize, Option<String>)> {
    let lower = text.to_ascii_lowercase();
    let phrase = phrase.to_ascii_lowercase();
    let slot = phrase
        .split_once('{')
        .and_then(|(before, rest)| rest.split_once('}').map(|(_, after)| (before, after)));
    match slot {
        None => find_word(&lower, &phrase).map(|at| (at, None)),
        Some((before, after)) => {
            let at = find_word(&lower, before.trim_end())?;
            let start = at + before.trim_end().len();
            let rest = text.get(start..)?;
            let rest_lower = lower.get(start..)?;
            let end = if after.trim().is_empty() {
                slot_end(rest_lower)
            } else {
                rest_lower.find(after)?
            };
            let slot = clean(rest.get(..end)?);
            (!slot.is_empty()).then_some((at, Some(slot)))
        }
    }
}

/// The first occurrence of `needle` in `haystack` not inside an ASCII word.
fn find_word(haystack: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let mut from = 0;
    while let Some(found) = haystack.get(from..).and_then(|h| h.find(needle)) {
        let at = from + found;
        let end = at + needle.len();
        let before = haystack.get(..at).and_then(|h| h.chars().next_back());
        let after = haystack.get(end..).and_then(|h| h.chars().next());
        let joins = |c: Option<char>, edge: Option<char>| {
            c.is_some_and(|c| c.is_ascii_alphanumeric())
                && edge.is_some_and(|e| e.is_ascii_alphanumeric())
        };
        if !joins(before, needle.chars().next()) && !joins(after, needle.chars().next_back()) {
            return Some(at);
        }
        from = at + needle.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// Where a trailing slot ends: at the next clause separator, or the end.
fn slot_end(rest: &str) -> usize {
    const SEPARATORS: [&str; 10] = [
        " and ", " then ", ",", "，", "、", "然后", "并且", ";", "；", "。",
    ];
    SEPARATORS
        .iter()
        .filter_map(|s| rest.find(s))
        .min()
        .unwrap_or(rest.len())
}

/// The slot's text without surrounding spaces and punctuation (`“Apollo”.` → `Apollo`).
fn clean(slot: &str) -> String {
    slot.trim_matches(|c: char| {
        c.is_whitespace()
            || c.is_ascii_punctuation()
            || "“”‘’「」『』《》（）。！？，、；：…—".contains(c)
    })
    .to_owned()
}

pub(super) fn fill(template: &Value, slot: Option<&str>) -> Value {
    match template {
        Value::String(s) => match slot {
            Some(slot) if s.contains('{') => {
                let filled = match s
                    .split_once('{')
                    .and_then(|(b, r)| r.split_once('}').map(|(_, a)| (b, a)))
                {
                    Some((before, after)) => format!("{before}{slot}{after}"),
                    None => s.clone(),
                };
                Value::String(filled)
            }
            _ => template.clone(),
        },
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, slot)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, slot)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_slot_is_trimmed_of_punctuation_in_either_script() {
        for (text, want) in [
            ("rename it to “Apollo”.", "Apollo"),
            ("rename it to 'Apollo'!", "Apollo"),
            ("rename it to (Apollo)?", "Apollo"),
            ("rename it to Apollo...", "Apollo"),
            ("rename it to Apollo, then archive", "Apollo"),
        ] {
            let got = match_phrase("rename it to {name}", text).and_then(|(_, s)| s);
            assert_eq!(got.as_deref(), Some(want), "{text}");
        }
        let got = match_phrase("重命名为{name}", "重命名为「阿波罗」。").and_then(|(_, s)| s);
        assert_eq!(got.as_deref(), Some("阿波罗"));
        assert_eq!(
            match_phrase("rename it to {name}", "rename it to “”."),
            None
        );
    }
}
