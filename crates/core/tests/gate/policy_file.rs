//! The policy file sets each role's scopes and levels, is read strictly, and fails closed.

use countersign::{
    action::NoParams, policy::ApprovalPolicy, policy::PolicyFile, policy::MAX_POLICY_BYTES, Action,
    Confirm, Expect, Gesture, Handoff, Kind, Mode, Reason, Session, Step,
};
use serde_json::json;

use crate::common::{at, code, drive, World};

const POLICY: &str = r#"{
  "roles": {
    "viewer": { "scopes": ["workspace.read"],
                "overrides": { "save": { "confirm": "always" }, "publish": { "confirm": "off" } } },
    "editor": { "scopes": ["workspace.read", "workspace.write"],
                "overrides": { "save": { "confirm": "always" } } },
    "admin":  { "scopes": ["workspace.read", "workspace.write"],
                "overrides": { "save": { "confirm": "off" }, "publish": { "kind": "read", "confirm": "off" } } }
  }
}"#;

fn world(role: &str) -> World {
    // The session claims every scope; with a policy file only the file's count.
    let mut w = World::with_session(Session::new(role, ["workspace.read", "workspace.write"]));
    w.add(
        w.action("save", Kind::Write, Confirm::Ask)
            .scope("workspace.write"),
    );
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    w.regs.push(
        w.exec
            .register(
                Action::<NoParams>::new("publish", "p")
                    .kind(Kind::Danger)
                    .handoff(Handoff::new("r", Expect::new("e", || false)).step("s", None)),
            )
            .unwrap(),
    );
    w
}

