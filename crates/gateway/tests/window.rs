//! The approval window, over real HTTP: its card comes from the server's declarations and
//! never from the page; an action declared for the window gets no token from the page;
//! the window is served only at its own host, and only its own origin changes anything;
//! a request ends once (denied, withdrawn, expired). The passkey ceremony itself runs in
//! Chromium, with its virtual authenticator (the end-to-end window scenario).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{config, page_post, state};
use countersign::action::NoParams;
use countersign::countersignature::Countersignature;
use countersign::text::Preview;
use countersign::{Action, Config, Confirm, Executor, Kind, MemoryAudit, Session};
use countersign_gateway::window::{ApprovalWindow, WindowConfig};
use serde_json::{json, Value};

/// The parameters of the server's `rename_workspace`.
#[derive(Clone, Debug, serde::Deserialize, countersign::schemars::JsonSchema)]
#[schemars(crate = "countersign::schemars")]
struct Rename {
    /// The workspace's new name.
    name: String,
}

/// The server's own declarations: rename and reset approved in the window, archive by a
/// click in the page, and a read that needs nobody.
fn declare(role: &str) -> Result<Executor, String> {
    if role == "guest" {
        return Err("no declarations for guests".into());
    }
    let exec = Executor::new(
        Config::new("window", Session::new(role, ["workspace.admin"]), [9; 32]),
        MemoryAudit::new(),
    );
    let run = |_: NoParams, _: Countersignature| async { Ok::<_, String>(json!({})) };
    let actions = [
        exec.register(
            Action::<Rename>::new("rename_workspace", "Renames the workspace.")
                .title("Rename the workspace")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("the workspace will be called “{}”", p.name))
                .needs_window()
                .run_countersigned(|_: Rename, _: Countersignature| async {
                    Ok::<_, String>(json!({}))
                }),
        ),
        exec.register(
            Action::<NoParams>::new("reset_workspace", "Resets the workspace.")
                .title("Reset the workspace")
                .kind(Kind::Danger)
                .scope("workspace.admin")
                .consequence(|_| "the name and description go back to their defaults".into())
                .needs_window()
                .run_countersigned(run),
        ),
        exec.register(
            Action::<NoParams>::new("archive_workspace", "Archives the workspace.")
                .kind(Kind::Danger)
                .run_countersigned(run),
        ),
        exec.register(
            Action::<NoParams>::new("read_members", "Lists the members.")
                .kind(Kind::Read)
                .run(|_| async { Ok::<_, String>(json!([])) }),
        ),
    ];
    for action in actions {
        action.map_err(|e| e.to_string())?.forget();
    }
    Ok(exec)
}

/// A gateway with an approval window at `approve.localhost` on the same port.
struct Served {
    /// The page's origin (`http://127.0.0.1:PORT`).
    page: String,
    /// The window's origin (`http://approve.localhost:PORT`).
    window: String,
    state: countersign_gateway::AppState,
    /// A client that finds `approve.localhost` on loopback.
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn served(timeout: Duration) -> Served {
    served_with(timeout, Duration::from_secs(40), None).await
}

async fn served_with(timeout: Duration, abandoned: Duration, policy: Option<&str>) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let window_origin = format!("http://approve.localhost:{}", addr.port());
    let mut cfg = config(None);
    cfg.policy = policy.map(str::to_owned);
    let (s, dir) = state(cfg);
    let mut wc = WindowConfig::new(&window_origin);
    wc.timeout = timeout;
    wc.abandoned_after = abandoned;
    wc.passkeys_file = Some(dir.path().join("window-passkeys.json"));
    let s = s.with_window(ApprovalWindow::new(&wc, declare).unwrap());
    let service =
        countersign_gateway::app(s.clone()).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    let client = reqwest::Client::builder()
        .resolve("approve.localhost", addr)
        .build()
        .unwrap();
    Served {
        page: format!("http://{addr}"),
        window: window_origin,
        state: s,
        client,
        _dir: dir,
    }
}

