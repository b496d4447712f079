//! Flat arguments (strings, booleans and null only) are read, checked and hashed
//! without a JSON value; any other arguments are parsed to one first. The two readings
//! must not differ in anything a person, the model or an auditor sees: the same call
//! runs the same params, its card shows the same arguments and binds the same digest,
//! and its records carry the same keyed digest, the one the session's audit key gives
//! for the arguments. Each test sends the same arguments both ways: as they are (read
//! flat), and after a decoy copy of a field (a repeated key is never read flat; the
//! value keeps the last copy, as serde_json always has).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::{at, drive, World};
use countersign::{Action, Confirm, Gesture, Kind, Step};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
struct Note {
    /// The text.
    text: String,
    /// Pinned or not; unsaid, not.
    pinned: Option<bool>,
    /// Where it goes.
    folder: Folder,
}

#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Folder {
    Inbox,
    Archive,
}

/// A world with `note`, an action of `kind` that logs the params it runs with (a
/// `Write` asks; a `Read` runs unasked).
fn world(kind: Kind) -> (World, Rc<RefCell<Vec<Note>>>) {
    let confirm = if kind == Kind::Read {
        Confirm::Unset
    } else {
        Confirm::Ask
    };
    let mut w = World::new();
    let ran: Rc<RefCell<Vec<Note>>> = Rc::default();
    let log = Rc::clone(&ran);
    let action = Action::<Note>::new("note", "Write a note.")
        .kind(kind)
        .confirm(confirm)
        .remember(|p| {
            let folder = format!("{:?}", p.folder).to_lowercase();
            countersign::GrantRule::exact(format!("notes in {folder}"), "/folder", folder)
        })
        .run(move |p: Note| {
            log.borrow_mut().push(p);
            async { Ok::<_, String>(json!({})) }
        });
    w.regs.push(w.exec.register(action).unwrap());
    (w, ran)
}

