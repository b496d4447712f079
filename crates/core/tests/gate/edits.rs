//! An edited call is a new call, asked again, and the model is told what the person changed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use countersign::{
    action::Rewrite, audit::AuditEvent, ticket::EditError, ticket::TicketError, Action, Confirm,
    Gesture, Kind, Mode, Reason, Step,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::common::{
    approval, at, at_most_one_terminal_each, code, drain, drive, edit, for_call, pending, World,
};

#[test]
fn an_edit_is_a_new_linked_call_that_needs_its_own_ticket() {
    let w = World::with_rename();
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
    assert!(drain(&w.exec).is_empty());
    // The original's card is gone; its ticket approves nothing.
    assert_eq!(
        w.exec
            .approve(original.countersign(Gesture::AllowOnce), at(20))
            .unwrap_err(),
        TicketError::NotPending
    );
    assert_eq!(w.exec.approvals().len(), 1);
    // The trail links the two calls; the original has one terminal record.
    let first = for_call(&w.audit, original.call);
    let last = first.last().unwrap();
    assert_eq!(last.event, AuditEvent::Superseded);
    assert_eq!(last.reason, Reason::EditedInto { call: edited.call });
    assert_eq!(w.terminal(original.call).len(), 1);
    let second = for_call(&w.audit, edited.call);
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
    let Step::Perform(job) = step else {
        panic!("an approved edit runs")
    };
    assert!(w.exec.complete(pollster::block_on(job.run()), at(40)));
    let answers = drain(&w.exec);
    assert_eq!(answers.len(), 1, "one answer for the tool call");
    let settled = &answers[0];
    assert_eq!(code(settled), "OK");
    assert_eq!(&*settled.tool_call_id, "tc");
    assert_eq!(w.runs(), ["rename:Acme Ltd"]);
    let json = settled.to_model_json();
    assert_eq!(json["edited_by_person"]["changes"][0]["field"], "name");
    assert_eq!(json["edited_by_person"]["changes"][0]["you_sent"], "Acme");
    assert_eq!(
        json["edited_by_person"]["changes"][0]["person_set"],
        "Acme Ltd"
    );
    assert_eq!(w.terminal(edited.call).len(), 1);
}

