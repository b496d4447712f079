//! The key never reaches the page in any form a client decodes, whatever a hostile
//! upstream sends: split across fields, choices and events a client joins, hidden by
//! framings and parses the redactor might read differently from a client, or shaped to
//! make the redactor crash or crawl. Each test is one attack, asserted as the promise,
//! so a failing test is a break. (`upstream.rs` has the plain cases: the key echoed,
//! escaped, split across deltas.)
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::type_complexity
)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::client::{ask, data, halves, spec_events};
use common::{Behaviour, KEY};
use countersign_gateway::redact::StreamRedactor;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------
// Helpers: what a client decodes from what the gateway sends.
// ---------------------------------------------------------------------------------

fn escaped(text: &str) -> String {
    text.chars()
        .map(|c| format!("\\u{:04x}", u32::from(c)))
        .collect()
}

/// `JSON.parse` as a browser (or Python's `json.loads`) does it: it takes what
/// serde_json refuses here, a number out of f64 range (→ Infinity) and a lone
/// surrogate escape. Simulated by normalising those two before serde parses.
fn js_parse(data: &str) -> Option<Value> {
    serde_json::from_str(data).ok().or_else(|| {
        let normal = data.replace("1e999", "0").replace("\\udead", "\\ufffd");
        serde_json::from_str(&normal).ok()
    })
}

/// What an SDK accumulates from a stream, per choice (keyed by the JS number value of
/// `index`): every text field, every tool call's name and arguments, the legacy
/// `function_call`, and the logprob tokens. Returned as separate strings, so only
/// joins a client really makes are checked.
fn sdk_accumulated(sse: &str) -> Vec<String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut add = |key: String, text: &str| fields.entry(key).or_default().push_str(text);
    for data in spec_events(sse) {
        if data.trim() == "[DONE]" {
            break;
        }
        let Some(event) = js_parse(&data) else {
            continue;
        };
        for (position, choice) in event["choices"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let index = choice["index"].as_f64().unwrap_or(position as f64);
            let delta = &choice["delta"];
            for name in ["content", "reasoning_content", "reasoning", "refusal"] {
                if let Some(text) = delta[name].as_str() {
                    add(format!("{index}/{name}"), text);
                }
            }
            for call in delta["tool_calls"].as_array().cloned().unwrap_or_default() {
                let at = call["index"].as_f64().unwrap_or(0.0);
                for part in ["name", "arguments"] {
                    if let Some(text) = call["function"][part].as_str() {
                        add(format!("{index}/tool{at}/{part}"), text);
                    }
                }
            }
            for part in ["name", "arguments"] {
                if let Some(text) = delta["function_call"][part].as_str() {
                    add(format!("{index}/function_call/{part}"), text);
                }
            }
            for token in choice["logprobs"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                if let Some(text) = token["token"].as_str() {
                    add(format!("{index}/logprobs"), text);
                }
            }
        }
    }
    let mut out: Vec<String> = fields.into_values().collect();
    // Arguments are JSON again: their decoded strings too.
    let inner: Vec<String> = out
        .iter()
        .filter_map(|s| serde_json::from_str::<Value>(s).ok())
        .map(|v| common::decoded(&v.to_string()))
        .collect();
    out.extend(inner);
    out
}

/// How a client decodes the key from `sse`, if it does.
fn leak(name: &str, sse: &str) -> Option<String> {
    sdk_accumulated(sse)
        .into_iter()
        .find(|text| text.contains(KEY))
        .map(|text| format!("{name}: a client accumulating the stream decodes the key from {text:?}\n--- stream sent to the page ---\n{sse:?}"))
}

fn assert_stream_never_decodes_the_key(name: &str, sse: &str) {
    if let Some(found) = leak(name, sse) {
        panic!("{found}");
    }
}

fn assert_none(leaks: &[String]) {
    assert!(
        leaks.is_empty(),
        "{} leak(s):\n{}",
        leaks.len(),
        leaks.join("\n\n")
    );
}