#[test]
fn the_same_action_is_asked_every_time_for_one_role_and_not_at_all_for_another() {
    let editor = world("editor");
    editor.exec.load_policy(POLICY).unwrap();
    let Step::Approval(card) = editor.call("save", r#"{"name":"a"}"#, 0) else {
        panic!("editor was not asked")
    };
    assert_eq!(card.policy, ApprovalPolicy::AskAlways);
    assert!(!card.offers_session_grant);

    let admin = world("admin");
    admin.exec.load_policy(POLICY).unwrap();
    let s = drive(&admin.exec, admin.call("save", r#"{"name":"a"}"#, 0), 1).unwrap();
    assert_eq!(code(&s), "OK");
    let record = &admin.terminal(s.call)[0];
    assert_eq!(
        record.policy,
        Some(ApprovalPolicy::None),
        "the audit records the effective policy"
    );
    assert_eq!(
        record.confirm,
        Some(Confirm::Ask),
        "and the declaration's confirm"
    );
    let tool = admin
        .exec
        .projection()
        .into_iter()
        .find(|t| t.name == "save")
        .unwrap();
    assert_eq!(tool.annotations.approval, ApprovalPolicy::None);
}

#[test]
fn scopes_come_from_the_file_not_from_what_the_session_claims() {
    let viewer = world("viewer");
    viewer.exec.load_policy(POLICY).unwrap();
    let Step::Settled(s) = viewer.call("save", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    assert_eq!(code(&s), "SCOPE_MISSING");
    assert!(s.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`workspace.write`"));
    assert!(viewer.exec.projection().iter().all(|t| t.name != "save"));
    // A role the file does not name is refused: the file is not in force for it, and
    // nothing but reversals runs (break 6).
    let stranger = world("stranger");
    let e = stranger.exec.load_policy(POLICY).unwrap_err();
    assert!(e.message.contains("`stranger` is not in the file"), "{e}");
    let Step::Settled(s) = stranger.call("note", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    assert_eq!(code(&s), "POLICY_DENIED");
    assert_eq!(
        s.outcome.to_model_json()["error"]["reason"],
        "policy_file_broken"
    );
    assert!(viewer.runs().is_empty() && stranger.runs().is_empty());
}

#[test]
fn no_file_can_turn_a_handoff_into_an_automatic_run() {
    for role in ["viewer", "admin"] {
        let w = world(role);
        w.exec.load_policy(POLICY).unwrap();
        assert!(
            matches!(w.call("publish", "{}", 0), Step::Handoff(_)),
            "{role}"
        );
    }
}

#[test]
fn a_malformed_file_is_refused_with_its_line_and_then_nothing_runs() {
    let w = world("admin");
    let broken = "{\n  \"roles\": {\n    \"admin\": { \"scopes\": [\"workspace.write\"], \"overides\": {} }\n  }\n}";
    let e = w.exec.load_policy(broken).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.message.contains("unknown field `overides`"), "{e}");
    // Fail closed: even an action that needs no approval is refused, and the model sees nothing.
    for action in ["note", "save"] {
        let Step::Settled(s) = w.call(action, r#"{"name":"a"}"#, 0) else {
            panic!("{action} was not refused")
        };
        assert_eq!(code(&s), "POLICY_DENIED", "{action}");
        let message = s.outcome.to_model_json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            message.contains("policy file is invalid")
                && message.contains("line 3")
                && message.contains("overides"),
            "{message}"
        );
        let ends = w.terminal(s.call);
        assert_eq!(ends.len(), 1);
        assert_eq!(ends[0].reason, Reason::PolicyFileBroken { line: 3 });
    }
    assert!(w.exec.projection().is_empty());
    assert!(w.runs().is_empty());
    // A valid file restores service.
    w.exec.load_policy(POLICY).unwrap();
    assert_eq!(
        code(&drive(&w.exec, w.call("note", r#"{"name":"a"}"#, 1), 2).unwrap()),
        "OK"
    );
}

#[test]
fn a_policy_file_that_spells_a_key_twice_with_escapes_is_refused() {
    for text in [
        r#"{"roles":{"viewer":{"scopes":[]},"vi\u0065wer":{"scopes":["workspace.write"]}}}"#,
        r#"{"roles":{"admin":{"overrides":{"save":{"confirm":"always"},"s\u0061ve":{"confirm":"off"}}}}}"#,
        r#"{"roles":{"admin":{}},"default_role":"admin","default_role":"admin"}"#,
        r#"{"roles":{"admin":{}},"roles":{"admin":{"scopes":["x"]}}}"#,
        r#"{"roles":{"admin":{"scopes":[],"scopes":["x"]}}}"#,
        r#"{"roles":{"admin":{"overrides":{"save":{"confirm":"always","confirm":"off"}}}}}"#,
        r#"{"roles":{"admin":{"overrides":{"save":{"confirm":"always","c\u006fnfirm":"off"}}}}}"#,
        r#"{"roles":{"admin":{}},"default_r\u006fle":"x"}"#,
    ] {
        assert!(PolicyFile::from_json(text).is_err(), "{text}");
    }
}

#[test]
fn a_broken_file_stops_waiting_cards_grants_and_restores_of_non_reversals() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.add(
        w.action("undo", Kind::Write, Confirm::Ask)
            .reversal()
            .rewrite(|p| {
                if p.name == "escape" {
                    countersign::action::Rewrite::Action {
                        action: "save".into(),
                        arguments: json!({"name": "escaped"}),
                        why: "w".into(),
                    }
                } else {
                    countersign::action::Rewrite::Keep
                }
            }),
    );
    w.exec
        .load_policy(r#"{"roles":{"admin":{"scopes":["workspace.write"]}}}"#)
        .unwrap();
    let first = w.card("save", r#"{"name":"a"}"#, 0);
    let waiting = w.card("save", r#"{"name":"b"}"#, 0);
    w.allow(&first, Gesture::AllowForSession, 1);
    let basis = w.exec.grants()[0].basis.clone();
    assert!(w
        .exec
        .load_policy(r#"{"roles":{"admin":{"scopes":["workspace.write"]}},}"#)
        .is_err());
    let Step::Settled(s) = w
        .exec
        .approve(waiting.countersign(Gesture::AllowOnce), at(2))
        .unwrap()
    else {
        panic!("a waiting non-reversal went on under a broken file")
    };
    assert_eq!(s.outcome.reason(), Reason::PolicyFileBroken { line: 1 });
    let Step::Settled(s) = w.call("save", r#"{"name":"c"}"#, 3) else {
        panic!("a grant covered a call under a broken file")
    };
    assert_eq!(s.outcome.reason().rule(), "policy_file_broken");
    w.exec.revoke(w.exec.grants()[0].id).unwrap();
    assert!(w.exec.restore_grant(&basis, at(4)).is_err());
    // A reversal rewritten into a non-reversal is stopped like one.
    let Step::Settled(s) = w.call("undo", r#"{"name":"escape"}"#, 5) else {
        panic!("the rewrite escaped")
    };
    assert_eq!(s.outcome.reason().rule(), "policy_file_broken");
    let names: Vec<String> = w.exec.projection().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["undo"]);
    assert_eq!(w.runs(), ["save:a"]);
    // The reversal itself still asks (the last good file keeps `Ask`); a mode never lowers it
    // below what a person could do.
    w.exec.set_mode(Mode::Away).unwrap();
    let s = drive(&w.exec, w.call("undo", r#"{"name":"u"}"#, 6), 7).unwrap();
    assert_eq!(s.outcome.reason(), Reason::ModeRefused { mode: Mode::Away });
}

const EXAMPLE: &str = r#"{
  "roles": {
    "viewer": { "scopes": ["workspace.read"],
                "overrides": { "save_workspace_name": { "confirm": "always" } } },
    "admin":  { "scopes": ["workspace.read", "workspace.write"],
                "overrides": { "save_workspace_name": { "confirm": "off" } } }
  }
}"#;

#[test]
fn the_same_action_gets_a_different_level_per_role() {
    let file = PolicyFile::from_json(EXAMPLE).unwrap();
    let resolve = |role| {
        file.level(role, "save_workspace_name", Kind::Write, Confirm::Ask)
            .0
    };
    assert_eq!(resolve("viewer"), ApprovalPolicy::AskAlways);
    assert_eq!(resolve("admin"), ApprovalPolicy::None);
    assert_eq!(
        resolve("guest"),
        ApprovalPolicy::Ask,
        "no override: the declaration"
    );
    let scopes = |role| file.role_for(role).map(|(_, r)| r.scopes.clone());
    assert!(scopes("viewer").unwrap().contains("workspace.read"));
    assert_eq!(scopes("guest"), None);
}

#[test]
fn an_override_names_its_role_and_line_and_the_default_role_covers_others() {
    let file = PolicyFile::from_json(EXAMPLE).unwrap();
    let (policy, by) = file.level("admin", "save_workspace_name", Kind::Write, Confirm::Ask);
    assert_eq!(policy, ApprovalPolicy::None);
    assert_eq!(by, Some(("admin".to_owned(), 6)));
    assert_eq!(file.role_for("Admin"), None, "roles are exact");
    let text = r#"{"roles": {"viewer": {"scopes": ["r"]}}, "default_role": "viewer"}"#;
    let file = PolicyFile::from_json(text).unwrap();
    assert_eq!(file.role_for("Admin").map(|(name, _)| name), Some("viewer"));
    assert!(file.role_for("Admin").unwrap().1.scopes.contains("r"));
}

#[test]
fn a_malformed_file_is_refused_naming_the_line() {
    let cases = [
        ("{\n  \"roles\": {\n    \"viewer\": { \"scope\": [] }\n  }\n}", 3, "unknown field `scope`"),
        ("{\n  \"roles\": {\n    \"viewer\": { \"overrides\": { \"x\": { \"confirm\": \"maybe\" } } }\n  }\n}", 3, "unknown variant `maybe`"),
        ("{\n  \"roles\": [\n", 2, "invalid type"),
        ("{\"roles\": {\"a\": {}},}", 1, "trailing comma"),
    ];
    for (text, line, needle) in cases {
        let e = PolicyFile::from_json(text).unwrap_err();
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.to_string().contains(needle), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("policy file, line {line}")),
            "{e}"
        );
    }
    assert!(PolicyFile::from_json(r#"{"roles":{" ":{}}}"#).is_err());
    let twice = [
        (
            "{\n  \"roles\": {\n    \"viewer\": {},\n    \"viewer\": {}\n  }\n}",
            4,
            "`viewer` is given twice",
        ),
        (
            "{\"roles\": {\"a\": {\"overrides\": {\n\"x\": {},\n\"x\": {\"confirm\": \"off\"}}}}}",
            3,
            "`x` is given twice",
        ),
        (
            "{\"roles\": {\"a\": {}},\n \"default_role\": \"b\"}",
            2,
            "not a role of the file",
        ),
    ];
    for (text, line, needle) in twice {
        let e = PolicyFile::from_json(text).unwrap_err();
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.to_string().contains(needle), "{e}");
    }
    assert!(PolicyFile::from_json(&" ".repeat(MAX_POLICY_BYTES + 1)).is_err());
}
