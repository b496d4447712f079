//! The official OpenAI Python SDK (a real client nobody here wrote) against the running
//! gateway, with the test upstream behind it: models, a completion with tools, a stream
//! with tool-call deltas, and an authentication error.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{config, serve, state, upstream, Behaviour};
use countersign_gateway::Secret;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_talks_to_the_gateway() {
    let (url, _seen) = upstream(Behaviour::Recorded).await;
    let mut cfg = config(Some(url));
    cfg.access.token = Some(Secret::new("sdk-token"));
    let (s, _dir) = state(cfg);
    let base = serve(s).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_client.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(format!("{base}/v1"))
        .arg("sdk-token")
        .output()
        .await
        .expect("python3 runs (cargo xtask setup installs the openai package)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK run failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("4 checks passed"), "{stdout}");
}
