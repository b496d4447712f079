//! Kill the gateway with SIGKILL while the page streams audit batches, restart it, and
//! check that every acknowledged record survived and the chain verifies.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use countersign::AuditRecord;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_countersign-gateway");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(port: u16, audit: &std::path::Path) -> Child {
    Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--rate-per-minute",
            "0",
            "--audit-file",
        ])
        .arg(audit)
        .env("COUNTERSIGN_TOKEN", "tok")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if client
            .get(format!("{base}/v1/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway did not come up");
}

/// The key file `serve` creates beside the audit file.
fn key_file(audit: &std::path::Path) -> std::path::PathBuf {
    let mut name = audit.as_os_str().to_owned();
    name.push(".key");
    std::path::PathBuf::from(name)
}

fn batch(start: usize, n: usize) -> Vec<AuditRecord> {
    common::records(n, "kill", start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_sigkill_and_the_chain_holds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut child = start(port, &file);
    wait_healthy(&client, &base).await;

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<String>>();
    let sender = {
        let (client, base) = (client.clone(), base.clone());
        tokio::spawn(async move {
            let mut next = 0;
            // Bounded: at most 2,000 batches, stops at the first failed request.
            for _ in 0..2_000 {
                let records = batch(next, 25);
                next += 25;
                let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
                let sent = client
                    .post(format!("{base}/v1/audit"))
                    .bearer_auth("tok")
                    .json(&records)
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status().is_success() => {
                        if tx.send(ids).is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        })
    };
    let mut acknowledged: HashSet<String> = HashSet::new();
    while acknowledged.len() < 40 * 25 {
        match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
            Ok(Some(ids)) => acknowledged.extend(ids),
            _ => panic!("appends stalled"),
        }
    }
    child.kill().unwrap(); // SIGKILL mid-stream
    child.wait().unwrap();
    let _ = sender.await;
    while let Ok(ids) = rx.try_recv() {
        acknowledged.extend(ids);
    }

    // The chain verifies (a torn, unacknowledged tail is allowed and reported).
    let verify = Command::new(BIN)
        .args(["verify", "--audit-file"])
        .arg(&file)
        .arg("--key-file")
        .arg(key_file(&file))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "verify failed: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert!(String::from_utf8_lossy(&verify.stdout).starts_with("ok: "));

    // Restart on the same file: every acknowledged record is there, and appends go on.
    let mut child = start(port, &file);
    wait_healthy(&client, &base).await;
    let export = common::exported(&client, &base).await;
    let stored: HashSet<String> = export
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["record"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let lost: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    let more = client
        .post(format!("{base}/v1/audit"))
        .bearer_auth("tok")
        .json(&batch(1_000_000, 3))
        .send()
        .await
        .unwrap();
    assert!(more.status().is_success());
    child.kill().unwrap();
    child.wait().unwrap();
    let verify = Command::new(BIN)
        .args(["verify", "--audit-file"])
        .arg(&file)
        .arg("--key-file")
        .arg(key_file(&file))
        .output()
        .unwrap();
    assert!(verify.status.success());
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    assert_eq!(lines, stored.len() + 3);
}

#[test]
fn verify_reports_the_first_broken_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let key = dir.path().join("audit.key");
    let store = countersign_gateway::FileStore::open(
        &file,
        countersign_gateway::ChainKey::load_or_create(&key).unwrap(),
    )
    .unwrap();
    store.append_blocking(batch(0, 5)).unwrap();
    drop(store);
    let text = std::fs::read_to_string(&file).unwrap();
    // Tamper with line 3's record: its mac no longer matches.
    let tampered: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 2 {
                l.replace("\"stage\":\"resolve\"", "\"stage\":\"verify\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&file, tampered.join("\n") + "\n").unwrap();
    let out = Command::new(BIN)
        .args(["verify", "--audit-file"])
        .arg(&file)
        .arg("--key-file")
        .arg(&key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken at line 3"), "{stderr}");
    // Without the key, verify says plainly that it checked the structure only.
    let out = Command::new(BIN)
        .args(["verify", "--audit-file"])
        .arg(&file)
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("structure only"), "{stdout}");
    assert!(stdout.contains("cannot be detected"), "{stdout}");
    // And the gateway refuses to extend a broken file.
    assert!(matches!(
        countersign_gateway::FileStore::open(
            &file,
            countersign_gateway::ChainKey::load(&key).unwrap()
        ),
        Err(countersign_gateway::StoreError::Broken { line: 3, .. })
    ));
}

#[test]
fn a_malformed_policy_file_stops_the_gateway_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        "{\n  \"roles\": {\n    \"admin\": { \"scope\": [] }\n  }\n}",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--policy-file",
        ])
        .arg(&policy)
        .arg("--audit-file")
        .arg(dir.path().join("audit.jsonl"))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the gateway started with a broken policy"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 3") && stderr.contains("unknown field `scope`"),
        "{stderr}"
    );
}
