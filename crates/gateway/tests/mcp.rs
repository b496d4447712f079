//! The MCP endpoint's door and the page relay's routes: who gets in, and every kind of
//! bad relay message. (The whole flow, with the official Python SDK and a real page in
//! Chromium, is in the end-to-end suite.)
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::Router;
use common::{config, state};
use countersign_gateway::{app, Secret};
use futures_util::StreamExt;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const TOKEN: &str = "mcp-test-token-0123456789abcdef0123456789";
const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn gateway(mcp: bool) -> (Router, tempfile::TempDir) {
    let mut config = config(None);
    if mcp {
        config.mcp_token = Some(Secret::new(TOKEN));
    }
    let (state, dir) = state(config);
    (app(state), dir)
}

async fn send(app: &Router, mut request: Request<Body>) -> (StatusCode, Value) {
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn initialize() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}
        }
    })
    .to_string()
}

fn mcp(token: Option<&str>, origin: Option<&str>) -> Request<Body> {
    let mut request = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "127.0.0.1:8787")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.body(Body::from(initialize())).unwrap()
}

fn page(uri: &str, body: Value) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header("content-type", "application/json")
        .header("origin", "http://127.0.0.1:8787")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn code(json: &Value) -> &str {
    json["error"]["code"].as_str().unwrap_or("<none>")
}

