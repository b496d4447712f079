//! What the card shows is what runs: one parse of the arguments, so the card, the
//! ticket, the audit digest and `run` see the same arguments, however they are spelt.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::ticket::TicketError;
use countersign::{audit::ArgsDigest, Action, Config, Confirm, Gesture, Kind, Session, Step};

use crate::common::{at, code, drive, World};

#[allow(dead_code, unreachable_pub, missing_docs)] // Only deserialised.
mod shapes {
    use schemars::JsonSchema;
    use serde::Deserialize;

    /// Which rows a purge removes: some, or (with no field at all) every one.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Rows {
        Some { rows: Vec<u32> },
        All {},
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Purge {
        pub target: Rows,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Amount {
        pub amount: f64,
        pub count: u64,
        pub note: String,
    }
}

/// Broke: the schema check chooses an untagged alternative by type, `const` and
/// `required` only, and ignores `minimum`/`maximum`/`format`; serde's own choice also
/// fails on a number out of the field's range. So `{"rows":[3, 4294967296]}` passes the
/// check judged against `Some { rows }` (every field declared), while serde cannot read
/// 4294967296 as a `u32` and falls through to `All {}`, dropping `rows`. The card shows
/// "rows 3 and 4294967296" as "the exact arguments that will run"; the ticket binds
/// them; `run` purges every row.
/// Fixed: see the INVARIANT where the check is made.
#[test]
fn break_the_card_shows_rows_the_untagged_params_dropped_and_run_purges_all() {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::<String>::new()));
    let log = Rc::clone(&ran);
    let _purge = w
        .exec
        .register(
            Action::<shapes::Purge>::new("purge", "Purge rows of the table.")
                .kind(Kind::Danger)
                .run(move |p: shapes::Purge| {
                    log.borrow_mut().push(format!("{:?}", p.target));
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    // Sanity: in-range rows are read as rows.
    let card = w.card("purge", r#"{"target":{"rows":[3]}}"#, 0);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        1,
    );
    assert_eq!(*ran.borrow(), ["Some { rows: [3] }"]);
    ran.borrow_mut().clear();

    match w.call("purge", r#"{"target":{"rows":[3,4294967296]}}"#, 2) {
        Step::Settled(s) => {
            assert_eq!(code(&s), "INVALID_ARGS");
            assert_eq!(w.terminal(s.call).len(), 1);
        }
        Step::Approval(card) => {
            assert_eq!(
                card.arguments["target"]["rows"],
                serde_json::json!([3, 4294967296u64]),
                "the card shows two rows"
            );
            let settled = drive(
                &w.exec,
                w.exec
                    .approve(card.countersign(Gesture::AllowOnce), at(3))
                    .unwrap(),
                3,
            )
            .unwrap();
            assert_eq!(w.terminal(settled.call).len(), 1);
            assert!(
                ran.borrow().iter().all(|r| r.starts_with("Some")),
                "the person approved a card showing rows [3, 4294967296]; what ran was {:?}",
                ran.borrow()
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Duplicate keys: serde_json keeps the last; the card, the ticket's digest, the audit
/// digest, the consequence and `run` must all be of that one value.
#[test]
fn a_key_given_twice_binds_one_value_on_card_ticket_audit_and_run() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"shown","name":"hidden"}"#, 0);
    let shown = card.arguments["name"].as_str().unwrap().to_owned();
    assert_eq!(
        card.consequence.as_deref(),
        Some(format!("set the name to `{shown}`").as_str())
    );
    assert_eq!(card.args_sha256, ArgsDigest::of_value(&card.arguments));
    let key = Config::new("test", Session::new("admin", ["workspace.write"]), [42; 32]).audit_key;
    for r in w.audit.for_call(card.call) {
        assert_eq!(r.args_digest, key.digest(&card.arguments).to_hex());
    }
    let settled = w.allow(&card, Gesture::AllowOnce, 1).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), [format!("rename:{shown}")]);
    for r in w.audit.for_call(card.call) {
        assert_eq!(r.args_digest, key.digest(&card.arguments).to_hex());
    }
    assert_eq!(w.terminal(card.call).len(), 1);
}

/// A ticket minted for one spelling of the arguments approves only the value the card
/// showed; another spelling of the same value is the same call, a different value is
/// not; and a reload (which stores the parsed value as text) binds the same digest.
#[test]
fn a_reload_binds_the_same_arguments_whatever_their_spelling() {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::<String>::new()));
    let log = Rc::clone(&ran);
    let _a = w
        .exec
        .register(
            Action::<shapes::Amount>::new("pay", "Pay.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("pay {} x{} ({})", p.amount, p.count, p.note))
                .run(move |p: shapes::Amount| {
                    log.borrow_mut()
                        .push(format!("{}|{}|{}", p.amount, p.count, p.note));
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    let raw = r#"{ "note": "caf\u00e9 \ud83d\ude00 \/ \u2028", "count": 18446744073709551615,
                  "amount": 1e2 }"#;
    let first = w.card("pay", raw, 0);
    let stored = w.exec.waiting(at(1));
    assert_eq!(stored.len(), 1);
    // The page reloads: a new executor, the same declaration, the stored call.
    let w2 = World::new();
    let ran2 = Rc::new(RefCell::new(Vec::<String>::new()));
    let log2 = Rc::clone(&ran2);
    let _b = w2
        .exec
        .register(
            Action::<shapes::Amount>::new("pay", "Pay.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("pay {} x{} ({})", p.amount, p.count, p.note))
                .run(move |p: shapes::Amount| {
                    log2.borrow_mut()
                        .push(format!("{}|{}|{}", p.amount, p.count, p.note));
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    let Step::Approval(again) = w2.exec.restore_pending(stored[0].1.clone(), at(2)).unwrap() else {
        panic!("a restored call is asked again");
    };
    assert_eq!(again.arguments, first.arguments);
    assert_eq!(again.args_sha256, first.args_sha256);
    assert_eq!(again.consequence, first.consequence);
    let settled = w2.allow(&again, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(
        *ran2.borrow(),
        ["100|18446744073709551615|café 😀 / \u{2028}"]
    );
    assert!(ran.borrow().is_empty());
    assert_eq!(w2.terminal(again.call).len(), 1);
}

/// An edit's value, not the model's, is what the new card binds and what runs; a ticket
/// of the card the model's arguments drew approves nothing.
#[test]
fn a_ticket_for_the_models_arguments_does_not_approve_the_persons_edit() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"model"}"#, 0);
    let Step::Approval(edited) = w
        .exec
        .edit(card.call, r#"{"name":"person"}"#, at(1))
        .unwrap()
    else {
        panic!("an edit is asked again")
    };
    let stale = w.exec.approve(card.countersign(Gesture::AllowOnce), at(2));
    assert!(matches!(stale, Err(TicketError::NotPending)), "{stale:?}");
    assert_eq!(edited.args_sha256, ArgsDigest::of_value(&edited.arguments));
    // The edited card's ticket cannot be re-pointed at the original call.
    let settled = w.allow(&edited, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["rename:person"]);
    assert_eq!(w.terminal(card.call).len(), 1, "superseded once");
    assert_eq!(w.terminal(edited.call).len(), 1);
}
