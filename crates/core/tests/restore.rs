//! Calls waiting when the page reloaded: brought back only as they were (same
//! declaration, available, time left), always asked again, never run by themselves;
//! otherwise settled at once with one terminal record.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

mod common;

use std::time::Duration;

use common::{at, code, drive, World};
use countersign::{
    AuditEvent, Call, Confirm, Gesture, Kind, Mode, Pending, Reason, RestoreMiss, Step,
};

fn world() -> World {
    let mut w = World::new();
    w.add(w.action("rename", Kind::Write, Confirm::Ask));
    w
}

fn pending(w: &World, action: &str, args: &str, remaining: u64) -> Pending {
    Pending {
        call: Call::new("tc-old", action, args),
        declaration: w.exec.registration(action).unwrap_or_default(),
        handoff: false,
        remaining: Duration::from_millis(remaining),
        edited: None,
    }
}

#[test]
fn a_restored_call_waits_on_a_new_card_with_its_old_deadline() {
    let w = world();
    let Step::Approval(card) = w
        .exec
        .restore_pending(pending(&w, "rename", r#"{"name":"a"}"#, 9_000), at(1_000))
        .unwrap()
    else {
        panic!("a restored call is asked again");
    };
    assert_eq!(
        card.deadline,
        at(10_000),
        "the deadline is not extended by a reload"
    );
    assert_eq!(card.arguments["name"], "a");
    assert!(w.runs().is_empty());
    let records = w.audit.for_call(card.call);
    assert_eq!(records[0].event, AuditEvent::Restored);
    assert_eq!(records[1].event, AuditEvent::Asked);
    // The restored record carries the arguments' digest, as the rest of the call does.
    assert_eq!(records[0].args_digest, records[1].args_digest);
    assert_ne!(records[0].args_digest, "0".repeat(64));
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(2_000))
        .unwrap();
    let settled = drive(&w.exec, step, 2_001).unwrap();
    assert_eq!((code(&settled), &*settled.tool_call_id), ("OK", "tc-old"));
    assert_eq!(w.runs(), ["rename:a"]);
    assert_eq!(w.terminal(card.call).len(), 1);
}

#[test]
fn nothing_restored_runs_by_itself_even_where_the_mode_would_allow_it() {
    let w = world();
    w.exec.set_mode(Mode::Unattended).unwrap();
    let step = w
        .exec
        .restore_pending(pending(&w, "rename", r#"{"name":"a"}"#, 9_000), at(0))
        .unwrap();
    let Step::Approval(card) = step else {
        panic!("asked, not run");
    };
    let asked = w.audit.for_call(card.call)[1].clone();
    assert_eq!(asked.reason, Reason::Restored);
    assert!(w.runs().is_empty());
}

#[test]
fn a_call_that_cannot_come_back_settles_at_once_with_one_record() {
    let mut w = world();
    let enabled = std::rc::Rc::new(std::cell::Cell::new(false));
    let flag = std::rc::Rc::clone(&enabled);
    w.add(
        w.action("off", Kind::Write, Confirm::Ask)
            .available(move || flag.get()),
    );
    let mut changed = pending(&w, "rename", r#"{"name":"a"}"#, 9_000);
    changed.declaration = "an older declaration".into();
    let mut handoff = pending(&w, "rename", r#"{"name":"a"}"#, 0);
    handoff.handoff = true;
    let cases = [
        (
            pending(&w, "rename", r#"{"name":"a"}"#, 0),
            RestoreMiss::Expired,
            "APPROVAL_EXPIRED",
        ),
        (changed, RestoreMiss::Changed, "APPROVAL_EXPIRED"),
        (
            pending(&w, "gone", r#"{"name":"a"}"#, 9_000),
            RestoreMiss::Changed,
            "APPROVAL_EXPIRED",
        ),
        (
            pending(&w, "off", r#"{"name":"a"}"#, 9_000),
            RestoreMiss::Unavailable,
            "APPROVAL_EXPIRED",
        ),
        (handoff, RestoreMiss::Expired, "HANDOFF_TIMEOUT"),
    ];
    for (item, why, expected) in cases {
        let Step::Settled(settled) = w.exec.restore_pending(item, at(5)).unwrap() else {
            panic!("{why:?}: settled at once");
        };
        assert_eq!(code(&settled), expected, "{why:?}");
        assert_eq!(&*settled.tool_call_id, "tc-old");
        let records = w.audit.for_call(settled.call);
        assert_eq!(records.len(), 1, "{why:?}: one record, terminal");
        assert!(matches!(records[0].reason, Reason::NotRestored { why: w2, .. } if w2 == why));
        let told = settled.to_model_json();
        assert!(told["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reloaded"));
    }
    assert!(w.runs().is_empty());
    assert!(w.exec.approvals().is_empty());
}

#[test]
fn hostile_stored_calls_are_refused_by_the_gate_like_any_other() {
    let w = world();
    let huge = format!(r#"{{"name":"{}"}}"#, "x".repeat(40_000));
    for (i, args) in [
        r#"{"name":5}"#,
        r#"{"name":"a","approved":true}"#,
        "null",
        huge.as_str(),
    ]
    .into_iter()
    .enumerate()
    {
        // Each a different model call (one stored call comes back at most once).
        let mut item = pending(&w, "rename", args, 9_000);
        item.call.tool_call_id = format!("tc-{i}").into();
        let step = w.exec.restore_pending(item, at(0)).unwrap();
        let Step::Settled(settled) = step else {
            panic!("{args}: refused");
        };
        assert_eq!(code(&settled), "INVALID_ARGS");
        assert_eq!(w.terminal(settled.call).len(), 1);
    }
    let dropped = w
        .exec
        .drop_pending(
            pending(&w, "rename", r#"{"name":"a"}"#, 9_000),
            RestoreMiss::ElsewhereOrDone,
            at(1),
        )
        .unwrap();
    assert_eq!(code(&dropped), "APPROVAL_EXPIRED");
    assert!(w.runs().is_empty());
}

#[test]
fn a_restored_call_without_arguments_keeps_one_digest_in_every_record() {
    let w = World::new();
    let _registration = w
        .exec
        .register(
            countersign::Action::<countersign::NoParams>::new("wipe", "Wipe.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .run(|_| async { Ok::<_, String>(serde_json::json!({})) }),
        )
        .unwrap();
    // Empty and whitespace text validate to `{}`: the restored record says the same.
    for (i, raw) in ["", "  ", "\u{3000}", "{}"].into_iter().enumerate() {
        let mut p = pending(&w, "wipe", raw, 9_000);
        p.call.tool_call_id = format!("tc-{i}").into();
        let step = w.exec.restore_pending(p, at(1)).unwrap();
        let Step::Approval(card) = step else {
            panic!("a restored call is asked again: {step:?}")
        };
        let records = w.audit.for_call(card.call);
        assert_eq!(records[0].event, AuditEvent::Restored);
        assert_eq!(records[0].args_digest, records[1].args_digest, "{raw:?}");
    }
}
