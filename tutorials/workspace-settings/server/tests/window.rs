//! The tutorial's server as `cargo xtask serve` runs it: the approval window answers at
//! its own host with the card its declarations draw, the page cannot mint for reset, and
//! its backend refuses a reset whose approved card it draws differently now.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_tutorial_server_serves_its_approval_window() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let window = format!("http://approve.localhost:{port}");
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_workspace-settings-server"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--demo-backend",
            ])
            .args(["--window-origin", &window, "--enroll-approver", "admin/you"])
            .arg("--audit-file")
            .arg(dir.path().join("audit.jsonl"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::builder()
        .resolve(
            "approve.localhost",
            SocketAddr::from(([127, 0, 0, 1], port)),
        )
        .build()
        .unwrap();
    let page = format!("http://127.0.0.1:{port}");
    let mut healthy = false;
    for _ in 0..200 {
        if client.get(format!("{page}/v1/health")).send().await.is_ok() {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(healthy, "the server did not start");
    let post = |url: String, body: Value| {
        client
            .post(url)
            .header("content-type", "application/json")
            .header("origin", format!("http://127.0.0.1:{port}"))
            .body(body.to_string())
    };
    let digest = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
    let mint = post(
        format!("{page}/v1/countersign"),
        json!({ "call": 1, "tool_call_id": "t", "action": "reset_workspace", "kind": "danger",
                "args_sha256": digest, "card_sha256": digest, "approved_by": "once",
                "grant": null, "session": "s", "role": "admin", "presence": "passkey" }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(mint.status().as_u16(), 403);
    let opened: Value = post(
        format!("{page}/v1/window/requests"),
        json!({ "call": 1, "tool_call_id": "t", "action": "reset_workspace",
                "arguments": {}, "session": "s", "role": "admin" }),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(opened["card"]["title"], "Reset workspace", "{opened}");
    let url = opened["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{window}/approve#")), "{url}");
    let shown = client
        .get(format!("{window}/approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status().as_u16(), 200);

    // The backend draws reset's card again from its declarations. A window token for a
    // card with other words (the page's forged or stale card) is refused before it is
    // spent; a token for the card the server draws is taken.
    let seed = std::fs::read_to_string(dir.path().join("audit.jsonl.signing.key")).unwrap();
    let seed: [u8; 32] = (0..32)
        .map(|i| u8::from_str_radix(&seed.trim()[2 * i..2 * i + 2], 16).unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let signer = countersign_verify::Signer::from_seed(&seed);
    let words = |consequence: &str| {
        countersign::audit::ArgsDigest::of_value(&json!({
            "action": "reset_workspace", "title": "Reset workspace", "kind": "danger",
            "consequence": consequence, "preview": null, "arguments": {},
        }))
        .to_hex()
    };
    let reset = |card_sha256: String, jti: &str, role: &str| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims: countersign_verify::Claims = serde_json::from_value(json!({
            "iss": "countersign-gateway", "sub": "you", "aud": "countersign-backend",
            "iat": now, "nbf": now, "exp": now + 60, "jti": jti,
            "act": { "sub": "assistant" }, "amr": ["pop", "mfa"],
            "authorization_details": [{ "type": "countersign_action",
                "action": "reset_workspace", "kind": "danger", "call": 1, "tool_call_id": "t",
                "args_sha256": digest, "card_sha256": card_sha256, "decision": "once",
                "grant": null, "session": "s", "role": role, "presence": "window",
                "passkey": "cred" }],
        }))
        .unwrap();
        post(format!("{page}/v1/demo/reset_workspace"), json!({}))
            .header("countersignature", signer.sign(&claims).unwrap())
            .send()
    };
    let stale = reset(words("nothing is lost"), &"a1".repeat(16), "admin")
        .await
        .unwrap();
    assert_eq!(stale.status().as_u16(), 403);
    let stale: Value = stale.json().await.unwrap();
    assert_eq!(stale["error"]["code"], "wrong_card", "{stale}");
    // As a backend that shares the declarations draws it: their executor's card.
    let declared = workspace_settings_actions::for_window("admin").unwrap();
    let call = countersign::Call::new("t", "reset_workspace", "{}");
    let Ok(countersign::Step::Approval(card)) =
        declared.submit(call, countersign::Timestamp::from_millis(0))
    else {
        panic!("the declarations ask a person for reset");
    };
    let held = card.words_sha256().to_hex();
    // The same words approved for another role (one that reads the same card) are not
    // this backend's: the role is checked beside the card.
    let other = reset(held.clone(), &"c3".repeat(16), "owner")
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 403);
    let other: Value = other.json().await.unwrap();
    assert_eq!(other["error"]["code"], "wrong_role", "{other}");
    let done = reset(held, &"b2".repeat(16), "admin").await.unwrap();
    assert_eq!(done.status().as_u16(), 200);
    let done: Value = done.json().await.unwrap();
    assert_eq!(done["done"], "reset", "{done}");
}
