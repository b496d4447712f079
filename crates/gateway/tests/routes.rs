//! Every route in-process (`oneshot`, no socket), including every kind of bad input;
//! and the `Host` spellings a rebinding page could send, written as they are to a socket.
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
use common::{config, serve, state, test_key};
use countersign::AuditRecord;
use countersign_gateway::{app, verify_file, GatewayConfig, Secret};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Value, String) {
    let mut request = request;
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).to_string();
    let json = if content_type.starts_with("application/json") {
        serde_json::from_str(&text).unwrap()
    } else {
        Value::Null
    };
    (status, json, text)
}

fn page(method: &str, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("origin", "http://127.0.0.1:8787")
        .header("sec-fetch-site", "same-origin")
        .body(body.into())
        .unwrap()
}

fn code(json: &Value) -> &str {
    json["error"]["code"].as_str().unwrap_or("<none>")
}

fn records(n: usize) -> Vec<AuditRecord> {
    common::records(n, "page-1", 0)
}

#[tokio::test]
async fn health_answers_without_auth() {
    let (s, _dir) = state(config(None));
    let (status, json, _) = send(
        &app(s),
        Request::get("/v1/health").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json, json!({"ok": true, "model": false, "mcp": false}));
    // The page opens its MCP relay only where the gateway says MCP is on.
    let mut with_mcp = config(None);
    with_mcp.mcp_token = Some(Secret::new("mcp-token-0123456789abcdef0123456789ab"));
    let (s, _dir) = state(with_mcp);
    let (_, json, _) = send(
        &app(s),
        Request::get("/v1/health").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(json["mcp"], json!(true));
}

#[tokio::test]
async fn without_an_upstream_the_model_routes_say_not_configured() {
    let (s, _dir) = state(config(None));
    let app = app(s);
    let (status, json, _) = send(&app, page("GET", "/v1/models", Body::empty())).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::SERVICE_UNAVAILABLE, "not_configured")
    );
    let (status, json, _) = send(
        &app,
        page("POST", "/v1/chat/completions", common::chat_body(false)),
    )
    .await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::SERVICE_UNAVAILABLE, "not_configured")
    );
    assert!(json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("offline assistant"));
}

#[tokio::test]
async fn models_lists_the_configured_model() {
    let (s, _dir) = state(config(Some("http://127.0.0.1:9/v1".into())));
    let (status, json, _) = send(&app(s), page("GET", "/v1/models", Body::empty())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["data"][0]["id"], "gpt-4o-mini");
}

#[tokio::test]
async fn malformed_and_wrongly_typed_bodies_are_clear_400s() {
    let (s, _dir) = state(config(Some("http://127.0.0.1:9/v1".into())));
    let app = app(s);
    let deep = format!(
        "{{\"messages\":[],\"x\":{}{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    for (body, expected) in [
        ("{", "invalid_json"),
        ("", "invalid_json"),
        ("[1,2]", "invalid_request"),
        ("[1,", "invalid_json"),
        ("{\"messages\":\"hi\"}", "invalid_request"),
        ("{}", "invalid_request"),
        // Nested deeper than a JSON parser's usual limit: refused here, not sent on.
        (deep.as_str(), "invalid_json"),
    ] {
        let (status, json, _) =
            send(&app, page("POST", "/v1/chat/completions", body.to_owned())).await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::BAD_REQUEST, expected),
            "{body:?}"
        );
    }
}

#[tokio::test]
async fn an_oversized_body_is_a_413_json_error() {
    let mut cfg = config(Some("http://127.0.0.1:9/v1".into()));
    cfg.max_body_bytes = 1024;
    let (s, _dir) = state(cfg);
    let app = app(s);
    let big = format!("{{\"messages\":[],\"x\":\"{}\"}}", "a".repeat(4096));
    let (status, json, _) = send(&app, page("POST", "/v1/chat/completions", big.clone())).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    let (status, json, _) = send(&app, page("POST", "/v1/audit", format!("[{big}]"))).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
}