/// The window's id of an opened request: in its address, apart from the page's key.
fn window_id(opened: &Value) -> String {
    let url = opened["url"].as_str().unwrap();
    url.split_once('#').unwrap().1.to_owned()
}

fn opening(action: &str, arguments: Value) -> Value {
    json!({
        "call": 7,
        "tool_call_id": "call_w1",
        "action": action,
        "arguments": arguments,
        "session": "page-77",
        "role": "admin",
    })
}

impl Served {
    async fn open(&self, body: &Value) -> (u16, Value) {
        let r = page_post(
            &self.client,
            format!("{}/v1/window/requests", self.page),
            body.to_string(),
        )
        .send()
        .await
        .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// A request the window's own script makes (`Origin` the window's), or with `origin`.
    async fn window_post(&self, path: &str, body: &Value, origin: Option<&str>) -> (u16, Value) {
        let mut r = self
            .client
            .post(format!("{}{path}", self.window))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(origin) = origin {
            r = r.header("origin", origin);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Asserts that `path` of the decided request `id` (`deny`, `challenge`…) is refused
    /// from the window's own origin as `window_decided`.
    async fn refuses_decided(&self, id: &str, path: &str) {
        let path = format!("/api/requests/{id}/{path}");
        let (status, answer) = self
            .window_post(&path, &json!({}), Some(&self.window))
            .await;
        assert_eq!(
            (status, answer["error"]["code"].clone()),
            (409, json!("window_decided"))
        );
    }

    async fn window_get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.window))
            .send()
            .await
            .unwrap()
    }

