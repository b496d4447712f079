//! The audit trail keeps its word: without the deployment's key nobody can cut its
//! tail, rewrite and re-chain it, put an old head back, or pass it off under another key
//! unseen; a failed write retried leaves it whole; one gateway writes a file at a time,
//! whatever name it is given; and a countersigned call's arguments are in it only keyed.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::type_complexity
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::test_key;
use countersign_gateway::{head_path, verify_file, ChainKey, FileStore, StoreError};
use serde_json::Value;

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

fn write_lines(file: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(file, text).unwrap();
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[test]
fn a_cut_tail_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let key = ChainKey::new([3; 32]);
    let file = trail(dir.path(), &key, 6);
    let kept = lines(&file)[..4].join("\n") + "\n";
    std::fs::write(&file, kept).unwrap();
    let e = verify_file(&file, Some(&key)).unwrap_err();
    assert!(matches!(e, StoreError::Unanchored { .. }), "{e}");
    assert!(e.to_string().contains("records were cut"), "{e}");
    // Structure alone cannot see it, and says nothing more than that.
    assert!(!verify_file(&file, None).unwrap().keyed);
    // The gateway refuses to extend it.
    assert!(matches!(
        FileStore::open(&file, key),
        Err(StoreError::Unanchored { .. })
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

// ---------------------------------------------------------------------------------
// Cut, rewritten or added to, unseen: the tamperings a review tried.
// ---------------------------------------------------------------------------------

/// Held: a second `"mac"` field (appended after the genuine one), swapped lines, a line
/// dropped from the middle, a truncated or deleted head, a duplicated line, a forged
/// line under the wrong key; and a torn tail is cut at open without losing records.
#[test]
fn the_trail_tamperings_in_the_brief_are_detected() {
    let key = test_key();
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let store = FileStore::open(&path, key.clone()).unwrap();
        store.append_blocking(common::records(3, "t", 0)).unwrap();
        drop(store);
        (dir, path)
    };
    let tamperings: Vec<(&str, Box<dyn Fn(&Path)>)> = vec![
        (
            "a second mac field",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                let mac = serde_json::from_str::<Value>(&l[2]).unwrap()["mac"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                l[2] = format!("{},\"mac\":\"{mac}\"}}", l[2].trim_end_matches('}'));
                write_lines(p, &l);
            }),
        ),
        (
            "a field appended after the mac",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l[2] = format!("{},\"note\":\"x\"}}", l[2].trim_end_matches('}'));
                write_lines(p, &l);
            }),
        ),
        (
            "two lines swapped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.swap(1, 2);
                write_lines(p, &l);
            }),
        ),
        (
            "a middle line dropped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.remove(1);
                write_lines(p, &l);
            }),
        ),
        (
            "the last line dropped",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l.pop();
                write_lines(p, &l);
            }),
        ),
        (
            "a line repeated",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                let last = l[2].clone();
                l.push(last);
                write_lines(p, &l);
            }),
        ),
        (
            "the head truncated",
            Box::new(|p: &Path| {
                let h = head_path(p);
                let text = std::fs::read_to_string(&h).unwrap();
                std::fs::write(&h, &text[..text.len() / 2]).unwrap();
            }),
        ),
        (
            "the head deleted",
            Box::new(|p: &Path| std::fs::remove_file(head_path(p)).unwrap()),
        ),
        (
            "the record's text changed",
            Box::new(|p: &Path| {
                let mut l = lines(p);
                l[1] = l[1].replacen("\"t-1\"", "\"t-9\"", 1);
                write_lines(p, &l);
            }),
        ),
    ];
    for (name, tamper) in tamperings {
        let (_dir, path) = fresh();
        tamper(&path);
        assert!(
            verify_file(&path, Some(&key)).is_err(),
            "{name}: verify --key-file did not notice"
        );
        assert!(
            FileStore::open(&path, key.clone()).is_err(),
            "{name}: the store extends a tampered file"
        );
    }
    // A torn tail (an unacknowledged partial line) is cut at open; every record stays.
    let (_dir, path) = fresh();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"seq\":4,\"prev\":\"ab");
    std::fs::write(&path, bytes).unwrap();
    let store = FileStore::open(&path, key.clone()).unwrap();
    assert_eq!(store.len(), 3);
    drop(store);
    assert_eq!(verify_file(&path, Some(&key)).unwrap().lines, 3);
    // A record sent again is stored once, within a batch and across batches (the same
    // record: another one under a stored id is a conflict, see the routes' tests).
    let (_dir, path) = fresh();
    let store = FileStore::open(&path, key.clone()).unwrap();
    let mut batch = common::records(4, "t", 0).split_off(2);
    batch.push(batch[0].clone());
    let appended = store.append_blocking(batch).unwrap();
    assert_eq!((appended.appended, appended.duplicates), (1, 2));
}

