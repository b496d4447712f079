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
use serde_json::Value;

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
async fn a_completion_passes_through_byte_for_byte_with_the_key_added_and_the_model_set() {
    let (url, seen) = upstream(Behaviour::Recorded).await;
    let answer = ask(Some(url), false).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, COMPLETION, "the body changed on the way");
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
    assert_eq!(
        String::from_utf8(body).unwrap(),
        STREAM,
        "the stream changed on the way"
    );
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
    assert!(answer.body.starts_with("data: {\"id\":\"chatcmpl-XyZ789\""));
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