fn content(index: Value, text: &str, finish: Value) -> Value {
    json!({"object":"chat.completion.chunk","choices":[{"index":index,"delta":{"content":text},"finish_reason":finish}]})
}

/// The property key JavaScript uses for `snapshot.choices[index]` (openai-node's
/// `ChatCompletionStream` accumulates choices and tool calls this way): `0`, `0.0`,
/// `-0` and `"0"` are all the same slot; a missing index is `"undefined"`.
fn js_key(value: Option<&Value>) -> String {
    match value {
        None => "undefined".into(),
        Some(Value::Number(n)) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{}", f as i64)
            } else {
                format!("{f}")
            }
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// What a JS client accumulates per choice slot: `delta.content` (a string, or a list
/// of parts whose `text` it joins, as for Mistral's streamed content chunks), tool call
/// names/arguments per tool slot, and (optionally) the legacy `choices[].text`.
/// `past_done`: keep reading after `[DONE]` (a page using `EventSource` and
/// `try { JSON.parse } catch {}`), instead of stopping as the SDKs do.
fn js_accumulated(sse: &str, past_done: bool) -> Vec<String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    for data in spec_events(sse) {
        if data.trim() == "[DONE]" {
            if past_done {
                continue;
            }
            break;
        }
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        for choice in event["choices"].as_array().cloned().unwrap_or_default() {
            let slot = js_key(choice.get("index"));
            let mut add = |name: String, text: &str| {
                fields
                    .entry(format!("{slot}/{name}"))
                    .or_default()
                    .push_str(text);
            };
            if let Some(text) = choice["text"].as_str() {
                add("text".into(), text);
            }
            let delta = &choice["delta"];
            match &delta["content"] {
                Value::String(text) => add("content".into(), text),
                Value::Array(parts) => {
                    for part in parts {
                        if let Some(t) = part.as_str() {
                            add("content".into(), t);
                        }
                        if let Some(t) = part["text"].as_str() {
                            add("content".into(), t);
                        }
                    }
                }
                _ => {}
            }
            for call in delta["tool_calls"].as_array().cloned().unwrap_or_default() {
                let at = js_key(call.get("index"));
                for part in ["name", "arguments"] {
                    if let Some(text) = call["function"][part].as_str() {
                        add(format!("tool{at}/{part}"), text);
                    }
                }
            }
        }
    }
    fields.into_values().collect()
}

fn leak_in(name: &str, sse: &str, past_done: bool) -> Option<String> {
    js_accumulated(sse, past_done)
        .into_iter()
        .find(|t| t.contains(KEY))
        .map(|t| {
            format!("{name}: a client accumulating the stream decodes the key from {t:?}\n--- stream sent to the page ---\n{sse}")
        })
}

/// Runs this test's body in a child process (for attacks that may crash the process):
/// returns `true` in the child, where the body should run.
fn in_child(test: &str) -> bool {
    if std::env::var_os("REDACTION_TEST_CHILD").is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("REDACTION_TEST_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = stderr
        .chars()
        .rev()
        .take(1500)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        out.status.success(),
        "{test}: the gateway process died ({:?}):\n{tail}",
        out.status
    );
    false
}

// ---------------------------------------------------------------------------------
// Fields, framings and parses the redactor could see differently from a client.
// ---------------------------------------------------------------------------------

/// The redactor flushes what it held back for a choice as soon as that choice carries a
/// `finish_reason`; text the upstream sends for the same choice afterwards starts a
/// fresh hold. SDKs keep appending deltas by index regardless of `finish_reason`.
#[tokio::test]
async fn content_continued_after_finish_reason_joins_into_the_key() {
    let (a, b) = halves();
    let events = vec![
        data(&content(json!(0), &format!("token: {a}"), json!("stop"))),
        data(&content(json!(0), b, Value::Null)),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_stream_never_decodes_the_key("content after finish_reason", &sse);
}

/// The same for tool-call arguments: held "until the choice finishes", each flush
/// redacted on its own, joined by the client.
#[tokio::test]
async fn tool_arguments_continued_after_finish_reason_join_into_the_key() {
    let (a, b) = halves();
    let call = |arguments: &str, finish: Value| json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"save","arguments":arguments}}]},"finish_reason":finish}]});
    let events = vec![
        data(&call(&format!("{{\"note\":\"{a}"), json!("tool_calls"))),
        data(&call(&format!("{b}\"}}"), Value::Null)),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_stream_never_decodes_the_key("arguments after finish_reason", &sse);
}

