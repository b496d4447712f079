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

/// Opens a page's relay from the loopback address `source` and says hello with the
/// `n`th key: the socket and the gateway's first answer.
async fn page_from(base: &str, source: [u8; 4], n: usize) -> (Socket, Value) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let gateway: SocketAddr = base.trim_start_matches("http://").parse().unwrap();
    let tcp = tokio::net::TcpSocket::new_v4().unwrap();
    tcp.bind(SocketAddr::from((source, 0))).unwrap();
    let stream = tcp.connect(gateway).await.unwrap();
    let mut request = format!("{}/v1/relay", base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("origin", PAGE.parse().unwrap());
    let (mut socket, _) =
        tokio_tungstenite::client_async(request, tokio_tungstenite::MaybeTlsStream::Plain(stream))
            .await
            .unwrap();
    say(
        &mut socket,
        json!({"type": "hello", "key": format!("{n:0>64}")}),
    )
    .await;
    let answer = heard(&mut socket).await.unwrap();
    (socket, answer)
}

/// A page refused a slot is told why, and its socket ends.
async fn refused_slot(base: &str, source: [u8; 4], n: usize) -> String {
    let (mut socket, answer) = page_from(base, source, n).await;
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(heard(&mut socket).await.is_none(), "the socket stays open");
    answer["message"].as_str().unwrap().to_owned()
}

/// One program that opens pages from its address (a local process sending an allowed
/// `Origin`, a script in a page) gets its share of the relay's slots, not all of them:
/// the person's page, from another address, still pairs. Past the total, a new page is
/// refused, and told how the deployment raises it.
#[tokio::test]
async fn one_client_cannot_take_every_relay_slot() {
    let mut config = config(None);
    config.mcp_token = Some(Secret::new(TOKEN));
    config.max_relay_pages = 4;
    config.max_relay_pages_per_client = 2;
    let (state, _dir) = state(config);
    let base = common::serve(state.clone()).await;
    let greedy = [127, 0, 0, 2];
    let mut held = Vec::new();
    for n in 0..2 {
        let (socket, answer) = page_from(&base, greedy, n).await;
        assert_eq!(answer["type"], "paired", "{answer}");
        held.push(socket);
    }
    let refused = refused_slot(&base, greedy, 2).await;
    assert!(
        refused.contains("too many pages are connected from this address")
            && refused.contains("--max-relay-pages-per-client"),
        "{refused}"
    );
    let (_person, answer) = page_from(&base, [127, 0, 0, 1], 3).await;
    assert_eq!(answer["type"], "paired", "{answer}");
    let code = answer["code"].as_str().unwrap();
    assert!(state.relay.start_call(code, "save", "{}".into()).is_ok());
    let (_other, answer) = page_from(&base, [127, 0, 0, 3], 4).await;
    assert_eq!(answer["type"], "paired", "{answer}");
    let full = refused_slot(&base, [127, 0, 0, 4], 5).await;
    assert!(
        full.contains("too many pages are connected to this gateway")
            && full.contains("--max-relay-pages"),
        "{full}"
    );
    // A page already paired reconnects into its own slot, full or not.
    let (_again, answer) = page_from(&base, greedy, 0).await;
    assert_eq!(answer["type"], "paired", "{answer}");
}

/// The deployment sets both limits: `serve --max-relay-pages N
/// --max-relay-pages-per-client M` (or their variables).
#[tokio::test]
async fn a_deployment_sets_the_relay_limits_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    /// Ends the gateway however the test ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--allowed-origin", PAGE, "--max-relay-pages", "2"])
        .arg("--audit-file")
        .arg(dir.path().join("audit.jsonl"))
        .env("COUNTERSIGN_MAX_RELAY_PAGES_PER_CLIENT", "1")
        .env("COUNTERSIGN_MCP_TOKEN", TOKEN)
        .env("RUST_LOG", "error")
        .env_remove("COUNTERSIGN_TOKEN")
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _running = Running(child);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !client
        .get(format!("{base}/v1/health"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_first, answer) = page_from(&base, [127, 0, 0, 1], 0).await;
    assert_eq!(answer["type"], "paired", "{answer}");
    let share = refused_slot(&base, [127, 0, 0, 1], 1).await;
    assert!(share.contains("from this address"), "{share}");
    let (_second, answer) = page_from(&base, [127, 0, 0, 2], 2).await;
    assert_eq!(answer["type"], "paired", "{answer}");
    let total = refused_slot(&base, [127, 0, 0, 3], 3).await;
    assert!(total.contains("to this gateway"), "{total}");
}

