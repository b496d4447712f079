//! A call restored after a reload comes back once, as it was, and is always asked again.

use std::time::Duration;

use countersign::{
    audit::AuditEvent, executor::Pending, executor::DEFAULT_APPROVAL_TIMEOUT, reason::RestoreMiss,
    ticket::EditError, ticket::TicketError, Action, Call, CallId, Confirm, Expect, Gesture,
    Handoff, Kind, Mode, Reason, Step,
};

use crate::common::{
    approval, at, at_most_one_terminal_each, code, drive, edit, for_call, pending, World,
};

#[test]
fn a_restored_call_waits_on_a_new_card_with_its_old_deadline() {
    let w = World::with_rename();
    let Step::Approval(card) = w
        .exec
        .restore_pending(
            pending(
                &w,
                "rename",
                r#"{"name":"a"}"#,
                Duration::from_millis(9_000),
            ),
            at(1_000),
        )
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
    let records = for_call(&w.audit, card.call);
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
    let w = World::with_rename();
    w.exec.set_mode(Mode::Unattended).unwrap();
    let step = w
        .exec
        .restore_pending(
            pending(
                &w,
                "rename",
                r#"{"name":"a"}"#,
                Duration::from_millis(9_000),
            ),
            at(0),
        )
        .unwrap();
    let Step::Approval(card) = step else {
        panic!("asked, not run");
    };
    let asked = for_call(&w.audit, card.call)[1].clone();
    assert_eq!(asked.reason, Reason::Restored);
    assert!(w.runs().is_empty());
}