    /// The page's view of request `id`, waiting up to `wait` seconds.
    async fn outcome(&self, id: &str, wait: u64) -> Value {
        self.client
            .get(format!("{}/v1/window/requests/{id}?wait={wait}", self.page))
            .header("origin", "http://127.0.0.1:8787")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn trail(&self) -> Vec<Value> {
        let text = String::from_utf8(self.state.audit.export().await.unwrap()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn the_window_draws_its_card_from_the_servers_declarations_not_the_page() {
    let s = served(Duration::from_secs(60)).await;
    let (status, opened) = s
        .open(&opening("rename_workspace", json!({ "name": "Apollo" })))
        .await;
    assert_eq!(status, 200, "{opened}");
    let card = json!({
        "action": "rename_workspace",
        "title": "Rename the workspace",
        "kind": "write",
        "consequence": "the workspace will be called “Apollo”",
        "arguments": { "name": "Apollo" },
        "role": "admin",
    });
    assert_eq!(opened["card"], card);
    let id = window_id(&opened);
    assert_eq!(id.len(), 32);
    assert_eq!(opened["url"], json!(format!("{}/approve#{id}", s.window)));
    // The page's key is its own: the window's address does not hold it, and the
    // window's id does not collect the token.
    let key = opened["id"].as_str().unwrap();
    assert_ne!(key, id);
    assert_eq!(s.outcome(&id, 0).await["error"]["code"], "window_gone");
    assert_eq!(s.outcome(key, 0).await["state"], "waiting");
    assert_eq!(
        s.window_get(&format!("/api/requests/{key}"))
            .await
            .status()
            .as_u16(),
        404
    );
    // The window shows the same card; its digest is of the card's words, as a page's
    // card is digested too, so a backend checks both the same way.
    let view: Value = s
        .window_get(&format!("/api/requests/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (view["card"].clone(), view["state"].clone()),
        (card.clone(), json!("waiting"))
    );
    let mut words = card.clone();
    words.as_object_mut().unwrap().remove("role");
    words["preview"] = Value::Null;
    assert_eq!(
        view["card_sha256"],
        json!(countersign::audit::ArgsDigest::of_value(&words).to_hex())
    );
    // A page cannot put words on the card: anything beyond the call is refused.
    let mut forged = opening("rename_workspace", json!({ "name": "Apollo" }));
    forged["consequence"] = json!("nothing much");
    forged["title"] = json!("Say hello");
    let (status, answer) = s.open(&forged).await;
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!("invalid_request"))
    );
    // Nothing was minted, nothing written.
    assert!(s.trail().await.is_empty());
}

#[tokio::test]
async fn an_unknown_action_or_arguments_the_declaration_refuses_open_nothing() {
    let s = served(Duration::from_secs(60)).await;
    for (body, words) in [
        (
            opening("drop_database", json!({})),
            "declares no such action",
        ),
        (
            opening("rename_workspace", json!({ "name": 5 })),
            "do not ask a person",
        ),
        (
            opening("rename_workspace", json!({})),
            "do not ask a person",
        ),
        (opening("read_members", json!({})), "do not ask a person"),
    ] {
        let (status, answer) = s.open(&body).await;
        assert_eq!(status, 400, "{body} → {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{message}");
    }
    // The page's own digest of the arguments, when it sends one, must be theirs.
    let mut disagrees = opening("rename_workspace", json!({ "name": "Apollo" }));
    disagrees["args_sha256"] = json!("ab".repeat(32));
    let (status, answer) = s.open(&disagrees).await;
    assert_eq!(status, 400, "{answer}");
    let mut agrees = opening("rename_workspace", json!({ "name": "Apollo" }));
    agrees["args_sha256"] =
        json!(countersign::audit::ArgsDigest::of_value(&json!({ "name": "Apollo" })).to_hex());
    agrees["card_sha256"] = json!("cd".repeat(32));
    agrees["presence"] = json!("passkey");
    assert_eq!(s.open(&agrees).await.0, 200);
    let mut bad_role = opening("reset_workspace", json!({}));
    bad_role["role"] = json!("admin/evil");
    assert_eq!(s.open(&bad_role).await.0, 400);
}

#[tokio::test]
async fn an_action_declared_for_the_window_gets_no_token_from_the_page() {
    let s = served(Duration::from_secs(60)).await;
    let args_sha256 = countersign::audit::ArgsDigest::of_value(&json!({})).to_hex();
    let mint = |action: &str, presence: &str| {
        json!({
            "call": 3, "tool_call_id": "call_abc", "action": action, "kind": "danger",
            "args_sha256": args_sha256, "card_sha256": "cd".repeat(32),
            "approved_by": "once", "grant": null, "session": "page-77", "role": "admin",
            "presence": presence,
        })
    };
    for presence in ["click", "passkey", "window"] {
        let r = page_post(
            &s.client,
            format!("{}/v1/countersign", s.page),
            mint("reset_workspace", presence).to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{presence}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], "window_required");
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&s.window));
    }
    // Nor its passkey challenge.
    let r = page_post(
        &s.client,
        format!("{}/v1/countersign/challenge", s.page),
        mint("reset_workspace", "passkey").to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // No action claims the window's presence from the page either.
    let r = page_post(
        &s.client,
        format!("{}/v1/countersign", s.page),
        mint("archive_workspace", "window").to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(
        s.trail().await.is_empty(),
        "nothing minted, nothing recorded"
    );
    // An action declared for a click still mints from the page.
    let r = page_post(
        &s.client,
        format!("{}/v1/countersign", s.page),
        mint("archive_workspace", "click").to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(s.trail().await.len(), 1);
}

#[tokio::test]
async fn the_window_is_served_only_at_its_own_host_and_cannot_be_framed() {
    let s = served(Duration::from_secs(60)).await;
    // The window's host serves the window and nothing of the page's.
    let page = s.window_get("/approve").await;
    assert_eq!(page.status().as_u16(), 200);
    let headers = page.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["cross-origin-opener-policy"], "same-origin");
    assert!(page.text().await.unwrap().contains("/window.js"));
    for path in [
        "/v1/health",
        "/v1/window/requests",
        "/.well-known/jwks.json",
    ] {
        assert_eq!(s.window_get(path).await.status().as_u16(), 404, "{path}");
    }
    // The page's host serves none of the window.
    for path in ["/approve", "/window.js", "/api/requests/00"] {
        let r = s
            .client
            .get(format!("{}{path}", s.page))
            .send()
            .await
            .unwrap();
        assert_ne!(r.status().as_u16(), 200, "{path}");
    }
}

#[tokio::test]
async fn only_the_windows_own_origin_changes_a_request_or_enrolls() {
    let s = served(Duration::from_secs(60)).await;
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let id = window_id(&opened);
    let paths = [
        format!("/api/requests/{id}/challenge"),
        format!("/api/requests/{id}/approve"),
        format!("/api/requests/{id}/deny"),
        "/api/enroll".to_owned(),
        "/api/enroll/finish".to_owned(),
    ];
    // A page script's request carries the page's origin; a tool's, none.
    for origin in [
        Some(s.page.as_str()),
        Some("http://approve.localhost"),
        None,
    ] {
        for path in &paths {
            let (status, answer) = s.window_post(path, &json!({}), origin).await;
            assert_eq!(
                (status, answer["error"]["code"].clone()),
                (403, json!("origin_not_allowed")),
                "{path} from {origin:?}"
            );
        }
    }
    assert_eq!(
        s.outcome(opened["id"].as_str().unwrap(), 0).await["state"],
        "waiting"
    );
    // No approver is enrolled: the window's own request for a challenge says so.
    let (status, answer) = s.window_post(&paths[0], &json!({}), Some(&s.window)).await;
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (409, json!("no_passkey"))
    );
}

#[tokio::test]
async fn a_request_is_decided_once_denied_withdrawn_or_expired() {
    let s = served(Duration::from_secs(60)).await;
    let own = Some(s.window.as_str());
    // Denied in the window: the page, waiting, hears it; nothing more can decide it.
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let id = window_id(&opened);
    let waiting = {
        let page = s.page.clone();
        let client = s.client.clone();
        let key = opened["id"].as_str().unwrap().to_owned();
        tokio::spawn(async move {
            client
                .get(format!("{page}/v1/window/requests/{key}?wait=20"))
                .header("origin", "http://127.0.0.1:8787")
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, _) = s
        .window_post(&format!("/api/requests/{id}/deny"), &json!({}), own)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting page heard the denial at once")
            .unwrap(),
        json!({ "state": "denied" })
    );
    for path in ["deny", "challenge"] {
        s.refuses_decided(&id, path).await;
    }
    // Withdrawn by the page (its call settled there): the window says so.
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let id = window_id(&opened);
    let key = opened["id"].as_str().unwrap();
    let r = s
        .client
        .delete(format!("{}/v1/window/requests/{key}", s.page))
        .header("origin", "http://127.0.0.1:8787")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let view: Value = s
        .window_get(&format!("/api/requests/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["state"], "denied");
    // An id nobody opened.
    assert_eq!(
        s.outcome(&"0".repeat(32), 0).await["error"]["code"],
        "window_gone"
    );
    assert!(s.trail().await.is_empty());
}

#[tokio::test]
async fn a_request_nobody_decides_expires_at_its_deadline() {
    let s = served(Duration::from_millis(600)).await;
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let id = window_id(&opened);
    assert_eq!(
        s.outcome(opened["id"].as_str().unwrap(), 5).await,
        json!({ "state": "expired" })
    );
    s.refuses_decided(&id, "challenge").await;
}

#[tokio::test]
async fn enrolling_takes_the_code_issued_outside_the_page_for_that_person() {
    let s = served(Duration::from_secs(60)).await;
    let window = s.state.window.clone().unwrap();
    let own = Some(s.window.as_str());
    let enroll = |code: &str| json!({ "role": "admin", "person": "alice", "code": code });
    let (status, answer) = s
        .window_post("/api/enroll", &enroll("WRONG-CODE1"), own)
        .await;
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (403, json!("passkey_rejected"))
    );
    // A code for another person does not enroll alice.
    let bobs = window.issue_enrollment_code("admin", "bob").unwrap();
    assert_eq!(
        s.window_post("/api/enroll", &enroll(&bobs), own).await.0,
        403
    );
    let code = window.issue_enrollment_code("admin", "alice").unwrap();
    let (status, answer) = s.window_post("/api/enroll", &enroll(&code), own).await;
    assert_eq!(status, 200, "{answer}");
    // The passkey is for the window's relying party, which the page's origin cannot claim.
    assert_eq!(
        answer["options"]["publicKey"]["rp"]["id"],
        "approve.localhost"
    );
    assert_eq!(
        answer["options"]["publicKey"]["user"]["name"],
        "admin/alice"
    );
    // Spent.
    assert_eq!(
        s.window_post("/api/enroll", &enroll(&code), own).await.0,
        403
    );
    assert!(window.issue_enrollment_code("admin", "al/ice").is_err());
}

#[tokio::test]
async fn a_pages_audit_record_cannot_name_an_approver() {
    let s = served(Duration::from_secs(60)).await;
    let mut record = serde_json::to_value(&common::records(1, "page-77", 0)[0]).unwrap();
    record["approver"] = json!("alice");
    let r = page_post(
        &s.client,
        format!("{}/v1/audit", s.page),
        json!([record]).to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(s.trail().await.is_empty());
}

#[tokio::test]
async fn a_role_the_declarations_refuse_gets_no_token_from_the_page_either() {
    let s = served(Duration::from_secs(60)).await;
    let args_sha256 = countersign::audit::ArgsDigest::of_value(&json!({})).to_hex();
    // The page names the role: one the declarations refuse, or no valid name, cannot
    // slip a window action (or any other) past the window.
    for role in ["guest", "admin/evil"] {
        let body = json!({
            "call": 3, "tool_call_id": "call_abc", "action": "archive_workspace",
            "kind": "danger", "args_sha256": args_sha256, "card_sha256": "cd".repeat(32),
            "approved_by": "once", "grant": null, "session": "page-77", "role": role,
        });
        let r = page_post(
            &s.client,
            format!("{}/v1/countersign", s.page),
            body.to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{role}");
    }
    assert!(s.trail().await.is_empty());
}

#[tokio::test]
async fn the_windows_card_shows_hidden_characters_as_the_dock_does() {
    let s = served(Duration::from_secs(60)).await;
    let name = "Acme\u{202e}lave";
    let (status, opened) = s
        .open(&opening("rename_workspace", json!({ "name": name })))
        .await;
    assert_eq!(status, 200, "{opened}");
    let shown = opened["card"]["arguments"]["name"].as_str().unwrap();
    assert!(!shown.contains('\u{202e}'), "{shown:?}");
    assert!(shown.contains("\\u{202e}"), "{shown:?}");
    let consequence = opened["card"]["consequence"].as_str().unwrap();
    assert!(!consequence.contains('\u{202e}'), "{consequence:?}");
    // Its digest is of the words as they are, which a backend can draw: not of the
    // escaped text the window shows.
    let words = json!({
        "action": "rename_workspace", "title": "Rename the workspace", "kind": "write",
        "consequence": format!("the workspace will be called “{name}”"), "preview": null,
        "arguments": { "name": name },
    });
    assert_eq!(
        opened["card_sha256"],
        json!(countersign::audit::ArgsDigest::of_value(&words).to_hex())
    );
}

#[tokio::test]
async fn one_page_session_cannot_fill_the_window() {
    let s = served(Duration::from_secs(60)).await;
    for _ in 0..16 {
        assert_eq!(s.open(&opening("reset_workspace", json!({}))).await.0, 200);
    }
    let (status, answer) = s.open(&opening("reset_workspace", json!({}))).await;
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (503, json!("window_busy"))
    );
    let mut other = opening("reset_workspace", json!({}));
    other["session"] = json!("page-88");
    assert_eq!(s.open(&other).await.0, 200);
}

#[tokio::test]
async fn a_pages_wait_ends_before_the_request_timeout_would_cut_it() {
    // The test gateway's upstream timeout is 2 s (its request timeout 7 s): a wait of
    // 20 s is answered, still waiting, within it.
    let s = served(Duration::from_secs(60)).await;
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let started = std::time::Instant::now();
    let answer = s.outcome(opened["id"].as_str().unwrap(), 20).await;
    assert_eq!(answer, json!({ "state": "waiting" }));
    assert!(started.elapsed() < Duration::from_secs(7));
}

#[tokio::test]
async fn the_inbox_shows_a_role_its_own_approvals_and_only_to_a_signed_in_person() {
    let s = served(Duration::from_secs(60)).await;
    let (_, opened) = s.open(&opening("reset_workspace", json!({}))).await;
    let window = s.state.window.clone().unwrap();
    let waiting = window.waiting_for("admin");
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].0, window_id(&opened));
    assert!(
        window.waiting_for("viewer").is_empty(),
        "another role sees nothing"
    );
    // Without a session (or with a made-up one), nothing is listed or streamed.
    for path in ["/api/inbox", "/api/inbox/events"] {
        for cookie in [None, Some("cs-window=00112233")] {
            let mut r = s.client.get(format!("{}{path}", s.window));
            if let Some(cookie) = cookie {
                r = r.header("cookie", cookie);
            }
            let r = r.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 401, "{path} {cookie:?}");
        }
    }
    // Nobody is enrolled yet: signing in says so; and only the window's origin may ask.
    let (status, answer) = s
        .window_post("/api/signin", &json!({}), Some(&s.window))
        .await;
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (409, json!("no_passkey"))
    );
    assert_eq!(
        s.window_post("/api/signin", &json!({}), Some(&s.page))
            .await
            .0,
        403
    );
    // A decided request leaves the inbox.
    window.deny(&window_id(&opened)).unwrap();
    assert!(window.waiting_for("admin").is_empty());
}