fn initialize_with_id(id: u64) -> Request<Body> {
    let mut body: Value = serde_json::from_str(&initialize()).unwrap();
    body["id"] = json!(id);
    let mut request = mcp(Some(TOKEN), None);
    *request.body_mut() = Body::from(body.to_string());
    request
}

async fn answer(app: &Router, mut request: Request<Body>) -> axum::response::Response {
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    app.clone().oneshot(request).await.unwrap()
}

/// Legacy sessions cost memory until they end (about 100 KiB, up to five minutes idle),
/// so at most 128 are open: the next `initialize` is refused with 503 and a JSON-RPC
/// error for its own id that says what to do. Open sessions go on, and one ended makes
/// room.
#[tokio::test]
async fn legacy_sessions_are_capped_with_a_clear_refusal() {
    let (app, _dir) = gateway(true);
    let mut sessions = Vec::new();
    for n in 0..128 {
        let opened = answer(&app, initialize_with_id(n)).await;
        assert_eq!(opened.status(), StatusCode::OK, "session {n}");
        let id = opened.headers()["mcp-session-id"].to_str().unwrap();
        sessions.push(id.to_owned());
    }
    let refused = answer(&app, initialize_with_id(900)).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["content-type"], "application/json");
    assert!(!refused.headers().contains_key("mcp-session-id"));
    let body: Value =
        serde_json::from_slice(&refused.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 900);
    assert_eq!(body["error"]["code"], -32000);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("too many MCP sessions are open on this gateway (128")
            && message.contains("DELETE /mcp"),
        "{message}"
    );
    // An open session goes on.
    let in_session = |method: &str, id: &str| {
        Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18")
    };
    let initialized = in_session("POST", &sessions[1])
        .body(Body::from(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        ))
        .unwrap();
    assert_eq!(
        answer(&app, initialized).await.status(),
        StatusCode::ACCEPTED
    );
    // One ended: room for one more, and one only.
    let ended = in_session("DELETE", &sessions[0])
        .body(Body::empty())
        .unwrap();
    assert!(answer(&app, ended).await.status().is_success());
    assert_eq!(
        answer(&app, initialize_with_id(901)).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        answer(&app, initialize_with_id(902)).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}

/// The official MCP Python SDK, refused a legacy session, shows the gateway's sentence;
/// once a session ends, it connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_shows_why_its_session_was_refused() {
    let (base, _state, _dir) = served(true).await;
    let client = reqwest::Client::new();
    let open = |id: u64| {
        let mut body: Value = serde_json::from_str(&initialize()).unwrap();
        body["id"] = json!(id);
        client
            .post(format!("{base}/mcp"))
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let mut first = None;
    for n in 0..128 {
        let opened = open(n).await.unwrap();
        assert_eq!(opened.status(), 200);
        first.get_or_insert_with(|| opened.headers()["mcp-session-id"].clone());
    }
    let sdk = |base: String| async move {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_legacy_session.py");
        let out = tokio::process::Command::new("python3")
            .arg(script)
            .arg(format!("{base}/mcp"))
            .arg(TOKEN)
            .output()
            .await
            .expect("python3 runs (cargo xtask setup installs the mcp package)");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said
    };
    let said = sdk(base.clone()).await;
    assert!(
        said.starts_with("refused: ") && said.contains("too many MCP sessions are open"),
        "{said}"
    );
    let ended = client
        .delete(format!("{base}/mcp"))
        .bearer_auth(TOKEN)
        .header("mcp-session-id", first.unwrap())
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    assert_eq!(sdk(base).await.trim(), "connected");
}

/// Runs the official MCP Python SDK's `tools/call` of `tool` on the page paired as `code`;
/// its result as JSON (`is_error`, `text`, `meta`).
async fn official_call(base: &str, code: &str, tool: &str, args: &Value) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_call.py");
    let out = tokio::process::Command::new("python3")
        .args([script, &format!("{base}/mcp"), TOKEN, code, tool])
        .arg(args.to_string())
        .output()
        .await
        .expect("python3 runs (cargo xtask setup installs the mcp package)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(said.trim()).unwrap()
}

