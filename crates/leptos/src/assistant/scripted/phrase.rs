//! The offline assistant's phrase matching.
//!
//! Matching rules (what a person can type):
//! - case-insensitive for ASCII; a phrase matches only at ASCII word boundaries
//!   (`archive` does not match inside `unarchived`); Chinese has no word boundaries;
//! - a phrase may hold several `{slot}`s, each between words: a slot's text is what
//!   follows the words before it, up to the words after it, or (for a trailing slot) up
//!   to the next clause separator (` and `, ` then `, `,`, `;`, `，`, `、`, `；`, `。`,
//!   `然后`, `并且`, a line break) or the end (`rename {from} to {to}`);
//! - each captured text is trimmed of spaces and punctuation at both ends (quotes,
//!   brackets, full stops, in either script), and an empty capture does not match;
//! - one message may hold several phrases; they become calls in the order typed.
//!
//! A phrase that could never match (it starts with a slot, or two slots have no words
//! between them) is refused when the assistant is made ([`parse`]).

use serde_json::Value;

/// A phrase split at its slots: `words` has one more entry than `slots`.
pub(super) struct Pattern {
    words: Vec<String>,
    pub(super) slots: Vec<String>,
}

/// Splits `phrase` at its `{slot}`s, refusing what could never match.
pub(super) fn parse(phrase: &str) -> Result<Pattern, String> {
    let mut words = Vec::new();
    let mut slots = Vec::new();
    let mut rest = phrase;
    while let Some((before, after)) = rest.split_once('{') {
        let (name, tail) = after
            .split_once('}')
            .ok_or_else(|| format!("the phrase `{phrase}` has a `{{` with no `}}`"))?;
        if name.trim().is_empty() || name.contains('{') {
            return Err(format!("the phrase `{phrase}` has a slot with no name"));
        }
        if before.trim().is_empty() {
            return Err(if words.is_empty() {
                format!("the phrase `{phrase}` starts with a slot: it needs words before it")
            } else {
                format!("the phrase `{phrase}` has two slots with no words between them")
            });
        }
        words.push(before.to_ascii_lowercase());
        slots.push(name.trim().to_owned());
        rest = tail;
    }
    if rest.contains('}') {
        return Err(format!("the phrase `{phrase}` has a `}}` with no `{{`"));
    }
    words.push(rest.to_ascii_lowercase());
    if slots.is_empty() && rest.trim().is_empty() {
        return Err("a phrase needs words".to_owned());
    }
    Ok(Pattern { words, slots })
}

/// Where `phrase` occurs in `text` (ASCII case-insensitive, on word boundaries so
/// "publish" does not match "published") and what fills each of its slots.
pub(super) fn match_phrase(phrase: &str, text: &str) -> Option<(usize, Vec<(String, String)>)> {
    let pattern = parse(phrase).ok()?;
    let lower = text.to_ascii_lowercase();
    let (first, between) = pattern.words.split_first()?;
    if pattern.slots.is_empty() {
        return find_word(&lower, first).map(|at| (at, Vec::new()));
    }
    let at = find_word(&lower, first.trim_end())?;
    let mut start = at + first.trim_end().len();
    let mut filled = Vec::new();
    for (name, after) in pattern.slots.iter().zip(between) {
        let rest_lower = lower.get(start..)?;
        let end = if after.trim().is_empty() {
            slot_end(rest_lower)
        } else {
            rest_lower.find(after.as_str())?
        };
        let value = clean(text.get(start..start + end)?);
        if value.is_empty() {
            return None;
        }
        filled.push((name.clone(), value));
        start += end + after.len();
    }
    Some((at, filled))
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
    const SEPARATORS: [&str; 11] = [
        " and ", " then ", ",", "，", "、", "然后", "并且", ";", "；", "。", "\n",
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

/// The `{slot}`s a template's strings name.
pub(super) fn named(template: &Value, out: &mut Vec<String>) {
    match template {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some((_, after)) = rest.split_once('{') {
                let Some((name, tail)) = after.split_once('}') else {
                    break;
                };
                out.push(name.trim().to_owned());
                rest = tail;
            }
        }
        Value::Object(map) => map.values().for_each(|v| named(v, out)),
        Value::Array(items) => items.iter().for_each(|v| named(v, out)),
        _ => {}
    }
}

/// The template with each `{slot}` replaced by the text the person typed there.
pub(super) fn fill(template: &Value, filled: &[(String, String)]) -> Value {
    match template {
        Value::String(s) => {
            let mut text = s.clone();
            for (name, value) in filled {
                text = text.replace(&format!("{{{name}}}"), value);
            }
            Value::String(text)
        }
        // Inserted one by one: `collect` into a map brings a sort routine into the page.
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                out.insert(key.clone(), fill(value, filled));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, filled)).collect()),
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
            let got = match_phrase("rename it to {name}", text).map(|(_, s)| s);
            assert_eq!(
                got,
                Some(vec![("name".to_owned(), want.to_owned())]),
                "{text}"
            );
        }
        let got = match_phrase("重命名为{name}", "重命名为「阿波罗」。").map(|(_, s)| s);
        assert_eq!(got, Some(vec![("name".to_owned(), "阿波罗".to_owned())]));
        assert_eq!(
            match_phrase("rename it to {name}", "rename it to “”."),
            None
        );
    }

    #[test]
    fn a_phrase_with_two_slots_fills_both() {
        let got = match_phrase("rename {from} to {to}", "please rename Atlas to “Apollo”.");
        let want = vec![
            ("from".to_owned(), "Atlas".to_owned()),
            ("to".to_owned(), "Apollo".to_owned()),
        ];
        assert_eq!(got, Some((7, want)));
        let got = match_phrase("把{from}改名为{to}", "把 Atlas 改名为阿波罗。").map(|(_, s)| s);
        assert_eq!(
            got,
            Some(vec![
                ("from".to_owned(), "Atlas".to_owned()),
                ("to".to_owned(), "阿波罗".to_owned())
            ])
        );
        assert_eq!(match_phrase("rename {from} to {to}", "rename Atlas"), None);
    }

    #[test]
    fn a_phrase_that_could_never_match_is_refused() {
        for bad in [
            "{name} please",
            "rename {a}{b}",
            "rename {a} {b}",
            "rename {",
            "rename }",
            "rename {}",
            "  ",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("rename {from} to {to}").is_ok());
    }
}
