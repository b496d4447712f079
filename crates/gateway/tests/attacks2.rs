//! A second fresh attacker's review of the rewritten redaction and the keyed trail: one
//! test per attack tried. Each asserts the promise (the key never reaches the page in any
//! form a client decodes; the gateway stays up against a hostile upstream; a trail that
//! cannot be cut or rewritten unseen), so a failing test is a break.
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
use std::path::Path;
use std::time::{Duration, Instant};

use common::{test_key, Behaviour, KEY};
use countersign_gateway::redact::StreamRedactor;
use countersign_gateway::{head_path, verify_file, FileStore};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

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
fn accumulated(sse: &str, past_done: bool) -> Vec<String> {
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
    accumulated(sse, past_done)
        .into_iter()
        .find(|t| t.contains(KEY))
        .map(|t| {
            format!("{name}: a client accumulating the stream decodes the key from {t:?}\n--- stream sent to the page ---\n{sse}")
        })
}

fn assert_none(leaks: &[String]) {
    assert!(
        leaks.is_empty(),
        "{} leak(s):\n{}",
        leaks.len(),
        leaks.join("\n\n")
    );
}

/// Runs this test's body in a child process (for attacks that may crash the process):
/// returns `true` in the child, where the body should run.
fn in_child(test: &str) -> bool {
    if std::env::var_os("ATTACKS2_CHILD").is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("ATTACKS2_CHILD", "1")
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
// (a) The key never reaches a client.
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
// (b) The gateway stays up against a hostile upstream.
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

// ---------------------------------------------------------------------------------
// (c) The trail.
// ---------------------------------------------------------------------------------

fn file_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The head is keyed but not monotonic, and lines past the head's seq are accepted as
/// "written but never acknowledged": with a copy of an old genuine head (a backup, or
/// read at any time: it is not secret), acknowledged records can be cut off the tail
/// and `verify --key-file` and the store both accept the result.
#[test]
fn an_old_head_restored_after_cutting_acknowledged_records_is_detected() {
    // A body cut to exactly the old head's length, with that head put back, cannot be
    // told from the trail as it was then without an anchor kept elsewhere (documented in
    // the gateway README). Anything else is caught: the old head's `pending` does not
    // allow the lines left beyond it.
    let key = test_key();
    let mut passed = Vec::new();
    for keep in [3usize, 4, 5] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let store = FileStore::open(&path, key.clone()).unwrap();
        store.append_blocking(common::records(2, "r", 0)).unwrap();
        let old_head = std::fs::read(head_path(&path)).unwrap();
        let done = store.append_blocking(common::records(4, "r", 2)).unwrap();
        assert_eq!(done.last_seq, 6);
        drop(store);
        // The attacker cuts two acknowledged records (or four), restores the old head.
        let l = file_lines(&path);
        let mut text = l[..keep].join("\n");
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        std::fs::write(head_path(&path), &old_head).unwrap();
        let verdict = verify_file(&path, Some(&key));
        if let Ok(v) = &verdict {
            passed.push(format!(
                "6 acknowledged, cut to {keep}: verify --key-file says OK ({v:?}); open: {}",
                FileStore::open(&path, key.clone()).is_ok()
            ));
        }
    }
    assert!(passed.is_empty(), "{}", passed.join("\n"));
}

/// The mac covers a line only up to `,"mac":"`: bytes after it (a CR, spaces) can be
/// added to any line, and the whole file converted to CRLF, without `verify` noticing.
#[test]
fn bytes_added_after_a_lines_mac_are_detected() {
    let key = test_key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    store.append_blocking(common::records(3, "r", 0)).unwrap();
    drop(store);
    let l = file_lines(&path);
    let text = format!("{}\r\n{} \t \n{}\r\n", l[0], l[1], l[2]);
    std::fs::write(&path, &text).unwrap();
    let verdict = verify_file(&path, Some(&key));
    assert!(
        verdict.is_err(),
        "the file's bytes were changed (CRLF, trailing blanks) and verify --key-file says OK: {verdict:?}"
    );
}

/// Held: a complete last line whose newline was removed (it is cut as torn, and the
/// head then says records were cut), and appends racing from many threads (one chain,
/// every record once, the head at the end).
#[test]
fn a_missing_final_newline_and_racing_appends_hold() {
    let key = test_key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    store.append_blocking(common::records(3, "r", 0)).unwrap();
    drop(store);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.pop();
    std::fs::write(&path, &bytes).unwrap();
    assert!(verify_file(&path, Some(&key)).is_err());
    assert!(FileStore::open(&path, key.clone()).is_err());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    store
                        .append_blocking(common::records(2, &format!("t{t}"), i * 2))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(store);
    let v = verify_file(&path, Some(&key)).unwrap();
    assert_eq!((v.lines, v.unanchored_lines), (160, 0));
}