/// The arguments as the model might send them (spaced, in no order: not their canonical
/// text), and the same arguments with a decoy first copy of `text` (read as a value,
/// never flat).
fn both_ways(args: &Value) -> [String; 2] {
    let field = |name: &str| format!(" \"{name}\" : {} ", args[name]);
    let fields = [field("pinned"), field("text"), field("folder")].join(",");
    [
        format!("{{{fields}}}"),
        format!(r#"{{"text":"decoy",{fields}}}"#),
    ]
}

fn the_audit_key_digest(args: &Value) -> String {
    countersign::Config::new("test", countersign::Session::default(), [42; 32])
        .audit_key
        .digest(args)
        .to_hex()
}

fn args(text: &str, pinned: Option<bool>, archive: bool) -> Value {
    let folder = if archive { "archive" } else { "inbox" };
    match pinned {
        Some(pinned) => json!({ "text": text, "pinned": pinned, "folder": folder }),
        None => json!({ "text": text, "pinned": null, "folder": folder }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_call_runs_and_is_recorded_the_same_read_flat_or_as_a_value(
        text in any::<String>(),
        pinned in any::<Option<bool>>(),
        archive in any::<bool>(),
    ) {
        let args = args(&text, pinned, archive);
        let expected = Note {
            text: text.clone(),
            pinned,
            folder: if archive { Folder::Archive } else { Folder::Inbox },
        };
        for raw in both_ways(&args) {
            let (w, ran) = world(Kind::Read);
            let Step::Perform(job) = w.call("note", &raw, 0) else {
                return Err(TestCaseError::fail(format!("{raw} did not run")));
            };
            let settled = drive(&w.exec, Step::Perform(job), 1).unwrap();
            prop_assert_eq!(common::code(&settled), "OK");
            prop_assert_eq!(&*ran.borrow(), std::slice::from_ref(&expected));
            let records = w.audit.records();
            prop_assert_eq!(records.len(), 2);
            for record in &records {
                prop_assert_eq!(record.args_digest.to_string(), the_audit_key_digest(&args));
            }
        }
    }

    #[test]
    fn a_card_shows_and_binds_the_same_arguments_read_flat_or_as_a_value(
        text in any::<String>(),
        pinned in any::<Option<bool>>(),
    ) {
        let args = args(&text, pinned, false);
        let expected = Note { text: text.clone(), pinned, folder: Folder::Inbox };
        let mut cards = Vec::new();
        for raw in both_ways(&args) {
            let (w, ran) = world(Kind::Write);
            let card = w.card("note", &raw, 0);
            prop_assert_eq!(&card.arguments, &args);
            prop_assert_eq!(card.args_sha256, countersign::ArgsDigest::of_value(&args));
            let settled = w.allow(&card, Gesture::AllowOnce, 1).unwrap();
            prop_assert_eq!(common::code(&settled), "OK");
            prop_assert_eq!(&*ran.borrow(), std::slice::from_ref(&expected));
            cards.push(card.args_sha256);
        }
        prop_assert_eq!(cards[0], cards[1]);
    }
}

#[test]
fn fields_the_model_was_not_shown_are_refused_read_flat_as_ever() {
    let (w, ran) = world(Kind::Read);
    for raw in [
        r#"{"text":"a","folder":"inbox","approved":true}"#,
        r#"{"text":"a","folder":"inbox","confirmed":"yes"}"#,
        r#"{"text":"a","folder":"inbox","":null}"#,
        r#"{"text":"a","folder":"drafts"}"#,
        r#"{"text":true,"folder":"inbox"}"#,
        r#"{"folder":"inbox"}"#,
    ] {
        let Step::Settled(settled) = w.call("note", raw, 0) else {
            panic!("{raw} was not refused");
        };
        assert_eq!(common::code(&settled), "INVALID_ARGS", "{raw}");
    }
    assert!(ran.borrow().is_empty(), "nothing ran");
    let ends = w.audit.records();
    assert_eq!(ends.len(), 6, "one record for each refusal");
}

#[test]
fn a_grant_covers_flat_arguments_by_their_value() {
    let (w, ran) = world(Kind::Write);
    let card = w.card("note", r#"{"text":"a","folder":"inbox"}"#, 0);
    let settled = w.allow(&card, Gesture::AllowForSession, 1).unwrap();
    assert_eq!(common::code(&settled), "OK");
    // The grant covers notes in the inbox, whichever way their arguments are read;
    // a note to the archive is asked again.
    for raw in both_ways(&args("b", Some(true), false)) {
        let Step::Perform(job) = w.call("note", &raw, 10) else {
            panic!("{raw} was asked again");
        };
        drive(&w.exec, Step::Perform(job), 20);
    }
    for raw in both_ways(&args("c", None, true)) {
        assert!(
            matches!(w.call("note", &raw, 30), Step::Approval(_)),
            "{raw}"
        );
    }
    assert_eq!(ran.borrow().len(), 3);
    assert_eq!(w.exec.approvals().len(), 2, "both archive notes wait");
    let _ = at(0);
}

#[test]
fn a_key_of_serde_jsons_own_is_recorded_as_the_value_it_parses_to() {
    // With serde_json's `raw_value` feature on anywhere in the build (the gateway turns
    // it on), this text parses to the object its string holds; without it, to an object
    // with one unknown field. Either way the card, grants, `run` and the audit read the
    // same value: the text is never read as flat fields.
    let raw = r#"{"$serde_json::private::RawValue":"{\"text\":\"a\",\"folder\":\"inbox\"}"}"#;
    let (w, ran) = world(Kind::Read);
    let settled = drive(&w.exec, w.call("note", raw, 0), 1).expect("it ends at once");
    let value: Value = serde_json::from_str(raw).unwrap();
    let records = w.audit.records();
    assert!(!records.is_empty());
    for record in &records {
        assert_eq!(
            record.args_digest.to_string(),
            the_audit_key_digest(&value),
            "the digest of what the value path reads"
        );
    }
    match common::code(&settled) {
        "OK" => assert_eq!(
            *ran.borrow(),
            [Note {
                text: "a".into(),
                pinned: None,
                folder: Folder::Inbox
            }]
        ),
        code => {
            assert_eq!(code, "INVALID_ARGS");
            assert!(ran.borrow().is_empty());
        }
    }
}
