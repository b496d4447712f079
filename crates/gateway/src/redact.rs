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
use serde_json::{json, Map, Value};

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
fn lenient_unescape(text: &str) -> String {
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

/// Redacts one whole (non-streamed) answer. JSON is parsed, redacted at every decoded
/// level and re-serialised (left byte for byte as it was when nothing changed);
/// anything else has the raw key replaced, and is refused if it decodes to the key.
pub fn redact_answer(secret: &str, body: &[u8]) -> Result<Bytes, Leak> {
    if secret.is_empty() {
        return Ok(Bytes::copy_from_slice(body));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(mut value) => {
            if redact_value(&mut value, secret)? {
                Ok(Bytes::from(value.to_string()))
            } else {
                Ok(Bytes::copy_from_slice(body))
            }
        }
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let replaced = text.replace(secret, MARK);
            if lenient_unescape(&replaced).contains(secret) {
                Err(Leak)
            } else {
                Ok(Bytes::from(replaced))
            }
        }
    }
}

/// Which streamed text a held-back piece belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    /// `choices[choice].delta.<name>` (content, reasoning_content, refusal).
    Text { choice: u64, name: String },
    /// `choices[choice].delta.tool_calls[index].function.name`.
    ToolName { choice: u64, index: u64 },
}

/// The longest end of `text` that is a proper start of `secret`.
fn prefix_tail_len(text: &str, secret: &str) -> usize {
    let mut best = 0;
    for (i, _) in text.char_indices() {
        let tail = text.get(i..).unwrap_or_default();
        if tail.len() < secret.len() && secret.starts_with(tail) {
            best = tail.len();
            break;
        }
    }
    best
}

/// Redacts a Chat Completions event stream (SSE) at the decoded level, event by event.
#[derive(Debug)]
pub struct StreamRedactor {
    secret: String,
    /// Bytes of an event not yet complete.
    buffer: BytesMut,
    /// Decoded text held back per field, because it could still be the key's start.
    held: BTreeMap<Field, String>,
    /// Each tool call's arguments, held whole until its choice finishes (the key may be
    /// spelt with escapes of the arguments' own JSON, split anywhere).
    arguments: BTreeMap<(u64, u64), String>,
    /// Set once the stream was cut for a leak: nothing more is passed.
    stopped: bool,
}

/// The largest single event accepted from the upstream.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