/// The head is keyed but not monotonic, and lines past the head's seq are accepted as
/// "written but never acknowledged": with a copy of an old genuine head (a backup, or
/// read at any time: it is not secret), acknowledged records can be cut off the tail
/// and `verify --key-file` and the store both accept the result.
#[test]
fn an_old_head_restored_after_cutting_acknowledged_records_is_detected() {
    // A body cut to exactly the old head's length, with that head put back, cannot be
    // told from the trail as it was then without an anchor kept elsewhere (documented in
    // the gateway README). Anything else is caught: the old head's `pending` does not
    // allow the lines left beyond it.
    let key = test_key();
    let mut passed = Vec::new();
    for keep in [3usize, 4, 5] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let store = FileStore::open(&path, key.clone()).unwrap();
        store.append_blocking(common::records(2, "r", 0)).unwrap();
        let old_head = std::fs::read(head_path(&path)).unwrap();
        let done = store.append_blocking(common::records(4, "r", 2)).unwrap();
        assert_eq!(done.last_seq, 6);
        drop(store);
        // The attacker cuts two acknowledged records (or four), restores the old head.
        let l = lines(&path);
        let mut text = l[..keep].join("\n");
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        std::fs::write(head_path(&path), &old_head).unwrap();
        let verdict = verify_file(&path, Some(&key));
        if let Ok(v) = &verdict {
            passed.push(format!(
                "6 acknowledged, cut to {keep}: verify --key-file says OK ({v:?}); open: {}",
                FileStore::open(&path, key.clone()).is_ok()
            ));
        }
    }
    assert!(passed.is_empty(), "{}", passed.join("\n"));
}

/// The mac covers a line only up to `,"mac":"`: bytes after it (a CR, spaces) can be
/// added to any line, and the whole file converted to CRLF, without `verify` noticing.
#[test]
fn bytes_added_after_a_lines_mac_are_detected() {
    let key = test_key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    store.append_blocking(common::records(3, "r", 0)).unwrap();
    drop(store);
    let l = lines(&path);
    let text = format!("{}\r\n{} \t \n{}\r\n", l[0], l[1], l[2]);
    std::fs::write(&path, &text).unwrap();
    let verdict = verify_file(&path, Some(&key));
    assert!(
        verdict.is_err(),
        "the file's bytes were changed (CRLF, trailing blanks) and verify --key-file says OK: {verdict:?}"
    );
}

/// Held: a complete last line whose newline was removed (it is cut as torn, and the
/// head then says records were cut), and appends racing from many threads (one chain,
/// every record once, the head at the end).
#[test]
fn a_missing_final_newline_and_racing_appends_hold() {
    let key = test_key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    store.append_blocking(common::records(3, "r", 0)).unwrap();
    drop(store);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.pop();
    std::fs::write(&path, &bytes).unwrap();
    assert!(verify_file(&path, Some(&key)).is_err());
    assert!(FileStore::open(&path, key.clone()).is_err());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, key.clone()).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    store
                        .append_blocking(common::records(2, &format!("t{t}"), i * 2))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(store);
    let v = verify_file(&path, Some(&key)).unwrap();
    assert_eq!((v.lines, v.unanchored_lines), (160, 0));
}

// ---------------------------------------------------------------------------------
// A failure mid-append, and one writer per file whatever its name.
// ---------------------------------------------------------------------------------