/// Mints, as the page does after the person's click, a countersignature for the MCP
/// client's relayed call `id` of `save` over arguments with digest `digest`.
async fn mint_for_mcp(base: &str, id: &str, digest: &str) -> String {
    let body = json!({
        "call": 4, "tool_call_id": id, "action": "save", "kind": "write",
        "args_sha256": digest, "card_sha256": "cd".repeat(32), "approved_by": "once",
        "grant": null, "session": "page-1", "role": "admin", "caller": "mcp",
    });
    let answer: Value = common::page_post(
        &reqwest::Client::new(),
        format!("{base}/v1/countersign"),
        body.to_string(),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    answer["countersignature"].as_str().unwrap().to_owned()
}

/// Plays the page for one relayed call: waits for it, then answers with `content`.
async fn page_answers(socket: &mut Socket, content: &Value) -> String {
    let call = loop {
        let heard = heard(socket).await.unwrap();
        if heard["type"] == "call" {
            break heard;
        }
    };
    let id = call["id"].as_str().unwrap().to_owned();
    say(
        socket,
        json!({"type": "result", "id": id, "content": content.to_string()}),
    )
    .await;
    id
}

/// An MCP client (the official SDK) gets, with each result, the gateway's signed receipt
/// of how its call ended (the arguments it sent, the code, the result it got) and, for
/// a countersigned call, the countersignature the person's approval minted, to forward
/// as proof of consent. A denial has a receipt too, naming no approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_result_carries_the_approval_and_a_signed_receipt() {
    let (base, state, _dir) = served(true).await;
    let (mut socket, code) = paired_page(&base).await;
    say(&mut socket, json!({"type": "tools", "tools": [tool()]})).await;
    while state.relay.tools(&code).is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let verifier = countersign_verify::Verifier::new("countersign-gateway")
        .trust_jwks(&serde_json::to_string(&state.signer.jwks()).unwrap())
        .unwrap();
    let args = json!({"name": "Apollo"});
    let digest = countersign::audit::ArgsDigest::of_value(&args).to_hex();
    let ran = json!({"ok": true, "receipt": {"action": "save", "result": null}});
    // The page: an approved, countersigned run.
    let page = {
        let base = base.clone();
        let digest = digest.clone();
        let ran = ran.clone();
        async move {
            let call = loop {
                let heard = heard(&mut socket).await.unwrap();
                if heard["type"] == "call" {
                    break heard;
                }
            };
            let id = call["id"].as_str().unwrap().to_owned();
            // Another page that learned the call's id (the trail names it) mints first,
            // for other arguments: not attached.
            let mallory = countersign::audit::ArgsDigest::of_value(&json!({"name": "Mallory"}));
            let _forged = mint_for_mcp(&base, &id, &mallory.to_hex()).await;
            let minted = mint_for_mcp(&base, &id, &digest).await;
            // A later click token for the same call does not replace the first.
            let _late = mint_for_mcp(&base, &id, &digest).await;
            say(
                &mut socket,
                json!({"type": "result", "id": id, "content": ran.to_string()}),
            )
            .await;
            (socket, id, minted)
        }
    };
    let (client, (mut socket, id, token)) =
        tokio::join!(official_call(&base, &code, "save", &args), page);
    assert_eq!(client["is_error"], false, "{client}");
    assert_eq!(client["meta"]["countersign/approval"], json!(token));
    let receipt = client["meta"]["countersign/receipt"].as_str().unwrap();
    let claims = verifier.check_receipt(receipt, Some(&token)).unwrap();
    let outcome = &claims.outcome;
    assert_eq!(
        (
            outcome.call.as_str(),
            outcome.action.as_str(),
            outcome.args_sha256.as_str()
        ),
        (id.as_str(), "save", digest.as_str())
    );
    assert_eq!(
        (outcome.ok, outcome.code.as_str(), outcome.said_by.as_str()),
        (true, "OK", "page")
    );
    assert_eq!(
        outcome.result_sha256,
        countersign_verify::token_sha256(client["text"].as_str().unwrap())
    );
    assert_eq!(claims.act.sub, countersign::Caller::Mcp);
    // The page: a denial. A receipt, and no approval.
    let denied = json!({"ok": false, "error": {"code": "PERMISSION_DENIED", "reason": "denied",
                                              "message": "The person denied it.", "retry": false}});
    let (client, _) = tokio::join!(
        official_call(&base, &code, "save", &args),
        page_answers(&mut socket, &denied)
    );
    assert_eq!(client["is_error"], true, "{client}");
    assert!(
        client["meta"].get("countersign/approval").is_none(),
        "{client}"
    );
    let receipt = client["meta"]["countersign/receipt"].as_str().unwrap();
    let claims = verifier.check_receipt(receipt, None).unwrap();
    assert_eq!(
        (claims.outcome.ok, claims.outcome.code.as_str()),
        (false, "PERMISSION_DENIED")
    );
    assert_eq!(claims.outcome.approval_sha256, None);
    assert_eq!(
        verifier.check_receipt(receipt, Some(&token)),
        Err(countersign_verify::VerifyError::WrongApproval)
    );
}