#[tokio::test]
async fn a_request_no_page_waits_for_ends_and_one_waited_on_does_not() {
    let s = served_with(Duration::from_secs(60), Duration::from_millis(500), None).await;
    // The page that opened it went away (reloaded, closed): it ends, and nothing can
    // approve it any more.
    let (_, gone) = s.open(&opening("reset_workspace", json!({}))).await;
    // One the page keeps waiting on stays open.
    let (_, kept) = s.open(&opening("reset_workspace", json!({}))).await;
    let outcome = s.outcome(kept["id"].as_str().unwrap(), 2).await;
    assert_eq!(outcome, json!({ "state": "waiting" }));
    let view: Value = s
        .window_get(&format!("/api/requests/{}", window_id(&gone)))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["state"], "abandoned");
    s.refuses_decided(&window_id(&gone), "challenge").await;
}

#[tokio::test]
async fn a_policy_file_can_raise_an_action_to_the_window_and_the_page_then_mints_nothing() {
    let policy = r#"{"roles": {"admin": {"scopes": ["workspace.admin"], "overrides": {
        "archive_workspace": {"presence": "window"}}}}}"#;
    let s = served_with(
        Duration::from_secs(60),
        Duration::from_secs(40),
        Some(policy),
    )
    .await;
    let args_sha256 = countersign::audit::ArgsDigest::of_value(&json!({})).to_hex();
    let body = json!({
        "call": 3, "tool_call_id": "call_abc", "action": "archive_workspace", "kind": "danger",
        "args_sha256": args_sha256, "card_sha256": "cd".repeat(32), "approved_by": "once",
        "grant": null, "session": "page-77", "role": "admin",
    });
    let r = page_post(
        &s.client,
        format!("{}/v1/countersign", s.page),
        body.to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(s.trail().await.is_empty());
}

