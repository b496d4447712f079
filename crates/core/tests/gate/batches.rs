//! "Allow all in this batch" never covers a card that must be decided on its own.

use std::time::Duration;

use countersign::{
    audit::AuditEvent, policy::ApprovalPolicy, reason::CardChange, ticket::TicketError,
    ApprovalRequest, Confirm, Gesture, Kind, Mode, Reason, Step,
};

use crate::common::{approval, at, code, drive, edit, for_call, pending, World};

#[test]
fn allow_all_in_a_batch_never_covers_a_card_that_must_be_decided_alone() {
    let mut w = World::with_rename();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    w.add(
        w.action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    for action in ["archive", "twice"] {
        let card = w.card(action, r#"{"name":"a"}"#, 0);
        assert!(!card.batchable(), "{action}");
        assert_eq!(
            w.exec
                .approve(card.countersign(Gesture::AllowInBatch), at(1))
                .unwrap_err(),
            TicketError::BatchNotOffered,
            "{action}"
        );
        assert_eq!(
            w.exec.approvals().last().unwrap().card_sha256,
            card.card_sha256
        );
        assert_eq!(w.terminal(card.call).len(), 0);
    }
    let a = w.card("rename", r#"{"name":"a"}"#, 2);
    let b = w.card("rename", r#"{"name":"b"}"#, 2);
    assert!(a.batchable() && b.batchable());
    for ticket in ApprovalRequest::countersign_batch(&[a.clone(), b.clone()]) {
        let step = w.exec.approve(ticket, at(3)).unwrap();
        assert_eq!(code(&drive(&w.exec, step, 4).unwrap()), "OK");
    }
    for card in [&a, &b] {
        let approved = &for_call(&w.audit, card.call)[1];
        assert_eq!(approved.event, AuditEvent::Approved);
        assert_eq!(approved.reason, Reason::AllowedInBatch);
        assert_eq!(w.terminal(card.call).len(), 1);
    }
    assert_eq!(w.runs(), ["rename:a", "rename:b"]);
}

/// One "allow all" covers the cards it listed, each with its arguments, and only those:
/// a card minted alone, or one the list left off, waits for its own decision.
#[test]
fn allow_all_covers_only_the_cards_it_listed() {
    let w = World::with_rename();
    let shown = w.card("rename", r#"{"name":"weekly notes"}"#, 0);
    let other = w.card("rename", r#"{"name":"the release notes"}"#, 0);
    let unlisted = w.card("rename", r#"{"name":"all private notes"}"#, 0);
    let alone = w
        .exec
        .approve(unlisted.countersign(Gesture::AllowInBatch), at(1))
        .unwrap_err();
    assert_eq!(alone, TicketError::BatchNotOffered, "a batch of one card");
    for ticket in ApprovalRequest::countersign_batch(&[shown.clone(), other.clone()]) {
        let step = w.exec.approve(ticket, at(2)).unwrap();
        assert_eq!(code(&drive(&w.exec, step, 3).unwrap()), "OK");
    }
    assert_eq!(
        w.runs(),
        ["rename:weekly notes", "rename:the release notes"]
    );
    assert_eq!(w.terminal(unlisted.call).len(), 0, "still waiting");
    assert!(w.exec.approvals().iter().any(|c| c.call == unlisted.call));
}

/// One "allow all" covers two listed calls that ask the same thing with the same
/// arguments (the model asked twice): each is listed beside another call, though both
/// cards read alike. The same card listed twice is still a batch of one.
#[test]
fn allow_all_covers_two_listed_calls_that_read_alike() {
    let w = World::with_rename();
    let first = w.card("rename", r#"{"name":"a"}"#, 0);
    let second = w.card("rename", r#"{"name":"a"}"#, 0);
    assert_eq!(first.card_sha256, second.card_sha256);
    for ticket in ApprovalRequest::countersign_batch(&[first.clone(), first.clone()]) {
        let refused = w.exec.approve(ticket, at(1)).unwrap_err();
        assert_eq!(refused, TicketError::BatchNotOffered, "one card, twice");
    }
    assert_eq!(w.terminal(first.call).len(), 0, "still waiting");
    for ticket in ApprovalRequest::countersign_batch(&[first.clone(), second.clone()]) {
        let step = w.exec.approve(ticket, at(2)).unwrap();
        assert_eq!(code(&drive(&w.exec, step, 3).unwrap()), "OK");
    }
    assert_eq!(w.runs(), ["rename:a", "rename:a"]);
    for card in [&first, &second] {
        assert_eq!(
            for_call(&w.audit, card.call)[1].reason,
            Reason::AllowedInBatch
        );
        assert_eq!(w.terminal(card.call).len(), 1);
    }
}

/// "Allow all" never covers an edited or restored card of an ask-always action.
#[test]
fn allow_in_batch_is_refused_on_edited_and_restored_ask_always_cards() {
    let mut w = World::new();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    let card = w.card("archive", r#"{"name":"a"}"#, 0);
    let edited = edit(&w, &card, r#"{"name":"b"}"#, 1);
    let restored = approval(
        w.exec
            .restore_pending(
                pending(&w, "archive", r#"{"name":"c"}"#, Duration::from_secs(60)),
                at(2),
            )
            .unwrap(),
        "restored",
    );
    for card in [&edited, &restored] {
        assert_eq!(card.policy, ApprovalPolicy::AskAlways);
        assert_eq!(
            w.exec
                .approve(card.countersign(Gesture::AllowInBatch), at(3))
                .unwrap_err(),
            TicketError::BatchNotOffered
        );
    }
    assert!(w.runs().is_empty());
}

/// An edited or restored call whose decision was `Run` is forced to ask under plain
/// `Ask`, whatever the level: in bypass mode a `Danger` (ask-always) action's edited or
/// restored card says `Ask`, offers "always allow" and "allow all in this batch", and
/// the trail records `ask`. (Approving it redraws it as ask_always, so nothing runs; see
/// `a_forced_ask_card_under_the_wrong_level_still_runs_nothing`.)
#[test]
fn break_an_edited_or_restored_card_in_bypass_understates_an_ask_always_level() {
    let mut failures = Vec::new();
    for how in ["edit", "restore"] {
        let mut w = World::new();
        w.add(w.action("archive", Kind::Danger, Confirm::Unset));
        let card = match how {
            "edit" => {
                let card = w.card("archive", r#"{"name":"a"}"#, 0);
                assert_eq!(card.policy, ApprovalPolicy::AskAlways);
                w.exec.set_mode(Mode::Bypass).unwrap();
                edit(&w, &card, r#"{"name":"b"}"#, 1)
            }
            _ => {
                w.exec.set_mode(Mode::Bypass).unwrap();
                approval(
                    w.exec
                        .restore_pending(
                            pending(&w, "archive", r#"{"name":"a"}"#, Duration::from_secs(60)),
                            at(1),
                        )
                        .unwrap(),
                    "restored",
                )
            }
        };
        let asked = for_call(&w.audit, card.call).last().unwrap().clone();
        if card.policy != ApprovalPolicy::AskAlways
            || card.batchable()
            || card.offers_session_grant
            || asked.policy != Some(ApprovalPolicy::AskAlways)
        {
            failures.push(format!(
                "{how}: card policy {:?}, batchable {}, offers grant {}, trail policy {:?}",
                card.policy,
                card.batchable(),
                card.offers_session_grant,
                asked.policy
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The safety net behind `break_an_edited_or_restored_card_in_bypass_…`: the misleveled
/// card's "allow all in this batch" or "always allow" is caught by the redraw.
#[test]
fn a_forced_ask_card_under_the_wrong_level_still_runs_nothing() {
    for gesture in [Gesture::AllowInBatch, Gesture::AllowForSession] {
        let mut w = World::new();
        w.add(w.action("archive", Kind::Danger, Confirm::Unset));
        let card = w.card("archive", r#"{"name":"a"}"#, 0);
        w.exec.set_mode(Mode::Bypass).unwrap();
        let edited = edit(&w, &card, r#"{"name":"b"}"#, 1);
        match w.exec.approve(edited.countersign(gesture), at(2)) {
            Ok(Step::Approval(again)) => {
                assert_eq!(again.policy, ApprovalPolicy::AskAlways, "{gesture:?}");
                assert!(again.changed.contains(&CardChange::Level));
                assert!(!again.batchable());
                assert_eq!(
                    w.exec
                        .approve(again.countersign(gesture), at(3))
                        .unwrap_err(),
                    if gesture == Gesture::AllowInBatch {
                        TicketError::BatchNotOffered
                    } else {
                        TicketError::GrantNotOffered
                    }
                );
            }
            Err(_) => {}
            Ok(other) => panic!("{gesture:?}: {other:?}"),
        }
        assert!(w.runs().is_empty(), "{gesture:?}");
        assert!(w.exec.grants().is_empty(), "{gesture:?}");
    }
}
