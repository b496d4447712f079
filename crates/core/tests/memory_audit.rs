//! The in-memory trail is bounded: acknowledged records are let go, and a full trail
//! counts every record it pushed out, by `seq`, so nothing leaves unrecorded.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use countersign::{AuditSink, Config, Dropped, Executor, MemoryAudit, Session};

/// Records from a real executor: each refused call leaves exactly one (`settled`).
fn trail(capacity: usize, calls: usize) -> MemoryAudit {
    let audit = MemoryAudit::with_capacity(capacity);
    let exec = Executor::new(
        Config::new("test", Session::new("admin", ["workspace.write"]), [7; 32]),
        audit.clone(),
    );
    for i in 0..calls {
        let _ = exec.submit(
            countersign::Call::new(format!("tc{i}"), "no_such_action", "{}"),
            countersign::Timestamp::from_millis(i as u64),
        );
    }
    audit
}

#[test]
fn positions_stay_absolute_when_acknowledged_records_are_let_go() {
    let audit = trail(100, 10);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 10, 0));
    let seqs = |v: Vec<countersign::AuditRecord>| v.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(audit.slice(4, 3)), [5, 6, 7]);
    audit.forget_before(6);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 4, 6));
    // A position before the first held record reads from the first held one.
    assert_eq!(seqs(audit.slice(4, 3)), [7, 8, 9]);
    assert_eq!(seqs(audit.slice(8, 100)), [9, 10]);
    assert!(audit.slice(10, 5).is_empty());
    // Forgetting is not dropping, and forgetting past the end stops at the end.
    assert_eq!(audit.dropped(), Dropped::default());
    audit.forget_before(1_000);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 0, 10));
    assert!(!audit.is_empty());
}

#[test]
fn a_full_trail_counts_what_it_pushed_out_and_holds_no_more_than_its_capacity() {
    let audit = trail(8, 20);
    assert_eq!((audit.len(), audit.held(), audit.first()), (20, 8, 12));
    assert_eq!(
        audit.dropped(),
        Dropped {
            count: 12,
            first_seq: 1,
            last_seq: 12
        }
    );
    let held: Vec<u64> = audit.records().iter().map(|r| r.seq).collect();
    assert_eq!(held, (13..=20).collect::<Vec<_>>(), "the newest are kept");
    // What the held records and the drop count say adds up to every record taken.
    assert_eq!(audit.dropped().count + audit.held(), audit.len());
}

#[test]
fn the_default_capacity_holds_a_long_session_within_bounds() {
    let audit = trail(countersign::DEFAULT_MEMORY_AUDIT_CAPACITY, 10_000);
    assert_eq!(audit.held(), countersign::DEFAULT_MEMORY_AUDIT_CAPACITY);
    assert_eq!(
        audit.dropped().count,
        10_000 - countersign::DEFAULT_MEMORY_AUDIT_CAPACITY
    );
    // One more record taken: the held count does not move.
    let mut sink = audit.clone();
    sink.record(audit.records().pop().unwrap());
    assert_eq!(audit.held(), countersign::DEFAULT_MEMORY_AUDIT_CAPACITY);
}

#[test]
fn a_trail_gap_is_a_record_of_its_own_naming_the_lost_seqs() {
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new("gap", Session::new("admin", ["workspace.write"]), [7; 32]),
        audit.clone(),
    );
    let seq = exec
        .record_trail_gap(1, 12, 2, countersign::Timestamp::from_millis(5))
        .unwrap();
    let gap = audit.records().pop().unwrap();
    assert_eq!(gap.seq, seq);
    assert_eq!(gap.event, countersign::AuditEvent::TrailGap);
    assert_eq!(
        gap.reason,
        countersign::Reason::TrailGap {
            first_seq: 1,
            last_seq: 12,
            unconfirmed: 2
        }
    );
    assert_eq!(
        (gap.call, &*gap.action, gap.outcome.as_deref()),
        (0, "", None)
    );
    assert!(!gap.is_terminal());
    assert!(gap.summary.contains("1–12"), "{}", gap.summary);
    let json = serde_json::to_value(&gap).unwrap();
    assert_eq!(json["event"], "trail_gap");
    assert_eq!(json["reason"]["rule"], "trail_gap");
}
