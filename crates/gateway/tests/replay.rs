//! Policy replay: `countersign-gateway replay` re-decides every call a trail recorded
//! under a candidate policy file, prints what changes per action and role, and fails a
//! change that would lower any decision, so it can gate a policy change in CI.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::session::trail;
use countersign_gateway::AuditStore;

fn run(
    dir: &std::path::Path,
    trail: &std::path::Path,
    candidate: &str,
    current: Option<&str>,
) -> (i32, String) {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"));
    command
        .arg("replay")
        .arg("--audit-file")
        .arg(trail)
        .arg("--candidate")
        .arg(write("candidate.json", candidate))
        .env_remove("COUNTERSIGN_AUDIT_URL");
    if let Some(current) = current {
        command.arg("--current").arg(write("current.json", current));
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_that_lowers_a_decision_fails_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let store = AuditStore::open(&file, common::test_key()).unwrap();
    store.append(trail().await).await.unwrap();
    let admin = |overrides: &str| {
        format!(r#"{{"roles": {{"admin": {{"scopes": ["ws"], "overrides": {{{overrides}}}}}}}}}"#)
    };

    // Renames no longer asked: four calls lowered, named, and the run fails.
    let (code, said) = run(
        dir.path(),
        &file,
        &admin(r#""save_workspace_name": {"confirm": "off"}"#),
        None,
    );
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains(
            "LOWERED: 4 call(s) of save_workspace_name by admin: ask -> run without asking"
        ),
        "{said}"
    );
    assert!(
        said.contains("unchanged: 1 call(s) of archive_workspace by admin"),
        "{said}"
    );
    assert!(
        said.contains(
            "5 calls replayed; 4 lowered (4 would have run without asking); 1 not decidable"
        ),
        "{said}"
    );

    // Renames asked every time: raised, and the run passes.
    let (code, said) = run(
        dir.path(),
        &file,
        &admin(r#""save_workspace_name": {"confirm": "always"}"#),
        None,
    );
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("raised: 4 call(s) of save_workspace_name by admin: ask -> ask every time"),
        "{said}"
    );

    // Against the file in force then: the same candidate is no change.
    let (code, said) = run(
        dir.path(),
        &file,
        &admin(r#""save_workspace_name": {"confirm": "off"}"#),
        Some(&admin(r#""save_workspace_name": {"confirm": "off"}"#)),
    );
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("5 calls replayed; 0 lowered"), "{said}");

    // A candidate that names no role for the session: every call would be refused.
    let (code, said) = run(dir.path(), &file, r#"{"roles": {"viewer": {}}}"#, None);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("ask -> refuse (no role)"), "{said}");

    // A broken candidate: a clear error, exit 2.
    let (code, said) = run(dir.path(), &file, "{\"roles\": ", None);
    assert_eq!(code, 2, "{said}");
    assert!(
        said.starts_with("unreadable: ") && said.contains("candidate.json"),
        "{said}"
    );
}