/// An approval minted before the page went away is still named in the receipt, which
/// says the gateway ended the call (not the page).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_minted_before_the_page_went_away_is_still_named() {
    let (base, state, _dir) = served(true).await;
    let (mut socket, code) = paired_page(&base).await;
    say(&mut socket, json!({"type": "tools", "tools": [tool()]})).await;
    while state.relay.tools(&code).is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let args = json!({"name": "Apollo"});
    let digest = countersign::audit::ArgsDigest::of_value(&args).to_hex();
    let page = {
        let base = base.clone();
        async move {
            let call = loop {
                let heard = heard(&mut socket).await.unwrap();
                if heard["type"] == "call" {
                    break heard;
                }
            };
            let id = call["id"].as_str().unwrap();
            let token = mint_for_mcp(&base, id, &digest).await;
            // The page goes away (it closes its relay) before it answers.
            let _ = socket.close(None).await;
            token
        }
    };
    let (client, token) = tokio::join!(official_call(&base, &code, "save", &args), page);
    assert_eq!(client["is_error"], true, "{client}");
    let receipt = client["meta"]["countersign/receipt"].as_str().unwrap();
    let verifier = countersign_verify::Verifier::new("countersign-gateway")
        .trust_jwks(&serde_json::to_string(&state.signer.jwks()).unwrap())
        .unwrap();
    let claims = verifier.check_receipt(receipt, Some(&token)).unwrap();
    assert_eq!(
        (
            claims.outcome.code.as_str(),
            claims.outcome.said_by.as_str()
        ),
        ("PAGE_GONE", "gateway")
    );
    assert_eq!(client["meta"]["countersign/approval"], json!(token));
}

/// The relay's messages are declared once (`countersign::relay`), for the gateway and the
/// page alike: each reads back what the other writes, in the documented shape.
#[test]
fn relay_messages_read_back_as_written_in_the_documented_shape() {
    use countersign::relay::{ToGateway, ToPage};
    let to_page = [
        (
            ToPage::Paired {
                code: "123-456".into(),
                waiting: vec!["c1".into()],
                max_bytes: 1024,
            },
            json!({"type":"paired","code":"123-456","waiting":["c1"],"max_bytes":1024}),
        ),
        (
            ToPage::Call {
                id: "c1".into(),
                name: "rename".into(),
                arguments: "{\"name\":\"a\u{202e}\"}".into(),
            },
            json!({"type":"call","id":"c1","name":"rename","arguments":"{\"name\":\"a\u{202e}\"}"}),
        ),
        (
            ToPage::Cancel { id: "c1".into() },
            json!({"type":"cancel","id":"c1"}),
        ),
        (
            ToPage::Error {
                message: "no".into(),
            },
            json!({"type":"error","message":"no"}),
        ),
    ];
    for (message, shape) in to_page {
        let text = message.to_json();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), shape);
        assert_eq!(ToPage::parse(&text), Some(message));
    }
    let to_gateway = [
        (
            ToGateway::Hello {
                key: "k".repeat(32),
            },
            json!({"type":"hello","key":"k".repeat(32)}),
        ),
        (
            ToGateway::Tools { tools: "[]".into() },
            json!({"type":"tools","tools":[]}),
        ),
        (
            ToGateway::Result {
                id: "c1".into(),
                content: r#"{"ok":true}"#.into(),
            },
            json!({"type":"result","id":"c1","content":"{\"ok\":true}"}),
        ),
    ];
    for (message, shape) in to_gateway {
        let text = message.to_json();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), shape);
        assert_eq!(ToGateway::parse(&text), Ok(message));
    }
    // What is not a message is said, and never half read.
    for (bad, why) in [
        (
            r#"{"type":"hello","key":"k","extra":1}"#,
            "unknown field `extra`",
        ),
        (r#"{"type":"wave"}"#, "unknown type `wave`"),
        (
            r#"{"type":"result","id":"c1","content":{}}"#,
            "`content` must be text",
        ),
        ("[1]", "not an object"),
    ] {
        let error = ToGateway::parse(bad).unwrap_err();
        assert!(error.contains(why), "{bad}: {error}");
    }
    assert_eq!(
        ToPage::parse(r#"{"type":"paired","code":"1","waiting":[1],"max_bytes":1}"#),
        None
    );
}
