//! A backend that is not written in Rust checks a countersignature and a receipt with
//! stock libraries, as the verifier's README shows: Python with joserfc and rfc8785,
//! Node with jose and canonicalize, over canonical JSON of hard arguments.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{config, page_post, state};
use serde_json::{json, Value};

fn digest(args: &Value) -> String {
    countersign::audit::ArgsDigest::of_value(args).to_hex()
}

/// A gateway on loopback: its base URL and state.
async fn gateway() -> (String, countersign_gateway::AppState, tempfile::TempDir) {
    let (s, dir) = state(config(None));
    let s = s.with_signing_seed(&[9; 32]);
    (common::serve(s.clone()).await, s, dir)
}

/// The card's words, as a backend draws them from its own data (the token binds their
/// digest with the action and the arguments).
fn card_words() -> Value {
    json!({"title": "Rename workspace", "kind": "write",
           "consequence": "the workspace is renamed “Zoë” — 東京 sees it at once",
           "preview": {"diff": "-Acme\n+Zoë", "counts": [["pages renamed", 3]]}})
}

/// Mints, as the page does, a countersignature for `save_workspace_name` with `args`,
/// approved on a card with [`card_words`].
async fn mint(client: &reqwest::Client, base: &str, args: &Value) -> Value {
    let mut card = card_words();
    card["action"] = json!("save_workspace_name");
    card["arguments"] = args.clone();
    let body = json!({
        "call": 3, "tool_call_id": "call_abc", "action": "save_workspace_name",
        "kind": "write", "args_sha256": digest(args), "card_sha256": digest(&card),
        "approved_by": "once", "grant": null, "session": "page-0a1b2c", "role": "admin",
    });
    page_post(client, format!("{base}/v1/countersign"), body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Arguments that stress canonical JSON: escapes, non-ASCII text, small and large
/// numbers, a whole double, and keys past the Basic Multilingual Plane.
fn hard_arguments() -> Value {
    json!({"name": "Zoë \"Ops\" 東京", "count": 3, "tags": ["b", "a"], "nested": {"z": true, "a": null},
           "ratio": 0.00001, "far": 1e21, "whole": 2.0, "\u{fb01}": 2, "\u{1f600}": 1})
}

/// Runs a stock backend's check (`program script JWKS TOKEN ACTION ARGS CARD RECEIPT`) on a
/// token the gateway minted for `args` and a receipt naming it, and asserts it verified
/// both, then refused other arguments, a tampered signature and the receipt as an
/// approval.
async fn a_stock_backend_checks(program: &str, script: &std::path::Path, library: &str) {
    let (base, s, _dir) = gateway().await;
    let client = reqwest::Client::new();
    let args = hard_arguments();
    let answer = mint(&client, &base, &args).await;
    let token = answer["countersignature"].as_str().unwrap();
    // The receipt the gateway would sign for the call's result (as an MCP client gets it).
    let receipt = s
        .signer
        .sign_receipt(&countersign_verify::ReceiptClaims {
            iss: "countersign-gateway".into(),
            iat: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            jti: "ab".repeat(16),
            act: countersign_verify::Actor {
                sub: countersign::Caller::Mcp,
            },
            outcome: countersign_verify::CallOutcome {
                call: "call_abc".into(),
                action: "save_workspace_name".into(),
                args_sha256: digest(&args),
                ok: true,
                code: "OK".into(),
                said_by: "page".into(),
                result_sha256: "00".repeat(32),
                approval_sha256: Some(countersign_verify::token_sha256(token)),
                approval_jti: answer["id"].as_str().map(str::to_owned),
            },
        })
        .unwrap();
    let output = tokio::process::Command::new(program)
        .arg(script)
        .arg(format!("{base}/.well-known/jwks.json"))
        .arg(token)
        .arg("save_workspace_name")
        .arg(args.to_string())
        .arg(card_words().to_string())
        .arg(&receipt)
        .output()
        .await
        .unwrap_or_else(|e| panic!("{program} runs (cargo xtask setup installs {library}): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{library} refused:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(
            "verified: save_workspace_name call 3 decision once presence click asked by assistant"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("card: the words the person approved hold"),
        "{stdout}"
    );
    assert!(stdout.contains("refused: other card"), "{stdout}");
    assert!(stdout.contains("refused: other arguments"), "{stdout}");
    assert!(stdout.contains("refused: tampered"), "{stdout}");
    assert!(
        stdout.contains("receipt: save_workspace_name OK for this approval"),
        "{stdout}"
    );
    assert!(
        stdout.contains("refused: a receipt is not an approval"),
        "{stdout}"
    );
}

/// A Python backend with joserfc and rfc8785 (stock libraries from PyPI) fetches the
/// JWKS, verifies a token the gateway minted (`alg: Ed25519`, the type, issuer,
/// audience, times) and checks the argument digest itself over canonical JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_backend_verifies_a_token_with_joserfc() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify_token.py");
    a_stock_backend_checks("python3", &script, "joserfc and rfc8785").await;
}

/// A Node backend with jose and canonicalize (stock libraries from npm) does the same.
/// The script runs beside the npm tools, where its imports resolve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_backend_verifies_a_token_with_jose() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tools = root.join("target/tools");
    let script = tools.join("verify_token.mjs");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify_token.mjs"),
        &script,
    )
    .expect("cargo xtask setup makes target/tools with jose and canonicalize from npm");
    a_stock_backend_checks("node", &script, "jose and canonicalize").await;
}