#[tokio::test]
async fn a_wrong_content_type_is_a_415() {
    let (s, _dir) = state(config(Some("http://127.0.0.1:9/v1".into())));
    let app = app(s);
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/jsonp",
    ] {
        let request = Request::post("/v1/chat/completions")
            .header("content-type", ct)
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(common::chat_body(false)))
            .unwrap();
        let (status, json, _) = send(&app, request).await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            "{ct}"
        );
    }
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let mut cfg = config(None);
    cfg.access.token = Some(Secret::new("tok-123"));
    let (s, _dir) = state(cfg);
    let app = app(s);
    let with = |auth: Option<&str>| {
        let mut b = Request::get("/v1/models");
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        b.body(Body::empty()).unwrap()
    };
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("tok-123"),
        Some("Bearer tok-1234"),
        Some("Basic dG9rLTEyMw=="),
    ] {
        let (status, json, _) = send(&app, with(auth)).await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{auth:?}"
        );
    }
    let (status, json, _) = send(&app, with(Some("Bearer tok-123"))).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::SERVICE_UNAVAILABLE, "not_configured"),
        "auth passed, route answered"
    );
}

#[tokio::test]
async fn same_origin_mode_refuses_requests_that_are_not_from_the_page() {
    let (s, _dir) = state(config(None));
    let app = app(s);
    let bare = Request::get("/v1/models").body(Body::empty()).unwrap();
    let (status, json, _) = send(&app, bare).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let cross_site = Request::get("/v1/models")
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, cross_site).await.0, StatusCode::UNAUTHORIZED);
    let same = Request::get("/v1/models")
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, same).await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_disallowed_origin_is_refused_even_with_a_token() {
    let mut cfg = config(None);
    cfg.access.token = Some(Secret::new("tok"));
    let (s, _dir) = state(cfg);
    let request = Request::get("/v1/models")
        .header("origin", "https://evil.example")
        .header("authorization", "Bearer tok")
        .body(Body::empty())
        .unwrap();
    let (status, json, _) = send(&app(s), request).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::FORBIDDEN, "origin_not_allowed")
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let (s, _dir) = state(config(None));
    let app = app(s);
    let (status, json, _) = send(&app, page("GET", "/v1/nope", Body::empty())).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::NOT_FOUND, "unknown_route")
    );
    let (status, json, _) = send(
        &app,
        Request::get("/etc/passwd").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::NOT_FOUND, "unknown_route")
    );
    let (status, json, _) = send(&app, page("DELETE", "/v1/audit", Body::empty())).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
}

#[tokio::test]
async fn an_audit_batch_is_appended_durably_and_idempotently() {
    let (s, dir) = state(config(None));
    let app = app(s);
    let batch = serde_json::to_string(&records(5)).unwrap();
    let (status, json, _) = send(&app, page("POST", "/v1/audit", batch.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json, json!({"appended": 5, "duplicates": 0, "last_seq": 5}));
    // The page retries the same batch after a lost answer: nothing is duplicated.
    let (_, json, _) = send(&app, page("POST", "/v1/audit", batch)).await;
    assert_eq!(json, json!({"appended": 0, "duplicates": 5, "last_seq": 5}));
    // Another record under a stored id, or twice in one batch with other contents, is
    // a conflict: 409, nothing of the batch written, never dropped as a "duplicate".
    let mut other = records(6);
    other[2].duration_ms += 1;
    let mut twice = records(7);
    twice[5] = twice[6].clone();
    twice[5].duration_ms += 1;
    twice[6].id = "fresh-one".into();
    twice.push(twice[5].clone());
    twice[7].duration_ms += 1;
    for batch in [other, twice] {
        let (status, json, _) = send(
            &app,
            page("POST", "/v1/audit", serde_json::to_string(&batch).unwrap()),
        )
        .await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::CONFLICT, "audit_conflict"),
            "{json}"
        );
    }
    let (status, _, text) = send(&app, page("GET", "/v1/audit", Body::empty())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text.lines().count(), 5);
    // The page sends the reason only; the trail keeps it in words too.
    for line in text.lines() {
        let stored: AuditRecord =
            serde_json::from_value(serde_json::from_str::<Value>(line).unwrap()["record"].take())
                .unwrap();
        assert!(!stored.summary.is_empty(), "{line}");
        assert_eq!(
            stored.summary,
            countersign_gateway::summary::summary(&stored.reason)
        );
    }
    let verified = verify_file(&dir.path().join("audit.jsonl"), Some(&test_key())).unwrap();
    assert_eq!(verified.lines, 5);
}

