//! What the person approves is exactly what runs: one test per break that was found
//! around the ticket (issue 9). Each asserts the promise and that nothing else happened.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::{at, code, drive, Named, World};
use countersign::{
    Action, AuditEvent, CardChange, Confirm, Executor, Gesture, Kind, Mode, Preview, Reason,
    Reentered, Step, TicketError,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Clone, Deserialize, JsonSchema)]
struct Rows {
    /// How many rows to delete from the top.
    count: u32,
}

/// A table whose `delete_rows` card counts what will go, and an `add_rows` that needs no
/// approval and changes the table.
fn table(w: &mut World) -> Rc<RefCell<Vec<u32>>> {
    let rows = Rc::new(RefCell::new(vec![1]));
    let (shown, counted, deleted, added) = (
        Rc::clone(&rows),
        Rc::clone(&rows),
        Rc::clone(&rows),
        Rc::clone(&rows),
    );
    let runs = Rc::clone(&w.runs);
    w.regs.push(
        w.exec
            .register(
                Action::<Rows>::new("delete_rows", "Delete rows matching the filter.")
                    .kind(Kind::Danger)
                    // Matches every row now in the table (the filter is the page's).
                    .consequence(move |_| format!("delete {} rows", shown.borrow().len()))
                    .preview(move |_| {
                        Preview::default().count("rows deleted", counted.borrow().len() as u64)
                    })
                    .run(move |_| {
                        let rows = Rc::clone(&deleted);
                        let runs = Rc::clone(&runs);
                        async move {
                            let n = rows.borrow().len();
                            rows.borrow_mut().clear();
                            runs.borrow_mut().push(format!("deleted:{n}"));
                            Ok::<_, String>(n)
                        }
                    }),
            )
            .unwrap(),
    );
    w.regs.push(
        w.exec
            .register(
                Action::<Rows>::new("add_rows", "Add rows.")
                    .kind(Kind::Write)
                    .run(move |p: Rows| {
                        let rows = Rc::clone(&added);
                        async move {
                            rows.borrow_mut().extend(0..p.count);
                            Ok::<_, String>(())
                        }
                    }),
            )
            .unwrap(),
    );
    rows
}