#[test]
fn an_edit_that_does_not_validate_changes_nothing() {
    let w = World::with_rename();
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
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let late = card.deadline.as_millis();
    assert_eq!(
        w.exec
            .edit(card.call, r#"{"name":"B"}"#, at(late))
            .unwrap_err(),
        EditError::Ticket(TicketError::Expired)
    );
    let settled = drain(&w.exec);
    assert_eq!(settled.len(), 1);
    assert_eq!(code(&settled[0]), "APPROVAL_TIMEOUT");
    assert_eq!(w.terminal(card.call).len(), 1);
    assert!(w.runs().is_empty());
    assert!(w.exec.approvals().is_empty());
}

#[test]
fn an_edit_is_asked_even_where_a_grant_or_the_mode_would_let_it_run() {
    for how in ["grant", "unattended"] {
        let w = World::with_rename();
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
        let asked = for_call(&w.audit, edited.call).last().unwrap().clone();
        assert_eq!(asked.event, AuditEvent::Asked, "{how}");
        assert_eq!(
            asked.decided_by,
            countersign::audit::Decider::Person,
            "{how}"
        );
        assert!(matches!(asked.reason, Reason::EditedFrom { .. }), "{how}");
        assert_eq!(w.runs(), runs, "{how}: nothing more ran");
    }
}

/// A level lowered to `None` by the policy file while the card waits: the edit is asked.
#[test]
fn an_edit_after_the_level_was_lowered_to_none_is_still_asked() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    w.exec
        .load_policy(
            r#"{"roles":{"admin":{"scopes":["workspace.write"],"overrides":{"rename":{"confirm":"off"}}}}}"#,
        )
        .unwrap();
    assert!(matches!(
        w.call("rename", r#"{"name":"z"}"#, 1),
        Step::Perform(_)
    ));
    let runs = w.runs();
    let edited = edit(&w, &card, r#"{"name":"b"}"#, 2);
    assert_eq!(w.runs(), runs);
    assert!(matches!(
        for_call(&w.audit, edited.call).last().unwrap().reason,
        Reason::EditedFrom { .. }
    ));
}

/// An edit whose arguments a rewrite hook sends to an action that needs no approval is
/// still asked; so is a restored call rewritten the same way.
#[test]
fn an_edit_or_restore_rewritten_into_an_action_that_needs_no_approval_is_still_asked() {
    for how in ["edit", "restore"] {
        let mut w = World::new();
        w.add(w.action("peek", Kind::Read, Confirm::Unset));
        let action = w.action("rename", Kind::Write, Confirm::Ask).rewrite(|p| {
            if p.name == "x" {
                Rewrite::Action {
                    action: "peek".into(),
                    arguments: json!({ "name": "x" }),
                    why: "read instead".into(),
                }
            } else {
                Rewrite::Keep
            }
        });
        w.add(action);
        assert!(matches!(
            w.call("rename", r#"{"name":"x"}"#, 0),
            Step::Perform(_)
        ));
        let baseline = w.runs();
        let step = if how == "edit" {
            let card = w.card("rename", r#"{"name":"a"}"#, 1);
            w.exec.edit(card.call, r#"{"name":"x"}"#, at(2)).unwrap()
        } else {
            w.exec
                .restore_pending(
                    pending(&w, "rename", r#"{"name":"x"}"#, Duration::from_secs(60)),
                    at(2),
                )
                .unwrap()
        };
        let card = approval(step, how);
        assert_eq!(card.action, "peek", "{how}: the card is for what runs");
        assert_eq!(w.runs(), baseline, "{how}: nothing ran by itself");
        let settled = w.allow(&card, Gesture::AllowOnce, 3).unwrap();
        assert_eq!(code(&settled), "OK");
        at_most_one_terminal_each(&w);
    }
}

/// In every mode an edit runs nothing by itself, and every call of an edit chain ends
/// with exactly one terminal record; the model's tool call gets exactly one answer.
#[test]
fn an_edit_chain_in_every_mode_runs_nothing_and_settles_each_call_once() {
    for mode in [Mode::Default, Mode::Bypass, Mode::Unattended, Mode::Away] {
        let w = World::with_rename();
        let card = w.card("rename", r#"{"name":"a"}"#, 0);
        w.exec.set_mode(mode).unwrap();
        let mut last = card.clone();
        let mut calls = vec![card.call];
        for (i, name) in ["b", "c", "d"].iter().enumerate() {
            match w.exec.edit(
                last.call,
                &format!(r#"{{"name":"{name}"}}"#),
                at(1 + i as u64),
            ) {
                Ok(Step::Approval(next)) => {
                    calls.push(next.call);
                    last = *next;
                }
                Ok(Step::Settled(s)) => {
                    // Away mode refuses the edited call: answered once, nothing ran.
                    assert_eq!(mode, Mode::Away);
                    calls.push(s.call);
                    break;
                }
                Ok(other) => panic!("{mode:?}: {other:?}"),
                Err(e) => panic!("{mode:?}: {e:?}"),
            }
        }
        assert!(w.runs().is_empty(), "{mode:?}: an edit ran something");
        if mode != Mode::Away {
            w.exec.deny(last.call, None, at(10)).unwrap();
        }
        for call in &calls {
            assert_eq!(w.terminal(*call).len(), 1, "{mode:?}: call {call:?}");
        }
        let answers = drain(&w.exec);
        assert_eq!(answers.len(), 1, "{mode:?}: one answer for the tool call");
        assert_eq!(&*answers[0].tool_call_id, "tc");
        assert!(answers[0].edited.is_some());
    }
}

#[test]
fn only_a_card_can_be_edited() {
    let mut w = World::with_rename();
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

/// Tickets of every earlier card of an edit chain approve nothing; only the last card's
/// ticket runs, and only with its arguments.
#[test]
fn tickets_of_superseded_cards_approve_nothing() {
    let w = World::with_rename();
    let c0 = w.card("rename", r#"{"name":"a"}"#, 0);
    let c1 = edit(&w, &c0, r#"{"name":"b"}"#, 1);
    let c2 = edit(&w, &c1, r#"{"name":"c"}"#, 2);
    for old in [&c0, &c1] {
        for gesture in [
            Gesture::AllowOnce,
            Gesture::AllowInBatch,
            Gesture::AllowForSession,
        ] {
            assert_eq!(
                w.exec.approve(old.countersign(gesture), at(3)).unwrap_err(),
                TicketError::NotPending
            );
        }
        assert_eq!(
            w.exec.edit(old.call, r#"{"name":"z"}"#, at(3)).unwrap_err(),
            EditError::Ticket(TicketError::NotPending)
        );
    }
    assert!(w.runs().is_empty());
    w.allow(&c2, Gesture::AllowOnce, 4).unwrap();
    assert_eq!(w.runs(), ["rename:c"]);
}

/// Editing the second question of a double-confirmed action starts over: the edited
/// call needs two tickets again, and neither may be "allow all".
#[test]
fn an_edit_of_a_second_question_needs_both_tickets_again() {
    let mut w = World::new();
    w.add(
        w.action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    let first = w.card("twice", r#"{"name":"a"}"#, 0);
    let second = approval(
        w.exec
            .approve(first.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        "second question",
    );
    assert_eq!(second.round, 2);
    let edited = edit(&w, &second, r#"{"name":"b"}"#, 2);
    assert_eq!(
        edited.round, 1,
        "the edited call starts at the first question"
    );
    assert!(!edited.batchable());
    assert_eq!(
        w.exec
            .approve(edited.countersign(Gesture::AllowInBatch), at(3))
            .unwrap_err(),
        TicketError::BatchNotOffered
    );
    let again = approval(
        w.exec
            .approve(edited.countersign(Gesture::AllowOnce), at(4))
            .unwrap(),
        "asked twice again",
    );
    assert_eq!(again.round, 2);
    assert!(w.runs().is_empty());
    w.allow(&again, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(w.runs(), ["twice:b"]);
}

/// A hook re-entering the executor during an edit's validation leaves the original
/// card waiting (nothing superseded, nothing answered).
#[test]
fn a_validator_that_reenters_during_an_edit_changes_nothing() {
    let mut w = World::new();
    let slot: Rc<RefCell<Option<countersign::Executor>>> = Rc::default();
    let inner = Rc::clone(&slot);
    let action = w
        .action("rename", Kind::Write, Confirm::Ask)
        .validate(move |p| {
            if p.name == "evil" {
                if let Some(exec) = inner.borrow().as_ref() {
                    let _ = exec.approvals();
                }
            }
            Ok(())
        });
    w.add(action);
    *slot.borrow_mut() = Some(w.exec.clone());
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    let records = w.audit.len();
    assert!(matches!(
        w.exec.edit(card.call, r#"{"name":"evil"}"#, at(1)),
        Err(EditError::Invalid(_))
    ));
    assert_eq!(w.audit.len(), records);
    assert_eq!(w.exec.approvals()[0].card_sha256, card.card_sha256);
    assert!(drain(&w.exec).is_empty());
    w.allow(&card, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(w.runs(), ["rename:a"]);
}

#[test]
fn a_denied_edit_tells_the_model_what_the_person_changed() {
    let w = World::with_rename();
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

/// An edited call refused by the classifier (or any later stage) still tells the model
/// what the person changed, and settles once.
#[test]
fn an_edited_call_refused_later_still_tells_the_model_and_settles_once() {
    let mut w = World::new();
    let action = w.action("rename", Kind::Write, Confirm::Ask).classify(|p| {
        if p.name == "root" {
            countersign::Verdict::Deny("not root".into())
        } else {
            countersign::Verdict::Allow
        }
    });
    w.add(action);
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    let Step::Settled(settled) = w.exec.edit(card.call, r#"{"name":"root"}"#, at(1)).unwrap()
    else {
        panic!("refused");
    };
    assert_eq!(code(&settled), "POLICY_DENIED");
    assert_eq!(
        settled.to_model_json()["edited_by_person"]["changes"][0]["person_set"],
        "root"
    );
    assert_eq!(w.terminal(card.call).len(), 1);
    assert_eq!(w.terminal(settled.call).len(), 1);
    assert_eq!(drain(&w.exec).len(), 1);
    assert!(w.runs().is_empty());
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
struct Tagged {
    /// A name.
    name: String,
    /// A tag.
    tag: String,
}

fn tagged(w: &World) -> Action<Tagged> {
    let runs = Rc::clone(&w.runs);
    Action::<Tagged>::new("tag", "tags a thing")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .consequence(|p| format!("name `{}`, tag `{}`", p.name, p.tag))
        .run(move |p: Tagged| {
            let runs = Rc::clone(&runs);
            async move {
                runs.borrow_mut().push(format!("tag:{}:{}", p.name, p.tag));
                Ok::<_, String>(json!({}))
            }
        })
}

/// A second edit is diffed against the first edit, not against what the model sent: the
/// model is told only the field of the last edit, with the person's earlier value as
/// `you_sent`. A field the person changed in the first edit is reported as the model's.
#[test]
fn break_a_second_edit_hides_the_first_from_the_model() {
    let w = World::new();
    w.exec.register(tagged(&w)).unwrap().forget();
    let card = w.card("tag", r#"{"name":"model","tag":"t"}"#, 0);
    let first = edit(&w, &card, r#"{"name":"person","tag":"t"}"#, 1);
    let second = edit(&w, &first, r#"{"name":"person","tag":"u"}"#, 2);
    let settled = w.allow(&second, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(w.runs(), ["tag:person:u"]);
    let told = settled.to_model_json();
    let changes = told["edited_by_person"]["changes"].as_array().unwrap();
    let name = changes.iter().find(|c| c["field"] == "name");
    assert!(
        name.is_some_and(|c| c["you_sent"] == "model" && c["person_set"] == "person"),
        "the model sent name `model`, `person` ran, and it is told: {told}"
    );
}

/// A person edits `Acme` → `B`, then changes their mind and edits back to `Acme`: the
/// model's own arguments run, yet the model is told the person replaced them and that
/// it had sent `B`.
#[test]
fn break_an_edit_undone_by_a_second_edit_tells_the_model_it_sent_what_the_person_typed() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"Acme"}"#, 0);
    let first = edit(&w, &card, r#"{"name":"B"}"#, 1);
    let back = edit(&w, &first, r#"{"name":"Acme"}"#, 2);
    let settled = w.allow(&back, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(w.runs(), ["rename:Acme"]);
    let told = settled.to_model_json();
    assert!(
        told["edited_by_person"]["changes"]
            .as_array()
            .is_none_or(|c| c.iter().all(|c| c["you_sent"] != "B")),
        "the model never sent `B`: {told}"
    );
}

/// A rewrite hook that normalises arguments runs after the edit: the card's diff (and
/// the model's `person_set`) say `Evil Corp`, the arguments that run are `evil corp`.
#[test]
fn break_an_edit_that_is_rewritten_shows_and_reports_a_value_that_does_not_run() {
    let mut w = World::new();
    let action = w.action("rename", Kind::Write, Confirm::Ask).rewrite(|p| {
        let lower = p.name.to_lowercase();
        if lower == p.name {
            Rewrite::Keep
        } else {
            Rewrite::Arguments(json!({ "name": lower }))
        }
    });
    w.add(action);
    let card = w.card("rename", r#"{"name":"acme"}"#, 0);
    let edited = edit(&w, &card, r#"{"name":"Evil Corp"}"#, 1);
    assert_eq!(edited.arguments["name"], "evil corp", "what will run");
    let settled = w.allow(&edited, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(w.runs(), ["rename:evil corp"]);
    let told = settled.to_model_json();
    let diff = edited.edited.as_ref().unwrap();
    assert_eq!(
        diff.changes[0].after,
        Some(json!("evil corp")),
        "the card's original → edited line shows a value that does not run"
    );
    assert_eq!(
        told["edited_by_person"]["changes"][0]["person_set"],
        "evil corp"
    );
}

/// An edit's diff names added, removed and changed fields, in field order.
#[test]
fn an_edit_s_diff_names_added_removed_and_changed_fields_in_order() {
    let w = World::new();
    w.exec.register(labels(&w)).unwrap().forget();
    let card = w.card("labels", r#"{"b":"1","a":"x","keep":"t"}"#, 0);
    let edited = edit(&w, &card, r#"{"a":"y","keep":"t","c":"z"}"#, 1);
    let changes = &edited.edited.as_ref().unwrap().changes;
    let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["a", "b", "c"]);
    assert_eq!(changes[1].after, None);
    assert_eq!(changes[2].before, None);
}

fn labels(w: &World) -> Action<BTreeMap<String, String>> {
    let runs = Rc::clone(&w.runs);
    Action::<BTreeMap<String, String>>::new("labels", "sets labels")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(move |p: BTreeMap<String, String>| {
            let runs = Rc::clone(&runs);
            async move {
                runs.borrow_mut().push(format!("labels:{}", p.len()));
                Ok::<_, String>(json!({}))
            }
        })
}

/// Model-written keys (a map's keys) never reach the trail through an edit's reason
/// or summary: only declared field names, else `…`.
#[test]
fn model_written_keys_never_reach_the_trail_through_an_edit() {
    let w = World::new();
    w.exec.register(labels(&w)).unwrap().forget();
    let secret = "sk-live-SECRET-0xdeadbeef";
    let card = w.card("labels", &format!(r#"{{"{secret}":"v"}}"#), 0);
    let edited = edit(&w, &card, &format!(r#"{{"{secret}":"w","name":"x"}}"#), 1);
    w.allow(&edited, Gesture::AllowOnce, 2).unwrap();
    let trail = serde_json::to_string(&w.audit.records()).unwrap();
    assert!(!trail.contains("SECRET"), "{trail}");
    let from = for_call(&w.audit, edited.call)
        .into_iter()
        .find(|r| r.event == AuditEvent::Edited)
        .unwrap();
    assert_eq!(
        from.reason,
        Reason::EditedFrom {
            call: card.call,
            changed: vec!["…".into()]
        }
    );
}