/// Streamed fields clients accumulate that the redactor does not hold back: the legacy
/// `function_call` deltas (still accumulated by the OpenAI SDKs), `reasoning` (vLLM,
/// OpenRouter, Ollama), and `content` sent as a list of parts.
#[tokio::test]
async fn fields_the_redactor_does_not_hold_carry_a_split_key() {
    let (a, b) = halves();
    let shapes: Vec<(&str, Box<dyn Fn(&str) -> Value>)> = vec![
        (
            "function_call.arguments",
            Box::new(
                |t: &str| json!({"choices":[{"index":0,"delta":{"function_call":{"name":"save","arguments":t}}}]}),
            ),
        ),
        (
            "reasoning",
            Box::new(|t: &str| json!({"choices":[{"index":0,"delta":{"reasoning":t}}]})),
        ),
    ];
    let mut leaks = Vec::new();
    for (name, shape) in shapes {
        let events = vec![
            data(&shape(a)),
            data(&shape(b)),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        leaks.extend(leak(name, &sse));
    }
    assert_none(&leaks);
}

/// A lone CR ends a line for every spec-following SSE client, but the redactor splits
/// lines at LF only: a line that starts as a comment (or `event:`) carries, after a CR,
/// a `data:` line the redactor never parses, so JSON escapes of the key pass.
#[tokio::test]
async fn a_lone_cr_smuggles_a_data_line_past_the_redactor() {
    let hidden = format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":"{}"}}}}]}}"#,
        escaped(KEY)
    );
    let mut leaks = Vec::new();
    for prefix in [": keep-alive\r", "event: message\r", "id: 1\r"] {
        let events = vec![
            format!("{prefix}data: {hidden}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        leaks.extend(leak(&format!("{prefix:?}"), &sse));
    }
    assert_none(&leaks);
}

/// Lone-CR framing between events: the redactor sees one non-JSON data line (passed
/// raw, the key not contiguous in it), the client sees two JSON events whose contents
/// join into the key.
#[tokio::test]
async fn cr_framed_events_are_one_opaque_line_to_the_redactor() {
    let (a, b) = halves();
    let one = content(json!(0), a, Value::Null);
    let two = content(json!(0), b, Value::Null);
    let events = vec![format!(
        "data: {one}\r\rdata: {two}\r\r\n\ndata: [DONE]\n\n"
    )];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_stream_never_decodes_the_key("CR framing", &sse);
}

/// A data value that is not JSON is re-sent as `data: {joined lines}`: an empty data
/// line becomes a blank line in the output, which ends the event, so whole JSON events
/// packed in the value are dispatched to the client unparsed by the redactor.
#[tokio::test]
async fn an_empty_data_line_splits_one_opaque_event_into_several() {
    let (a, b) = halves();
    let one = content(json!(0), a, Value::Null);
    let two = content(json!(0), b, Value::Null);
    let events = vec![
        format!("data: junk\ndata:\ndata: data: {one}\ndata:\ndata: data: {two}\n\n"),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_stream_never_decodes_the_key("empty data line", &sse);
}

/// A BOM before the first line is dropped by SSE clients, but to the redactor the first
/// line then does not start with `data:`: it is passed as an "other" line with only the
/// raw key replaced, so the escaped key goes through.
#[tokio::test]
async fn a_leading_bom_hides_the_first_data_line_from_the_redactor() {
    let hidden = format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":"{}"}}}}]}}"#,
        escaped(KEY)
    );
    let events = vec![
        format!("\u{feff}data: {hidden}\n\n"),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_stream_never_decodes_the_key("leading BOM", &sse);
}

/// Events that browsers' `JSON.parse` (and Python's `json`) accept but serde_json
/// refuses (a number out of range, a lone surrogate) take the redactor's raw path,
/// where only the raw key is looked for: split across two such events, it joins.
#[tokio::test]
async fn events_serde_refuses_but_clients_parse_carry_a_split_key() {
    let (a, b) = halves();
    let mut leaks = Vec::new();
    for pad in [json!("PAD_NUMBER"), json!("PAD_SURROGATE")] {
        let event = |text: &str| {
            let value = json!({"choices":[{"index":0,"delta":{"content":text}}],"x":pad});
            let text = value
                .to_string()
                .replace("\"PAD_NUMBER\"", "1e999")
                .replace("PAD_SURROGATE", "\\udead");
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
            format!("data: {text}\n\n")
        };
        let events = vec![event(a), event(b), "data: [DONE]\n\n".to_owned()];
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        leaks.extend(leak(&pad.to_string(), &sse));
    }
    assert_none(&leaks);
}

/// A whole answer in which nothing changes after parsing is sent "byte for byte as it
/// was": with a duplicate key, the parsed value keeps only the last one, so an escaped
/// key in the first never reaches the redactor but does reach the page (any script
/// reading `response.text()`, and first-wins parsers such as simdjson On-Demand).
#[tokio::test]
async fn a_duplicate_json_key_hides_an_escaped_key_in_a_whole_answer() {
    let body = format!(
        r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"{}","content":"ok"}},"finish_reason":"stop"}}]}}"#,
        escaped(KEY)
    );
    let (status, answer) = ask(Behaviour::Body(body), false).await;
    // What a script on the page gets by decoding the text's escapes.
    let mut unescaped = answer.clone();
    for c in KEY.chars() {
        unescaped = unescaped.replace(&format!("\\u{:04x}", u32::from(c)), &c.to_string());
    }
    assert!(
        !unescaped.contains(KEY),
        "HTTP {status}: the page got the key's escapes verbatim: {answer}"
    );
}