#[tokio::test]
async fn the_trail_s_words_are_always_the_reason_s() {
    // The gateway writes the reason in words into the trail it keeps. A page that sends
    // its own words (say "the person approved it" on a refusal) must not have them kept:
    // people read the summary, and it must never say other than the reason.
    let (s, _dir) = state(config(None));
    let app = app(s);
    let mut batch = records(2);
    batch[0].summary = "the person approved it on a card".into();
    batch[1].summary = "allowed: the session grant covers it".into();
    let (status, json, _) = send(
        &app,
        page("POST", "/v1/audit", serde_json::to_string(&batch).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let (_, _, text) = send(&app, page("GET", "/v1/audit", Body::empty())).await;
    assert_eq!(text.lines().count(), 2);
    for line in text.lines() {
        let stored: AuditRecord =
            serde_json::from_value(serde_json::from_str::<Value>(line).unwrap()["record"].take())
                .unwrap();
        assert_eq!(
            stored.summary,
            countersign_gateway::summary::summary(&stored.reason),
            "{line}"
        );
    }
}

#[tokio::test]
async fn an_audit_batch_with_a_broken_record_is_refused_whole() {
    let (s, dir) = state(config(None));
    let app = app(s);
    let mut values: Vec<Value> = records(3)
        .into_iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    values[2].as_object_mut().unwrap().remove("args_digest");
    let (status, json, _) = send(
        &app,
        page("POST", "/v1/audit", serde_json::to_string(&values).unwrap()),
    )
    .await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::BAD_REQUEST, "invalid_audit_record")
    );
    assert!(json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("record 2"));
    for bad in ["{\"not\":\"an array\"}", "[1]", "nonsense"] {
        let (status, _, _) = send(&app, page("POST", "/v1/audit", bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    // An id no store can keep as it is (a control character: PostgreSQL refuses NUL in
    // text) is the page's error, not the store's: 400, never a 503 retried forever.
    for id in ["a\u{0}b", "line\nbreak", "tab\there"] {
        let mut bad = records(1);
        bad[0].id = id.into();
        let (status, json, _) = send(
            &app,
            page("POST", "/v1/audit", serde_json::to_string(&bad).unwrap()),
        )
        .await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::BAD_REQUEST, "invalid_audit_record"),
            "{id:?}"
        );
    }
    assert_eq!(
        verify_file(&dir.path().join("audit.jsonl"), Some(&test_key()))
            .unwrap()
            .lines,
        0,
        "nothing was written"
    );
}

#[tokio::test]
async fn an_audit_batch_over_the_record_cap_is_refused() {
    let mut cfg: GatewayConfig = config(None);
    cfg.max_audit_batch = 2;
    let (s, _dir) = state(cfg);
    let (status, json, _) = send(
        &app(s),
        page(
            "POST",
            "/v1/audit",
            serde_json::to_string(&records(3)).unwrap(),
        ),
    )
    .await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::PAYLOAD_TOO_LARGE, "batch_too_large")
    );
}

