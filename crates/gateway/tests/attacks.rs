//! A fresh attacker's review of the gateway: one test per attack tried. Each asserts
//! the promise (the key never reaches the page in any encoding a client decodes; a
//! trail that cannot be cut or rewritten unseen; one writer per file; only allowed
//! `Host` values), so a failing test is a break.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::type_complexity
)]

mod common;

use common::client::{ask, data, halves, spec_events};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{config, serve, state, test_key, Behaviour, KEY};
use countersign_gateway::{head_path, verify_file, FileStore, StoreError};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---------------------------------------------------------------------------------
// Helpers: the gateway against a hostile upstream, and what a client decodes.
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
fn accumulated(sse: &str) -> Vec<String> {
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
    accumulated(sse)
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

// ---------------------------------------------------------------------------------
// (a) The key never reaches the page.
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
// (b)/(c) The trail.
// ---------------------------------------------------------------------------------

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(file: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(file, text).unwrap();
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// One writer per file is enforced per *path*: the lock is `<path>.lock`, so a second
/// gateway given another name for the same file (a symlink, a hard link, a bind mount)
/// takes another lock and both write, forking the chain.
#[test]
fn a_second_writer_through_another_name_for_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let first = FileStore::open(&path, test_key()).unwrap();
    let alias = dir.path().join("alias.jsonl");
    std::os::unix::fs::symlink(&path, &alias).unwrap();
    match FileStore::open(&alias, test_key()) {
        Err(StoreError::Locked { .. }) => {}
        Err(other) => panic!("refused, but not as locked: {other}"),
        Ok(second) => {
            first
                .append_blocking(common::records(2, "first", 0))
                .unwrap();
            second
                .append_blocking(common::records(2, "second", 0))
                .unwrap();
            let verdict = verify_file(&path, Some(&test_key()));
            panic!(
                "a second writer opened the same file through a symlink; after one batch each, verify says: {verdict:?}"
            );
        }
    }
}

/// The head is written after the lines are synced; if writing it fails, the batch is
/// reported failed but its lines stay in the file while the store's seq and ids do not
/// move. The page retries (as it is told it safely can): the next lines repeat seq and
/// prev, the record is stored twice, and the trail no longer verifies or opens.
#[test]
fn a_failed_head_write_then_a_retry_keeps_the_trail_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, test_key()).unwrap();
    store.append_blocking(common::records(1, "r", 0)).unwrap();
    // Something makes the head's temporary file unwritable (here: a directory in its
    // place; on a real disk: ENOSPC, EIO, a permission change).
    let temp = suffixed(&head_path(&path), ".tmp");
    std::fs::create_dir(&temp).unwrap();
    assert!(store.append_blocking(common::records(1, "r", 1)).is_err());
    std::fs::remove_dir(&temp).unwrap();
    // The page retries the batch that was not acknowledged.
    store.append_blocking(common::records(1, "r", 1)).unwrap();
    drop(store);
    let verdict = verify_file(&path, Some(&test_key()));
    assert!(
        verdict.is_ok(),
        "after a failed head write and a retry the gateway's own trail is broken: {verdict:?}\n{}",
        lines(&path).join("\n")
    );
    assert!(FileStore::open(&path, test_key()).is_ok());
}

/// The lock file (and the head's temporary file) are opened following symlinks and
/// truncated: whoever can plant `<file>.lock` (or `<file>.head.tmp`) as a symlink
/// makes the gateway overwrite the target, for instance the audit key file.
#[test]
fn a_symlinked_lock_or_temp_file_does_not_clobber_its_target() {
    let mut clobbered = Vec::new();
    for suffix in [".lock", ".head.tmp"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let victim = dir.path().join("audit.jsonl.key");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = if suffix == ".lock" {
            suffixed(&path, suffix)
        } else {
            suffixed(&head_path(&path), ".tmp")
        };
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let _ = FileStore::open(&path, test_key());
        let now = std::fs::read_to_string(&victim).unwrap();
        if now != "precious\n" {
            clobbered.push(format!(
                "{suffix}: the gateway wrote through a symlink into `audit.jsonl.key`, which now holds {now:?}"
            ));
        }
    }
    assert!(clobbered.is_empty(), "{}", clobbered.join("\n"));
}

