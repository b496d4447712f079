//! The proxy against a test upstream on loopback speaking the real wire format:
//! byte-for-byte pass-through (plain and SSE with tool-call deltas), every upstream
//! failure mode as a bounded, clear JSON error, and the key never sent back.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::{Duration, Instant};

use common::{
    chat_body, config, page_post, serve, state, upstream, Behaviour, COMPLETION, KEY, STREAM,
};
use serde_json::{json, Value};

struct Answer {
    status: u16,
    headers: String,
    body: String,
}

async fn ask(upstream_url: Option<String>, stream: bool) -> Answer {
    let (s, _dir) = state(config(upstream_url));
    let base = serve(s).await;
    let client = reqwest::Client::new();
    let response = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(stream),
    )
    .send()
    .await
    .unwrap();
    let status = response.status().as_u16();
    let headers = format!("{:?}", response.headers());
    let body = response.text().await.unwrap();
    Answer {
        status,
        headers,
        body,
    }
}

/// What a client accumulates from a stream: content, tool names, tool arguments, ids
/// and finish reasons.
fn summary(sse: &str) -> Vec<String> {
    let mut out = vec![String::new(); 4];
    for line in sse.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        for choice in event["choices"].as_array().cloned().unwrap_or_default() {
            out[0].push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                out[1].push_str(call["function"]["name"].as_str().unwrap_or_default());
                out[2].push_str(call["function"]["arguments"].as_str().unwrap_or_default());
                out[3].push_str(call["id"].as_str().unwrap_or_default());
            }
            out[3].push_str(choice["finish_reason"].as_str().unwrap_or_default());
        }
    }
    out
}

