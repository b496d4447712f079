//! The trail as a verifiable log: someone holding only an earlier signed tree head (and
//! the gateway's public key, not the audit key) catches a trail cut short, a record
//! rewritten by someone who holds the audit key, and a forked history, on the file store
//! and on a real PostgreSQL; replicas on one database sign one log.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;
#[path = "support/postgres.rs"]
mod postgres;

use countersign::AuditRecord;
use countersign_gateway::{AppState, AuditStore, ChainedLine};
use countersign_verify::log::{from_hex, leaf_hash, verify_inclusion};
use countersign_verify::{Verifier, VerifyError};
use serde_json::Value;

/// Where the test's trails are kept: files in a folder, or databases in a cluster.
enum Place {
    Files(tempfile::TempDir),
    Postgres(postgres::Cluster),
}

impl Place {
    /// A new, empty trail named `name`.
    async fn trail(&self, name: &str) -> AuditStore {
        match self {
            Place::Files(dir) => {
                AuditStore::open(dir.path().join(format!("{name}.jsonl")), common::test_key())
                    .unwrap()
            }
            Place::Postgres(cluster) => {
                use sqlx::Connection as _;
                let mut admin = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut admin)
                    .await
                    .unwrap();
                let url = cluster.url().replace("/postgres", &format!("/{name}"));
                AuditStore::connect(&url, common::test_key()).await.unwrap()
            }
        }
    }
}

/// A gateway over `trail`, served on loopback: its base URL and state.
async fn gateway(trail: AuditStore) -> (String, AppState) {
    let state = AppState::new(common::config(None), trail)
        .unwrap()
        .with_signing_seed(&[4; 32]);
    (common::serve(state.clone()).await, state)
}

