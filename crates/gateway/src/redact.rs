//! Removing the provider key from anything sent back to the page, at the level a client
//! decodes it.
//!
//! Replacing the key's raw bytes is not enough: an upstream answer may spell the key
//! with JSON escapes (`\u0073k-…`), put it inside a tool call's arguments (JSON inside a
//! JSON string), or split it across two stream deltas (`"earer s"`, `"k-harne"`) so it is
//! never contiguous in the bytes. So answers are parsed, the key is redacted in every
//! decoded string (and inside strings that are JSON themselves), and re-serialised;
//! streams are parsed event by event, holding back the decoded text that could still
//! be the start of the key. Where the key is found and cannot be cut cleanly, the
//! answer is refused as `upstream_malformed`.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};

const MARK: &str = "[redacted]";

/// The key was found where it cannot be cut cleanly: refuse the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the upstream's answer holds the provider key in a form that cannot be redacted")]
pub struct Leak;

/// Redacts `secret` in every decoded string of `value`: string values, object keys, and
/// the strings inside string values that are JSON themselves. `Ok(true)` if anything
/// changed; [`Leak`] if a string still decodes to the key through escapes that are not
/// JSON (broken arguments a lenient client would still decode).
pub fn redact_value(value: &mut Value, secret: &str) -> Result<bool, Leak> {
    if secret.is_empty() {
        return Ok(false);
    }
    match value {
        Value::String(text) => redact_string(text, secret),
        Value::Array(items) => {
            let mut changed = false;
            for item in items {
                changed |= redact_value(item, secret)?;
            }
            Ok(changed)
        }
        Value::Object(map) => {
            let mut changed = false;
            let entries = std::mem::take(map);
            for (mut key, mut item) in entries {
                changed |= redact_value(&mut item, secret)?;
                changed |= redact_string(&mut key, secret)?;
                map.insert(key, item);
            }
            Ok(changed)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(false),
    }
}

fn redact_string(text: &mut String, secret: &str) -> Result<bool, Leak> {
    let mut changed = false;
    if text.contains(secret) {
        *text = text.replace(secret, MARK);
        changed = true;
    }
    // A string that is JSON itself (a tool call's arguments) is decoded again by the
    // client: redact at that level too.
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') || trimmed.starts_with('"') {
        if let Ok(mut inner) = serde_json::from_str::<Value>(text) {
            if redact_value(&mut inner, secret)? {
                *text = inner.to_string();
                changed = true;
            }
        }
    }
    if text.contains('\\') && lenient_unescape(text).contains(secret) {
        return Err(Leak);
    }
    Ok(changed)
}

/// Decodes JSON string escapes leniently, for text that is not valid JSON but that a
/// lenient client might still decode (`\u0073k-…` in broken arguments).
pub(crate) fn lenient_unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let Ok(unit) = u32::from_str_radix(&hex, 16) else {
                    out.push_str("\\u");
                    out.push_str(&hex);
                    continue;
                };
                if (0xD800..0xDC00).contains(&unit) {
                    pending_high = Some(unit);
                    continue;
                }
                let code = match pending_high.take() {
                    Some(high) if (0xDC00..0xE000).contains(&unit) => {
                        0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                    }
                    _ => unit,
                };
                out.extend(char::from_u32(code));
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Redacts a tool call's whole arguments text: parsed and redacted when it is JSON;
/// refused when it is not JSON but decodes to the key anyway.
fn redact_arguments(text: &str, secret: &str) -> Result<String, Leak> {
    let mut value = Value::String(text.to_owned());
    redact_value(&mut value, secret)?;
    let redacted = match value {
        Value::String(s) => s,
        _ => text.to_owned(),
    };
    if serde_json::from_str::<Value>(&redacted).is_err()
        && lenient_unescape(&redacted).contains(secret)
    {
        return Err(Leak);
    }
    Ok(redacted)
}

/// Redacts one whole (non-streamed) answer. JSON is parsed, stripped of `logprobs`
/// (token fragments a client could join), redacted at every decoded level, checked once
/// more with each choice's text joined (content parts), and always re-serialised: what
/// reaches the page is exactly what was checked (a duplicate key, which a first-wins
/// parser would read differently, does not survive). Anything else is refused.
pub fn redact_answer(secret: &str, body: &[u8]) -> Result<Bytes, Leak> {
    if secret.is_empty() {
        return Ok(Bytes::copy_from_slice(body));
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| Leak)?;
    redact_parsed(secret, value)
}

