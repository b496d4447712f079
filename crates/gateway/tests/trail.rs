//! The audit trail keeps its word: without the deployment's key nobody can cut its
//! tail, rewrite and re-chain it, or pass it off under another key unseen; and one
//! gateway writes a file at a time.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use countersign_gateway::{head_path, verify_file, ChainKey, FileStore, StoreError};

const BIN: &str = env!("CARGO_BIN_EXE_countersign-gateway");

fn trail(dir: &Path, key: &ChainKey, n: usize) -> std::path::PathBuf {
    let file = dir.join("audit.jsonl");
    let store = FileStore::open(&file, key.clone()).unwrap();
    store.append_blocking(common::records(n, "t", 0)).unwrap();
    file
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_cut_tail_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let key = ChainKey::new([3; 32]);
    let file = trail(dir.path(), &key, 6);
    let kept = lines(&file)[..4].join("\n") + "\n";
    std::fs::write(&file, kept).unwrap();
    let e = verify_file(&file, Some(&key)).unwrap_err();
    assert!(matches!(e, StoreError::Unanchored(_)), "{e}");
    assert!(e.to_string().contains("records were cut"), "{e}");
    // Structure alone cannot see it, and says nothing more than that.
    assert!(!verify_file(&file, None).unwrap().keyed);
    // The gateway refuses to extend it.
    assert!(matches!(
        FileStore::open(&file, key),
        Err(StoreError::Unanchored(_))
    ));
}

#[test]
fn a_rewritten_and_rechained_file_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let key = ChainKey::new([3; 32]);
    let file = trail(dir.path(), &key, 5);
    // An attacker rebuilds the whole trail (other records, consistent chain) under a key
    // of their own, and even writes a matching head with it.
    let forged_dir = tempfile::tempdir().unwrap();
    let forged = trail(forged_dir.path(), &ChainKey::new([9; 32]), 5);
    std::fs::copy(&forged, &file).unwrap();
    std::fs::copy(head_path(&forged), head_path(&file)).unwrap();
    assert!(verify_file(&file, None).is_ok(), "the structure is fine");
    let e = verify_file(&file, Some(&key)).unwrap_err();
    assert!(matches!(e, StoreError::Broken { line: 1, .. }), "{e}");
}

#[test]
fn a_wrong_key_and_a_forged_head_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let key = ChainKey::new([3; 32]);
    let file = trail(dir.path(), &key, 3);
    let e = verify_file(&file, Some(&ChainKey::new([4; 32]))).unwrap_err();
    assert!(e.to_string().contains("key is wrong"), "{e}");
    // A head claiming fewer records (to hide a later cut) has no valid mac.
    let head = std::fs::read_to_string(head_path(&file)).unwrap();
    std::fs::write(head_path(&file), head.replace("\"seq\":3", "\"seq\":2")).unwrap();
    let e = verify_file(&file, Some(&key)).unwrap_err();
    assert!(e.to_string().contains("head's mac"), "{e}");
    // A deleted head with records left is refused too.
    std::fs::remove_file(head_path(&file)).unwrap();
    assert!(verify_file(&file, Some(&key)).is_err());
}

#[test]
fn verify_with_the_key_file_checks_everything_and_without_it_says_structure_only() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    let key = ChainKey::load_or_create(&key_file).unwrap();
    let file = trail(dir.path(), &key, 4);
    let run = |with_key: bool| {
        let mut c = Command::new(BIN);
        c.args(["verify", "--audit-file"]).arg(&file);
        if with_key {
            c.arg("--key-file").arg(&key_file);
        }
        c.env_remove("COUNTERSIGN_AUDIT_KEY").output().unwrap()
    };
    let out = run(true);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ok: 4 records"));
    let out = run(false);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("structure only"));
    // Cut the tail: with the key, verify fails.
    std::fs::write(&file, lines(&file)[..2].join("\n") + "\n").unwrap();
    let out = run(true);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("records were cut"));
}