#[test]
fn a_card_that_went_stale_runs_nothing_and_is_shown_again() {
    let mut w = World::new();
    let rows = table(&mut w);
    let Step::Approval(seen) = w.call("delete_rows", r#"{"count":1}"#, 0) else {
        panic!("danger asks")
    };
    assert_eq!(seen.consequence.as_deref(), Some("delete 1 rows"));
    assert!(seen.changed.is_empty());
    // Same model turn: a call that needs no approval changes the page.
    let added = drive(&w.exec, w.call("add_rows", r#"{"count":100}"#, 1), 2).unwrap();
    assert_eq!(code(&added), "OK");
    assert_eq!(rows.borrow().len(), 101);

    let Step::Approval(fresh) = w
        .exec
        .approve(seen.countersign(Gesture::AllowOnce), at(3))
        .unwrap()
    else {
        panic!("a stale card must not run")
    };
    assert!(w.runs().is_empty(), "nothing ran on the stale card");
    assert_eq!(rows.borrow().len(), 101);
    assert_eq!(fresh.call, seen.call);
    assert_eq!(fresh.consequence.as_deref(), Some("delete 101 rows"));
    assert_eq!(
        fresh.changed,
        [CardChange::Consequence, CardChange::Preview]
    );
    assert_ne!(fresh.card_sha256, seen.card_sha256);
    // The old card's ticket is dead (new nonce, new face).
    assert_eq!(
        w.exec
            .approve(seen.countersign(Gesture::AllowOnce), at(4))
            .unwrap_err(),
        TicketError::Mismatch
    );
    let records = w.audit.for_call(seen.call);
    assert_eq!(
        records[1].reason,
        Reason::StaleCard {
            changed: vec![CardChange::Consequence, CardChange::Preview]
        }
    );
    // The person approves what they now see, and exactly that runs.
    let done = drive(
        &w.exec,
        w.exec
            .approve(fresh.countersign(Gesture::AllowOnce), at(5))
            .unwrap(),
        6,
    )
    .unwrap();
    assert_eq!(code(&done), "OK");
    assert_eq!(w.runs(), ["deleted:101"]);
    assert_eq!(w.terminal(seen.call).len(), 1);
}

#[test]
fn a_card_that_keeps_changing_is_given_up_not_run() {
    let mut w = World::new();
    let rows = table(&mut w);
    let Step::Approval(mut card) = w.call("delete_rows", r#"{"count":1}"#, 0) else {
        panic!()
    };
    for t in 1..=6 {
        rows.borrow_mut().push(t);
        match w
            .exec
            .approve(card.countersign(Gesture::AllowOnce), at(t.into()))
            .unwrap()
        {
            Step::Approval(next) => card = next,
            Step::Settled(s) => {
                assert_eq!(code(&s), "UNAVAILABLE");
                assert_eq!(s.outcome.reason(), Reason::CardKeptChanging);
                assert!(w.runs().is_empty());
                return;
            }
            other => panic!("{other:?}"),
        }
    }
    panic!("the card was redrawn forever");
}

#[test]
fn a_card_whose_level_rose_meanwhile_is_shown_again_without_the_grant_offer() {
    let mut w = World::new();
    let strict = Rc::new(Cell::new(false));
    let flag = Rc::clone(&strict);
    w.add(
        w.action("save", Kind::Write, Confirm::Ask)
            .classify(move |_| {
                if flag.get() {
                    countersign::Verdict::Ask
                } else {
                    countersign::Verdict::Allow
                }
            }),
    );
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    assert!(card.offers_session_grant);
    strict.set(true);
    let Step::Approval(fresh) = w
        .exec
        .approve(card.countersign(Gesture::AllowForSession), at(1))
        .unwrap()
    else {
        panic!()
    };
    assert!(fresh.changed.contains(&CardChange::Level));
    assert!(!fresh.offers_session_grant);
    assert!(w.exec.grants().is_empty(), "no grant from a stale card");
    assert!(w.runs().is_empty());
}

#[test]
fn grants_die_with_their_registration_and_never_cover_a_new_declaration() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1);
    let step = w.call("save", r#"{"name":"b"}"#, 2);
    assert!(matches!(step, Step::Perform(_)));
    drive(&w.exec, step, 2);
    // Unregister: the grant is revoked.
    w.regs.clear();
    assert!(w.exec.grants().is_empty());
    // A different declaration under the same id (asked twice) inherits nothing.
    w.add(
        w.action("save", Kind::Write, Confirm::Ask)
            .confirm_twice(|_| "really?".into()),
    );
    let Step::Approval(first) = w.call("save", r#"{"name":"c"}"#, 3) else {
        panic!("a new registration is asked")
    };
    assert_eq!(first.round, 1);
    assert!(!first.offers_session_grant);
    // Even the same declaration registered again starts without grants.
    w.regs.clear();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    assert!(matches!(
        w.call("save", r#"{"name":"d"}"#, 4),
        Step::Approval(_)
    ));
    assert_eq!(w.runs(), ["save:a", "save:b"]);
}

#[test]
fn time_never_moves_back_for_an_approval() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    // The executor has seen a time past the card's deadline.
    let late = card.deadline.as_millis() + 1;
    drive(&w.exec, w.call("note", r#"{"name":"n"}"#, late), late);
    // A caller with a stale clock cannot approve the expired card.
    assert_eq!(
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap_err(),
        TicketError::Expired
    );
    assert_eq!(w.runs(), ["note:n"]);
    assert_eq!(
        w.terminal(card.call)[0].outcome.as_deref(),
        Some("APPROVAL_TIMEOUT")
    );
}

#[allow(dead_code, unreachable_pub, missing_docs)] // The shapes are only deserialised.
mod shapes {
    use super::*;

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    pub enum Internal {
        Row { id: u32 },
        All,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c")]
    pub enum Adjacent {
        Row { id: u32 },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Untagged {
        Plain(String),
        Full { first: String, last: String },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub enum External {
        Row { id: u32 },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Extra {
        pub note: String,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Params {
        pub internal: Option<Internal>,
        pub adjacent: Option<Adjacent>,
        pub untagged: Option<Untagged>,
        pub external: Option<External>,
        pub list: Option<Vec<Internal>>,
        #[serde(flatten)]
        pub extra: Option<Extra>,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op")]
    pub enum TopLevel {
        Rename { name: String },
        Archive {},
    }
}

fn shaped<P>(id: &str) -> Action<P>
where
    P: serde::de::DeserializeOwned + JsonSchema + Clone + 'static,
{
    Action::<P>::new(id, "shapes")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(|_| async { Ok::<_, String>(()) })
}

#[test]
fn unknown_fields_are_refused_in_every_serde_shape() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Params>("shapes")).unwrap();
    let _b = w.exec.register(shaped::<shapes::TopLevel>("top")).unwrap();
    let refused = [
        (
            "shapes",
            r#"{"internal":{"type":"Row","id":1,"confirmed":true}}"#,
            "internal.confirmed",
        ),
        (
            "shapes",
            r#"{"internal":{"type":"All","approved_by":"me"}}"#,
            "internal.approved_by",
        ),
        (
            "shapes",
            r#"{"adjacent":{"t":"Row","c":{"id":1,"confirmed":true}}}"#,
            "confirmed",
        ),
        (
            "shapes",
            r#"{"untagged":{"first":"a","last":"b","approved_by":"me"}}"#,
            "approved_by",
        ),
        (
            "shapes",
            r#"{"external":{"Row":{"id":1,"confirmed":true}}}"#,
            "confirmed",
        ),
        (
            "shapes",
            r#"{"list":[{"type":"All"},{"type":"Row","id":2,"confirmed":true}]}"#,
            "confirmed",
        ),
        ("shapes", r#"{"note":"n","confirmed":true}"#, "confirmed"),
        (
            "top",
            r#"{"op":"Rename","name":"a","confirmed":true}"#,
            "confirmed",
        ),
        (
            "top",
            r#"{"op":"Archive","approved_by":"me"}"#,
            "approved_by",
        ),
    ];
    for (action, args, field) in refused {
        let Step::Settled(s) = w.call(action, args, 0) else {
            panic!("{args} reached the card")
        };
        let message = s.outcome.to_model_json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(code(&s), "INVALID_ARGS", "{args}");
        assert!(message.contains(field), "{args}: {message}");
    }
    let accepted = [
        ("shapes", r#"{"internal":{"type":"Row","id":1}}"#),
        ("shapes", r#"{"internal":{"type":"All"}}"#),
        ("shapes", r#"{"adjacent":{"t":"Row","c":{"id":1}}}"#),
        ("shapes", r#"{"untagged":"plain"}"#),
        ("shapes", r#"{"untagged":{"first":"a","last":"b"}}"#),
        ("shapes", r#"{"external":{"Row":{"id":1}}}"#),
        (
            "shapes",
            r#"{"list":[{"type":"All"},{"type":"Row","id":2}]}"#,
        ),
        ("shapes", r#"{"note":"n"}"#),
        ("shapes", r#"{}"#),
        ("top", r#"{"op":"Rename","name":"a"}"#),
        ("top", r#"{"op":"Archive"}"#),
    ];
    for (action, args) in accepted {
        assert!(
            matches!(w.call(action, args, 0), Step::Approval(_)),
            "{args} was refused"
        );
    }
}

/// An action whose hook calls back into the executor.
fn reentering(exec: &Executor, hook: &str, tried: Rc<RefCell<Vec<String>>>) -> Action<Named> {
    let exec = exec.clone();
    let runs = Rc::clone(&tried);
    let base = Action::<Named>::new("nosy", "calls back")
        .kind(Kind::Write)
        .confirm(Confirm::Ask);
    let poke = move || {
        let got = exec.submit(countersign::Call::new("x", "nosy", "{}"), at(0));
        tried.borrow_mut().push(format!("{:?}", got.map(|_| ())));
        let _ = exec.approvals();
    };
    match hook {
        "available" => base.available(move || {
            poke();
            true
        }),
        "classify" => base.classify(move |_| {
            poke();
            countersign::Verdict::Allow
        }),
        "consequence" => base.consequence(move |_| {
            poke();
            "x".into()
        }),
        _ => base.verify(move |_, _| {
            poke();
            Ok(())
        }),
    }
    .run(move |_| {
        runs.borrow_mut().push("ran".into());
        async { Ok::<_, String>(()) }
    })
}

#[test]
fn a_hook_that_calls_back_into_the_executor_refuses_its_call_instead_of_panicking() {
    for (hook, expected) in [
        ("available", "UNAVAILABLE"),
        ("classify", "UNAVAILABLE"),
        ("consequence", "UNAVAILABLE"),
    ] {
        let w = World::new();
        let tried = Rc::new(RefCell::new(Vec::new()));
        let _reg = w
            .exec
            .register(reentering(&w.exec, hook, Rc::clone(&tried)))
            .unwrap();
        let Step::Settled(s) = w.call("nosy", r#"{"name":"a"}"#, 0) else {
            panic!("{hook}: the call went on")
        };
        assert_eq!(code(&s), expected, "{hook}");
        assert_eq!(
            s.outcome.to_model_json()["error"]["reason"],
            "hook_reentered"
        );
        assert_eq!(tried.borrow()[0], format!("{:?}", Err::<(), _>(Reentered)));
        assert!(
            !tried.borrow().contains(&"ran".to_owned()),
            "{hook}: run was reached"
        );
        assert_eq!(w.terminal(s.call).len(), 1);
        assert_eq!(w.exec.live_calls(), 0, "the inner submit made no call");
    }
    // In verify (after the run): the check cannot be trusted, so it is not a receipt.
    let w = World::new();
    let tried = Rc::new(RefCell::new(Vec::new()));
    let _reg = w
        .exec
        .register(reentering(&w.exec, "verify", Rc::clone(&tried)))
        .unwrap();
    let card = w.card("nosy", r#"{"name":"a"}"#, 0);
    let s = drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        2,
    )
    .unwrap();
    assert_eq!(code(&s), "VERIFY_FAILED");
    // Reading the mode is the one thing a hook may do.
    let w = World::new();
    let exec = w.exec.clone();
    let _reg = w
        .exec
        .register(
            Action::<Named>::new("calm", "reads the mode")
                .available(move || exec.mode() == Mode::Default)
                .run(|_| async { Ok::<_, String>(()) }),
        )
        .unwrap();
    assert_eq!(
        code(&drive(&w.exec, w.call("calm", r#"{"name":"a"}"#, 0), 1).unwrap()),
        "OK"
    );
}

#[test]
fn refusals_are_worded_and_audited_for_their_own_reason() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.add(
        w.action("picky", Kind::Write, Confirm::Unset)
            .classify(|_| countersign::Verdict::Deny("never".into())),
    );
    w.exec.set_mode(Mode::Away).unwrap();
    let away = drive(&w.exec, w.call("save", r#"{"name":"a"}"#, 0), 1).unwrap();
    let denied = drive(&w.exec, w.call("picky", r#"{"name":"a"}"#, 0), 1).unwrap();
    let json = away.outcome.to_model_json();
    assert_eq!(json["error"]["retry"], "when_person_returns");
    assert_eq!(
        denied.outcome.to_model_json()["error"]["retry"],
        "do_not_retry"
    );
    let away_record = &w.terminal(away.call)[0];
    let denied_record = &w.terminal(denied.call)[0];
    assert_eq!(away_record.reason, Reason::ModeRefused { mode: Mode::Away });
    assert_eq!(denied_record.reason, Reason::ClassifierDenied);
    assert_ne!(away_record.summary, denied_record.summary);
    assert!(
        !away_record.summary.contains("classif"),
        "{}",
        away_record.summary
    );
    // A hostile id comes back escaped, not merely truncated.
    let s = match w
        .exec
        .submit(
            countersign::Call::new("t", "a\nb\u{0}c\u{202e}", "{}"),
            at(2),
        )
        .unwrap()
    {
        Step::Settled(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(
        !s.action.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{:?}",
        s.action
    );
    assert_eq!(&*s.action, "a\\nb\\u{0}c\\u{202e}");
}

#[test]
fn the_grant_that_allowed_a_call_is_in_its_record() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1);
    let grant = w.exec.grants()[0].id;
    let granted = w
        .audit
        .for_call(card.call)
        .into_iter()
        .find(|r| r.event == AuditEvent::Granted)
        .unwrap();
    assert_eq!(granted.grant, Some(grant));
    let s = drive(&w.exec, w.call("save", r#"{"name":"b"}"#, 2), 2).unwrap();
    let allowed = &w.audit.for_call(s.call)[0];
    assert_eq!(allowed.reason, Reason::Grant { grant });
    assert_eq!(allowed.grant, Some(grant));
}

/// Found by `properties.rs`: a card drawn under one policy file and redrawn under another
/// carries the new level, and the trail records the level the person countersigned.
#[test]
fn a_card_redrawn_under_a_new_policy_file_is_recorded_at_the_level_it_showed() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.exec
        .load_policy(r#"{"roles":{"admin":{"overrides":{"save":{"confirm":"always"}}}}}"#)
        .unwrap();
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    assert_eq!(card.policy, countersign::ApprovalPolicy::AskAlways);
    w.exec
        .load_policy(r#"{"roles":{"admin":{"overrides":{}}}}"#)
        .unwrap();
    let Step::Approval(fresh) = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(1))
        .unwrap()
    else {
        panic!("a card whose level changed must be shown again")
    };
    assert!(fresh.changed.contains(&CardChange::Level));
    assert_eq!(fresh.policy, countersign::ApprovalPolicy::Ask);
    let step = w
        .exec
        .approve(fresh.countersign(Gesture::AllowOnce), at(2))
        .unwrap();
    let settled = drive(&w.exec, step, 3).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), vec!["save:a".to_string()]);
    let records = w.audit.for_call(card.call);
    let approved = records
        .iter()
        .find(|r| r.event == AuditEvent::Approved)
        .unwrap();
    assert_eq!(approved.policy, Some(countersign::ApprovalPolicy::Ask));
    let redrawn = records
        .iter()
        .find(|r| r.event == AuditEvent::Asked && matches!(r.reason, Reason::StaleCard { .. }))
        .unwrap();
    assert_eq!(redrawn.policy, Some(countersign::ApprovalPolicy::Ask));
}