#[tokio::test]
async fn mcp_needs_its_token_and_takes_no_browser_requests() {
    let (app, _dir) = gateway(true);
    let (status, body) = send(&app, mcp(None, None)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let (status, _) = send(
        &app,
        mcp(Some("mcp-test-token-0123456789abcdef012345678X"), None),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A page, even one the gateway serves, even holding the token: no.
    for origin in ["http://127.0.0.1:8787", "https://attacker.example", "null"] {
        let (status, body) = send(&app, mcp(Some(TOKEN), Some(origin))).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "origin_not_allowed"),
            "{origin}"
        );
    }
    let (status, body) = send(&app, mcp(Some(TOKEN), None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn without_an_mcp_token_there_is_no_mcp() {
    let (app, _dir) = gateway(false);
    let (status, body) = send(&app, mcp(Some(TOKEN), None)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_route")
    );
    let (status, body) = send(
        &app,
        page("/v1/relay/tools", json!({"key": KEY, "tools": []})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_route")
    );
}

/// Opens the page's relay WebSocket as a browser on `origin` would.
async fn relay_socket(
    base: &str,
    origin: Option<&str>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("{}/v1/relay", base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(s, _)| s)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn say(socket: &mut Socket, message: Value) {
    use futures_util::SinkExt;
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            message.to_string().into(),
        ))
        .await
        .unwrap();
}

/// The next text message, as JSON; `None` when the socket ends first.
async fn heard(socket: &mut Socket) -> Option<Value> {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(5), socket.next())
            .await
            .expect("an answer within 5 s")?;
        match message.ok()? {
            tokio_tungstenite::tungstenite::Message::Text(text) => {
                return serde_json::from_str(&text).ok()
            }
            tokio_tungstenite::tungstenite::Message::Close(_) => return None,
            _ => {}
        }
    }
}

const PAGE: &str = "http://127.0.0.1:8787";

/// A page's relay, paired: its socket and its code.
async fn paired_page(base: &str) -> (Socket, String) {
    let mut socket = relay_socket(base, Some(PAGE)).await.unwrap();
    say(&mut socket, json!({"type": "hello", "key": KEY})).await;
    let paired = heard(&mut socket).await.unwrap();
    assert_eq!(paired["type"], "paired");
    (socket, paired["code"].as_str().unwrap().to_owned())
}

fn tool() -> Value {
    json!({
        "name": "save", "description": "Saves.", "parameters": {"type": "object"},
        "annotations": {"title": "Save", "readOnlyHint": false, "destructiveHint": false,
                        "approval": "ask", "handoff": false}
    })
}

async fn served(mcp: bool) -> (String, countersign_gateway::AppState, tempfile::TempDir) {
    let mut config = config(None);
    if mcp {
        config.mcp_token = Some(Secret::new(TOKEN));
    }
    let (state, dir) = state(config);
    (common::serve(state.clone()).await, state, dir)
}

#[tokio::test]
async fn only_the_page_may_open_the_relay_and_only_with_mcp_on() {
    use tokio_tungstenite::tungstenite::Error;
    let status = |r: Result<Socket, Error>| match r {
        Err(Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{e}"),
        Ok(_) => 101,
    };
    let (base, _state, _dir) = served(true).await;
    // Another site (cross-site WebSocket hijacking), or not a browser page at all.
    assert_eq!(
        status(relay_socket(&base, Some("https://attacker.example")).await),
        403
    );
    assert_eq!(status(relay_socket(&base, None).await), 401);
    assert_eq!(status(relay_socket(&base, Some(PAGE)).await), 101);
    let (off, _state, _dir) = served(false).await;
    assert_eq!(status(relay_socket(&off, Some(PAGE)).await), 404);
}

#[tokio::test]
async fn the_relay_takes_nothing_before_hello_and_refuses_bad_messages() {
    let (base, state, _dir) = served(true).await;
    // Tools before hello: refused, and the socket ends.
    let mut socket = relay_socket(&base, Some(PAGE)).await.unwrap();
    say(&mut socket, json!({"type": "tools", "tools": [tool()]})).await;
    let answer = heard(&mut socket).await.unwrap();
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(heard(&mut socket).await.is_none());
    // A short key, an unknown field in hello.
    for hello in [
        json!({"type": "hello", "key": "short"}),
        json!({"type": "hello", "key": KEY, "approved": true}),
    ] {
        let mut socket = relay_socket(&base, Some(PAGE)).await.unwrap();
        say(&mut socket, hello.clone()).await;
        assert_eq!(
            heard(&mut socket).await.unwrap()["type"],
            "error",
            "{hello}"
        );
    }
    let mut socket = relay_socket(&base, Some(PAGE)).await.unwrap();
    say(&mut socket, json!({"type": "hello", "key": KEY})).await;
    let paired = heard(&mut socket).await.unwrap();
    assert_eq!(paired["type"], "paired");
    assert_eq!(paired["waiting"], json!([]));
    let code = paired["code"].as_str().unwrap().to_owned();
    // Each bad message gets an error and changes nothing.
    let mut extra = tool();
    extra["annotations"]["approved"] = json!(true);
    for bad in [
        json!({"type": "tools", "tools": [extra]}),
        json!({"type": "tools", "tools": [tool()], "approve": true}),
        json!({"type": "result", "id": "mcp-00", "content": "{\"ok\":true}"}),
        json!({"type": "result", "id": 7, "content": "{}"}),
        json!({"type": "approve", "id": "mcp-00"}),
    ] {
        say(&mut socket, bad.clone()).await;
        assert_eq!(heard(&mut socket).await.unwrap()["type"], "error", "{bad}");
    }
    assert!(state.relay.tools(&code).is_empty());
    say(&mut socket, json!({"type": "tools", "tools": [tool()]})).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while state.relay.tools(&code).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state.relay.tools(&code)[0].name, "save");
}

#[tokio::test]
async fn a_relayed_call_reaches_the_page_and_its_answer_the_caller() {
    let (base, state, _dir) = served(true).await;
    let (mut socket, code) = paired_page(&base).await;
    let (id, answer) = state
        .relay
        .start_call(&code, "save", "{\"name\":\"Apollo\"}".into())
        .unwrap();
    let call = heard(&mut socket).await.unwrap();
    assert_eq!(
        call,
        json!({"type": "call", "id": id, "name": "save", "arguments": "{\"name\":\"Apollo\"}"})
    );
    say(
        &mut socket,
        json!({"type": "result", "id": id, "content": "{\"ok\":true}"}),
    )
    .await;
    assert_eq!(answer.await.unwrap(), "{\"ok\":true}");
    // Cancelled by its client: the page is told.
    let (id, _answer) = state.relay.start_call(&code, "save", "{}".into()).unwrap();
    let _ = heard(&mut socket).await;
    state.relay.cancel(&code, &id);
    assert_eq!(
        heard(&mut socket).await.unwrap(),
        json!({"type": "cancel", "id": id})
    );
}

#[tokio::test]
async fn a_page_that_closes_its_relay_is_gone_at_once() {
    let (base, state, _dir) = served(true).await;
    let (mut socket, code) = paired_page(&base).await;
    let (_, answer) = state.relay.start_call(&code, "save", "{}".into()).unwrap();
    socket.close(None).await.unwrap();
    assert!(answer.await.is_err(), "the waiting call ends with the page");
    assert!(state.relay.start_call(&code, "save", "{}".into()).is_err());
}
