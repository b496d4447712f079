//! The tutorial's server as `cargo xtask serve` runs it: the approval window answers at
//! its own host with the card its declarations draw, and the page cannot mint for reset.
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
}