impl StreamRedactor {
    /// A redactor for `secret`; an empty secret passes everything unchanged.
    pub fn new(secret: &str) -> Self {
        Self {
            secret: secret.to_owned(),
            buffer: BytesMut::new(),
            held: BTreeMap::new(),
            arguments: BTreeMap::new(),
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
        self.buffer.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, skip)) = event_end(&self.buffer) {
            let event = self.buffer.split_to(end + skip);
            let text = String::from_utf8_lossy(event.get(..end).unwrap_or_default()).into_owned();
            match self.event(&text) {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(Leak) => {
                    out.extend_from_slice(&leak_event());
                    self.stopped = true;
                    self.buffer.clear();
                    return Bytes::from(out);
                }
            }
        }
        if self.buffer.len() > MAX_EVENT_BYTES {
            out.extend_from_slice(&error_event(
                "upstream_malformed",
                "the model upstream sent an event that is too large",
            ));
            self.stopped = true;
            self.buffer.clear();
        }
        Bytes::from(out)
    }

    /// Ends the stream: flushes what was held back (the upstream closed without `[DONE]`).
    pub fn finish(&mut self) -> Bytes {
        if self.stopped || self.secret.is_empty() {
            return Bytes::new();
        }
        let mut out = Vec::new();
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            let text = String::from_utf8_lossy(&rest).into_owned();
            match self.event(&text) {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(Leak) => {
                    self.stopped = true;
                    return Bytes::from(leak_event());
                }
            }
        }
        match self.flush_all() {
            Ok(bytes) => out.extend_from_slice(&bytes),
            Err(Leak) => out.extend_from_slice(&leak_event()),
        }
        self.stopped = true;
        Bytes::from(out)
    }

    /// One complete event (without its blank line).
    fn event(&mut self, text: &str) -> Result<Vec<u8>, Leak> {
        let mut data = Vec::new();
        let mut other = Vec::new();
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            match line.strip_prefix("data:") {
                Some(rest) => data.push(rest.strip_prefix(' ').unwrap_or(rest)),
                None => other.push(line),
            }
        }
        let mut out = Vec::new();
        for line in other.iter().filter(|l| !l.is_empty()) {
            // `event:`, `id:`, comments: no client decodes them into model text.
            out.extend_from_slice(line.replace(&self.secret, MARK).as_bytes());
            out.push(b'\n');
        }
        if data.is_empty() {
            if !out.is_empty() {
                out.push(b'\n');
            }
            return Ok(out);
        }
        let data = data.join("\n");
        if data.trim() == "[DONE]" {
            out.extend_from_slice(&self.flush_all()?);
            out.extend_from_slice(b"data: [DONE]\n\n");
            return Ok(out);
        }
        let Ok(mut value) = serde_json::from_str::<Value>(&data) else {
            let replaced = data.replace(&self.secret, MARK);
            if lenient_unescape(&replaced).contains(&self.secret) {
                return Err(Leak);
            }
            out.extend_from_slice(format!("data: {replaced}\n\n").as_bytes());
            return Ok(out);
        };
        self.chunk(&mut value)?;
        redact_value(&mut value, &self.secret)?;
        out.extend_from_slice(format!("data: {value}\n\n").as_bytes());
        Ok(out)
    }

    /// Holds back what could still be the key in each choice's streamed text, and each
    /// tool call's arguments until its choice finishes.
    fn chunk(&mut self, value: &mut Value) -> Result<(), Leak> {
        let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        for (position, choice) in choices.iter_mut().enumerate() {
            let index = choice
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let finished = choice.get("finish_reason").is_some_and(|r| !r.is_null());
            let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) else {
                if finished {
                    let flushed = self.flush_choice(index)?;
                    if !flushed.is_empty() {
                        if let Some(object) = choice.as_object_mut() {
                            object.insert("delta".into(), Value::Object(flushed));
                        }
                    }
                }
                continue;
            };
            for name in ["content", "reasoning_content", "refusal"] {
                if let Some(Value::String(text)) = delta.get_mut(name) {
                    let field = Field::Text {
                        choice: index,
                        name: name.to_owned(),
                    };
                    *text = self.hold(field, text);
                }
            }
            if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for (k, call) in calls.iter_mut().enumerate() {
                    let call_index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(k as u64);
                    let Some(function) = call.get_mut("function").and_then(Value::as_object_mut)
                    else {
                        continue;
                    };
                    if let Some(Value::String(name)) = function.get_mut("name") {
                        let field = Field::ToolName {
                            choice: index,
                            index: call_index,
                        };
                        *name = self.hold(field, name);
                    }
                    if let Some(Value::String(arguments)) = function.get_mut("arguments") {
                        self.arguments
                            .entry((index, call_index))
                            .or_default()
                            .push_str(arguments);
                        arguments.clear();
                    }
                }
            }
            if finished {
                let flushed = self.flush_choice(index)?;
                merge_delta(delta, flushed);
            }
        }
        Ok(())
    }

    /// Adds `text` to what is held for `field`; returns the part that can go now.
    fn hold(&mut self, field: Field, text: &str) -> String {
        let held = self.held.entry(field).or_default();
        held.push_str(text);
        let redacted = held.replace(&self.secret, MARK);
        let keep = prefix_tail_len(&redacted, &self.secret);
        let split = redacted.len() - keep;
        let now = redacted.get(..split).unwrap_or_default().to_owned();
        *held = redacted.get(split..).unwrap_or_default().to_owned();
        now
    }

    /// Everything held for one choice, as delta fields to send.
    fn flush_choice(&mut self, choice: u64) -> Result<Map<String, Value>, Leak> {
        let mut delta = Map::new();
        let fields: Vec<Field> = self
            .held
            .keys()
            .filter(|f| matches!(f, Field::Text { choice: c, .. } | Field::ToolName { choice: c, .. } if *c == choice))
            .cloned()
            .collect();
        let mut calls: BTreeMap<u64, Map<String, Value>> = BTreeMap::new();
        for field in fields {
            let text = self.held.remove(&field).unwrap_or_default();
            if text.is_empty() {
                continue;
            }
            match field {
                Field::Text { name, .. } => {
                    delta.insert(name, Value::String(text));
                }
                Field::ToolName { index, .. } => {
                    calls
                        .entry(index)
                        .or_default()
                        .insert("name".into(), Value::String(text));
                }
            }
        }
        let keys: Vec<(u64, u64)> = self
            .arguments
            .keys()
            .filter(|(c, _)| *c == choice)
            .copied()
            .collect();
        for key in keys {
            let text = self.arguments.remove(&key).unwrap_or_default();
            let redacted = redact_arguments(&text, &self.secret)?;
            calls
                .entry(key.1)
                .or_default()
                .insert("arguments".into(), Value::String(redacted));
        }
        if !calls.is_empty() {
            let list = calls
                .into_iter()
                .map(|(index, function)| json!({ "index": index, "function": function }))
                .collect();
            delta.insert("tool_calls".into(), Value::Array(list));
        }
        Ok(delta)
    }

    /// Everything still held, as one event (before `[DONE]` or the end of the stream).
    fn flush_all(&mut self) -> Result<Vec<u8>, Leak> {
        let mut choices: Vec<u64> = self
            .held
            .keys()
            .map(|f| match f {
                Field::Text { choice, .. } | Field::ToolName { choice, .. } => *choice,
            })
            .chain(self.arguments.keys().map(|(c, _)| *c))
            .collect();
        choices.sort_unstable();
        choices.dedup();
        let mut list = Vec::new();
        for choice in choices {
            let delta = self.flush_choice(choice)?;
            if !delta.is_empty() {
                list.push(json!({ "index": choice, "delta": delta, "finish_reason": null }));
            }
        }
        if list.is_empty() {
            return Ok(Vec::new());
        }
        let event = json!({ "object": "chat.completion.chunk", "choices": list });
        Ok(format!("data: {event}\n\n").into_bytes())
    }
}