fn code(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap()["error"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn assert_no_key(answer: &Answer) {
    assert!(
        !answer.body.contains(KEY) && !answer.headers.contains(KEY),
        "the key leaked: {}",
        answer.body
    );
    // Not even a recognisable piece of it.
    assert!(!answer.body.contains(&KEY[..12]) && !answer.body.contains(&KEY[KEY.len() - 8..]));
}

#[tokio::test]
async fn a_completion_passes_through_unchanged_with_the_key_added_and_the_model_set() {
    let (url, seen) = upstream(Behaviour::Recorded).await;
    let answer = ask(Some(url), false).await;
    assert_eq!(answer.status, 200);
    // The answer is parsed, checked and written again (what reaches the page is exactly
    // what was checked); a client reads the same JSON, less the token logprobs.
    let mut recorded: Value = serde_json::from_str(COMPLETION).unwrap();
    for choice in recorded["choices"].as_array_mut().unwrap() {
        choice.as_object_mut().unwrap().remove("logprobs");
    }
    let got: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(got, recorded, "the body changed on the way");
    let requests = seen.requests.lock().unwrap();
    let (headers, body) = &requests[0];
    assert_eq!(headers["authorization"], format!("Bearer {KEY}"));
    let sent: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        sent["model"], "gpt-4o-mini",
        "the gateway decides the model"
    );
    assert_eq!(
        sent["tools"][0]["function"]["name"], "save_workspace_name",
        "tools forwarded"
    );
    assert_no_key(&answer);
}

#[tokio::test]
async fn a_stream_passes_through_chunk_by_chunk_with_tool_call_deltas() {
    let (url, _seen) = upstream(Behaviour::Recorded).await;
    let (s, _dir) = state(config(Some(url)));
    let base = serve(s).await;
    let client = reqwest::Client::new();
    let response = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(true),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut chunks = 0;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    use futures_util::StreamExt;
    while let Some(chunk) = stream.next().await {
        chunks += 1;
        body.extend_from_slice(&chunk.unwrap());
    }
    // The events are parsed and written again (the key is redacted at the decoded
    // level), so a client decodes exactly what the upstream sent.
    let body = String::from_utf8(body).unwrap();
    assert_eq!(
        summary(&body),
        summary(STREAM),
        "the stream changed on the way: {body}"
    );
    assert!(body.ends_with("data: [DONE]\n\n"));
    assert!(
        chunks >= 2,
        "the stream arrived in one piece ({chunks} chunk), not passed through"
    );
}

#[tokio::test]
async fn an_upstream_that_is_down_is_a_quick_502() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: nothing listens there
    let started = Instant::now();
    let answer = ask(Some(format!("http://127.0.0.1:{port}/v1")), false).await;
    assert_eq!(
        (answer.status, code(&answer.body).as_str()),
        (502, "upstream_unavailable")
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_no_key(&answer);
}

#[tokio::test]
async fn a_slow_upstream_is_cut_at_the_timeout() {
    let (url, _seen) = upstream(Behaviour::Slow(Duration::from_secs(30))).await;
    let started = Instant::now();
    let answer = ask(Some(url), false).await;
    assert_eq!(
        (answer.status, code(&answer.body).as_str()),
        (504, "upstream_timeout")
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn garbage_from_the_upstream_is_a_502_not_a_pass_through() {
    let (url, _seen) = upstream(Behaviour::Garbage).await;
    let answer = ask(Some(url), false).await;
    assert_eq!(
        (answer.status, code(&answer.body).as_str()),
        (502, "upstream_malformed")
    );
    // A plain answer where a stream was asked for is malformed too.
    let (url, _seen) = upstream(Behaviour::Garbage).await;
    let answer = ask(Some(url), true).await;
    assert_eq!(
        (answer.status, code(&answer.body).as_str()),
        (502, "upstream_malformed")
    );
}

#[tokio::test]
async fn upstream_errors_are_reported_without_echoing_their_text() {
    let leaky = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {}***{}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#,
        &KEY[..8],
        &KEY[KEY.len() - 4..]
    );
    for (status, body, want_status) in [
        (401, leaky.clone(), 502),
        (500, "{}".to_owned(), 502),
        (429, "{}".to_owned(), 429),
        (400, "not json".to_owned(), 502),
    ] {
        let (url, _seen) = upstream(Behaviour::Status(status, body)).await;
        let answer = ask(Some(url), false).await;
        assert_eq!(
            (answer.status, code(&answer.body).as_str()),
            (want_status, "upstream_error"),
            "upstream {status}"
        );
        assert!(answer.body.contains(&format!("HTTP {status}")));
        assert!(
            !answer.body.contains(&KEY[..8]),
            "a piece of the key came back: {}",
            answer.body
        );
    }
    let (url, _seen) = upstream(Behaviour::Status(401, leaky)).await;
    let answer = ask(Some(url), false).await;
    assert!(
        answer.body.contains("invalid_api_key"),
        "the upstream's code is kept: {}",
        answer.body
    );
}

#[tokio::test]
async fn a_stalled_stream_ends_with_an_error_event_after_the_idle_timeout() {
    let (url, _seen) = upstream(Behaviour::Stall).await;
    let started = Instant::now();
    let answer = ask(Some(url), true).await;
    assert_eq!(answer.status, 200, "the stream had started");
    let first = answer
        .body
        .lines()
        .next()
        .unwrap()
        .strip_prefix("data: ")
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(first).unwrap()["id"],
        "chatcmpl-XyZ789",
        "the first event passed before the stall"
    );
    assert!(
        answer.body.contains("\"code\":\"upstream_timeout\""),
        "{}",
        answer.body
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_upstream_that_echoes_the_key_has_it_redacted_in_bodies_and_streams() {
    for stream in [false, true] {
        let (url, _seen) = upstream(Behaviour::EchoKey).await;
        let answer = ask(Some(url), stream).await;
        assert_eq!(answer.status, 200);
        assert!(
            answer.body.contains("[redacted]"),
            "stream={stream}: {}",
            answer.body
        );
        assert_no_key(&answer);
    }
}

#[tokio::test]
async fn the_key_never_appears_in_any_answer_of_any_route() {
    let (url, _seen) = upstream(Behaviour::Recorded).await;
    let (s, _dir) = state(config(Some(url)));
    let base = serve(s).await;
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for (method, path, body) in [
        ("GET", "/v1/health", ""),
        ("GET", "/v1/models", ""),
        ("POST", "/v1/chat/completions", "{"),
        ("POST", "/v1/audit", "[{}]"),
        ("GET", "/v1/audit", ""),
        ("GET", "/v1/unknown", ""),
        ("GET", "/", ""),
    ] {
        let request = client
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("sec-fetch-site", "same-origin")
            .body(body.to_owned());
        let response = request.send().await.unwrap();
        let headers = format!("{:?}", response.headers());
        answers.push(format!("{headers}{}", response.text().await.unwrap()));
    }
    for unauthenticated in ["/v1/models", "/v1/chat/completions"] {
        let response = client
            .get(format!("{base}{unauthenticated}"))
            .send()
            .await
            .unwrap();
        let headers = format!("{:?}", response.headers());
        answers.push(format!("{headers}{}", response.text().await.unwrap()));
    }
    for answer in answers {
        assert!(!answer.contains(KEY), "the key leaked: {answer}");
    }
}

/// The key spelt with JSON escapes: every character as `\uXXXX`.
fn escaped_key() -> String {
    KEY.chars()
        .map(|c| format!("\\u{:04x}", u32::from(c)))
        .collect()
}

fn event(delta: Value) -> String {
    format!(
        "data: {}\n\n",
        json!({"object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":null}]})
    )
}

fn finish(reason: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":reason}]})
    )
}