#[tokio::test]
async fn the_model_route_is_rate_limited_per_client() {
    let mut cfg = config(None);
    cfg.rate_per_minute = Some(2);
    let (s, _dir) = state(cfg);
    let app = app(s);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let (status, json, _) = send(
            &app,
            page("POST", "/v1/chat/completions", common::chat_body(false)),
        )
        .await;
        statuses.push((status, code(&json).to_owned()));
    }
    assert_eq!(statuses[0].1, "not_configured");
    assert_eq!(
        statuses[3],
        (StatusCode::TOO_MANY_REQUESTS, "rate_limited".to_owned()),
        "{statuses:?}"
    );
    // Other routes are not limited by it.
    assert_eq!(
        send(&app, page("GET", "/v1/models", Body::empty())).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test]
async fn the_policy_file_is_served_to_the_page() {
    let (s, _dir) = state(config(None));
    let (status, json, _) = send(&app(s), page("GET", "/v1/policy", Body::empty())).await;
    assert_eq!((status, code(&json)), (StatusCode::NOT_FOUND, "no_policy"));
    let mut cfg = config(None);
    cfg.policy = Some(r#"{"roles":{"admin":{"scopes":["a"]}}}"#.into());
    let (s, _dir) = state(cfg);
    let (status, json, _) = send(&app(s), page("GET", "/v1/policy", Body::empty())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["roles"]["admin"]["scopes"][0], "a");
    // Like every API route, not for other sites.
    let (s, _dir) = state({
        let mut c = config(None);
        c.policy = Some("{}".into());
        c
    });
    let bare = Request::get("/v1/policy").body(Body::empty()).unwrap();
    assert_eq!(send(&app(s), bare).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_foreign_host_is_refused_on_every_route() {
    // DNS rebinding: a page on `attacker.example` resolved to 127.0.0.1 sends its own
    // name as `Host`, and a same-origin fetch passes the origin guard.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<p>page</p>").unwrap();
    let mut cfg = config(None);
    cfg.dist = Some(dir.path().to_owned());
    cfg.policy = Some(r#"{"roles":{}}"#.into());
    let (s, _audit_dir) = state(cfg);
    let app = app(s);
    for (method, path) in [
        ("GET", "/v1/health"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/audit"),
        ("POST", "/v1/audit"),
        ("GET", "/v1/policy"),
        ("GET", "/v1/nope"),
        ("GET", "/"),
        ("GET", "/index.html"),
    ] {
        for host in [
            "attacker.example:8787",
            "127.0.0.1.attacker.example",
            "localhost.evil:80",
        ] {
            let mut request = page(method, path, "[]");
            request.headers_mut().insert("host", host.parse().unwrap());
            let (status, json, _) = send(&app, request).await;
            assert_eq!(
                status,
                StatusCode::MISDIRECTED_REQUEST,
                "{method} {path} as {host}"
            );
            assert_eq!(code(&json), "host_not_allowed");
        }
        let mut request = page(method, path, "[]");
        request
            .headers_mut()
            .insert("host", "127.0.0.1:8787".parse().unwrap());
        let (status, _, _) = send(&app, request).await;
        assert_ne!(
            status,
            StatusCode::MISDIRECTED_REQUEST,
            "{method} {path} on loopback"
        );
    }
}

#[tokio::test]
async fn configured_hosts_replace_the_loopback_defaults() {
    let mut cfg = config(None);
    cfg.access.allowed_hosts = vec!["app.example:443".into()];
    let (s, _dir) = state(cfg);
    let app = app(s);
    for (host, ok) in [
        ("app.example:443", true),
        ("localhost:8787", false),
        ("app.example:80", false),
    ] {
        let mut request = Request::get("/v1/health").body(Body::empty()).unwrap();
        request.headers_mut().insert("host", host.parse().unwrap());
        let (status, _, _) = send(&app, request).await;
        assert_eq!(status == StatusCode::OK, ok, "{host}: {status}");
    }
}

// ---------------------------------------------------------------------------------
// Host spellings, sent as they are over a socket.
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
