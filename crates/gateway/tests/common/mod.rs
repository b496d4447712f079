//! A test upstream on loopback that speaks the real Chat Completions wire format
//! (recorded responses and SSE streams), and helpers to run the gateway against it.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod client;
pub mod session;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use countersign::{AuditRecord, Call, Config, Executor, MemoryAudit, Session, Timestamp};
use countersign_gateway::{app, AppState, AuditStore, GatewayConfig, Secret, Upstream};

pub const KEY: &str = "sk-test-DO-NOT-LEAK-7f3a9c21e5";
pub const COMPLETION: &str = include_str!("../fixtures/completion_tool_call.json");
pub const STREAM: &str = include_str!("../fixtures/stream_tool_call.sse");

/// How the test upstream answers.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// The recorded completion, or the recorded stream when `stream: true`.
    Recorded,
    /// An HTTP error with this body.
    Status(u16, String),
    /// 200 with a body that is not JSON.
    Garbage,
    /// Waits this long before answering.
    Slow(Duration),
    /// Sends the first half of the stream, then falls silent.
    Stall,
    /// Echoes the Authorization header into the answer (a leaking upstream).
    EchoKey,
    /// 200 with this JSON body (a hostile upstream's whole answer).
    Body(String),
    /// These SSE events, one per network chunk.
    Events(Vec<String>),
}

#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub requests: Arc<Mutex<Vec<(HeaderMap, String)>>>,
}

pub async fn upstream(behaviour: Behaviour) -> (String, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let handler = move |headers: HeaderMap, body: Bytes| {
        let behaviour = behaviour.clone();
        let log = log.clone();
        async move {
            let text = String::from_utf8_lossy(&body).to_string();
            log.requests
                .lock()
                .unwrap()
                .push((headers.clone(), text.clone()));
            let streaming = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("stream").and_then(serde_json::Value::as_bool))
                == Some(true);
            answer(behaviour, streaming, &headers).await
        }
    };
    let app = Router::new().route("/v1/chat/completions", post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

async fn answer(behaviour: Behaviour, streaming: bool, headers: &HeaderMap) -> Response {
    let sse = |body: Body| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(body)
            .unwrap()
    };
    let json = |status: u16, body: String| {
        Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    match behaviour {
        Behaviour::Recorded if streaming => {
            // Chunk by event, with a pause, as a real server streams.
            let events: Vec<String> = STREAM.split_inclusive("\n\n").map(str::to_owned).collect();
            let stream = futures_util::stream::iter(events).then(|e| async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok::<_, std::io::Error>(Bytes::from(e))
            });
            sse(Body::from_stream(stream))
        }
        Behaviour::Recorded => json(200, COMPLETION.to_owned()),
        Behaviour::Body(body) => json(200, body),
        Behaviour::Events(events) => {
            let stream = futures_util::stream::iter(events).then(|e| async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, std::io::Error>(Bytes::from(e))
            });
            sse(Body::from_stream(stream))
        }
        Behaviour::Status(code, body) => json(code, body),
        Behaviour::Garbage => json(200, "<html>bad gateway</html>".into()),
        Behaviour::Slow(delay) => {
            tokio::time::sleep(delay).await;
            json(200, COMPLETION.to_owned())
        }
        Behaviour::Stall => {
            let first = STREAM.split_inclusive("\n\n").next().unwrap().to_owned();
            let stream =
                futures_util::stream::once(
                    async move { Ok::<_, std::io::Error>(Bytes::from(first)) },
                )
                .chain(futures_util::stream::pending());
            sse(Body::from_stream(stream))
        }
        Behaviour::EchoKey => {
            let auth = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if streaming {
                let text = format!("data: {{\"echo\":\"{auth}\"}}\n\ndata: [DONE]\n\n");
                let (a, b) = text.split_at(text.len() / 2);
                let parts = vec![Bytes::from(a.to_owned()), Bytes::from(b.to_owned())];
                sse(Body::from_stream(futures_util::stream::iter(
                    parts.into_iter().map(Ok::<_, std::io::Error>),
                )))
            } else {
                json(200, format!("{{\"choices\":[{{\"message\":{{\"role\":\"assistant\",\"content\":\"{auth}\"}}}}]}}"))
            }
        }
    }
}

use futures_util::StreamExt;

