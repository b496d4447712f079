//! Previews, rewrites, double confirmation and reversals: what is shown runs, no mode skips a yes.

use countersign::{
    audit::AuditEvent, policy::ApprovalPolicy, text::line_diff, text::Preview, ticket::TicketError,
    Confirm, Gesture, Kind, Mode, Step,
};

use crate::common::{at, code, drive, for_call, World};

#[test]
fn the_card_carries_the_dry_runs_preview_and_the_dry_run_changes_nothing() {
    let mut w = World::new();
    w.add(w.action("rewrite", Kind::Write, Confirm::Ask).preview(|p| {
        Preview::of_text(
            "title: Atlas\nowner: design",
            &format!("title: {}\nowner: design", p.name),
        )
        .count("files touched", 1)
    }));
    let card = w.card("rewrite", r#"{"name":"Apollo"}"#, 0);
    let preview = card.preview.clone().unwrap();
    assert_eq!(
        preview.diff.as_deref(),
        Some("- title: Atlas\n+ title: Apollo\n  owner: design\n")
    );
    assert_eq!(preview.counts, [("files touched".to_owned(), 1)]);
    assert!(w.runs().is_empty(), "the preview ran the action");
}

#[test]
fn a_double_confirmed_action_needs_two_yeses_and_offers_no_grant() {
    let mut w = World::new();
    w.add(
        w.action("delete", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("Really delete `{}`? This cannot be undone.", p.name)),
    );
    let first = w.card("delete", r#"{"name":"repo"}"#, 0);
    assert_eq!((first.round, first.offers_session_grant), (1, false));
    assert_eq!(
        w.exec
            .approve(first.countersign(Gesture::AllowForSession), at(1))
            .unwrap_err(),
        TicketError::GrantNotOffered
    );
    let Step::Approval(second) = w
        .exec
        .approve(first.countersign(Gesture::AllowOnce), at(2))
        .unwrap()
    else {
        panic!("ran after one yes")
    };
    assert!(w.runs().is_empty());
    assert_eq!(second.round, 2);
    assert_eq!(
        second.question.as_deref(),
        Some("Really delete `repo`? This cannot be undone.")
    );
    // The first card's ticket cannot answer the second question.
    assert_eq!(
        w.exec
            .approve(first.countersign(Gesture::AllowOnce), at(3))
            .unwrap_err(),
        TicketError::Mismatch
    );
    let settled = drive(
        &w.exec,
        w.exec
            .approve(second.countersign(Gesture::AllowOnce), at(4))
            .unwrap(),
        5,
    )
    .unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["delete:repo"]);
    let events: Vec<AuditEvent> = for_call(&w.audit, settled.call)
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(
        events,
        [
            AuditEvent::Asked,
            AuditEvent::Approved,
            AuditEvent::Asked,
            AuditEvent::Approved,
            AuditEvent::Settled
        ]
    );
}

#[test]
fn a_no_to_the_second_question_is_a_denial() {
    let mut w = World::new();
    w.add(
        w.action("delete", Kind::Danger, Confirm::Unset)
            .confirm_twice(|_| "Sure?".into()),
    );
    let first = w.card("delete", r#"{"name":"repo"}"#, 0);
    let Step::Approval(second) = w
        .exec
        .approve(first.countersign(Gesture::AllowOnce), at(1))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        code(&w.exec.deny(second.call, None, at(2)).unwrap()),
        "PERMISSION_DENIED"
    );
    assert!(w.runs().is_empty());
    assert_eq!(w.terminal(second.call).len(), 1);
}

#[test]
fn a_reversal_is_never_lowered_by_a_mode() {
    // Break 3: `.reversal()` used to turn every ask into a run while nobody was there.
    let mut w = World::new();
    w.add(w.action("undo", Kind::Write, Confirm::Ask).reversal());
    w.add(w.action("restore", Kind::Danger, Confirm::Unset).reversal());
    w.add(
        w.action("flagged", Kind::Write, Confirm::Unset)
            .classify(|_| countersign::Verdict::Ask)
            .reversal(),
    );
    w.exec.set_mode(Mode::Away).unwrap();
    for action in ["undo", "restore", "flagged"] {
        let s = drive(&w.exec, w.call(action, r#"{"name":"x"}"#, 0), 1).unwrap();
        let json = s.outcome.to_model_json();
        assert_eq!(json["error"]["code"], "POLICY_DENIED", "{action}");
        assert_eq!(json["error"]["reason"], "mode_refused", "{action}");
        assert_eq!(json["error"]["retry"], "when_person_returns", "{action}");
        assert!(json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("when the person is back"));
    }
    w.exec.set_mode(Mode::Unattended).unwrap();
    for action in ["restore", "flagged"] {
        let s = drive(&w.exec, w.call(action, r#"{"name":"x"}"#, 0), 1).unwrap();
        assert_eq!(
            code(&s),
            "POLICY_DENIED",
            "{action}: asked every time, nobody there"
        );
    }
    // Unattended stands in for a person on `Ask`, for a reversal as for anything else.
    let s = drive(&w.exec, w.call("undo", r#"{"name":"u"}"#, 0), 1).unwrap();
    assert_eq!(code(&s), "OK");
    assert_eq!(w.runs(), ["undo:u"]);
}

#[test]
fn a_broken_file_leaves_reversals_the_last_good_file_or_asks_every_time() {
    // Break 4: a broken file used to widen a reversal to the session's claimed scopes and
    // its declared level.
    let mut w = World::new();
    w.add(w.action("undo", Kind::Write, Confirm::Unset).reversal());
    w.add(
        w.action("scoped_undo", Kind::Write, Confirm::Unset)
            .scope("workspace.write")
            .reversal(),
    );
    w.add(w.action("purge", Kind::Danger, Confirm::Unset));
    // Never a good file: asked every time, no grant offered.
    assert!(w.exec.load_policy("{").is_err());
    let Step::Approval(card) = w.call("undo", r#"{"name":"y"}"#, 0) else {
        panic!("a reversal under a broken file with no good file is asked")
    };
    assert_eq!(card.policy, ApprovalPolicy::AskAlways);
    assert!(!card.offers_session_grant);
    w.exec.deny(card.call, None, at(1)).unwrap();
    assert_eq!(
        code(&drive(&w.exec, w.call("purge", r#"{"name":"x"}"#, 0), 1).unwrap()),
        "POLICY_DENIED"
    );
    // A good file narrows: admin's `undo` is asked every time and `workspace.write` is
    // gone. Then the file breaks: the good file still holds for the reversals.
    let good = r#"{"roles":{"admin":{"scopes":[],"overrides":{"undo":{"confirm":"always"}}}}}"#;
    w.exec.load_policy(good).unwrap();
    assert!(w.exec.load_policy(r#"{"roles":"#).is_err());
    let Step::Approval(card) = w.call("undo", r#"{"name":"z"}"#, 2) else {
        panic!("the last good file's level holds")
    };
    assert_eq!(card.policy, ApprovalPolicy::AskAlways);
    let s = drive(&w.exec, w.call("scoped_undo", r#"{"name":"z"}"#, 3), 4).unwrap();
    assert_eq!(
        code(&s),
        "SCOPE_MISSING",
        "the session's claimed scope does not count"
    );
    let records = for_call(&w.audit, card.call);
    assert_eq!(
        records[0].reason,
        countersign::Reason::Level(countersign::reason::Level {
            policy: ApprovalPolicy::AskAlways,
            source: countersign::reason::LevelSource::BrokenFileFallback { last_good: true }
        })
    );
    assert!(w.runs().is_empty());
}

#[test]
fn a_normalising_rewrite_shows_and_runs_the_final_arguments() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask).rewrite(|p| {
        let trimmed = p.name.trim().to_owned();
        if trimmed == p.name {
            countersign::action::Rewrite::Keep
        } else {
            countersign::action::Rewrite::Arguments(serde_json::json!({ "name": trimmed }))
        }
    }));
    let card = w.card("save", r#"{"name":"  Apollo  "}"#, 0);
    assert_eq!(
        card.arguments,
        serde_json::json!({"name": "Apollo"}),
        "the card shows what will run"
    );
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        2,
    );
    assert_eq!(w.runs(), ["save:Apollo"]);
    let events: Vec<AuditEvent> = for_call(&w.audit, card.call)
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(
        events,
        [
            AuditEvent::Rewritten,
            AuditEvent::Asked,
            AuditEvent::Approved,
            AuditEvent::Settled
        ]
    );
    let records = for_call(&w.audit, card.call);
    assert_ne!(
        records[0].args_digest, records[1].args_digest,
        "the digest follows the rewrite"
    );
}

#[test]
fn a_downgrade_replaces_a_destructive_action_with_a_reversible_one() {
    let mut w = World::new();
    w.add(
        w.action("delete_file", Kind::Danger, Confirm::Unset)
            .rewrite(|p| countersign::action::Rewrite::Action {
                action: "trash_file".into(),
                arguments: serde_json::json!({ "name": p.name }),
                why: "deleting moves to the trash".into(),
            }),
    );
    w.add(w.action("trash_file", Kind::Write, Confirm::Unset));
    let settled = drive(&w.exec, w.call("delete_file", r#"{"name":"a.md"}"#, 0), 1).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(
        w.runs(),
        ["trash_file:a.md"],
        "only the reversible action ran"
    );
    let first = &for_call(&w.audit, settled.call)[0];
    assert_eq!(
        (first.event, &*first.action),
        (AuditEvent::Rewritten, "delete_file")
    );
    assert_eq!(
        first.reason,
        countersign::Reason::Rewritten {
            to: Some("trash_file".into())
        }
    );
    assert_eq!(&*w.terminal(settled.call)[0].action, "trash_file");
}

#[test]
fn rewrites_cannot_loop_or_escape_the_pipeline() {
    let mut w = World::new();
    w.add(w.action("spin", Kind::Write, Confirm::Unset).rewrite(|p| {
        countersign::action::Rewrite::Arguments(
            serde_json::json!({ "name": format!("{}x", p.name) }),
        )
    }));
    w.add(
        w.action("escape", Kind::Write, Confirm::Unset)
            .rewrite(|_| countersign::action::Rewrite::Action {
                action: "invented".into(),
                arguments: serde_json::json!({}),
                why: "?".into(),
            }),
    );
    let Step::Settled(s) = w.call("spin", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    assert_eq!(code(&s), "INVALID_ARGS");
    assert!(s.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("kept rewriting itself"));
    let Step::Settled(s) = w.call("escape", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    // A replacement that is not registered is refused where the rewrite happened (its
    // id, which a hook may have built from the arguments, never enters the trail).
    assert_eq!(code(&s), "UNAVAILABLE");
    assert_eq!(
        s.outcome.reason(),
        countersign::Reason::Rewritten { to: None }
    );
    assert!(w.runs().is_empty());
    assert_eq!(w.terminal(s.call).len(), 1);
}

#[test]
fn a_first_round_ticket_cannot_answer_the_second_question() {
    let mut w = World::new();
    w.add(
        w.action("purge", Kind::Write, Confirm::Ask)
            .confirm_twice(|_| "sure?".into()),
    );
    let first = w.card("purge", r#"{"name":"x"}"#, 0);
    assert!(!first.offers_session_grant);
    let (a, b) = (
        first.countersign(Gesture::AllowOnce),
        first.countersign(Gesture::AllowOnce),
    );
    assert_eq!(
        w.exec
            .approve(first.countersign(Gesture::AllowForSession), at(1))
            .unwrap_err(),
        TicketError::GrantNotOffered
    );
    let Step::Approval(second) = w.exec.approve(a, at(1)).unwrap() else {
        panic!("ran after one yes")
    };
    assert_eq!(second.round, 2);
    assert_eq!(w.exec.approve(b, at(2)).unwrap_err(), TicketError::Mismatch);
    assert!(w.runs().is_empty());
}

/// Unattended stands in for a person on `Ask`; but a double-confirmed action asks a
/// person twice, and no stand-in may skip both questions.
#[test]
fn unattended_mode_does_not_skip_a_double_confirmation() {
    let mut w = World::new();
    w.add(
        w.action("purge", Kind::Write, Confirm::Ask)
            .confirm_twice(|_| "this cannot be undone; sure?".into()),
    );
    w.exec.set_mode(Mode::Unattended).unwrap();
    let step = w.call("purge", r#"{"name":"x"}"#, 0);
    drive(&w.exec, step, 1);
    assert!(
        w.runs().is_empty(),
        "a double-confirmed action ran with no answer at all: {:?}",
        w.runs()
    );
}

/// The promise as briefed: no mode lowers a reversal. Bypass skips every approval, a
/// reversal's too.
#[test]
fn bypass_does_not_lower_a_reversal() {
    let mut w = World::new();
    w.add(w.action("restore", Kind::Danger, Confirm::Unset).reversal());
    assert!(w.exec.load_policy("{").is_err());
    w.exec.set_mode(Mode::Bypass).unwrap();
    let step = w.call("restore", r#"{"name":"x"}"#, 0);
    drive(&w.exec, step, 1);
    assert!(
        w.runs().is_empty(),
        "an AskAlways reversal under a broken file ran in bypass: {:?}",
        w.runs()
    );
}

#[test]
fn a_line_diff_marks_removed_added_and_kept_lines() {
    assert_eq!(line_diff("a\nb\nc", "a\nx\nc"), "  a\n- b\n+ x\n  c\n");
    assert_eq!(line_diff("", "new"), "+ new\n");
    assert_eq!(line_diff("old", ""), "- old\n");
    assert_eq!(line_diff("same", "same"), "  same\n");
}

#[test]
fn huge_texts_are_summarised_not_diffed() {
    let big = "x\n".repeat(3_000);
    assert_eq!(line_diff(&big, "y"), "- 3000 lines\n+ 1 lines\n");
}