/// Asks through the gateway and checks that neither the bytes nor anything a client
/// decodes from them (escapes, joined deltas, the arguments' own JSON) hold the key.
async fn assert_never_decoded(behaviour: Behaviour, stream: bool) -> Answer {
    let (url, _seen) = upstream(behaviour).await;
    let answer = ask(Some(url), stream).await;
    assert_no_key(&answer);
    let decoded = common::decoded(&answer.body);
    assert!(
        !decoded.contains(KEY),
        "a client decodes the key from: {}",
        answer.body
    );
    answer
}

#[tokio::test]
async fn a_key_spelt_with_json_escapes_never_reaches_the_page() {
    let escaped = escaped_key();
    // In the content, in a tool call's name, and in its arguments (escaped at the
    // arguments' own JSON level).
    let inner = format!("{{\\\"note\\\":\\\"{}\\\"}}", escaped.replace('\\', "\\\\"));
    let body = format!(
        r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"key {escaped}","tool_calls":[{{"id":"c1","type":"function","function":{{"name":"{escaped}","arguments":"{inner}"}}}}]}},"finish_reason":"tool_calls"}}]}}"#
    );
    assert!(serde_json::from_str::<Value>(&body).is_ok(), "{body}");
    assert!(
        common::decoded(&body).contains(KEY),
        "the test body must hide the key"
    );
    let answer = assert_never_decoded(Behaviour::Body(body), false).await;
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains("[redacted]"));
}