/// A whole answer's strings are each redacted alone, but clients join some of them:
/// the logprob tokens (the text, token by token), their `bytes` (UTF-8, as numbers),
/// and the parts of a `content` list.
#[tokio::test]
async fn key_fragments_a_client_joins_pass_in_a_whole_answer() {
    let (a, b) = halves();
    let bytes: Vec<u8> = KEY.bytes().collect();
    let cases = [
        (
            "logprob tokens",
            json!({"choices":[{"index":0,"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"token":a,"logprob":0.0,"bytes":null,"top_logprobs":[]},{"token":b,"logprob":0.0,"bytes":null,"top_logprobs":[]}]},"finish_reason":"stop"}]}),
        ),
        (
            "logprob bytes",
            json!({"choices":[{"index":0,"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"token":"x","logprob":0.0,"bytes":bytes,"top_logprobs":[]}]},"finish_reason":"stop"}]}),
        ),
        (
            "content parts",
            json!({"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":a},{"type":"text","text":b}]},"finish_reason":"stop"}]}),
        ),
    ];
    let mut leaks = Vec::new();
    for (name, body) in cases {
        let (status, answer) = ask(Behaviour::Body(body.to_string()), false).await;
        let Ok(value) = serde_json::from_str::<Value>(&answer) else {
            continue;
        };
        let choice = &value["choices"][0];
        let mut joined = String::new();
        let mut byte_run = Vec::new();
        for token in choice["logprobs"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            joined.push_str(token["token"].as_str().unwrap_or_default());
            for n in token["bytes"].as_array().cloned().unwrap_or_default() {
                byte_run.push(u8::try_from(n.as_u64().unwrap_or(0)).unwrap_or(0));
            }
        }
        for part in choice["message"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            joined.push_str(part["text"].as_str().unwrap_or_default());
        }
        let from_bytes = String::from_utf8_lossy(&byte_run).into_owned();
        if joined.contains(KEY) || from_bytes.contains(KEY) {
            leaks.push(format!(
                "{name}: HTTP {status}, a client joining the fragments decodes the key: {answer}"
            ));
        }
    }
    assert_none(&leaks);
}

/// Held: the key inside ids, model, fingerprint, refusal, reasoning_content, a tool
/// name split across deltas, object keys, uppercase and surrogate-pair escapes, SSE
/// `id:`/`event:` lines, and a stream without `[DONE]` or a trailing blank line.
#[tokio::test]
async fn the_covered_places_hold() {
    let (a, b) = halves();
    let upper: String = KEY
        .chars()
        .map(|c| format!("\\u{:04X}", u32::from(c)))
        .collect();
    // A whole answer with the key, escaped, in every metadata string and object key.
    let body = format!(
        r#"{{"id":"{e}","model":"{u}","system_fingerprint":"{e}","{e}":1,"choices":[{{"index":0,"message":{{"role":"assistant","content":null,"refusal":"{u}","tool_calls":[{{"id":"{e}","type":"function","function":{{"name":"{e}","arguments":"{{\"{e2}\":\"{e2}\"}}"}}}}]}},"finish_reason":"stop"}}]}}"#,
        e = escaped(KEY),
        u = upper,
        e2 = escaped(KEY).replace('\\', "\\\\"),
    );
    let (status, answer) = ask(Behaviour::Body(body), false).await;
    assert!(
        !common::decoded(&answer).contains(KEY) && !answer.contains(KEY),
        "{status} {answer}"
    );
    // Streams.
    let tool_name = |t: &str| {
        data(
            &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":t}}]}}]}),
        )
    };
    let text = |field: &str, t: &str| data(&json!({"choices":[{"index":0,"delta":{field:t}}]}));
    let streams = vec![
        ("tool name split", vec![tool_name(a), tool_name(b)]),
        (
            "reasoning_content split",
            vec![text("reasoning_content", a), text("reasoning_content", b)],
        ),
        (
            "refusal split",
            vec![text("refusal", a), text("refusal", b)],
        ),
        (
            "id and event lines",
            vec![format!(
                "id: {KEY}\nevent: {KEY}\n: {KEY}\n{}",
                text("content", "x")
            )],
        ),
        (
            "crlf framing, no DONE, no final blank line",
            vec![
                text("content", a).replace("\n\n", "\r\n\r\n"),
                format!(
                    "data: {}",
                    json!({"choices":[{"index":0,"delta":{"content":b}}]})
                ),
            ],
        ),
        (
            "escaped key in one event",
            vec![format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{upper}\"}}}}]}}\n\n"
            )],
        ),
    ];
    for (name, events) in streams {
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        assert!(!sse.contains(KEY), "{name}: {sse}");
        assert_stream_never_decodes_the_key(name, &sse);
    }
}

// ---------------------------------------------------------------------------------
// Choices, indexes and content parts a JS client joins.
// ---------------------------------------------------------------------------------

/// The redactor names a choice by `index` only when it is a u64 (`as_u64`), else by its
/// position in the list; a JS client names it by `index`'s value as a property key. So
/// `0.0`, `"0"` (or `-0`) at position 1 is a *fresh* choice to the redactor, past the
/// "nothing follows a finish" check, but the same choice 0 to the client, which appends
/// its text after the prefix the redactor flushed at choice 0's finish.
#[tokio::test]
async fn a_non_integer_index_continues_a_finished_choice_in_the_client() {
    let (a, b) = halves();
    let mut leaks = Vec::new();
    for spelled in [json!(0.0), json!("0")] {
        let events = vec![
            data(
                &json!({"choices":[{"index":0,"delta":{"content":format!("token: {a}")},"finish_reason":null}]}),
            ),
            data(&json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})),
            data(
                &json!({"choices":[{"index":7,"delta":{},"finish_reason":null},{"index":spelled,"delta":{"content":b},"finish_reason":null}]}),
            ),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        leaks.extend(leak_in(&format!("index {spelled}"), &sse, false));
    }
    assert_none(&leaks);
}

/// At a choice's finish its held text is merged into the finishing event's delta by the
/// *list entry's `index` value*, while it was held by the entry's `index`-or-position.
/// With content sent as a list of parts (Mistral streams `content` as typed chunks), the
/// held key prefix lands in the entry marked `"index":0`, *before* a fresh part holding
/// the rest: each string is redacted alone, the parts a client joins spell the key.
#[tokio::test]
async fn the_finish_flush_lands_a_held_prefix_before_the_rest_in_content_parts() {
    let (a, b) = halves();
    let events = vec![
        data(
            &json!({"choices":[{"index":0,"delta":{"content":[{"type":"text","text":format!("key {a}")}]},"finish_reason":null}]}),
        ),
        data(
            &json!({"choices":[{"index":0,"delta":{"content":[{"index":0,"type":"text","text":""},{"type":"text","text":b}]},"finish_reason":"stop"}]}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_none(
        &leak_in("content parts", &sse, false)
            .into_iter()
            .collect::<Vec<_>>(),
    );
}

/// `[DONE]` flushes what is held, but the redactor keeps going afterwards with fresh
/// holds: the rest of the key in an event after `[DONE]` is passed. SDKs stop at
/// `[DONE]`, but a page reading with `EventSource` and skipping what is not JSON joins
/// the two.
#[tokio::test]
async fn text_after_done_continues_a_flushed_prefix() {
    let (a, b) = halves();
    let events = vec![
        data(
            &json!({"choices":[{"index":0,"delta":{"content":format!("token: {a}")},"finish_reason":null}]}),
        ),
        "data:  [DONE] \n\n".to_owned(),
        data(&json!({"choices":[{"index":0,"delta":{"content":b},"finish_reason":null}]})),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_none(
        &leak_in("after [DONE]", &sse, true)
            .into_iter()
            .collect::<Vec<_>>(),
    );
}

/// Only strings inside `delta` are held back: the legacy completions chunk shape
/// (`choices[].text`, what vLLM/LangChain completion clients accumulate) passes a split
/// key, each half redacted alone.
#[tokio::test]
async fn a_key_split_across_choice_text_outside_delta() {
    let (a, b) = halves();
    let events = vec![
        data(
            &json!({"object":"text_completion","choices":[{"index":0,"text":format!("token: {a}"),"finish_reason":null}]}),
        ),
        data(
            &json!({"object":"text_completion","choices":[{"index":0,"text":b,"finish_reason":null}]}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (_, sse) = ask(Behaviour::Events(events), true).await;
    assert_none(
        &leak_in("choices[].text", &sse, false)
            .into_iter()
            .collect::<Vec<_>>(),
    );
}

/// A whole answer's `content` list mixing a bare string and a `{type,text}` part (both
/// shapes LangChain's content blocks accept and join): `joined_leak` joins the strings
/// alone and each key's strings alone, never the two together.
#[tokio::test]
async fn mixed_string_and_object_content_parts_join_into_the_key() {
    let (a, b) = halves();
    let body = json!({"choices":[{"index":0,"message":{"role":"assistant","content":[a,{"type":"text","text":b}]},"finish_reason":"stop"}]});
    let (status, answer) = ask(Behaviour::Body(body.to_string()), false).await;
    let Ok(value) = serde_json::from_str::<Value>(&answer) else {
        return;
    };
    let mut joined = String::new();
    for part in value["choices"][0]["message"]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        joined.push_str(part.as_str().unwrap_or_default());
        joined.push_str(part["text"].as_str().unwrap_or_default());
    }
    assert!(
        !joined.contains(KEY),
        "HTTP {status}: a client joining the content parts decodes the key: {answer}"
    );
}

/// Held: a key split within one choice across two `tool_calls` entries whose `index`
/// collide as `0` and `0.0`, and arguments split the same way; two entries with the
/// same index in one event; a delta that is a string; `[DONE]` spelt with spaces or
/// over two data lines; an idle end with a held prefix.
#[tokio::test]
async fn index_collisions_inside_a_choice_and_odd_shapes_hold() {
    let (a, b) = halves();
    let tool = |at: Value, part: &str, t: &str, finish: Value| {
        data(
            &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":at,"function":{part:t}}]},"finish_reason":finish}]}),
        )
    };
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "tool name 0 / 0.0",
            vec![
                tool(json!(0), "name", a, Value::Null),
                data(
                    &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"function":{"name":"x"}},{"index":0.0,"function":{"name":b}}]},"finish_reason":null}]}),
                ),
                tool(json!(5), "name", "", json!("tool_calls")),
            ],
        ),
        (
            "arguments 0 / 0.0",
            vec![
                tool(
                    json!(0),
                    "arguments",
                    &format!("{{\"k\":\"{a}"),
                    Value::Null,
                ),
                data(
                    &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"function":{"arguments":"{}"}},{"index":0.0,"function":{"arguments":format!("{b}\"}}")}}]},"finish_reason":null}]}),
                ),
                tool(json!(5), "arguments", "", json!("tool_calls")),
            ],
        ),
        (
            "two entries, same index, one event",
            vec![data(
                &json!({"choices":[{"index":0,"delta":{"content":a}},{"index":0,"delta":{"content":b}}]}),
            )],
        ),
        (
            "delta as a string",
            vec![
                data(&json!({"choices":[{"index":0,"delta":a}]})),
                data(&json!({"choices":[{"index":0,"delta":b}]})),
            ],
        ),
        (
            "[DONE] over two data lines",
            vec![
                data(&json!({"choices":[{"index":0,"delta":{"content":a}}]})),
                "data:\ndata: [DONE]\n\n".to_owned(),
                data(&json!({"choices":[{"index":0,"delta":{"content":b}}]})),
            ],
        ),
        (
            "no DONE, stream just ends with a held prefix",
            vec![data(
                &json!({"choices":[{"index":0,"delta":{"content":a}}]}),
            )],
        ),
    ];
    let mut leaks = Vec::new();
    for (name, mut events) in cases {
        if !events.iter().any(|e| e.contains("[DONE]"))
            && name != "no DONE, stream just ends with a held prefix"
        {
            events.push("data: [DONE]\n\n".to_owned());
        }
        let (_, sse) = ask(Behaviour::Events(events), true).await;
        if sse.contains(KEY) {
            leaks.push(format!("{name}: raw key in {sse}"));
        }
        leaks.extend(leak_in(name, &sse, false));
    }
    assert_none(&leaks);
}

