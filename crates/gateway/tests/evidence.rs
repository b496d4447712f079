//! Evidence on request: `countersign-gateway evidence` turns a trail the executor wrote
//! into the auditor's table (one row per call: who asked, what, who decided, how it
//! ended, the countersignature, the line in the verifiable log), filtered, as CSV, JSON
//! or a summary, from the file, without the audit key.
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
use serde_json::Value;

fn run(args: &[&str], file: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"))
        .arg("evidence")
        .arg("--audit-file")
        .arg(file)
        .args(args)
        .env_remove("COUNTERSIGN_AUDIT_URL")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        said + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auditors_table_names_who_decided_each_call_and_how_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let store = AuditStore::open(&file, common::test_key()).unwrap();
    store.append(trail().await).await.unwrap();

    let (ok, said) = run(&["--format", "json"], &file);
    assert!(ok, "{said}");
    let rows: Vec<Value> = serde_json::from_str(&said).unwrap();
    let row = |id: usize| {
        let r = &rows[id];
        (
            r["action"].as_str().unwrap().to_owned(),
            r["caller"].as_str().unwrap().to_owned(),
            r["decided_by"].as_str().unwrap().to_owned(),
            r["outcome"].as_str().unwrap().to_owned(),
        )
    };
    let s = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(rows.len(), 6, "{said}");
    assert_eq!(
        row(0),
        s("save_workspace_name", "assistant", "person", "OK")
    );
    assert_eq!(
        row(1),
        s(
            "save_workspace_name",
            "assistant",
            "person",
            "PERMISSION_DENIED"
        )
    );
    assert_eq!(
        row(2),
        s("save_workspace_name", "assistant", "person", "OK")
    );
    assert_eq!(
        row(3),
        s("save_workspace_name", "assistant", "session_grant", "OK")
    );
    assert_eq!(
        row(4),
        s("archive_workspace", "mcp", "timer", "APPROVAL_TIMEOUT")
    );
    assert_eq!(row(5).3, "UNKNOWN_ACTION");
    assert_eq!(rows[3]["grant"], rows[2]["grant"]);
    assert!(!rows[3]["grant"].as_str().unwrap().is_empty());
    assert_eq!(rows[4]["kind"], "danger");
    // Each ended call names its terminal line in the log, in order.
    let indices: Vec<u64> = rows
        .iter()
        .map(|r| r["log_index"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(indices.windows(2).all(|w| w[0] < w[1]), "{indices:?}");

    // Filtered: what a person decided about writes, as CSV.
    let (ok, said) = run(
        &[
            "--decided-by",
            "person",
            "--kind",
            "write",
            "--outcome",
            "OK",
        ],
        &file,
    );
    assert!(ok, "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 3, "{said}");
    assert!(lines[0].starts_with("at_ms,session,role,caller,action,kind,outcome,decided_by"));
    assert!(lines[1..].iter().all(|l| l.contains(",person,")));
    // By day: none before the epoch's second day.
    let (ok, said) = run(&["--from", "1970-01-02", "--format", "json"], &file);
    assert!(ok, "{said}");
    assert_eq!(said.trim(), "[]");
    let (ok, said) = run(&["--from", "1970-13-01"], &file);
    assert!(!ok && said.contains("is not a day"), "{said}");

    // The summary.
    let (ok, said) = run(&["--format", "summary"], &file);
    assert!(ok, "{said}");
    assert!(said.starts_with("6 calls"), "{said}");
    assert!(
        said.contains("     3  OK") && said.contains("     1  PERMISSION_DENIED"),
        "{said}"
    );
    assert!(
        said.contains("     3  person") && said.contains("     1  session_grant"),
        "{said}"
    );
    // No policy file: every level came from the declarations.
    assert!(
        said.contains("level from:") && said.contains("  declared"),
        "{said}"
    );

    // Under a policy file, the rows name the rule that set each level.
    let policy = "{\n  \"roles\": {\"admin\": {\"scopes\": [\"ws\"],\n    \"overrides\": {\"save_workspace_name\": {\"confirm\": \"ask\"}}}}\n}";
    let file = dir.path().join("under-policy.jsonl");
    let store = AuditStore::open(&file, common::test_key()).unwrap();
    store
        .append(common::session::trail_under(Some(policy)).await)
        .await
        .unwrap();
    let (ok, said) = run(
        &["--action", "save_workspace_name", "--format", "json"],
        &file,
    );
    assert!(ok, "{said}");
    let rows: Vec<Value> = serde_json::from_str(&said).unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .any(|r| r["level_from"] == "policy file: role admin, line 3"),
        "{said}"
    );
}

/// A cell that a spreadsheet would run as a formula is written as text, and a trail
/// that is not one is refused with its line.
#[test]
fn csv_cells_are_never_formulas_and_bad_lines_are_named() {
    use countersign_gateway::evidence::{csv, rows, Filter, Row};
    let row = Row {
        at_ms: 1,
        session: "s".into(),
        role: "=HYPERLINK(\"http://x\")".into(),
        caller: "assistant".into(),
        action: "a,b".into(),
        kind: String::new(),
        outcome: String::new(),
        decided_by: String::new(),
        reason: "+1".into(),
        level_from: String::new(),
        grant: String::new(),
        countersignature: String::new(),
        log_index: String::new(),
    };
    let out = csv(&[row]);
    let line = out.lines().nth(1).unwrap();
    assert!(line.contains("\"'=HYPERLINK(\"\"http://x\"\")\""), "{line}");
    assert!(line.contains("\"a,b\"") && line.contains(",'+1,"), "{line}");
    let err = rows(b"{\"seq\":1}\nnot json\n", &Filter::default()).unwrap_err();
    assert_eq!(err.line, 1, "{err}");
}
