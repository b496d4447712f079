//! A session grant covers only the rule the person approved, in the registration it was made in.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::{
    audit::AuditEvent, audit::Decider, ticket::GrantBasis, ticket::GrantRule, ticket::Matcher,
    ticket::RestoreError, ticket::TicketError, Action, Confirm, Gesture, Kind, Reason, Step,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::common::{at, drive, for_call, stateful, World};

#[derive(Clone, Deserialize, JsonSchema)]
struct WriteFile {
    /// The file's path.
    path: String,
}

fn folder(path: &str) -> String {
    path.rfind('/')
        .map_or_else(String::new, |i| path[..=i].to_owned())
}

fn world() -> (World, Rc<RefCell<Vec<String>>>) {
    let mut w = World::new();
    let written = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&written);
    w.regs.push(
        w.exec
            .register(
                Action::<WriteFile>::new("write_file", "Write a file.")
                    .kind(Kind::Write)
                    .confirm(Confirm::Ask)
                    .remember(|p| {
                        let dir = folder(&p.path);
                        if dir.is_empty() {
                            GrantRule::exact(
                                format!("writing `{}`", p.path),
                                "/path",
                                p.path.clone(),
                            )
                        } else {
                            GrantRule::prefix(format!("writing files under `{dir}`"), "/path", dir)
                        }
                    })
                    .run(move |p: WriteFile| {
                        let log = Rc::clone(&log);
                        async move {
                            log.borrow_mut().push(p.path);
                            Ok::<_, String>(())
                        }
                    }),
            )
            .unwrap(),
    );
    (w, written)
}