/// Held: a second `"mac"` field (appended after the genuine one), swapped lines, a line
/// dropped from the middle, a truncated or deleted head, a duplicated line, a forged
/// line under the wrong key; and a torn tail is cut at open without losing records.
#[test]
fn the_trail_tamperings_in_the_brief_are_detected() {
    let key = test_key();
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let store = FileStore::open(&path, key.clone()).unwrap();
        store.append_blocking(common::records(3, "t", 0)).unwrap();
        drop(store);
        (dir, path)
    };
    let tamperings: Vec<(&str, Box<dyn Fn(&Path)>)> = vec![
        (
            "a second mac field",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                let mac = serde_json::from_str::<Value>(&l[2]).unwrap()["mac"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                l[2] = format!("{},\"mac\":\"{mac}\"}}", l[2].trim_end_matches('}'));
                write_lines(p, &l);
            }),
        ),
        (
            "a field appended after the mac",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l[2] = format!("{},\"note\":\"x\"}}", l[2].trim_end_matches('}'));
                write_lines(p, &l);
            }),
        ),
        (
            "two lines swapped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.swap(1, 2);
                write_lines(p, &l);
            }),
        ),
        (
            "a middle line dropped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.remove(1);
                write_lines(p, &l);
            }),
        ),
        (
            "the last line dropped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.pop();
                write_lines(p, &l);
            }),
        ),
        (
            "a line repeated",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                let last = l[2].clone();
                l.push(last);
                write_lines(p, &l);
            }),
        ),
        (
            "the head truncated",
            Box::new(|p: &Path| {
                let h = head_path(p);
                let text = std::fs::read_to_string(&h).unwrap();
                std::fs::write(&h, &text[..text.len() / 2]).unwrap();
            }),
        ),
        (
            "the head deleted",
            Box::new(|p: &Path| std::fs::remove_file(head_path(p)).unwrap()),
        ),
        (
            "the record's text changed",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l[1] = l[1].replacen("\"t-1\"", "\"t-9\"", 1);
                write_lines(p, &l);
            }),
        ),
    ];
    for (name, tamper) in tamperings {
        let (_dir, path) = fresh();
        tamper(&path);
        assert!(
            verify_file(&path, Some(&key)).is_err(),
            "{name}: verify --key-file did not notice"
        );
        assert!(
            FileStore::open(&path, key.clone()).is_err(),
            "{name}: the store extends a tampered file"
        );
    }
    // A torn tail (an unacknowledged partial line) is cut at open; every record stays.
    let (_dir, path) = fresh();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"seq\":4,\"prev\":\"ab");
    std::fs::write(&path, bytes).unwrap();
    let store = FileStore::open(&path, key.clone()).unwrap();
    assert_eq!(store.len(), 3);
    drop(store);
    assert_eq!(verify_file(&path, Some(&key)).unwrap().lines, 3);
    // A record sent again is stored once, within a batch and across batches (the same
    // record: another one under a stored id is a conflict, see the routes' tests).
    let (_dir, path) = fresh();
    let store = FileStore::open(&path, key.clone()).unwrap();
    let mut batch = common::records(4, "t", 0).split_off(2);
    batch.push(batch[0].clone());
    let appended = store.append_blocking(batch).unwrap();
    assert_eq!((appended.appended, appended.duplicates), (1, 2));
}

// ---------------------------------------------------------------------------------
// (d) Host allow-list.
// ---------------------------------------------------------------------------------

async fn raw(base: &str, request: &str) -> String {
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        stream.read_to_end(&mut out),
    )
    .await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Held: every spelling of a foreign host is refused (421) on the API and on static
/// files; the loopback names in any case and on any port pass.
#[tokio::test]
async fn host_spellings_a_rebinding_page_could_send_are_refused() {
    let dist = tempfile::tempdir().unwrap();
    std::fs::write(dist.path().join("index.html"), "<p>page</p>").unwrap();
    let mut cfg = config(None);
    cfg.dist = Some(dist.path().to_owned());
    let (s, _dir) = state(cfg);
    let base = serve(s).await;
    let refused = [
        ("/v1/health", "attacker.example:8787"),
        ("/index.html", "attacker.example:8787"),
        ("/v1/audit", "attacker.example"),
        ("/v1/health", "localhost.attacker.example"),
        ("/v1/health", "localhost@attacker.example"),
        ("/v1/health", "attacker.example@localhost"),
        ("/v1/health", "localhost:80@attacker.example"),
        ("/v1/health", "127.0.0.1.nip.io"),
        ("/v1/health", "[::ffff:127.0.0.1]"),
        ("/v1/health", "0x7f.1"),
        ("/v1/health", "localhost%2eattacker.example"),
        ("http://localhost/v1/health", "attacker.example"),
        ("/", "attacker.example"),
    ];
    for (target, host) in refused {
        let response = raw(
            &base,
            &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(
            status_of(&response) == 421 || status_of(&response) == 400,
            "{target} with Host {host}: {response}"
        );
    }
    for host in ["localhost", "LOCALHOST:9", "127.0.0.1:8787", "[::1]:1"] {
        let response = raw(
            &base,
            &format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert_eq!(status_of(&response), 200, "{host}: {response}");
    }
}