/// A same-origin GET, as the page (or a holder of the gateway's token) makes it.
async fn get(base: &str, path: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("origin", "http://127.0.0.1:8787")
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// What an auditor holds: a verifier trusting the gateway's published key (no audit key).
fn auditor(state: &AppState) -> Verifier {
    Verifier::new(countersign_gateway::DEFAULT_ISSUER)
        .trust_jwks(&serde_json::to_string(&state.signer.jwks()).unwrap())
        .unwrap()
}

/// The records a trail holds, as stored.
async fn stored(trail: &AuditStore) -> Vec<AuditRecord> {
    String::from_utf8(trail.export().await.unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<ChainedLine>(l).unwrap().record)
        .collect()
}

/// Whether the log at `base` is consistent with the earlier signed head `old` of
/// `size` lines, as an auditor checks it.
async fn consistent(auditor: &Verifier, base: &str, old: &str, size: u64) -> Result<(), String> {
    let (status, answer) = get(base, &format!("/v1/log/proof?first={size}")).await;
    if status != 200 {
        return Err(format!("{status}: {answer}"));
    }
    let proof: Vec<String> = serde_json::from_value(answer["proof"].clone()).unwrap();
    auditor
        .check_log_consistency(old, answer["signed"].as_str().unwrap(), &proof)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

async fn the_log_catches_a_cut_a_rewrite_and_a_fork(place: Place) {
    let trail = place.trail("kept").await;
    let (base, state) = gateway(trail.clone()).await;
    let auditor = auditor(&state);
    trail.append(common::records(5, "a", 0)).await.unwrap();
    let (status, head) = get(&base, "/v1/log/head").await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(head["tree_size"], 5);
    let old = head["signed"].as_str().unwrap().to_owned();
    assert_eq!(auditor.check_tree_head(&old).unwrap().tree_size, 5);
    // The honest log grows: consistent with the old head.
    trail.append(common::records(4, "b", 0)).await.unwrap();
    consistent(&auditor, &base, &old, 5).await.unwrap();
    // A line is in it, by its own bytes.
    let exported = String::from_utf8(trail.export().await.unwrap()).unwrap();
    let third = exported.lines().nth(2).unwrap();
    let (_, included) = get(&base, "/v1/log/inclusion?index=2").await;
    let leaf = leaf_hash(third.as_bytes());
    assert_eq!(
        included["leaf_hash"],
        countersign_verify::log::to_hex(&leaf)
    );
    let signed = auditor
        .check_tree_head(included["signed"].as_str().unwrap())
        .unwrap();
    let proof: Vec<_> = included["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| from_hex(h.as_str().unwrap()).unwrap())
        .collect();
    let top = from_hex(&signed.root_hash).unwrap();
    assert!(verify_inclusion(2, signed.tree_size, &leaf, &proof, &top));
    let records = stored(&trail).await;

    // Rewritten by someone holding the audit key: re-chained, so its own chain checks,
    // but the log is not the one the old head signed.
    let mut changed = records.clone();
    changed[1].action = "archive_workspace".into();
    let rewritten = place.trail("rewritten").await;
    rewritten.append(changed).await.unwrap();
    let verified = countersign_gateway::verify_bytes(
        &rewritten.export().await.unwrap(),
        Some(&common::test_key()),
    );
    assert!(
        verified.is_ok(),
        "the rewrite passes the chain: {verified:?}"
    );
    let (base, _) = gateway(rewritten).await;
    let caught = consistent(&auditor, &base, &old, 5).await.unwrap_err();
    assert!(
        caught.contains(&VerifyError::Inconsistent.to_string()),
        "{caught}"
    );

    // Cut back to three lines: the log says it holds fewer than the head did.
    let cut = place.trail("cut").await;
    cut.append(records[..3].to_vec()).await.unwrap();
    let (base, _) = gateway(cut.clone()).await;
    let caught = consistent(&auditor, &base, &old, 5).await.unwrap_err();
    assert!(
        caught.starts_with("400") && caught.contains("it was cut"),
        "{caught}"
    );
    // ... and grown again with other lines to hide it: a fork.
    cut.append(common::records(6, "c", 0)).await.unwrap();
    let caught = consistent(&auditor, &base, &old, 5).await.unwrap_err();
    assert!(
        caught.contains(&VerifyError::Inconsistent.to_string()),
        "{caught}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_log_catches_a_cut_a_rewrite_and_a_fork() {
    the_log_catches_a_cut_a_rewrite_and_a_fork(Place::Files(tempfile::tempdir().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_log_catches_a_cut_a_rewrite_and_a_fork() {
    the_log_catches_a_cut_a_rewrite_and_a_fork(Place::Postgres(postgres::Cluster::start())).await;
}

/// Three replicas on one database, written to in turn, sign one log: each one's head
/// is consistent with every earlier head of any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_database_sign_one_log() {
    let place = Place::Postgres(postgres::Cluster::start());
    let Place::Postgres(cluster) = &place else {
        unreachable!()
    };
    let _ = place.trail("shared").await;
    let url = cluster.url().replace("/postgres", "/shared");
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let trail = AuditStore::connect(&url, common::test_key()).await.unwrap();
        replicas.push(gateway(trail).await);
    }
    let auditor = auditor(&replicas[0].1);
    let mut heads: Vec<(String, u64)> = Vec::new();
    for round in 0..3 {
        for (i, (base, state)) in replicas.iter().enumerate() {
            let prefix = format!("r{round}x{i}");
            state
                .audit
                .append(common::records(2, &prefix, 0))
                .await
                .unwrap();
            for (old, size) in &heads {
                consistent(&auditor, base, old, *size).await.unwrap();
            }
            let (_, head) = get(base, "/v1/log/head").await;
            let size = head["tree_size"].as_u64().unwrap();
            heads.push((head["signed"].as_str().unwrap().to_owned(), size));
        }
    }
    assert_eq!(heads.last().unwrap().1, 18);
    let roots: std::collections::HashSet<Value> = {
        let mut roots = std::collections::HashSet::new();
        for (base, _) in &replicas {
            roots.insert(get(base, "/v1/log/head").await.1["root_hash"].clone());
        }
        roots
    };
    assert_eq!(roots.len(), 1, "one log: {roots:?}");
}

/// `countersign-gateway check-log`, as an auditor runs it on a schedule: the first run
/// keeps the signed head, the next ones check the log against it and keep the newer
/// one, and a rewritten log fails with a non-zero exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_log_keeps_a_head_and_fails_on_a_rewritten_log() {
    const TOKEN: &str = "an-auditors-token-0123456789abcdef";
    let place = Place::Files(tempfile::tempdir().unwrap());
    // A deployment with a token: the auditor holds it (and no audit key).
    let with_key = |trail: AuditStore, seed: [u8; 32]| async move {
        let mut config = common::config(None);
        config.access.token = Some(countersign_gateway::Secret::new(TOKEN));
        let state = AppState::new(config, trail)
            .unwrap()
            .with_signing_seed(&seed);
        common::serve(state).await
    };
    let with_token = |trail: AuditStore| with_key(trail, [4; 32]);
    let trail = place.trail("kept").await;
    let base = with_token(trail.clone()).await;
    trail.append(common::records(3, "a", 0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let head_file = dir.path().join("head.jws");
    let run = |base: String| {
        let head_file = head_file.clone();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"))
                .args(["check-log", "--gateway", &base, "--head-file"])
                .arg(&head_file)
                .env("COUNTERSIGN_TOKEN", TOKEN)
                .output()
                .await
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), said)
        }
    };
    let (ok, said) = run(base.clone()).await;
    assert!(
        ok && said.starts_with("kept: the log's signed head at 3 lines"),
        "{said}"
    );
    trail.append(common::records(2, "b", 0)).await.unwrap();
    let (ok, said) = run(base.clone()).await;
    assert!(
        ok && said.starts_with("ok: the log holds the 3 lines"),
        "{said}"
    );
    let mut changed = stored(&trail).await;
    changed[0].action = "reset_workspace".into();
    let rewritten = place.trail("rewritten").await;
    rewritten.append(changed).await.unwrap();
    let other = with_token(rewritten).await;
    let (ok, said) = run(other).await;
    assert!(
        !ok && said.contains("broken: the log is not consistent"),
        "{said}"
    );
    // The kept head is still the honest one: the honest log checks out against it.
    let (ok, said) = run(base).await;
    assert!(ok, "{said}");
    // After a key rotation that dropped the old key, the check goes on: the kept head
    // was checked when kept, and the new key signs the newer head.
    let rotated = with_key(trail.clone(), [5; 32]).await;
    trail.append(common::records(1, "c", 0)).await.unwrap();
    let (ok, said) = run(rotated).await;
    assert!(ok && said.contains("and 6 now"), "{said}");
}

/// A backend that acted on an approval confirms the gateway's record of it is in the
/// log: the token names its place, and the inclusion proof shows that line, naming the
/// token, under a signed head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_proven_to_be_in_the_log() {
    let place = Place::Files(tempfile::tempdir().unwrap());
    let trail = place.trail("kept").await;
    let (base, state) = gateway(trail.clone()).await;
    trail.append(common::records(3, "a", 0)).await.unwrap();
    let minted = common::countersign(&reqwest::Client::new(), &base, &serde_json::json!({})).await;
    trail.append(common::records(2, "b", 0)).await.unwrap();
    let token = minted["countersignature"].as_str().unwrap();
    let claims = state
        .verifier
        .verify_now(
            token,
            &countersign_verify::Expected::call("publish_note", &serde_json::json!({})),
        )
        .await
        .unwrap();
    assert_eq!(claims.log_index, Some(3));
    let (status, included) = get(&base, "/v1/log/inclusion?index=3").await;
    assert_eq!(status, 200, "{included}");
    let line = included["line"].as_str().unwrap();
    let leaf = leaf_hash(line.as_bytes());
    assert_eq!(
        included["leaf_hash"],
        countersign_verify::log::to_hex(&leaf)
    );
    let record = serde_json::from_str::<ChainedLine>(line).unwrap().record;
    assert_eq!(
        record.countersignature.as_deref(),
        Some(claims.jti.as_str())
    );
    let head = auditor(&state)
        .check_tree_head(included["signed"].as_str().unwrap())
        .unwrap();
    assert_eq!(head.tree_size, 6);
    let proof: Vec<_> = included["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| from_hex(h.as_str().unwrap()).unwrap())
        .collect();
    assert!(verify_inclusion(
        3,
        head.tree_size,
        &leaf,
        &proof,
        &from_hex(&head.root_hash).unwrap()
    ));
}

/// Lines someone without the audit key put into the trail are never signed over: the
/// gateway checks every mac before it signs a head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_head_is_signed_over_lines_the_gateway_did_not_seal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kept.jsonl");
    let trail = AuditStore::open(&file, common::test_key()).unwrap();
    let (base, _) = gateway(trail.clone()).await;
    trail.append(common::records(3, "a", 0)).await.unwrap();
    assert_eq!(get(&base, "/v1/log/head").await.0, 200);
    // One byte of the second line changed on disk, the length kept.
    let mut bytes = std::fs::read(&file).unwrap();
    let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    let at = second
        + bytes[second..]
            .windows(6)
            .position(|w| w == b"\"role\"")
            .unwrap()
        + 9;
    bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
    std::fs::write(&file, bytes).unwrap();
    for path in [
        "/v1/log/head",
        "/v1/log/proof?first=1",
        "/v1/log/inclusion?index=0",
    ] {
        let (status, answer) = get(&base, path).await;
        assert_eq!(status, 503, "{path}: {answer}");
        assert_eq!(answer["error"]["code"], "audit_unavailable", "{answer}");
    }
}