fn write(w: &World, path: &str, at_ms: u64) -> Step {
    w.call("write_file", &format!(r#"{{"path":"{path}"}}"#), at_ms)
}

#[test]
fn a_grant_covers_the_approved_folder_and_asks_for_anything_else() {
    let (w, written) = world();
    let Step::Approval(card) = write(&w, "drafts/a.md", 0) else {
        panic!()
    };
    let rule = card.grant_rule.clone().unwrap();
    assert_eq!(
        rule.description.as_deref(),
        Some("writing files under `drafts/`")
    );
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    assert_eq!(
        w.exec.grants()[0].rule.matcher,
        Matcher::Prefix {
            pointer: "/path".into(),
            prefix: "drafts/".into()
        }
    );

    let step = write(&w, "drafts/b.md", 3);
    let Step::Perform(_) = &step else {
        panic!("same folder was asked again")
    };
    let settled = drive(&w.exec, step, 4).unwrap();
    assert_eq!(
        for_call(&w.audit, settled.call)[0].decided_by,
        Decider::SessionGrant
    );

    for other in [
        "config.json",
        "secrets/.env",
        "drafts/../.env",
        "draftsX/a.md",
    ] {
        assert!(
            matches!(write(&w, other, 5), Step::Approval(_)),
            "{other} was not asked"
        );
    }
    assert_eq!(written.borrow().as_slice(), ["drafts/a.md", "drafts/b.md"]);
}

#[test]
fn without_a_rule_the_grant_covers_every_call_of_the_action() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    assert_eq!(card.grant_rule.as_ref().unwrap().matcher, Matcher::Any);
    // The default rule carries no words of its own: the dock words it in its language.
    assert_eq!(card.grant_rule.as_ref().unwrap().description, None);
    assert_eq!(card.grant_rule.as_ref().unwrap().matcher, Matcher::Any);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    assert!(matches!(
        w.call("save", r#"{"name":"anything"}"#, 3),
        Step::Perform(_)
    ));
}

#[test]
fn ask_always_cards_offer_no_rule() {
    let mut w = World::new();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    let card = w.card("archive", r#"{"name":"a"}"#, 0);
    assert!(card.grant_rule.is_none());
}

fn basis(w: &World, action: &str, role: &str, arguments: serde_json::Value) -> GrantBasis {
    GrantBasis {
        action: action.into(),
        registration: w.exec.registration(action).unwrap_or_default(),
        role: role.into(),
        arguments,
        caller: countersign::Caller::Assistant,
    }
}

#[test]
fn a_stored_grant_is_restored_only_where_a_fresh_one_could_be_made() {
    let (mut w, written) = world();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    w.add(
        w.action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|_| "sure?".into()),
    );
    let stored = basis(&w, "write_file", "admin", json!({"path": "drafts/a.md"}));
    w.exec.restore_grant(&stored, at(0)).unwrap();
    // The rule is derived again by the action's own `remember`, never read from storage.
    assert_eq!(
        w.exec.grants()[0].rule.matcher,
        Matcher::Prefix {
            pointer: "/path".into(),
            prefix: "drafts/".into()
        }
    );
    assert!(
        matches!(write(&w, "drafts/c.md", 1), Step::Perform(_)),
        "the restored grant covers drafts/"
    );
    assert!(
        matches!(write(&w, "notes/c.md", 1), Step::Approval(_)),
        "and nothing else"
    );
    let refused = |b: GrantBasis| w.exec.restore_grant(&b, at(0)).unwrap_err();
    assert_eq!(
        refused(basis(&w, "archive", "admin", json!({"name": "a"}))),
        RestoreError::NotOffered("archive".into())
    );
    assert_eq!(
        refused(basis(&w, "twice", "admin", json!({"name": "a"}))),
        RestoreError::NotOffered("twice".into())
    );
    assert_eq!(
        refused(basis(&w, "invented", "admin", json!({}))),
        RestoreError::UnknownAction("invented".into())
    );
    assert_eq!(
        refused(basis(&w, "write_file", "viewer", json!({"path": "a"}))),
        RestoreError::OtherRole
    );
    assert_eq!(
        refused(basis(&w, "write_file", "admin", json!({"path": 7}))),
        RestoreError::InvalidArguments("write_file".into())
    );
    let mut changed = basis(&w, "write_file", "admin", json!({"path": "a"}));
    changed.registration = "0".repeat(64);
    assert_eq!(
        refused(changed),
        RestoreError::RegistrationChanged("write_file".into())
    );
    assert_eq!(w.exec.grants().len(), 1);
    assert!(
        written.borrow().is_empty(),
        "a step that was never driven ran"
    );
}

#[test]
fn storage_cannot_hand_the_executor_a_matcher() {
    // Break 5: a stored "match anything" rule under a harmless description trashed
    // config.json. A basis has no rule to forge, and extra fields are refused.
    let forged = r#"{"action":"write_file","registration":"x","role":"admin","arguments":{"path":"drafts/a"},"rule":{"description":"under drafts/","matcher":{"match":"any"}}}"#;
    assert!(serde_json::from_str::<GrantBasis>(forged).is_err());
}

/// A restored grant is on this session's trail before any call runs under it: one
/// `restored` record naming the grant, the action and the stored arguments' keyed
/// digest, so the records that cite the grant point at a record of where it came from.
/// A refused restore writes nothing.
#[test]
fn a_restored_grant_is_on_the_trail_before_a_call_cites_it() {
    use countersign::{audit::AuditEvent, Reason};
    let (w, _) = world();
    let stored = basis(&w, "write_file", "admin", json!({"path": "drafts/a.md"}));
    let grant = w.exec.restore_grant(&stored, at(0)).unwrap();
    let refused = basis(&w, "write_file", "viewer", json!({"path": "a"}));
    assert!(w.exec.restore_grant(&refused, at(0)).is_err());
    drive(&w.exec, write(&w, "drafts/a.md", 1), 2);
    let records = w.audit.records();
    let restored: Vec<_> = records
        .iter()
        .filter(|r| r.event == AuditEvent::Restored)
        .collect();
    assert_eq!(restored.len(), 1, "one record per grant restored");
    let record = restored[0];
    assert_eq!(record.reason, Reason::Granted { grant });
    assert_eq!(
        (record.decided_by, &*record.action),
        (Decider::Host, "write_file")
    );
    let allowed = records
        .iter()
        .find(|r| r.event == AuditEvent::Allowed)
        .expect("the call ran under the grant");
    assert_eq!(allowed.reason.grant(), Some(grant));
    assert!(record.seq < allowed.seq, "the grant is on the trail first");
    assert_eq!(
        record.args_digest, allowed.args_digest,
        "the record names the arguments the grant was made for"
    );
}

#[test]
fn a_grant_never_covers_a_reregistered_action_even_with_the_same_declaration() {
    let w = World::new();
    let reg = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Ask))
        .unwrap();
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    // A second card waits while the registration is swapped.
    let waiting = w.card("save", r#"{"name":"b"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1);
    let basis = w.exec.grants()[0].basis.clone();
    let ticket = waiting.countersign(Gesture::AllowOnce);
    reg.unregister();
    let _again = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Ask))
        .unwrap();
    assert!(w.exec.grants().is_empty());
    assert_eq!(
        w.exec.approve(ticket, at(2)).unwrap_err(),
        TicketError::NotPending
    );
    assert!(matches!(
        w.call("save", r#"{"name":"c"}"#, 3),
        Step::Approval(_)
    ));
    assert_eq!(w.runs(), ["save:a"]);
    // Only the basis brings it back, derived again.
    w.exec.restore_grant(&basis, at(4)).unwrap();
    assert!(matches!(
        w.call("save", r#"{"name":"d"}"#, 5),
        Step::Perform(_)
    ));
}

/// AllowForSession where what "always allow" would remember changed under the card.
#[test]
fn a_grant_is_never_made_from_a_card_whose_rule_changed() {
    let mut w = World::new();
    let state = Rc::new(RefCell::new(String::from("A")));
    w.add(stateful(&w, "save", Confirm::Ask, &state));
    let card = w.card("save", r#"{"name":"x"}"#, 0);
    *state.borrow_mut() = "B".into();
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowForSession), at(1))
        .unwrap();
    assert!(matches!(step, Step::Approval(_)));
    assert!(w.exec.grants().is_empty());
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
fn the_grant_that_allowed_a_call_is_in_its_record() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1);
    let grant = w.exec.grants()[0].id;
    let granted = for_call(&w.audit, card.call)
        .into_iter()
        .find(|r| r.event == AuditEvent::Granted)
        .unwrap();
    assert_eq!(granted.grant, Some(grant));
    let s = drive(&w.exec, w.call("save", r#"{"name":"b"}"#, 2), 2).unwrap();
    let allowed = &for_call(&w.audit, s.call)[0];
    assert_eq!(allowed.reason, Reason::Grant { grant });
    assert_eq!(allowed.grant, Some(grant));
}

#[test]
fn matchers_cover_what_they_say_and_nothing_else() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    assert!(drafts.matches(&json!({"path": "drafts/a.md"})));
    assert!(!drafts.matches(&json!({"path": "config.json"})));
    assert!(
        !drafts.matches(&json!({"path": "drafts/../.env"})),
        "no climbing out"
    );
    assert!(!drafts.matches(&json!({"path": 7})));
    assert!(!drafts.matches(&json!({})));

    let md = Matcher::Glob {
        pointer: "/path".into(),
        pattern: "notes/*.md".into(),
    };
    assert!(md.matches(&json!({"path": "notes/a.md"})));
    assert!(
        !md.matches(&json!({"path": "notes/sub/a.md"})),
        "`*` stays in a segment"
    );
    assert!(!md.matches(&json!({"path": "notes/a.txt"})));
    let deep = Matcher::Glob {
        pointer: "/path".into(),
        pattern: "notes/**/*.md".into(),
    };
    assert!(deep.matches(&json!({"path": "notes/sub/a.md"})));

    let exact = Matcher::Exact {
        pointer: "/name".into(),
        value: json!("Apollo"),
    };
    assert!(exact.matches(&json!({"name": "Apollo", "x": 1})));
    assert!(!exact.matches(&json!({"name": "apollo"})));
    assert!(Matcher::Any.matches(&json!({})));
}

#[test]
fn matchers_round_trip_as_data_for_storage() {
    let rule = GrantRule::prefix("files under drafts/", "/path", "drafts/");
    let text = serde_json::to_string(&rule).unwrap();
    assert!(text.contains("\"match\":\"prefix\""));
    assert_eq!(serde_json::from_str::<GrantRule>(&text).unwrap(), rule);
}