/// Held: the upstream answering SSE to a non-streaming request, or JSON to a streaming
/// one, or `text/event-stream` with an escaped key in the JSON body.
#[tokio::test]
async fn mismatched_answer_kinds_are_refused() {
    let escaped: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", u32::from(c)))
        .collect();
    let sse = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{escaped}\"}}}}]}}\n\n"
    );
    let (status, body) = ask(Behaviour::Body(sse), false).await;
    assert!(
        !common::decoded(&body).contains(KEY) && status >= 400,
        "{status} {body}"
    );
    let json_body = format!(
        r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"{escaped}"}}}}]}}"#
    );
    // `Behaviour::Body` answers `application/json` even to `stream: true`.
    let (status, body) = ask(Behaviour::Body(json_body), true).await;
    assert!(
        !common::decoded(&body).contains(KEY) && status >= 400,
        "{status} {body}"
    );
}

// ---------------------------------------------------------------------------------
// The redactor stays up against a hostile upstream.
// ---------------------------------------------------------------------------------

/// serde_json caps nesting at 128 per parse, but `redact_string` parses every string
/// that looks like JSON and recurses into it, and a string inside that is parsed again:
/// ~20 levels of JSON-in-a-string, each 120 deep, fit in the 8 MiB answer cap and
/// recurse ~2,400 levels deep through `redact_value` on a 2 MiB tokio worker stack.
/// A stack overflow aborts the whole gateway (every page, every request).
#[test]
fn json_nested_inside_strings_does_not_overflow_the_stack() {
    if !in_child("json_nested_inside_strings_does_not_overflow_the_stack") {
        return;
    }
    const DEPTH: usize = 120;
    let mut inner = Value::String("x".into());
    let mut levels = 0;
    loop {
        let mut v = inner.clone();
        for _ in 0..DEPTH {
            v = Value::Array(vec![v]);
        }
        let text = v.to_string();
        if text.len() > 3 * 1024 * 1024 {
            break;
        }
        inner = Value::String(text);
        levels += 1;
    }
    let body =
        json!({"choices":[{"index":0,"message":{"role":"assistant","content":inner}}]}).to_string();
    eprintln!("{levels} levels, {} bytes", body.len());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (status, answer) = runtime.block_on(ask(Behaviour::Body(body), false));
    assert!(status > 0, "{}", answer.len());
}