/// [`redact_answer`] for an answer already parsed (the proxy parses it once, to check
/// it, and redacts that same value).
pub fn redact_parsed(secret: &str, mut value: Value) -> Result<Bytes, Leak> {
    drop_logprobs(&mut value);
    redact_value(&mut value, secret)?;
    if joined_leak(&value, secret) {
        return Err(Leak);
    }
    Ok(Bytes::from(value.to_string()))
}

/// Whether a list's parts, joined as a client joins them, spell the key: its strings in
/// order, or one field's strings across its objects (content parts' `text`). One pass
/// over each list (every field's strings joined together as they come), so the scan is
/// linear in the answer's size whatever the objects' keys.
fn joined_leak(value: &Value, secret: &str) -> bool {
    match value {
        Value::Array(items) => {
            let mut strings = String::new();
            // Content parts as clients join them: a string as itself, an object by its
            // `text` (mixed lists included).
            let mut parts = String::new();
            let mut fields: BTreeMap<&str, String> = BTreeMap::new();
            for item in items {
                match item {
                    Value::String(text) => {
                        strings.push_str(text);
                        parts.push_str(text);
                    }
                    Value::Object(map) => {
                        for (key, field) in map {
                            if let Value::String(text) = field {
                                fields.entry(key.as_str()).or_default().push_str(text);
                                if key == "text" {
                                    parts.push_str(text);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            if strings.contains(secret)
                || parts.contains(secret)
                || fields.values().any(|joined| joined.contains(secret))
            {
                return true;
            }
            items.iter().any(|item| joined_leak(item, secret))
        }
        Value::Object(map) => map.values().any(|item| joined_leak(item, secret)),
        _ => false,
    }
}

/// Removes `logprobs` from every choice: each token is a fragment a client may join, and
/// the page has no use for them.
fn drop_logprobs(value: &mut Value) {
    if let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices {
            if let Some(object) = choice.as_object_mut() {
                object.remove("logprobs");
            }
        }
    }
}

fn join_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => out.push_str(text),
        Value::Array(items) => items.iter().for_each(|item| join_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| join_strings(item, out)),
        _ => {}
    }
}

/// The longest end of `text` that is a proper start of `secret`.
fn prefix_tail_len(text: &str, secret: &str) -> usize {
    for (i, _) in text.char_indices() {
        let tail = text.get(i..).unwrap_or_default();
        if tail.len() < secret.len() && secret.starts_with(tail) {
            return tail.len();
        }
    }
    0
}

/// A step into a delta: an object key, or the element of a list with this `index`
/// (tool calls) or at this position.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Key(String),
    At(u64),
}

/// Where a streamed string sits: the choice and the path inside its delta.
type Place = (u64, Vec<Seg>);

/// The most decoded text held back at once (tool call arguments are held whole).
const MAX_HELD_BYTES: usize = 1024 * 1024;

/// The longest tool call id or name a stream may build.
const MAX_NAME_BYTES: usize = 4096;

/// The most places (choice × path) holding text at once.
const MAX_PLACES: usize = 256;

/// The `index` of a choice or a tool call: a plain integer, or (when absent) the
/// position, but only in a list of one — a client would read a missing, fractional or
/// string `index` differently from us.
fn index_of(item: &Value, position: usize, len: usize) -> Result<u64, Leak> {
    match item.get("index") {
        Some(index) => index.as_u64().filter(|i| *i < 1024).ok_or(Leak),
        None if len == 1 => Ok(position as u64),
        None => Err(Leak),
    }
}

/// The largest single line or event accepted from the upstream.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// Redacts a Chat Completions event stream at the decoded level.
///
/// The upstream's bytes are parsed as the HTML standard parses an event stream (lines end
/// at CR, LF or CRLF; a leading BOM is dropped; comments and other fields are dropped; a
/// blank line ends an event), and nothing the upstream sent is passed on as bytes: each
/// event's JSON is parsed, redacted and written again. Per choice, every string in its
/// delta is held back while its end could still be the start of the key (a tool call's
/// `id` and `name` whole, never cut, and a whole repeat of them dropped), and each
/// `arguments` string whole until the choice finishes. A delta after a choice finished,
/// data that is not JSON, or held text over the cap end the stream with an
/// `upstream_malformed` error event.
#[derive(Debug)]
pub struct StreamRedactor {
    secret: String,
    /// Bytes of a line not yet complete.
    line: BytesMut,
    /// Whether the stream's start (and a BOM there) was seen.
    started: bool,
    /// The current event's data, when it has a `data` field.
    data: Option<String>,
    /// Decoded text held back, by where it sits.
    held: BTreeMap<Place, String>,
    /// `arguments` strings, held whole until their choice finishes.
    arguments: BTreeMap<Place, String>,
    /// Each tool call's `id` and `name` as received so far: a server that repeats them
    /// whole in every chunk (llama-cpp-python) is passed on as if it sent them once, so
    /// the pieces held back here never shift a repeat into something a client misjoins.
    names: BTreeMap<Place, String>,
    /// Choices that sent their `finish_reason`.
    finished: std::collections::BTreeSet<u64>,
    /// Bytes held back in all places.
    held_bytes: usize,
    /// Set once the stream was cut: nothing more is passed.
    stopped: bool,
}

impl StreamRedactor {
    /// A redactor for `secret`; an empty secret passes everything unchanged.
    pub fn new(secret: &str) -> Self {
        Self {
            secret: secret.to_owned(),
            line: BytesMut::new(),
            started: false,
            data: None,
            held: BTreeMap::new(),
            arguments: BTreeMap::new(),
            names: BTreeMap::new(),
            finished: std::collections::BTreeSet::new(),
            held_bytes: 0,
            stopped: false,
        }
    }

    /// Takes the next chunk of the upstream's bytes; returns what can be sent now.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        if self.stopped {
            return Bytes::new();
        }
        if self.secret.is_empty() {
            return Bytes::copy_from_slice(chunk);
        }
        self.line.extend_from_slice(chunk);
        let mut out = Vec::new();
        if let Err(Leak) = self.lines(false, &mut out) {
            self.stop(&mut out);
        }
        Bytes::from(out)
    }

    /// Ends the stream: the last event, and whatever was held back.
    pub fn finish(&mut self) -> Bytes {
        if self.stopped || self.secret.is_empty() {
            return Bytes::new();
        }
        let mut out = Vec::new();
        let done = self
            .lines(true, &mut out)
            .and_then(|()| self.dispatch(&mut out))
            .and_then(|()| self.flush_all(&mut out));
        if let Err(Leak) = done {
            self.stop(&mut out);
        }
        self.stopped = true;
        Bytes::from(out)
    }

    /// Whether the stream was cut (a leak or a malformed upstream).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    fn stop(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&leak_event());
        self.stopped = true;
        self.line.clear();
        self.held.clear();
        self.arguments.clear();
    }

    /// Splits off and handles every complete line (at the end, the last one too).
    fn lines(&mut self, at_end: bool, out: &mut Vec<u8>) -> Result<(), Leak> {
        if !self.started {
            if self.line.len() < 3 && !at_end && b"\xEF\xBB\xBF".starts_with(&self.line) {
                return Ok(());
            }
            if self.line.starts_with(b"\xEF\xBB\xBF") {
                let _ = self.line.split_to(3);
            }
            self.started = true;
        }
        loop {
            let Some(end) = self.line.iter().position(|b| *b == b'\r' || *b == b'\n') else {
                if self.line.len() > MAX_EVENT_BYTES {
                    return Err(Leak);
                }
                if at_end && !self.line.is_empty() {
                    let rest = self.line.split();
                    self.field(&rest)?;
                }
                return Ok(());
            };
            let cr = self.line.get(end) == Some(&b'\r');
            // A CR last in the buffer may be the first half of a CRLF: wait for more.
            if cr && end + 1 == self.line.len() && !at_end {
                return Ok(());
            }
            let skip = if cr && self.line.get(end + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line = self.line.split_to(end);
            let _ = self.line.split_to(skip);
            if line.is_empty() {
                self.dispatch(out)?;
                if self.stopped {
                    return Ok(());
                }
            } else {
                self.field(&line)?;
            }
        }
    }

    /// One non-empty line: only `data` fields are kept (comments, `event`, `id`,
    /// `retry` and unknown fields are dropped).
    fn field(&mut self, line: &[u8]) -> Result<(), Leak> {
        let text = std::str::from_utf8(line).map_err(|_| Leak)?;
        if text.starts_with(':') {
            return Ok(());
        }
        let (name, value) = match text.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        if name == "data" {
            let data = self.data.get_or_insert_with(String::new);
            data.push_str(value);
            data.push('\n');
            if data.len() > MAX_EVENT_BYTES {
                return Err(Leak);
            }
        }
        Ok(())
    }

    /// A blank line: the event's data, if any, is handled.
    fn dispatch(&mut self, out: &mut Vec<u8>) -> Result<(), Leak> {
        let Some(mut data) = self.data.take() else {
            return Ok(());
        };
        if data.ends_with('\n') {
            data.pop();
        }
        if data.trim() == "[DONE]" {
            self.flush_all(out)?;
            out.extend_from_slice(b"data: [DONE]\n\n");
            // Nothing follows `[DONE]`: what was held is out, so more could finish a key.
            self.stopped = true;
            self.line.clear();
            return Ok(());
        }
        // Data that is not JSON is refused, not passed: a client's parser may read more
        // into it than serde does (`1e999`, lone surrogates).
        let mut value: Value = serde_json::from_str(&data).map_err(|_| Leak)?;
        drop_logprobs(&mut value);
        self.chunk(&mut value)?;
        redact_value(&mut value, &self.secret)?;
        out.extend_from_slice(format!("data: {value}\n\n").as_bytes());
        Ok(())
    }

    /// Holds back, per choice, what could still be the key in any streamed string of the
    /// choice (its delta and anything beside it), and each `arguments` string until the
    /// choice finishes. Shapes a client could read differently are refused: a `choices`
    /// or `index` that is not what the wire format says, lists other than `tool_calls`,
    /// anything for a choice that finished.
    fn chunk(&mut self, value: &mut Value) -> Result<(), Leak> {
        let Some(choices) = value.get_mut("choices") else {
            return Ok(());
        };
        let Some(choices) = choices.as_array_mut() else {
            return Err(Leak);
        };
        let count = choices.len();
        for (position, choice) in choices.iter_mut().enumerate() {
            let index = index_of(choice, position, count)?;
            let finishing = choice.get("finish_reason").is_some_and(|r| !r.is_null());
            let Some(fields) = choice.as_object_mut() else {
                return Err(Leak);
            };
            if self.finished.contains(&index) {
                // INVARIANT: nothing follows a choice's finish: its held text was
                // flushed, so a continuation could complete the key unseen.
                let mut text = String::new();
                for (key, item) in fields.iter() {
                    if key != "index" && key != "finish_reason" {
                        join_strings(item, &mut text);
                    }
                }
                if !text.is_empty() || finishing {
                    return Err(Leak);
                }
                continue;
            }
            for (key, item) in fields.iter_mut() {
                if key == "index" || key == "finish_reason" {
                    continue;
                }
                let mut path = vec![Seg::Key(key.clone())];
                self.hold_all(index, item, &mut path)?;
            }
            if finishing {
                let flushed = self.flush_choice(index)?;
                if let Value::Object(flushed) = flushed {
                    for (key, item) in flushed {
                        match fields.get_mut(&key) {
                            Some(existing) => merge(existing, item),
                            None => {
                                fields.insert(key, item);
                            }
                        }
                    }
                }
                self.finished.insert(index);
            }
        }
        Ok(())
    }

    fn hold_all(
        &mut self,
        choice: u64,
        value: &mut Value,
        path: &mut Vec<Seg>,
    ) -> Result<(), Leak> {
        match value {
            Value::String(text) => {
                let place = (choice, path.clone());
                if matches!(path.last(), Some(Seg::Key(k)) if k == "arguments") {
                    self.held_bytes += text.len();
                    self.arguments.entry(place).or_default().push_str(text);
                    text.clear();
                } else if matches!(path.last(), Some(Seg::Key(k)) if k == "id" || k == "name")
                    && matches!(path.first(), Some(Seg::Key(k)) if k == "delta")
                {
                    let received = self.names.entry(place.clone()).or_default();
                    if !text.is_empty() && *received == *text {
                        // The whole of it again: a repeat, not a piece.
                        text.clear();
                    } else {
                        received.push_str(text);
                        // Ids and names are short: a long one is not passed on.
                        if received.len() > MAX_NAME_BYTES {
                            return Err(Leak);
                        }
                        *text = self.hold_whole(place, text);
                    }
                } else {
                    *text = self.hold(place, text);
                }
                self.check_cap()
            }
            Value::Array(items) => {
                // Only tool calls come as a list, each with its integer `index`: a list
                // of content parts would be joined by clients across places held apart.
                if !matches!(path.last(), Some(Seg::Key(k)) if k == "tool_calls") {
                    return Err(Leak);
                }
                let count = items.len();
                for (position, item) in items.iter_mut().enumerate() {
                    let at = index_of(item, position, count)?;
                    path.push(Seg::At(at));
                    self.hold_all(choice, item, path)?;
                    path.pop();
                }
                Ok(())
            }
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    if key == "index" {
                        continue;
                    }
                    path.push(Seg::Key(key.clone()));
                    self.hold_all(choice, item, path)?;
                    path.pop();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Refuses more held text, or more places holding it, than a stream needs.
    fn check_cap(&self) -> Result<(), Leak> {
        let places = self.held.len() + self.arguments.len() + self.names.len();
        if self.held_bytes > MAX_HELD_BYTES || places > MAX_PLACES {
            Err(Leak)
        } else {
            Ok(())
        }
    }

    /// Adds `text` to what is held at `place`; returns the part that can go now.
    fn hold(&mut self, place: Place, text: &str) -> String {
        let mut held = self.held.remove(&place).unwrap_or_default();
        self.held_bytes = self.held_bytes.saturating_sub(held.len());
        held.push_str(text);
        let redacted = held.replace(&self.secret, MARK);
        let keep = prefix_tail_len(&redacted, &self.secret);
        let split = redacted.len() - keep;
        let now = redacted.get(..split).unwrap_or_default().to_owned();
        let tail = redacted.get(split..).unwrap_or_default().to_owned();
        if !tail.is_empty() {
            self.held_bytes += tail.len();
            self.held.insert(place, tail);
        }
        now
    }

    /// Like [`StreamRedactor::hold`] for a tool call's id or name, which clients join
    /// piece by piece (and the page reads a piece equal to all it holds as a repeat):
    /// what could end in the start of the key is held back whole, never cut, so every
    /// piece sent is one or more of the upstream's pieces, redacted.
    fn hold_whole(&mut self, place: Place, text: &str) -> String {
        let mut held = self.held.remove(&place).unwrap_or_default();
        self.held_bytes = self.held_bytes.saturating_sub(held.len());
        held.push_str(text);
        let redacted = held.replace(&self.secret, MARK);
        if prefix_tail_len(&redacted, &self.secret) == 0 {
            return redacted;
        }
        self.held_bytes += redacted.len();
        self.held.insert(place, redacted);
        String::new()
    }

    /// Everything held for one choice, as the choice's fields to send.
    fn flush_choice(&mut self, choice: u64) -> Result<Value, Leak> {
        let mut delta = json!({});
        let held: Vec<Place> = self
            .held
            .keys()
            .filter(|(c, _)| *c == choice)
            .cloned()
            .collect();
        for place in held {
            let text = self.held.remove(&place).unwrap_or_default();
            self.held_bytes = self.held_bytes.saturating_sub(text.len());
            if !text.is_empty() {
                insert_at(&mut delta, &place.1, text);
            }
        }
        let arguments: Vec<Place> = self
            .arguments
            .keys()
            .filter(|(c, _)| *c == choice)
            .cloned()
            .collect();
        for place in arguments {
            let text = self.arguments.remove(&place).unwrap_or_default();
            self.held_bytes = self.held_bytes.saturating_sub(text.len());
            insert_at(&mut delta, &place.1, redact_arguments(&text, &self.secret)?);
        }
        Ok(delta)
    }

    /// Everything still held, as one event (before `[DONE]` or the end of the stream).
    fn flush_all(&mut self, out: &mut Vec<u8>) -> Result<(), Leak> {
        let mut choices: Vec<u64> = self
            .held
            .keys()
            .chain(self.arguments.keys())
            .map(|(c, _)| *c)
            .collect();
        choices.sort_unstable();
        choices.dedup();
        let mut list = Vec::new();
        for choice in choices {
            let Value::Object(mut fields) = self.flush_choice(choice)? else {
                continue;
            };
            if !fields.is_empty() {
                fields.insert("index".into(), json!(choice));
                fields.insert("finish_reason".into(), Value::Null);
                list.push(Value::Object(fields));
            }
        }
        if !list.is_empty() {
            let event = json!({ "object": "chat.completion.chunk", "choices": list });
            out.extend_from_slice(format!("data: {event}\n\n").as_bytes());
        }
        Ok(())
    }
}

/// Writes `text` at `path` inside `root`, creating objects and `index`ed list entries.
fn insert_at(root: &mut Value, path: &[Seg], text: String) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = root;
    for seg in parents {
        here = match seg {
            Seg::Key(key) => {
                let Some(object) = here.as_object_mut() else {
                    return;
                };
                object.entry(key.clone()).or_insert_with(|| json!({}))
            }
            Seg::At(at) => {
                if !here.is_array() {
                    *here = json!([]);
                }
                let Some(list) = here.as_array_mut() else {
                    return;
                };
                let position = list
                    .iter()
                    .position(|e| e.get("index").and_then(Value::as_u64) == Some(*at));
                let position = match position {
                    Some(p) => p,
                    None => {
                        list.push(json!({ "index": at }));
                        list.len() - 1
                    }
                };
                match list.get_mut(position) {
                    Some(entry) => entry,
                    None => return,
                }
            }
        };
    }
    if let (Seg::Key(key), Some(object)) = (last, here.as_object_mut()) {
        let before = object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        object.insert(key.clone(), Value::String(format!("{before}{text}")));
    }
}

/// Adds a flushed delta to an event's delta: strings are appended, lists matched by
/// `index`, objects merged.
fn merge(into: &mut Value, flushed: Value) {
    match (into, flushed) {
        (Value::Object(target), Value::Object(source)) => {
            for (key, value) in source {
                match target.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        target.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(target), Value::Array(source)) => {
            for item in source {
                let index = item.get("index").cloned();
                match target.iter_mut().find(|e| e.get("index").cloned() == index) {
                    Some(existing) => merge(existing, item),
                    None => target.push(item),
                }
            }
        }
        (target @ Value::String(_), Value::String(more)) => {
            let before = target.as_str().unwrap_or_default().to_owned();
            *target = Value::String(format!("{before}{more}"));
        }
        (target, other) => *target = other,
    }
}

fn error_event(code: &str, message: &str) -> Vec<u8> {
    let event =
        json!({ "error": { "code": code, "message": message, "type": "countersign_gateway" } });
    format!("data: {event}\n\n").into_bytes()
}

fn leak_event() -> Vec<u8> {
    error_event(
        "upstream_malformed",
        "the model upstream's stream was malformed, or held the provider key in a form that cannot be redacted; the rest was withheld",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-harness-7f3a";

    fn stream(chunks: &[&str]) -> String {
        let mut r = StreamRedactor::new(KEY);
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&r.push(c.as_bytes()));
        }
        out.extend_from_slice(&r.finish());
        String::from_utf8(out).unwrap()
    }

    /// What a client decodes from a stream: the joined content and tool call arguments.
    fn decoded(sse: &str) -> (String, String) {
        let (mut content, mut arguments) = (String::new(), String::new());
        for line in sse.lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            for choice in v["choices"].as_array().cloned().unwrap_or_default() {
                content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
                for call in choice["delta"]["tool_calls"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                {
                    arguments.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
                }
            }
        }
        (content, arguments)
    }

    fn delta(content: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"content":content}}]})
        )
    }

    /// A server that repeats the call's whole id and name in every chunk
    /// (llama-cpp-python) reaches the client as if it sent them once: a name ending in
    /// the key's first letter (`s` of `sk-`) is not shifted into pieces a client misjoins.
    #[test]
    fn ids_and_names_repeated_whole_in_every_chunk_are_passed_once() {
        let chunk = |args: &str| {
            format!(
                "data: {}\n\n",
                json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"publish_changes","arguments":args}}]}}]})
            )
        };
        let finish =
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
        let chunks = [chunk("{\"a\""), chunk(":1}"), finish.to_owned()];
        let sse = stream(&chunks.iter().map(String::as_str).collect::<Vec<_>>());
        let (mut ids, mut names) = (String::new(), String::new());
        for line in sse.lines() {
            let Some(v) = line
                .strip_prefix("data: ")
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                continue;
            };
            for call in v["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                ids.push_str(call["id"].as_str().unwrap_or_default());
                names.push_str(call["function"]["name"].as_str().unwrap_or_default());
            }
        }
        assert_eq!(
            (ids.as_str(), names.as_str()),
            ("call_s", "publish_changes"),
            "{sse}"
        );
        assert_eq!(decoded(&sse).1, "{\"a\":1}");
    }

    #[test]
    fn an_escaped_key_in_a_whole_answer_is_redacted() {
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", u32::from(c)))
            .collect();
        let body = format!(r#"{{"choices":[{{"message":{{"content":"key: {escaped}"}}}}]}}"#);
        let out = redact_answer(KEY, body.as_bytes()).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "key: [redacted]");
    }

    #[test]
    fn a_key_inside_tool_call_arguments_json_is_redacted() {
        let inner = json!({"note": KEY}).to_string().replace("sk", "\\u0073k");
        let body = json!({"choices":[{"message":{"tool_calls":[{"function":{"name":"save","arguments":inner}}]}}]});
        let out = redact_answer(KEY, body.to_string().as_bytes()).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let args: Value = serde_json::from_str(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args["note"], "[redacted]");
        assert!(!String::from_utf8_lossy(&out).contains(KEY));
    }

    #[test]
    fn broken_arguments_that_decode_to_the_key_are_refused() {
        // The arguments are broken JSON, `{"a": "\u0073k-harness-7f3a`: a lenient client
        // still decodes the key from them.
        let body = r#"{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"{\"a\": \"\\u0073k-harness-7f3a"}}]}}]}"#;
        assert_eq!(redact_answer(KEY, body.as_bytes()), Err(Leak));
    }

    #[test]
    fn a_key_split_at_every_delta_boundary_never_reaches_the_client() {
        let text = format!("the key is {KEY} ok");
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            let sse = stream(&[&delta(a), &delta(b), "data: [DONE]\n\n"]);
            let (content, _) = decoded(&sse);
            assert_eq!(content, "the key is [redacted] ok", "cut at {cut}");
            assert!(!sse.contains(KEY), "cut at {cut}");
        }
    }

    #[test]
    fn a_key_split_into_three_deltas_and_across_byte_chunks_is_redacted() {
        let events = [
            delta("earer s"),
            delta("k-harne"),
            delta("ss-7f3a!"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let all = events.concat();
        for cut in 0..all.len() {
            let (a, b) = all.split_at(cut);
            let (content, _) = decoded(&stream(&[a, b]));
            assert_eq!(content, "earer [redacted]!", "cut at {cut}");
        }
    }

    #[test]
    fn streamed_tool_arguments_are_redacted_whole_at_finish() {
        let escaped = json!({"token": KEY})
            .to_string()
            .replace("k-h", "\\u006b-h");
        let mut events = Vec::new();
        for piece in escaped.as_bytes().chunks(3) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            events.push(format!("data: {}\n\n", json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":piece}}]}}]})));
        }
        events.push(format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})
        ));
        events.push("data: [DONE]\n\n".into());
        let sse = stream(&events.iter().map(String::as_str).collect::<Vec<_>>());
        let (_, arguments) = decoded(&sse);
        let parsed: Value = serde_json::from_str(&arguments).unwrap();
        assert_eq!(parsed["token"], "[redacted]");
    }

    #[test]
    fn text_without_the_key_streams_through_in_order() {
        let sse = stream(&[&delta("hello "), &delta("world"), "data: [DONE]\n\n"]);
        assert_eq!(decoded(&sse).0, "hello world");
        assert!(sse.ends_with("data: [DONE]\n\n"));
    }
}
