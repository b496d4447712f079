//! Approve with edits: an edited call is a new call, linked to the original, that passes
//! the pipeline again and needs its own ticket; batch approval only where it is offered.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

mod common;

use common::{at, code, drive, World};
use countersign::{AuditEvent, Confirm, EditError, Gesture, Kind, Mode, Reason, Step, TicketError};

fn world() -> World {
    let mut w = World::new();
    w.add(w.action("rename", Kind::Write, Confirm::Ask));
    w
}

#[test]
fn an_edit_is_a_new_linked_call_that_needs_its_own_ticket() {
    let w = world();
    let original = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let Step::Approval(edited) = w
        .exec
        .edit(original.call, r#"{"name":"Acme Ltd"}"#, at(10))
        .unwrap()
    else {
        panic!("an edit asks again");
    };
    assert_ne!(edited.call, original.call);
    let diff = edited.edited.as_ref().unwrap();
    assert_eq!(diff.from, original.call);
    assert_eq!(diff.changes.len(), 1);
    assert_eq!(diff.changes[0].field, "name");
    assert_eq!(diff.changes[0].before, Some("Acme".into()));
    assert_eq!(diff.changes[0].after, Some("Acme Ltd".into()));
    assert_eq!(
        edited.consequence.as_deref(),
        Some("set the name to `Acme Ltd`")
    );
    assert_ne!(edited.card_sha256, original.card_sha256);
    // Nothing ran, and nothing was answered yet: the edit approved nothing.
    assert!(w.runs().is_empty());
    assert!(w.exec.drain_settled().is_empty());
    // The original's card is gone; its ticket approves nothing.
    assert_eq!(
        w.exec
            .approve(original.countersign(Gesture::AllowOnce), at(20))
            .unwrap_err(),
        TicketError::NotPending
    );
    assert_eq!(w.exec.approvals().len(), 1);
    // The trail links the two calls; the original has one terminal record.
    let first = w.audit.for_call(original.call);
    let last = first.last().unwrap();
    assert_eq!(last.event, AuditEvent::Superseded);
    assert_eq!(last.reason, Reason::EditedInto { call: edited.call });
    assert_eq!(w.terminal(original.call).len(), 1);
    let second = w.audit.for_call(edited.call);
    assert_eq!(second[0].event, AuditEvent::Edited);
    assert_eq!(
        second[0].reason,
        Reason::EditedFrom {
            call: original.call,
            changed: vec!["name".into()]
        }
    );
    assert_ne!(second[0].args_digest, first[0].args_digest);
    // The new card runs with the person's arguments, and the model is told so.
    let step = w
        .exec
        .approve(edited.countersign(Gesture::AllowOnce), at(30))
        .unwrap();
    let settled = drive(&w.exec, step, 40).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(&*settled.tool_call_id, "tc");
    assert_eq!(w.runs(), ["rename:Acme Ltd"]);
    let json = settled.to_model_json();
    assert_eq!(json["edited_by_person"]["changes"][0]["field"], "name");
    assert_eq!(json["edited_by_person"]["changes"][0]["you_sent"], "Acme");
    assert_eq!(
        json["edited_by_person"]["changes"][0]["person_set"],
        "Acme Ltd"
    );
    assert_eq!(
        w.exec.drain_settled().len(),
        1,
        "one answer for the tool call"
    );
    assert_eq!(w.terminal(edited.call).len(), 1);
}

#[test]
fn an_edit_that_does_not_validate_changes_nothing() {
    let w = world();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let records = w.audit.len();
    let huge = format!(r#"{{"name":"{}"}}"#, "x".repeat(20_000));
    for bad in [
        r#"{"name":5}"#,
        r#"{"name":"a","approved":true}"#,
        "not json",
        "[1]",
        huge.as_str(),
        r#"{}"#,
    ] {
        match w.exec.edit(card.call, bad, at(5)) {
            Err(EditError::Invalid(why)) => assert!(!why.is_empty(), "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(
        w.exec
            .edit(card.call, r#"{ "name" : "Acme" }"#, at(5))
            .unwrap_err(),
        EditError::Unchanged
    );
    assert_eq!(w.audit.len(), records, "no record for a refused edit");
    assert_eq!(w.exec.approvals()[0].card_sha256, card.card_sha256);
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(6))
        .unwrap();
    assert_eq!(code(&drive(&w.exec, step, 7).unwrap()), "OK");
    assert_eq!(w.runs(), ["rename:Acme"]);
}

#[test]
fn an_edit_after_the_deadline_expires_the_call_and_runs_nothing() {
    let w = world();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let late = card.deadline.as_millis();
    assert_eq!(
        w.exec
            .edit(card.call, r#"{"name":"B"}"#, at(late))
            .unwrap_err(),
        EditError::Ticket(TicketError::Expired)
    );
    let settled = w.exec.drain_settled();
    assert_eq!(settled.len(), 1);
    assert_eq!(code(&settled[0]), "APPROVAL_TIMEOUT");
    assert_eq!(w.terminal(card.call).len(), 1);
    assert!(w.runs().is_empty());
    assert!(w.exec.approvals().is_empty());
}

#[test]
fn an_edit_is_asked_even_where_a_grant_or_the_mode_would_let_it_run() {
    for how in ["grant", "unattended"] {
        let w = world();
        let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
        if how == "grant" {
            // Another card, allowed for the session: its grant covers every later call.
            let other = w.card("rename", r#"{"name":"first"}"#, 1);
            let step = w
                .exec
                .approve(other.countersign(Gesture::AllowForSession), at(2))
                .unwrap();
            drive(&w.exec, step, 3).unwrap();
            assert!(matches!(
                w.call("rename", r#"{"name":"covered"}"#, 4),
                Step::Perform(_)
            ));
        } else {
            w.exec.set_mode(Mode::Unattended).unwrap();
        }
        let runs = w.runs();
        let Step::Approval(edited) = w.exec.edit(card.call, r#"{"name":"Evil"}"#, at(5)).unwrap()
        else {
            panic!("{how}: an edit is always asked");
        };
        let asked = w.audit.for_call(edited.call).last().unwrap().clone();
        assert_eq!(asked.event, AuditEvent::Asked, "{how}");
        assert_eq!(asked.decided_by, countersign::Decider::Person, "{how}");
        assert!(matches!(asked.reason, Reason::EditedFrom { .. }), "{how}");
        assert_eq!(w.runs(), runs, "{how}: nothing more ran");
    }
}

#[test]
fn only_a_card_can_be_edited() {
    let mut w = world();
    w.add(w.action("quiet", Kind::Write, Confirm::Off));
    let Step::Perform(_job) = w.call("quiet", r#"{"name":"a"}"#, 0) else {
        panic!("runs without a card");
    };
    assert_eq!(
        w.exec
            .edit(countersign::CallId::default(), r#"{"name":"b"}"#, at(1))
            .unwrap_err(),
        EditError::Ticket(TicketError::NotPending)
    );
    let card = w.card("rename", r#"{"name":"a"}"#, 2);
    w.exec.deny(card.call, None, at(3)).unwrap();
    assert_eq!(
        w.exec
            .edit(card.call, r#"{"name":"b"}"#, at(4))
            .unwrap_err(),
        EditError::Ticket(TicketError::NotPending)
    );
}

#[test]
fn a_denied_edit_tells_the_model_what_the_person_changed() {
    let w = world();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let Step::Approval(edited) = w.exec.edit(card.call, r#"{"name":"B"}"#, at(1)).unwrap() else {
        panic!("asks");
    };
    let settled = w.exec.deny(edited.call, None, at(2)).unwrap();
    assert_eq!(code(&settled), "PERMISSION_DENIED");
    assert_eq!(
        settled.to_model_json()["edited_by_person"]["changes"][0]["person_set"],
        "B"
    );
    assert!(w.runs().is_empty());
}

#[test]
fn allow_all_in_a_batch_never_covers_a_card_that_must_be_decided_alone() {
    let mut w = world();
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
    let card = w.card("rename", r#"{"name":"a"}"#, 2);
    assert!(card.batchable());
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowInBatch), at(3))
        .unwrap();
    assert_eq!(code(&drive(&w.exec, step, 4).unwrap()), "OK");
    let approved = &w.audit.for_call(card.call)[1];
    assert_eq!(approved.event, AuditEvent::Approved);
    assert_eq!(approved.reason, Reason::AllowedInBatch);
    assert_eq!(w.runs(), ["rename:a"]);
}

#[test]
fn a_script_s_press_is_recorded_and_changes_nothing() {
    let w = world();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    w.exec
        .refuse_synthetic(card.call, countersign::Control::AllowOnce, at(1))
        .unwrap();
    let records = w.audit.for_call(card.call);
    let last = records.last().unwrap();
    assert_eq!(last.event, AuditEvent::GestureRefused);
    assert_eq!(
        last.reason,
        Reason::SyntheticGesture {
            control: countersign::Control::AllowOnce
        }
    );
    assert!(!last.is_terminal());
    assert!(w.runs().is_empty());
    assert_eq!(
        w.exec.approvals()[0].card_sha256,
        card.card_sha256,
        "the card is as it was"
    );
    // The person's own press still works.
    let settled = w.allow(&card, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(
        w.exec
            .refuse_synthetic(card.call, countersign::Control::Deny, at(3))
            .unwrap_err(),
        TicketError::NotPending
    );
}