/// Every distinct (choice, path) ever seen stays in `held` (an empty string, uncounted
/// by the 1 MiB cap), and every string of every later event sums all of them
/// (`check_cap`): tool calls with fresh `index` values make the redactor's work
/// quadratic and its memory unbounded. ~2.5 MB from the upstream should take well under
/// a few seconds.
#[test]
fn many_distinct_tool_call_indexes_do_not_make_the_redactor_quadratic() {
    let mut events = Vec::new();
    let per_event = 2_000;
    for e in 0..30 {
        let calls: Vec<Value> = (0..per_event)
            .map(|i| json!({"index": e * per_event + i, "function": {"name": "x"}}))
            .collect();
        events.push(data(
            &json!({"choices":[{"index":0,"delta":{"tool_calls":calls}}]}),
        ));
    }
    let bytes: usize = events.iter().map(String::len).sum();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut r = StreamRedactor::new(KEY);
        for e in &events {
            let _ = r.push(e.as_bytes());
        }
        let _ = r.finish();
        let _ = tx.send(started.elapsed());
    });
    match rx.recv_timeout(Duration::from_secs(8)) {
        Ok(took) => assert!(
            took < Duration::from_secs(8),
            "{bytes} bytes took {took:?}"
        ),
        Err(_) => panic!(
            "{bytes} bytes of upstream events (60,000 tool calls, fresh indexes) still not redacted after 8 s"
        ),
    }
}