#[tokio::test]
async fn a_key_split_across_stream_deltas_never_reaches_the_page() {
    let text = format!("Bearer {KEY} done");
    for cut in [1, 7, 8, 9, 12, 20, 30, text.len() - 6] {
        let (a, b) = text.split_at(cut);
        let events = vec![
            event(json!({"role": "assistant", "content": a})),
            event(json!({"content": b})),
            finish("stop"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let answer = assert_never_decoded(Behaviour::Events(events), true).await;
        assert_eq!(
            summary(&answer.body)[0],
            "Bearer [redacted] done",
            "cut at {cut}"
        );
    }
}

#[tokio::test]
async fn a_key_in_streamed_tool_arguments_or_an_error_event_never_reaches_the_page() {
    let arguments = format!("{{\"token\":\"{}\"}}", escaped_key());
    let mut events = vec![event(
        json!({"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"save","arguments":""}}]}),
    )];
    for piece in arguments.as_bytes().chunks(5) {
        let piece = String::from_utf8_lossy(piece).into_owned();
        events.push(event(
            json!({"tool_calls":[{"index":0,"function":{"arguments":piece}}]}),
        ));
    }
    events.push(finish("tool_calls"));
    events.push(format!(
        "data: {}\n\n",
        json!({"error":{"message": format!("bad key {KEY}")}})
    ));
    events.push("data: [DONE]\n\n".to_owned());
    let answer = assert_never_decoded(Behaviour::Events(events), true).await;
    let parsed: Value = serde_json::from_str(&summary(&answer.body)[2]).unwrap();
    assert_eq!(parsed["token"], "[redacted]");
}

#[tokio::test]
async fn broken_arguments_that_decode_to_the_key_are_refused_not_passed() {
    // Not JSON, so it cannot be re-serialised; a lenient client would still decode it.
    let broken = format!("{{\\\"a\\\": \\\"{}", escaped_key().replace('\\', "\\\\"));
    let body = format!(
        r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","tool_calls":[{{"id":"c","type":"function","function":{{"name":"x","arguments":"{broken}"}}}}]}}}}]}}"#
    );
    assert!(serde_json::from_str::<Value>(&body).is_ok(), "{body}");
    let answer = assert_never_decoded(Behaviour::Body(body), false).await;
    assert_eq!(answer.status, 502);
    assert_eq!(code(&answer.body), "upstream_malformed");
}

#[tokio::test]
async fn an_error_body_naming_the_key_in_its_code_is_not_echoed() {
    for code_text in [KEY.to_owned(), escaped_key()] {
        let body =
            format!(r#"{{"error":{{"code":"{code_text}","message":"invalid key {code_text}"}}}}"#);
        let answer = assert_never_decoded(Behaviour::Status(401, body), false).await;
        assert_eq!(answer.status, 502);
    }
}

#[tokio::test]
async fn a_stream_that_ends_before_a_word_is_an_error_not_an_empty_answer() {
    let (url, _seen) = upstream(Behaviour::Events(Vec::new())).await;
    let answer = ask(Some(url), true).await;
    assert_eq!(answer.status, 200, "the stream had started");
    let event: Value = serde_json::from_str(
        answer
            .body
            .trim()
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("{}", answer.body)),
    )
    .unwrap();
    assert_eq!(
        event["error"]["code"], "upstream_malformed",
        "{}",
        answer.body
    );
    assert!(event["error"]["message"]
        .as_str()
        .unwrap()
        .contains("without an answer"));
}

/// The gateway's log after one page request that the upstream refuses with `status`
/// and `body`: its stdout and stderr, at `warn`.
async fn log_of_a_refusal(status: u16, body: String) -> String {
    let (url, _seen) = upstream(Behaviour::Status(status, body)).await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--allowed-origin",
            "http://127.0.0.1:8787",
            "--upstream",
            &url,
        ])
        .arg("--audit-file")
        .arg(dir.path().join("audit.jsonl"))
        .env("COUNTERSIGN_UPSTREAM_KEY", KEY)
        .env("RUST_LOG", "warn")
        .env_remove("COUNTERSIGN_TOKEN")
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !client
        .get(format!("{base}/v1/health"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "the gateway did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(false),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status(), 502);
    let text = answer.text().await.unwrap();
    assert!(!text.contains("not found"), "the page gets no echo: {text}");
    child.start_kill().unwrap();
    let out = child.wait_with_output().await.unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The operator learns why the upstream failed: its status and words in the gateway's
/// log, at `warn`, with the provider key taken out (the page still gets no echo of them).
#[tokio::test]
async fn an_upstream_refusal_is_logged_with_its_words_and_never_the_key() {
    let body = json!({"error":{"message": format!("model `tiny` not found; key {KEY} is fine"), "code":"model_not_found"}})
        .to_string();
    let log = log_of_a_refusal(404, body).await;
    let line = log
        .lines()
        .find(|l| l.contains("the model upstream refused the request"))
        .unwrap_or_else(|| panic!("no warning in the log:\n{log}"));
    assert!(line.contains("WARN") && line.contains("404"), "{line}");
    assert!(
        line.contains("model `tiny` not found") && line.contains("[redacted]"),
        "{line}"
    );
    assert!(!log.contains(KEY), "the key reached the log:\n{log}");
}

/// Words that spell the key through JSON escapes (text that is not JSON, or a string
/// escaped twice) are withheld from the log: a reader decodes them as easily.
#[tokio::test]
async fn an_upstream_refusal_that_spells_the_key_in_escapes_is_withheld_from_the_log() {
    let escaped = KEY.replacen('s', "\\u0073", 1);
    let plain = format!("invalid key {escaped}");
    let twice = json!({"error":{"message": format!("invalid key {escaped}")}}).to_string();
    for body in [plain, twice] {
        let log = log_of_a_refusal(401, body.clone()).await;
        let line = log
            .lines()
            .find(|l| l.contains("the model upstream refused the request"))
            .unwrap_or_else(|| panic!("no warning in the log:\n{log}"));
        assert!(
            line.contains("401") && line.contains("withheld"),
            "{body}: {line}"
        );
        assert!(!log.contains(&KEY[1..]), "the key reached the log:\n{log}");
    }
}