#[test]
fn a_trail_stored_with_any_digest_text_still_opens_and_verifies() {
    // Gateways before the page's records carried a typed digest stored whatever text a
    // page sent as `args_digest`; such a trail must still open, verify and take more.
    let dir = tempfile::tempdir().unwrap();
    let key = ChainKey::new([3; 32]);
    let file = dir.path().join("audit.jsonl");
    let mut old = common::records(3, "old", 0);
    old[0].args_digest = "".into();
    old[1].args_digest = "LEGACY-NOT-HEX".into();
    let store = FileStore::open(&file, key.clone()).unwrap();
    store.append_blocking(old).unwrap();
    drop(store);
    let store = FileStore::open(&file, key.clone()).unwrap();
    store.append_blocking(common::records(2, "new", 3)).unwrap();
    drop(store);
    verify_file(&file, Some(&key)).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#""args_digest":"LEGACY-NOT-HEX""#), "{text}");
    assert_eq!(lines(&file).len(), 5);
}

#[test]
fn a_second_writer_on_the_same_file_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let first = FileStore::open(&file, ChainKey::new([3; 32])).unwrap();
    let e = FileStore::open(&file, ChainKey::new([3; 32])).unwrap_err();
    assert!(matches!(e, StoreError::Locked { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    assert!(e.to_string().contains("audit.jsonl"), "{e}");
    drop(first);
    FileStore::open(&file, ChainKey::new([3; 32])).unwrap();
}

#[test]
fn a_second_gateway_process_on_a_locked_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let _held = FileStore::open(
        &file,
        ChainKey::load_or_create(&dir.path().join("audit.jsonl.key")).unwrap(),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--audit-file",
        ])
        .arg(&file)
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "a second writer started");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("in use by another gateway"), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", std::process::id())),
        "{stderr}"
    );
}

/// `countersign-gateway verify` on `file` with the key file: its status and what it printed.
fn verify_with_key(file: &Path, key_file: &Path) -> (std::process::Output, String) {
    let out = Command::new(BIN)
        .args(["verify", "--audit-file"])
        .arg(file)
        .arg("--key-file")
        .arg(key_file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

#[test]
fn verify_says_which_records_of_a_page_session_are_neither_in_the_trail_nor_named() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    let key = ChainKey::load_or_create(&key_file).unwrap();
    let file = dir.path().join("audit.jsonl");
    let store = FileStore::open(&file, key.clone()).unwrap();
    // One page session's records 1–8; 3–4 and 6 never arrive.
    let mut records = common::records(8, "t", 0);
    records.retain(|r| ![3, 4, 6].contains(&r.seq));
    store.append_blocking(records).unwrap();
    let verified = verify_file(&file, Some(&key)).unwrap();
    let holes: Vec<(String, u64, u64)> = verified
        .completeness
        .holes
        .iter()
        .map(|h| (h.session.clone(), h.first_seq, h.last_seq))
        .collect();
    assert_eq!(holes, [("t".into(), 3, 4), ("t".into(), 6, 6)]);
    assert_eq!(verified.completeness.unexplained, 3);
    let (out, stdout) = verify_with_key(&file, &key_file);
    assert!(out.status.success(), "the chain is sound: {stdout}");
    assert!(
        stdout.contains("incomplete: 3 records of the 1 page sessions"),
        "{stdout}"
    );
    assert!(stdout.contains("hole: session \"t\", seq 3-4"), "{stdout}");

    // The page names what it lost (its trail_gap record): the trail accounts for it.
    let audit = countersign::MemoryAudit::new();
    let exec = countersign::Executor::new(
        countersign::Config::new("t", countersign::Session::default(), [2; 32]),
        audit.clone(),
    );
    for seq in 1..=8 {
        let _ = exec.submit(
            countersign::Call::new("t", "nope", "{}"),
            countersign::Timestamp::from_millis(seq),
        );
    }
    exec.record_trail_gap(3, 6, 0, countersign::Timestamp::from_millis(9))
        .unwrap();
    let named: Vec<countersign::AuditRecord> = audit
        .records()
        .into_iter()
        .filter(|r| ![3, 4, 6].contains(&r.seq))
        .map(|mut r| {
            r.id = format!("named-{}", r.seq);
            r
        })
        .collect();
    store.append_blocking(named).unwrap();
    let (_, stdout) = verify_with_key(&file, &key_file);
    assert!(
        stdout.contains("complete: every record of the 1 page sessions"),
        "{stdout}"
    );
}