/// A client that reads a piece equal to everything it holds as a repeat (the page, for
/// servers that repeat a call's id and name whole in every chunk) assembles the id and
/// name the upstream sent, even one built of two copies of a start of the key: the held
/// copy, flushed at the finish, must not look like a repeat of the copy already sent.
#[test]
fn a_name_of_two_copies_of_a_start_of_the_key_reaches_the_client_whole() {
    let twice = |n: usize| KEY[..n].repeat(2);
    let (id, name) = (twice(1), twice(3));
    let call =
        json!({"index":0,"id":id,"type":"function","function":{"name":name,"arguments":"{}"}});
    let chunks = [
        json!({"choices":[{"index":0,"delta":{"tool_calls":[call]}}]}),
        json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    ];
    let mut redactor = StreamRedactor::new(KEY);
    let mut sse = Vec::new();
    for chunk in &chunks {
        sse.extend_from_slice(&redactor.push(format!("data: {chunk}\n\n").as_bytes()));
    }
    sse.extend_from_slice(&redactor.finish());
    let sse = String::from_utf8(sse).unwrap();
    // The page's reading: a piece equal to all it holds is a repeat.
    let join = |held: &mut String, piece: &str| {
        if held != piece {
            held.push_str(piece);
        }
    };
    let (mut got_id, mut got_name) = (String::new(), String::new());
    for data in spec_events(&sse) {
        let Some(event) = js_parse(&data) else {
            continue;
        };
        for call in event["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            join(&mut got_id, call["id"].as_str().unwrap_or_default());
            join(
                &mut got_name,
                call["function"]["name"].as_str().unwrap_or_default(),
            );
        }
    }
    assert_eq!((got_id, got_name), (id, name), "{sse}");
}