pub fn config(upstream: Option<String>) -> GatewayConfig {
    let mut config = GatewayConfig::local(vec!["http://127.0.0.1:8787".into()]);
    config.upstream = upstream.map(|base_url| Upstream {
        base_url,
        model: "gpt-4o-mini".into(),
        key: Some(Secret::new(KEY)),
    });
    config.upstream_timeout = Duration::from_secs(2);
    config.stream_idle_timeout = Duration::from_millis(500);
    config
}

/// The key the test stores are chained with.
pub fn test_key() -> countersign_gateway::ChainKey {
    countersign_gateway::ChainKey::new([7; 32])
}

pub fn state(config: GatewayConfig) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let audit = AuditStore::open(dir.path().join("audit.jsonl"), test_key()).unwrap();
    (AppState::new(config, audit).unwrap(), dir)
}

/// Serves the gateway on loopback; returns its base URL.
pub async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = app(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    format!("http://{addr}")
}

pub fn chat_body(stream: bool) -> String {
    serde_json::json!({
        "model": "whatever-the-page-says",
        "stream": stream,
        "messages": [{"role": "user", "content": "rename the workspace to Apollo"}],
        "tools": [{"type": "function", "function": {"name": "save_workspace_name", "description": "Save.", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}]
    })
    .to_string()
}

/// A same-origin request as the page's fetch sends it.
pub fn page_post(client: &reqwest::Client, url: String, body: String) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("origin", "http://127.0.0.1:8787")
        .header("sec-fetch-site", "same-origin")
        .body(body)
}

/// `n` real audit records (made by the executor) with ids `{prefix}-{offset}`, `{prefix}-{offset+1}`…
pub fn records(n: usize, prefix: &str, offset: usize) -> Vec<AuditRecord> {
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new(prefix, Session::default(), [2; 32]),
        audit.clone(),
    );
    for i in 0..n {
        let _ = exec.submit(
            Call::new("t", "nope", "{}"),
            Timestamp::from_millis(i as u64),
        );
    }
    let mut records = audit.records();
    for (i, r) in records.iter_mut().enumerate() {
        r.id = format!("{prefix}-{}", offset + i);
    }
    records
}

/// What a client decodes from a Chat Completions answer, streamed or not: every string
/// joined (content, tool names), and the tool calls' arguments decoded as JSON again.
pub fn decoded(body: &str) -> String {
    fn walk(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(s) => {
                out.push_str(s);
                if let Ok(inner) = serde_json::from_str::<serde_json::Value>(s) {
                    walk(&inner, out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push_str(k);
                walk(v, out);
            }),
            _ => {}
        }
    }
    let mut out = String::new();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        walk(&value, &mut out);
        return out;
    }
    // A stream: the deltas joined per field, as a client accumulates them.
    let (mut content, mut arguments, mut names) = (String::new(), String::new(), String::new());
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(data) else {
            continue;
        };
        walk(&event, &mut out);
        for choice in event["choices"].as_array().cloned().unwrap_or_default() {
            content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                names.push_str(call["function"]["name"].as_str().unwrap_or_default());
                arguments.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
            }
        }
    }
    out.push_str(&content);
    out.push_str(&names);
    out.push_str(&arguments);
    if let Ok(inner) = serde_json::from_str::<serde_json::Value>(&arguments) {
        walk(&inner, &mut out);
    }
    out
}

/// The trail as a gateway exports it (`GET /v1/audit` with the test token `tok`).
pub async fn exported(client: &reqwest::Client, base: &str) -> String {
    client
        .get(format!("{base}/v1/audit"))
        .bearer_auth("tok")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Asks the gateway at `base`, as the page does, to countersign one call approved once
/// with `args`; the answer's JSON (the token is `countersignature`).
pub async fn countersign(
    client: &reqwest::Client,
    base: &str,
    args: &serde_json::Value,
) -> serde_json::Value {
    let body = serde_json::json!({
        "call": 1,
        "tool_call_id": "call_1",
        "action": "publish_note",
        "kind": "write",
        "args_sha256": countersign::audit::ArgsDigest::of_value(args).to_hex(),
        "card_sha256": "cd".repeat(32),
        "approved_by": "once",
        "grant": null,
        "session": "page-1",
        "role": "admin",
    });
    let response = page_post(client, format!("{base}/v1/countersign"), body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the mint was refused");
    response.json().await.unwrap()
}

/// The claims of a compact JWS, read without checking it.
pub fn claims_of(token: &str) -> serde_json::Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}
