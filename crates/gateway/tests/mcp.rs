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
async fn without_an_mcp_token_there_is_no_mcp_and_no_relay() {
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

#[tokio::test]
async fn relay_messages_are_checked_strictly() {
    let (app, _dir) = gateway(true);
    let tool = json!({
        "name": "save", "description": "Saves.", "parameters": {"type": "object"},
        "annotations": {"title": "Save", "readOnlyHint": false, "destructiveHint": false,
                        "approval": "ask", "handoff": false}
    });
    for (uri, body, want) in [
        // No page is connected with this key.
        (
            "/v1/relay/tools",
            json!({"key": KEY, "tools": [tool]}),
            "relay_gone",
        ),
        (
            "/v1/relay/result",
            json!({"key": KEY, "id": "mcp-1", "content": "{}"}),
            "relay_gone",
        ),
        ("/v1/relay/bye", json!({"key": KEY}), "relay_gone"),
        // Malformed: short key, unknown fields, wrong types, a bad tool name.
        (
            "/v1/relay/tools",
            json!({"key": "short", "tools": []}),
            "invalid_request",
        ),
        (
            "/v1/relay/tools",
            json!({"key": KEY, "tools": [], "approve": true}),
            "invalid_request",
        ),
        (
            "/v1/relay/result",
            json!({"key": KEY, "id": 7, "content": "{}"}),
            "invalid_request",
        ),
        ("/v1/relay/bye", json!({}), "invalid_request"),
    ] {
        let (status, json) = send(&app, page(uri, body.clone())).await;
        assert_eq!(code(&json), want, "{uri} {body} → {status} {json}");
    }
    let mut bad = tool.clone();
    bad["name"] = json!("save\u{202e}");
    let (_, json) = send(
        &app,
        page("/v1/relay/tools", json!({"key": KEY, "tools": [bad]})),
    )
    .await;
    assert_eq!(code(&json), "invalid_request");
    let mut extra = tool;
    extra["annotations"]["approved"] = json!(true);
    let (_, json) = send(
        &app,
        page("/v1/relay/tools", json!({"key": KEY, "tools": [extra]})),
    )
    .await;
    assert_eq!(code(&json), "invalid_request");
}

#[tokio::test]
async fn only_the_page_may_open_the_relay() {
    let (app, _dir) = gateway(true);
    // Not from the page (no Origin, no Sec-Fetch-Site), or from another origin.
    for origin in [None, Some("https://attacker.example")] {
        let mut request = Request::builder().uri(format!("/v1/relay?key={KEY}"));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let (status, _) = send(&app, request.body(Body::empty()).unwrap()).await;
        assert!(status.is_client_error(), "{origin:?}: {status}");
    }
    let request = Request::builder()
        .uri("/v1/relay?key=short")
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .unwrap();
    let (status, body) = send(&app, request).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
}

#[tokio::test]
async fn a_page_gets_its_pairing_code_first_and_loses_it_when_it_goes() {
    let (app, _dir) = gateway(true);
    let request = Request::builder()
        .uri(format!("/v1/relay?key={KEY}"))
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .unwrap();
    let mut request = request;
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let first = body.next().await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&first).to_string();
    assert!(
        text.starts_with("data: {\"type\":\"paired\",\"code\":\""),
        "{text}"
    );
    // Connected: tools are taken.
    let tools = json!({"key": KEY, "tools": []});
    let (status, _) = send(&app, page("/v1/relay/tools", tools.clone())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The stream dropped: the page is gone.
    drop(body);
    let (_, json) = send(&app, page("/v1/relay/tools", tools)).await;
    assert_eq!(code(&json), "relay_gone");
}