#[tokio::test]
async fn one_process_at_a_time_keeps_the_windows_passkeys() {
    // A running window holds its passkey file: a second (the `approvers` command while
    // the gateway serves) is refused, so a revocation never lands in a copy only.
    let dir = tempfile::tempdir().unwrap();
    let mut config = WindowConfig::new("http://approve.localhost:8787");
    config.passkeys_file = Some(dir.path().join("window-passkeys.json"));
    let serving = ApprovalWindow::new(&config, declare).unwrap();
    let second = ApprovalWindow::new(&config, declare);
    assert!(second
        .unwrap_err()
        .to_string()
        .contains("in use by another process"));
    drop(serving);
    assert!(ApprovalWindow::new(&config, declare).is_ok());
}

#[tokio::test]
async fn a_backend_draws_the_card_again_and_sees_when_it_no_longer_holds() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    // The server's data: how many rows the call would delete, read when the card is drawn.
    let rows = Arc::new(AtomicU64::new(1));
    let data = Arc::clone(&rows);
    let declare = move |role: &str| {
        let exec = Executor::new(
            Config::new("window", Session::new(role, Vec::<String>::new()), [9; 32]),
            MemoryAudit::new(),
        );
        let data = Arc::clone(&data);
        exec.register(
            Action::<NoParams>::new("purge", "Deletes the old rows.")
                .kind(Kind::Danger)
                .consequence(|_| "the old rows are deleted".into())
                .preview(move |_| {
                    Preview::default().count("rows deleted\u{202e}", data.load(Ordering::SeqCst))
                })
                .needs_window()
                .run_countersigned(|_: NoParams, _: Countersignature| async {
                    Ok::<_, String>(json!({}))
                }),
        )
        .map_err(|e| e.to_string())?
        .forget();
        Ok(exec)
    };
    let window =
        ApprovalWindow::new(&WindowConfig::new("http://approve.localhost:8787"), declare).unwrap();
    let opened = window
        .open(serde_json::from_value(opening("purge", json!({}))).unwrap())
        .unwrap();
    // The preview is shown as the dock shows it: the hidden control character named.
    let preview = opened.card.preview.as_ref().unwrap();
    assert_eq!(preview.counts.len(), 1);
    assert_eq!(preview.counts[0].1, 1);
    assert!(!preview.counts[0].0.contains('\u{202e}'), "{preview:?}");
    // Drawn again now, the same: a backend acting on the token finds the card it approved.
    let now = window
        .card_digest("admin", "purge", &json!({}), countersign::Caller::Assistant)
        .unwrap();
    assert_eq!(now, opened.card_sha256);
    // The data moved on: the card the person approved (its preview) no longer holds.
    rows.store(101, Ordering::SeqCst);
    let now = window
        .card_digest("admin", "purge", &json!({}), countersign::Caller::Assistant)
        .unwrap();
    assert_ne!(now, opened.card_sha256);
}

#[tokio::test]
async fn signing_in_to_the_inbox_is_nobodys_to_block_and_signing_out_ends_nothing_else() {
    let s = served(Duration::from_secs(60)).await;
    // Nobody is enrolled: each try says so, and many tries (a stranger's) never lock the
    // sign-in as one user's ceremonies would.
    for _ in 0..12 {
        let (status, answer) = s
            .window_post("/api/signin", &json!({}), Some(&s.window))
            .await;
        assert_eq!(
            (status, answer["error"]["code"].clone()),
            (409, json!("no_passkey"))
        );
    }
    // Signing out without a session is harmless, and clears the cookie.
    let r = s
        .client
        .post(format!("{}/api/signout", s.window))
        .header("origin", &s.window)
        .header("content-type", "application/json")
        .header("cookie", "cs-window=planted; cs-window=other")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cleared = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cleared.starts_with("cs-window=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}