/// Adds flushed fields to an event's delta: text is appended, tool call arguments go to
/// the entry with the same index (or a new one).
fn merge_delta(delta: &mut Map<String, Value>, flushed: Map<String, Value>) {
    for (name, value) in flushed {
        match (name.as_str(), value) {
            ("tool_calls", Value::Array(new_calls)) => {
                let list = delta
                    .entry("tool_calls")
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Some(list) = list.as_array_mut() else {
                    continue;
                };
                for new_call in new_calls {
                    let index = new_call.get("index").cloned();
                    let existing = list.iter_mut().find(|c| c.get("index").cloned() == index);
                    match existing {
                        Some(call) => {
                            let Some(function) = call
                                .as_object_mut()
                                .map(|c| c.entry("function").or_insert_with(|| json!({})))
                                .and_then(Value::as_object_mut)
                            else {
                                continue;
                            };
                            if let Some(Value::Object(new_function)) = new_call.get("function") {
                                for (key, text) in new_function {
                                    let before = function
                                        .get(key)
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_owned();
                                    let joined =
                                        format!("{before}{}", text.as_str().unwrap_or_default());
                                    function.insert(key.clone(), Value::String(joined));
                                }
                            }
                        }
                        None => list.push(new_call),
                    }
                }
            }
            (_, Value::String(text)) => {
                let before = delta
                    .get(&name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                delta.insert(name, Value::String(format!("{before}{text}")));
            }
            (_, other) => {
                delta.insert(name, other);
            }
        }
    }
}

/// Where the first complete event ends in `buffer`, and how long its terminator is.
fn event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
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
        "the model upstream's answer held the provider key in a form that cannot be redacted; the rest was withheld",
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