/// The head is written after the lines are synced; if writing it fails, the batch is
/// reported failed but its lines stay in the file while the store's seq and ids do not
/// move. The page retries (as it is told it safely can): the next lines repeat seq and
/// prev, the record is stored twice, and the trail no longer verifies or opens.
#[test]
fn a_failed_head_write_then_a_retry_keeps_the_trail_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let store = FileStore::open(&path, test_key()).unwrap();
    store.append_blocking(common::records(1, "r", 0)).unwrap();
    // Something makes the head's temporary file unwritable (here: a directory in its
    // place; on a real disk: ENOSPC, EIO, a permission change).
    let temp = suffixed(&head_path(&path), ".tmp");
    std::fs::create_dir(&temp).unwrap();
    assert!(store.append_blocking(common::records(1, "r", 1)).is_err());
    std::fs::remove_dir(&temp).unwrap();
    // The page retries the batch that was not acknowledged.
    store.append_blocking(common::records(1, "r", 1)).unwrap();
    drop(store);
    let verdict = verify_file(&path, Some(&test_key()));
    assert!(
        verdict.is_ok(),
        "after a failed head write and a retry the gateway's own trail is broken: {verdict:?}\n{}",
        lines(&path).join("\n")
    );
    assert!(FileStore::open(&path, test_key()).is_ok());
}

/// One writer per file is enforced per *path*: the lock is `<path>.lock`, so a second
/// gateway given another name for the same file (a symlink, a hard link, a bind mount)
/// takes another lock and both write, forking the chain.
#[test]
fn a_second_writer_through_another_name_for_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let first = FileStore::open(&path, test_key()).unwrap();
    let alias = dir.path().join("alias.jsonl");
    std::os::unix::fs::symlink(&path, &alias).unwrap();
    match FileStore::open(&alias, test_key()) {
        Err(StoreError::Locked { .. }) => {}
        Err(other) => panic!("refused, but not as locked: {other}"),
        Ok(second) => {
            first
                .append_blocking(common::records(2, "first", 0))
                .unwrap();
            second
                .append_blocking(common::records(2, "second", 0))
                .unwrap();
            let verdict = verify_file(&path, Some(&test_key()));
            panic!(
                "a second writer opened the same file through a symlink; after one batch each, verify says: {verdict:?}"
            );
        }
    }
}

/// The lock file (and the head's temporary file) are opened following symlinks and
/// truncated: whoever can plant `<file>.lock` (or `<file>.head.tmp`) as a symlink
/// makes the gateway overwrite the target, for instance the audit key file.
#[test]
fn a_symlinked_lock_or_temp_file_does_not_clobber_its_target() {
    let mut clobbered = Vec::new();
    for suffix in [".lock", ".head.tmp"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let victim = dir.path().join("audit.jsonl.key");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = if suffix == ".lock" {
            suffixed(&path, suffix)
        } else {
            suffixed(&head_path(&path), ".tmp")
        };
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let _ = FileStore::open(&path, test_key());
        let now = std::fs::read_to_string(&victim).unwrap();
        if now != "precious\n" {
            clobbered.push(format!(
                "{suffix}: the gateway wrote through a symlink into `audit.jsonl.key`, which now holds {now:?}"
            ));
        }
    }
    assert!(clobbered.is_empty(), "{}", clobbered.join("\n"));
}

/// The record of a countersigned call holds its arguments keyed, like every other
/// record: never the plain SHA-256 its token binds, which anyone could compute from a
/// guessed argument and find in the trail.
#[tokio::test]
async fn a_countersigned_call_leaves_only_a_keyed_digest_of_its_arguments() {
    let (state, dir) = common::state(common::config(None));
    let base = common::serve(state).await;
    let args = serde_json::json!({"name": "all private notes of every user"});
    let plain = countersign::audit::ArgsDigest::of_value(&args).to_hex();
    let answer = common::countersign(&reqwest::Client::new(), &base, &args).await;
    // The backend still gets the plain digest, in the token.
    let token = answer["countersignature"].as_str().unwrap();
    assert_eq!(
        common::claims_of(token)["authorization_details"][0]["args_sha256"],
        plain.as_str()
    );
    let file = dir.path().join("audit.jsonl");
    for kept in [file.clone(), head_path(&file)] {
        let text = std::fs::read_to_string(&kept).unwrap();
        assert!(!text.contains(&plain), "{}: {text}", kept.display());
    }
    let lines = lines(&file);
    assert_eq!(lines.len(), 1);
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["record"]["event"], "countersigned");
    // The key's holder can check a claimed argument; without the key nobody can.
    assert_eq!(
        line["record"]["args_digest"],
        test_key().countersigned_digest(&plain).as_str()
    );
    assert_ne!(
        ChainKey::new([8; 32]).countersigned_digest(&plain),
        test_key().countersigned_digest(&plain)
    );
    verify_file(&file, Some(&test_key())).unwrap();
}