/// An edited call that is still waiting when the page reloads is stored by
/// `Executor::waiting` with the person's arguments only; `restore_pending` brings it back
/// as a plain call. The person's card no longer shows original → edited, and the model's
/// result carries no `edited_by_person`: the model believes its own version ran.
#[test]
fn break_a_reload_forgets_the_persons_edit_and_the_model_believes_its_version_ran() {
    let before = World::with_rename();
    let card = before.card("rename", r#"{"name":"Acme"}"#, 0);
    let edited = edit(&before, &card, r#"{"name":"Evil"}"#, 10);
    assert!(edited.edited.is_some());
    let stored: Vec<Pending> = before
        .exec
        .waiting(at(20))
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(&*stored[0].call.tool_call_id, "tc", "the model's tool call");

    // The page reloads: a new executor, the same declaration.
    let after = World::with_rename();
    let back = approval(
        after
            .exec
            .restore_pending(stored[0].clone(), at(0))
            .unwrap(),
        "restored",
    );
    let settled = after.allow(&back, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(after.runs(), ["rename:Evil"], "the person's version ran");
    let told = settled.to_model_json();
    assert_eq!(
        told["edited_by_person"]["changes"][0]["you_sent"], "Acme",
        "the model sent `Acme` and `Evil` ran, but it is not told: {told}"
    );
    assert!(back.edited.is_some(), "the restored card shows no edit");
}

/// An edit of a restored call keeps the restored deadline (a reload and an edit
/// together do not buy a fresh timeout).
#[test]
fn an_edit_of_a_restored_call_keeps_the_old_deadline() {
    let w = World::with_rename();
    let card = approval(
        w.exec
            .restore_pending(
                pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_secs(10)),
                at(0),
            )
            .unwrap(),
        "restored",
    );
    let edited = edit(&w, &card, r#"{"name":"b"}"#, 5_000);
    assert_eq!(edited.deadline, card.deadline);
    let again = edit(&w, &edited, r#"{"name":"c"}"#, 6_000);
    assert_eq!(again.deadline, card.deadline);
    // And the stored copy of the edited call carries the same deadline on.
    let stored = w.exec.waiting(at(7_000));
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].1.remaining, Duration::from_secs(3));
}

/// A call stored while its second question waited comes back at the first question:
/// a reload never turns one ticket into the two a double confirmation needs.
#[test]
fn a_double_confirmation_restored_after_its_first_ticket_asks_both_again() {
    let mut before = World::new();
    before.add(
        before
            .action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    let first = before.card("twice", r#"{"name":"a"}"#, 0);
    let second = approval(
        before
            .exec
            .approve(first.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        "second question",
    );
    assert_eq!(second.round, 2);
    let stored = before.exec.waiting(at(2));
    let mut after = World::new();
    after.add(
        after
            .action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    let back = approval(
        after
            .exec
            .restore_pending(stored[0].1.clone(), at(0))
            .unwrap(),
        "restored",
    );
    assert_eq!(back.round, 1);
    let again = approval(
        after
            .exec
            .approve(back.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        "asked twice again",
    );
    assert_eq!(again.round, 2);
    assert!(after.runs().is_empty());
}

/// `Pending::remaining` comes from storage (a wall-clock deadline the page wrote, or a
/// hostile one). `restore_pending` adds it to now unchecked: a card restored with a
/// huge `remaining` never times out, far beyond the action's approval timeout.
#[test]
fn break_a_restored_card_can_outlive_the_approval_timeout() {
    let w = World::with_rename();
    let now = 1_000;
    let card = approval(
        w.exec
            .restore_pending(
                pending(&w, "rename", r#"{"name":"a"}"#, Duration::MAX),
                at(now),
            )
            .unwrap(),
        "restored",
    );
    let cap = at(now).saturating_add(DEFAULT_APPROVAL_TIMEOUT);
    assert!(
        card.deadline <= cap,
        "restored deadline {:?} is past now + approval timeout {:?}",
        card.deadline,
        cap
    );
}

/// The same for a handoff: its declared timeout is 60 s, a restored one waits for ever.
#[test]
fn break_a_restored_handoff_can_outlive_its_declared_timeout() {
    let w = World::new();
    let publish = Action::<crate::common::Named>::new("publish", "publishes")
        .kind(Kind::Write)
        .handoff(
            Handoff::new("needs you", Expect::new("published", || true))
                .step("press publish", None)
                .timeout(Duration::from_secs(60)),
        );
    w.exec.register(publish).unwrap().forget();
    let mut pending = pending(&w, "publish", r#"{"name":"a"}"#, Duration::MAX);
    pending.handoff = true;
    let Step::Handoff(view) = w.exec.restore_pending(pending, at(0)).unwrap() else {
        panic!("a restored handoff waits for the person");
    };
    assert!(
        view.deadline <= at(60_000),
        "restored handoff deadline {:?} is past its 60 s timeout",
        view.deadline
    );
}

/// A restored card whose `remaining` rounds to zero milliseconds is drawn already
/// expired: it can neither be approved nor edited into a fresh deadline.
#[test]
fn a_restored_card_with_sub_millisecond_time_left_cannot_be_revived_by_an_edit() {
    let w = World::with_rename();
    let step = w
        .exec
        .restore_pending(
            pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_micros(500)),
            at(100),
        )
        .unwrap();
    match step {
        Step::Approval(card) => {
            assert!(card.deadline <= at(100));
            assert_eq!(
                w.exec
                    .edit(card.call, r#"{"name":"b"}"#, at(100))
                    .unwrap_err(),
                EditError::Ticket(TicketError::Expired)
            );
            assert_eq!(w.terminal(card.call).len(), 1);
        }
        Step::Settled(s) => assert_eq!(code(&s), "APPROVAL_EXPIRED"),
        other => panic!("{other:?}"),
    }
    assert!(w.runs().is_empty());
    assert!(w.exec.approvals().is_empty());
}

/// A stored call is restored once per item; the core does not notice the same model
/// call (same tool call id, same arguments) brought back twice (a duplicated or hostile
/// sessionStorage entry): two cards, two runs, two answers for one tool call.
#[test]
fn break_one_stored_call_brought_back_twice_runs_twice() {
    let w = World::with_rename();
    let item = pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_secs(60));
    let mut answers = 0;
    for now in [0, 1] {
        match w.exec.restore_pending(item.clone(), at(now)).unwrap() {
            Step::Approval(card) => {
                let settled = w.allow(&card, Gesture::AllowOnce, now + 10).unwrap();
                assert_eq!(&*settled.tool_call_id, "tc-old");
                answers += 1;
            }
            Step::Settled(s) => assert_eq!(&*s.tool_call_id, "tc-old"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(w.runs().len(), 1, "one model call ran {} times", answers);
}

#[test]
fn a_call_that_cannot_come_back_settles_at_once_with_one_record() {
    let mut w = World::with_rename();
    let enabled = std::rc::Rc::new(std::cell::Cell::new(false));
    let flag = std::rc::Rc::clone(&enabled);
    w.add(
        w.action("off", Kind::Write, Confirm::Ask)
            .available(move || flag.get()),
    );
    let mut changed = pending(
        &w,
        "rename",
        r#"{"name":"a"}"#,
        Duration::from_millis(9_000),
    );
    changed.declaration = "an older declaration".into();
    let mut handoff = pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_millis(0));
    handoff.handoff = true;
    let cases = [
        (
            pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_millis(0)),
            RestoreMiss::Expired,
            "APPROVAL_EXPIRED",
        ),
        (changed, RestoreMiss::Changed, "APPROVAL_EXPIRED"),
        (
            pending(&w, "gone", r#"{"name":"a"}"#, Duration::from_millis(9_000)),
            RestoreMiss::Changed,
            "APPROVAL_EXPIRED",
        ),
        (
            pending(&w, "off", r#"{"name":"a"}"#, Duration::from_millis(9_000)),
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
        let records = for_call(&w.audit, settled.call);
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
    let w = World::with_rename();
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
        let mut item = pending(&w, "rename", args, Duration::from_millis(9_000));
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
            pending(
                &w,
                "rename",
                r#"{"name":"a"}"#,
                Duration::from_millis(9_000),
            ),
            RestoreMiss::ElsewhereOrDone,
            at(1),
        )
        .unwrap();
    assert_eq!(code(&dropped), "APPROVAL_EXPIRED");
    assert!(w.runs().is_empty());
}

/// Hostile stored calls (forged but public declaration digests, odd ids, huge or deep
/// arguments, a huge `remaining`) never panic, never run, and end with one terminal
/// record each; a forged declaration that matches only brings back a card.
#[test]
fn hostile_stored_calls_never_panic_or_run() {
    let w = World::with_rename();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let deep_obj = format!(r#"{{"name":{}}}"#, "[".repeat(5_000));
    let long_id = "x".repeat(100_000);
    let cases: Vec<Pending> = vec![
        pending(&w, "rename", &deep, Duration::MAX),
        pending(&w, "rename", &deep_obj, Duration::MAX),
        Pending {
            call: Call::new(long_id.clone(), "rename", r#"{"name":"a"}"#),
            ..pending(&w, "rename", "{}", Duration::from_secs(1))
        },
        Pending {
            call: Call::new("tc", long_id.clone(), r#"{"name":"a"}"#),
            declaration: long_id.clone(),
            handoff: true,
            remaining: Duration::MAX,
            edited: None,
            untrusted: None,
        },
        Pending {
            call: Call::new("tc\u{202e}\n", "rename\u{0}", "\u{feff}{}"),
            declaration: String::new(),
            handoff: false,
            remaining: Duration::from_nanos(1),
            edited: None,
            untrusted: None,
        },
        pending(
            &w,
            "rename",
            r#"{"name":"a","__proto__":{}}"#,
            Duration::MAX,
        ),
        pending(&w, "rename", r#"{"name":"a"}"#, Duration::from_nanos(1)),
    ];
    let mut cards = 0;
    for (i, item) in cases.into_iter().enumerate() {
        match w.exec.restore_pending(item.clone(), at(10)).unwrap() {
            Step::Settled(s) => assert!(s.outcome.code().is_some(), "{i}"),
            Step::Approval(card) => {
                cards += 1;
                w.exec.deny(card.call, None, at(11)).unwrap();
            }
            other => panic!("{i}: {other:?}"),
        }
        let dropped = w
            .exec
            .drop_pending(item, RestoreMiss::ElsewhereOrDone, at(12))
            .unwrap();
        assert!(
            ["APPROVAL_EXPIRED", "HANDOFF_TIMEOUT"].contains(&code(&dropped)),
            "{i}"
        );
    }
    // A remaining of one nanosecond rounds to zero milliseconds: the card is drawn
    // with a deadline of now, and cannot be approved.
    assert!(cards <= 1, "{cards}");
    assert!(w.runs().is_empty());
    at_most_one_terminal_each(&w);
    assert!(w.exec.approvals().is_empty());
}

/// `drop_pending` always answers, never runs, and one terminal record per drop, even for
/// a call whose action needs no approval.
#[test]
fn drop_pending_never_runs() {
    let mut w = World::with_rename();
    w.add(w.action("quiet", Kind::Write, Confirm::Off));
    for why in [
        RestoreMiss::Expired,
        RestoreMiss::Changed,
        RestoreMiss::Unavailable,
        RestoreMiss::ElsewhereOrDone,
        RestoreMiss::NotWaiting,
        RestoreMiss::CallerGone,
    ] {
        let settled = w
            .exec
            .drop_pending(
                pending(&w, "quiet", r#"{"name":"a"}"#, Duration::from_secs(60)),
                why,
                at(0),
            )
            .unwrap();
        assert_eq!(code(&settled), "APPROVAL_EXPIRED");
        assert_eq!(w.terminal(settled.call).len(), 1);
        assert_ne!(settled.call, CallId::default());
    }
    assert!(w.runs().is_empty());
}

#[test]
fn a_restored_call_without_arguments_keeps_one_digest_in_every_record() {
    let w = World::new();
    let _registration = w
        .exec
        .register(
            countersign::Action::<countersign::action::NoParams>::new("wipe", "Wipe.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .run(|_| async { Ok::<_, String>(serde_json::json!({})) }),
        )
        .unwrap();
    // Empty and whitespace text validate to `{}`: the restored record says the same.
    for (i, raw) in ["", "  ", "\u{3000}", "{}"].into_iter().enumerate() {
        let mut p = pending(&w, "wipe", raw, Duration::from_millis(9_000));
        p.call.tool_call_id = format!("tc-{i}").into();
        let step = w.exec.restore_pending(p, at(1)).unwrap();
        let Step::Approval(card) = step else {
            panic!("a restored call is asked again: {step:?}")
        };
        let records = for_call(&w.audit, card.call);
        assert_eq!(records[0].event, AuditEvent::Restored);
        assert_eq!(records[0].args_digest, records[1].args_digest, "{raw:?}");
    }
}
