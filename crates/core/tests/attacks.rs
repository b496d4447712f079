//! A fresh security review: one test per attack tried. Each asserts the promise, so a
//! failing test is a break.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::{at, code, drive, told, world_with_a_failing_sink, Named, World};
use countersign::{
    has_dot_segment, Action, Call, Confirm, Gesture, GrantRule, Kind, Matcher, Mode, PolicyFile,
    Reason, Registration, Step, TicketError, Verdict,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

// ---------------------------------------------------------------------------------
// Hooks that call back into the executor.
// ---------------------------------------------------------------------------------

/// A hook may only *read* the mode. Writing it is calling back into the executor, and
/// the call whose hook did it must be refused, not decided under the mode it just set.
#[test]
fn a_hook_that_switches_the_mode_is_refused_not_obeyed() {
    let mut obeyed = Vec::new();
    for hook in ["available", "classify", "validate"] {
        let w = World::new();
        let exec = w.exec.clone();
        let flip = move || {
            // From inside a hook this is refused (`Reentered`) and changes nothing.
            let _ = exec.set_mode(Mode::Bypass);
        };
        let base = w.action("sneaky", Kind::Danger, Confirm::Always);
        let action = match hook {
            "available" => base.available(move || {
                flip();
                true
            }),
            "classify" => base.classify(move |_| {
                flip();
                Verdict::Allow
            }),
            _ => base.validate(move |_| {
                flip();
                Ok(())
            }),
        };
        let _reg = w.exec.register(action).unwrap();
        let step = w.call("sneaky", r#"{"name":"x"}"#, 0);
        let ran = matches!(step, Step::Perform(_));
        drive(&w.exec, step, 1);
        if ran || !w.runs().is_empty() {
            obeyed.push(hook);
        }
    }
    assert!(
        obeyed.is_empty(),
        "an AskAlways action ran with no ticket after its own hook set Bypass, via {obeyed:?}"
    );
}

/// Dropping a Registration is a call back into the executor (it unregisters and revokes
/// grants). From inside a hook it is only posted; the call must not go on to run under
/// a grant of the registration that was just dropped.
#[test]
fn a_hook_that_drops_its_registration_does_not_run_under_the_dead_grant() {
    let w = World::new();
    let slot: Rc<RefCell<Option<Registration>>> = Rc::default();
    let armed = Rc::new(std::cell::Cell::new(false));
    let (s2, a2) = (Rc::clone(&slot), Rc::clone(&armed));
    let action = w.action("w", Kind::Write, Confirm::Ask).classify(move |_| {
        if a2.get() {
            drop(s2.borrow_mut().take());
        }
        Verdict::Allow
    });
    *slot.borrow_mut() = Some(w.exec.register(action).unwrap());
    let card = w.card("w", r#"{"name":"a"}"#, 0);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    assert_eq!(w.runs(), ["w:a"]);
    armed.set(true);
    let step = w.call("w", r#"{"name":"b"}"#, 3);
    let ran = matches!(step, Step::Perform(_));
    drive(&w.exec, step, 4);
    assert!(
        w.exec.grants().is_empty(),
        "the grant died with the registration"
    );
    assert!(
        !ran && w.runs() == ["w:a"],
        "a call ran under the grant of a registration its own hook had dropped: {:?}",
        w.runs()
    );
}

/// The remaining hooks: each re-entry is refused, nothing panics, one terminal record.
#[test]
fn every_hook_that_reenters_is_refused_without_panicking() {
    for hook in [
        "preview", "remember", "rewrite", "second", "run", "validate",
    ] {
        let w = World::new();
        let exec = w.exec.clone();
        let poke = move || {
            let _ = exec.submit(Call::new("x", "nosy", "{}"), at(0));
            let _ = exec.revoke(serde_json::from_value(json!(1)).unwrap());
        };
        let base = w.action("nosy", Kind::Write, Confirm::Ask);
        let action = match hook {
            "preview" => base.preview(move |_| {
                poke();
                countersign::Preview::diff("-a\n+b").count("rows", 1)
            }),
            "remember" => base.remember(move |_| {
                poke();
                GrantRule::any("all")
            }),
            "rewrite" => base.rewrite(move |_| {
                poke();
                countersign::Rewrite::Keep
            }),
            "second" => base.confirm_twice(move |_| {
                poke();
                "sure?".into()
            }),
            "validate" => base.validate(move |_| {
                poke();
                Ok(())
            }),
            _ => base, // run: replaced below
        };
        let action = if hook == "run" {
            let exec = w.exec.clone();
            let runs = Rc::clone(&w.runs);
            action.run(move |_p: Named| {
                let _ = exec.submit(Call::new("x", "nosy", "{}"), at(0));
                let runs = Rc::clone(&runs);
                async move {
                    runs.borrow_mut().push("ran".into());
                    Ok::<_, String>(())
                }
            })
        } else {
            action
        };
        let _reg = w.exec.register(action).unwrap();
        let mut step = w.call("nosy", r#"{"name":"a"}"#, 0);
        let mut round = 0;
        while let Step::Approval(card) = step {
            round += 1;
            assert!(round < 4, "{hook}: kept asking");
            step = w
                .exec
                .approve(card.countersign(Gesture::AllowOnce), at(round))
                .unwrap();
        }
        let s = drive(&w.exec, step, 9).unwrap();
        assert_eq!(
            s.outcome.reason(),
            Reason::HookReentered {
                hook: match hook {
                    "preview" => countersign::Hook::Preview,
                    "remember" => countersign::Hook::Remember,
                    "rewrite" => countersign::Hook::Rewrite,
                    "second" => countersign::Hook::SecondQuestion,
                    "validate" => countersign::Hook::Validate,
                    _ => countersign::Hook::Run,
                }
            },
            "{hook}"
        );
        assert_eq!(w.terminal(s.call).len(), 1, "{hook}");
        assert_eq!(w.exec.live_calls(), 0, "{hook}");
    }
}

// ---------------------------------------------------------------------------------
// Unknown fields: schema_check false negatives.
// ---------------------------------------------------------------------------------

#[allow(dead_code, unreachable_pub, missing_docs)] // The shapes are only deserialised.
mod shapes {
    use super::*;

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Loc {
        pub dir: String,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Rest {
        pub to: String,
    }

    /// A plain struct beside a flattened one (serde drops unknown keys there).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Flat {
        pub from: Loc,
        #[serde(flatten)]
        pub rest: Rest,
    }

    /// An internally tagged enum (serde buffers the object and drops unknown keys).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op")]
    pub enum Tagged {
        Copy { from: Loc, to: String },
    }

    /// An internally tagged enum with a variant alias the schema does not show.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op", rename_all = "snake_case")]
    pub enum Aliased {
        #[serde(alias = "remove")]
        Delete {
            path: String,
        },
        Write {
            path: String,
        },
    }

    /// A field alias inside an untagged enum.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Untagged {
        Path {
            #[serde(alias = "file")]
            path: String,
        },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsUntagged {
        pub target: Untagged,
    }

    /// An untagged enum where one alternative is an integer-keyed map (its schema has
    /// `patternProperties: {"^\\d+$": ..}`).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum NamedOrNumbered {
        Named { name: String },
        Numbered(std::collections::HashMap<u32, String>),
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsNamedOrNumbered {
        pub who: NamedOrNumbered,
    }

    /// Untagged: the first alternative that deserialises wins, and it ignores extras.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Removal {
        Gentle { path: String },
        Forced { path: String, force: bool },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsRemoval {
        pub removal: Removal,
    }

    /// A field alias on a plain struct.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct PlainAlias {
        #[serde(alias = "file")]
        pub path: String,
    }

    /// `#[serde(default)]`, `rename`, nested Option/Vec/HashMap.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Nested {
        #[serde(default, rename = "Path")]
        pub path: Option<String>,
        #[serde(default)]
        pub items: Vec<Option<Loc>>,
        #[serde(default)]
        pub map: std::collections::HashMap<String, Loc>,
    }

    /// A recursive type (`$ref` back to itself).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Tree {
        pub name: String,
        #[serde(default)]
        pub children: Vec<Tree>,
    }

    /// An internally tagged enum whose variant holds a recursive type.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    pub enum TreeOp {
        Plant { tree: Tree },
    }

    /// Flat params with a field serde reads and then passes over (`IgnoredAny`): the
    /// model is shown it, the person sees it on the card, `run` never gets it.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Discarded {
        pub name: String,
        #[schemars(with = "String")]
        pub note: serde::de::IgnoredAny,
    }

    /// Flat params whose hand-written schema shows the model a field (`ghost`) their
    /// `Deserialize` does not read: the schema check lets it through, serde drops it.
    #[derive(Clone, Debug, Deserialize)]
    pub struct Ghost {
        pub name: String,
    }

    impl JsonSchema for Ghost {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            "Ghost".into()
        }

        fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
            schemars::json_schema!({
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "ghost": { "type": "string" },
                },
                "required": ["name"],
                "additionalProperties": false,
            })
        }
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

fn refused_as_invalid(w: &World, action: &str, args: &str) -> Result<(), String> {
    match w.call(action, args, 0) {
        Step::Settled(s) if code(&s) == "INVALID_ARGS" => Ok(()),
        Step::Settled(s) => Err(format!("{args}: refused as {}", code(&s))),
        Step::Approval(card) => {
            w.exec.deny(card.call, None, at(0)).unwrap();
            Err(format!("{action} {args}: accepted, reached the card"))
        }
        other => Err(format!("{args}: {other:?}")),
    }
}

/// A nested struct may be sent as a JSON array (serde's `visit_seq`); the schema says
/// object, so schema_check records a type mismatch and stops checking the object's
/// remaining fields, including an unknown one serde dropped beside a flatten or inside
/// an internally tagged enum.
#[test]
fn an_unknown_field_after_a_type_mismatch_is_still_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Flat>("flat")).unwrap();
    let _b = w.exec.register(shaped::<shapes::Tagged>("tagged")).unwrap();
    // Sanity: without the array trick both are refused.
    refused_as_invalid(&w, "flat", r#"{"from":{"dir":"a"},"to":"b","zzz":true}"#).unwrap();
    refused_as_invalid(
        &w,
        "tagged",
        r#"{"op":"Copy","from":{"dir":"a"},"to":"b","zzz":true}"#,
    )
    .unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        ("flat", r#"{"from":["a"],"to":"b","zzz":true}"#),
        (
            "tagged",
            r#"{"op":"Copy","from":["a"],"to":"b","zzz":true}"#,
        ),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "unknown field accepted: {accepted:#?}");
}

/// Aliases: the schema shows one name, serde accepts another.
#[test]
fn an_alias_the_schema_does_not_show_is_refused() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<shapes::Aliased>("aliased"))
        .unwrap();
    let _b = w
        .exec
        .register(shaped::<shapes::HoldsUntagged>("untagged"))
        .unwrap();
    let _c = w
        .exec
        .register(shaped::<shapes::PlainAlias>("plain"))
        .unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        // A variant alias, plus an unknown field serde drops.
        ("aliased", r#"{"op":"remove","path":"a","zzz":true}"#),
        ("untagged", r#"{"target":{"file":"a"}}"#),
        ("plain", r#"{"file":"a"}"#),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "{accepted:#?}");
}

/// Variant aliases alone (no extra field): a value the schema does not allow.
#[test]
fn a_variant_alias_alone_is_refused() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<shapes::Aliased>("aliased"))
        .unwrap();
    refused_as_invalid(&w, "aliased", r#"{"op":"remove","path":"a"}"#).unwrap();
}

#[test]
fn defaults_renames_nested_options_maps_and_recursion_refuse_unknown_fields() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Nested>("nested")).unwrap();
    let _b = w.exec.register(shaped::<shapes::Tree>("tree")).unwrap();
    let _c = w.exec.register(shaped::<shapes::TreeOp>("treeop")).unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        ("nested", r#"{"path":"a"}"#),
        ("nested", r#"{"Path":"a","zzz":1}"#),
        ("nested", r#"{"items":[null,{"dir":"a","zzz":1}]}"#),
        ("nested", r#"{"map":{"k":{"dir":"a","zzz":1}}}"#),
        (
            "tree",
            r#"{"name":"a","children":[{"name":"b","children":[{"name":"c","zzz":1}]}]}"#,
        ),
        (
            "treeop",
            r#"{"kind":"Plant","tree":{"name":"a","children":[{"name":"b","zzz":1}]}}"#,
        ),
        ("treeop", r#"{"kind":"Plant","tree":{"name":"a","zzz":1}}"#),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "{accepted:#?}");
    for (action, args) in [
        (
            "nested",
            r#"{"Path":"a","items":[null,{"dir":"b"}],"map":{"k":{"dir":"c"}}}"#,
        ),
        (
            "treeop",
            r#"{"kind":"Plant","tree":{"name":"a","children":[{"name":"b"}]}}"#,
        ),
    ] {
        assert!(
            matches!(w.call(action, args, 0), Step::Approval(_)),
            "{args} was refused"
        );
    }
}

/// Flat params read without `serde_ignored` (the schema check vouches for every field)
/// only where serde reads every field the schema shows, each as a value: a field shown
/// to the model but dropped by serde (not read, or read and passed over) is still
/// refused, and the call never reaches its card.
#[test]
fn a_field_the_schema_shows_but_serde_drops_is_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Ghost>("ghost")).unwrap();
    refused_as_invalid(&w, "ghost", r#"{"name":"a","ghost":"rm -rf"}"#).unwrap();
    // A field serde names but reads as nothing: refused as well.
    let _b = w
        .exec
        .register(shaped::<shapes::Discarded>("discarded"))
        .unwrap();
    refused_as_invalid(&w, "discarded", r#"{"name":"a","note":"rm -rf"}"#).unwrap();
    assert!(
        matches!(w.call("ghost", r#"{"name":"a"}"#, 0), Step::Approval(_)),
        "the field serde reads is accepted"
    );
}

/// The array trick inside a recursive tagged shape, deeper down.
#[test]
fn an_unknown_field_hidden_behind_a_deep_mismatch_is_refused() {
    let w = World::new();
    let _c = w.exec.register(shaped::<shapes::TreeOp>("treeop")).unwrap();
    refused_as_invalid(&w, "treeop", r#"{"kind":"Plant","tree":["a",[]],"zzz":1}"#).unwrap();
}

// ---------------------------------------------------------------------------------
// Folder matchers: no climbing out, in any encoding.
// ---------------------------------------------------------------------------------

#[test]
fn overlong_utf8_dots_and_slashes_do_not_climb_out_of_a_folder() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    let glob = Matcher::Glob {
        pointer: "/path".into(),
        pattern: "drafts/**".into(),
    };
    let mut matched = Vec::new();
    for path in [
        // Overlong UTF-8 `.` (2 and 3 bytes), as lenient decoders (old IIS, Tomcat
        // CVE-2008-2938) read them.
        "drafts/%c0%ae%c0%ae/config.json",
        "drafts/%e0%80%ae%e0%80%ae/config.json",
        // `..` then an overlong `/` or `\`.
        "drafts/..%c0%afconfig.json",
        "drafts/..%c1%9cconfig.json",
    ] {
        let args = json!({ "path": path });
        if !has_dot_segment(path) || drafts.matches(&args) || glob.matches(&args) {
            matched.push(path);
        }
    }
    assert!(matched.is_empty(), "climbing paths matched: {matched:#?}");
}

#[test]
fn known_dot_spellings_stay_refused() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    for path in [
        "drafts/../x",
        "drafts/.%2e/x",
        "drafts/%2e./x",
        "drafts/%252E%252E/x",
        "drafts/%25252e%25252e/x",
        "drafts/%2525252e%2525252e/x",
        "drafts/%ef%bc%8e%ef%bc%8e/x",
        "drafts/\u{fe52}\u{fe52}/x",
        "drafts/\u{2024}\u{2024}/x",
        "drafts/..%5cx",
        "drafts/..%2fx",
        "drafts/..\u{ff3c}x",
        "drafts\\..\\x",
        "drafts/a/../../x",
        "drafts/.",
        "drafts/..",
    ] {
        assert!(!drafts.matches(&json!({ "path": path })), "{path}");
    }
    // And the grant does not cover them end to end.
    let mut w = World::new();
    let runs = Rc::clone(&w.runs);
    #[derive(Clone, Deserialize, JsonSchema)]
    struct P {
        path: String,
    }
    w.regs.push(
        w.exec
            .register(
                Action::<P>::new("write_file", "w")
                    .kind(Kind::Write)
                    .confirm(Confirm::Ask)
                    .remember(|_| GrantRule::prefix("under drafts/", "/path", "drafts/"))
                    .run(move |p: P| {
                        let runs = Rc::clone(&runs);
                        async move {
                            runs.borrow_mut().push(p.path);
                            Ok::<_, String>(())
                        }
                    }),
            )
            .unwrap(),
    );
    let card = w.card("write_file", r#"{"path":"drafts/a"}"#, 0);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    for path in ["drafts/%2e%2e/x", "drafts/\u{ff0e}\u{ff0e}/x"] {
        let args = json!({ "path": path }).to_string();
        assert!(
            matches!(w.call("write_file", &args, 3), Step::Approval(_)),
            "{path} covered"
        );
    }
}

/// IIS's non-standard `%u` escapes spell `.` too.
#[test]
fn iis_percent_u_dots_do_not_climb_out_of_a_folder() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    let path = "drafts/%u002e%u002e/config.json";
    assert!(!drafts.matches(&json!({ "path": path })), "{path} matched");
}

// ---------------------------------------------------------------------------------
// Tickets, refreshed cards, double confirmation, grants and generations.
// ---------------------------------------------------------------------------------

/// An action whose consequence reads a shared cell (the page state).
fn stateful(w: &World, id: &str, confirm: Confirm, state: &Rc<RefCell<String>>) -> Action<Named> {
    let shown = Rc::clone(state);
    let rule = Rc::clone(state);
    w.action(id, Kind::Write, confirm)
        .consequence(move |p| format!("{} -> {}", shown.borrow(), p.name))
        .remember(move |p| {
            GrantRule::exact(
                format!("{} {}", rule.borrow(), p.name),
                "/name",
                p.name.clone(),
            )
        })
}

#[test]
fn a_second_ticket_for_a_card_that_went_stale_is_refused() {
    let mut w = World::new();
    let state = Rc::new(RefCell::new(String::from("A")));
    w.add(stateful(&w, "save", Confirm::Ask, &state));
    let card = w.card("save", r#"{"name":"x"}"#, 0);
    let (t1, t2, t3) = (
        card.countersign(Gesture::AllowOnce),
        card.countersign(Gesture::AllowForSession),
        card.countersign(Gesture::AllowOnce),
    );
    *state.borrow_mut() = "B".into();
    let Step::Approval(fresh) = w.exec.approve(t1, at(1)).unwrap() else {
        panic!("stale card ran")
    };
    // Put the page back: the old face is current again, but the old card is not.
    *state.borrow_mut() = "A".into();
    assert_eq!(
        w.exec.approve(t2, at(2)).unwrap_err(),
        TicketError::Mismatch
    );
    assert_eq!(
        w.exec.approve(t3, at(2)).unwrap_err(),
        TicketError::Mismatch
    );
    assert!(w.exec.grants().is_empty());
    assert!(w.runs().is_empty());
    // The fresh card (showing B) is stale again now: shown a third time, not run.
    let Step::Approval(third) = w
        .exec
        .approve(fresh.countersign(Gesture::AllowForSession), at(3))
        .unwrap()
    else {
        panic!("ran although the card showed B and the page shows A")
    };
    assert!(w.exec.grants().is_empty(), "no grant from a stale card");
    drive(
        &w.exec,
        w.exec
            .approve(third.countersign(Gesture::AllowOnce), at(4))
            .unwrap(),
        5,
    );
    assert_eq!(w.runs(), ["save:x"]);
    assert_eq!(w.terminal(third.call).len(), 1);
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

/// Registered again with the same id while a job runs: the old job's completion does
/// not settle anything of the new registration, and the new one inherits no grant.
#[test]
fn a_job_of_an_old_registration_completes_once() {
    let w = World::new();
    let reg = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Unset))
        .unwrap();
    let Step::Perform(job) = w.call("save", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    reg.unregister();
    let _again = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Ask))
        .unwrap();
    let s = drive(&w.exec, Step::Perform(job), 1).unwrap();
    assert_eq!(code(&s), "OK");
    assert_eq!(w.terminal(s.call).len(), 1);
    assert!(matches!(
        w.call("save", r#"{"name":"b"}"#, 2),
        Step::Approval(_)
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

// ---------------------------------------------------------------------------------
// Time.
// ---------------------------------------------------------------------------------

#[test]
fn a_stale_now_never_revives_an_expired_card_or_moves_the_trail_back() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let a = w.card("save", r#"{"name":"a"}"#, 1_000);
    let b = w.card("save", r#"{"name":"b"}"#, 0);
    // `b` was asked with a stale now: its deadline counts from the executor's clock.
    assert_eq!(b.asked_at, at(1_000));
    let late = 1_000 + 5 * 60 * 1000;
    // A restore_grant with a far-future now moves the clock too.
    let _ = w.exec.restore_grant(
        &countersign::GrantBasis {
            action: "nope".into(),
            registration: String::new(),
            role: "admin".into(),
            arguments: json!({}),
            caller: countersign::Caller::Assistant,
        },
        at(late),
    );
    assert_eq!(
        w.exec
            .approve(a.countersign(Gesture::AllowOnce), at(0))
            .unwrap_err(),
        TicketError::Expired
    );
    assert_eq!(
        w.exec
            .approve(b.countersign(Gesture::AllowOnce), at(1))
            .unwrap_err(),
        TicketError::Expired
    );
    let _ = w.exec.handle_timeout(at(0));
    let _ = w.exec.shutdown(at(0));
    let times: Vec<u64> = w.audit.records().iter().map(|r| r.at_ms).collect();
    assert!(times.windows(2).all(|p| p[0] <= p[1]), "{times:?}");
    assert!(w.runs().is_empty());
}

#[test]
fn a_late_handoff_done_with_a_stale_now_is_a_timeout() {
    let w = World::new();
    let _r = w
        .exec
        .register(
            Action::<countersign::NoParams>::new("publish", "p").handoff(
                countersign::Handoff::new("r", countersign::Expect::new("e", || true))
                    .step("s", None)
                    .timeout(std::time::Duration::from_secs(1)),
            ),
        )
        .unwrap();
    let Step::Handoff(view) = w.call("publish", "{}", 0) else {
        panic!()
    };
    // Another call moves the clock past the deadline; then a stale `done`.
    let _ = w.call("nope", "{}", 5_000);
    let s = w.exec.handoff_done(view.call, at(10)).unwrap();
    assert_eq!(code(&s), "HANDOFF_TIMEOUT");
}

// ---------------------------------------------------------------------------------
// Hooks that re-enter only when the person approves (the redraw).
// ---------------------------------------------------------------------------------

#[test]
fn hooks_that_reenter_only_at_approval_refuse_the_call() {
    for hook in [
        "available",
        "classify",
        "consequence",
        "preview",
        "remember",
        "second",
        "run",
    ] {
        let w = World::new();
        let armed = Rc::new(std::cell::Cell::new(false));
        let exec = w.exec.clone();
        let a = Rc::clone(&armed);
        let poke = move || {
            if a.get() {
                let _ = exec.live_calls();
            }
        };
        let base = w.action("nosy", Kind::Write, Confirm::Ask);
        let action = match hook {
            "available" => base.available(move || {
                poke();
                true
            }),
            "classify" => base.classify(move |_| {
                poke();
                Verdict::Allow
            }),
            "consequence" => base.consequence(move |_| {
                poke();
                "c".into()
            }),
            "preview" => base.preview(move |_| {
                poke();
                countersign::Preview::diff("d")
            }),
            "remember" => base.remember(move |_| {
                poke();
                GrantRule::any("all")
            }),
            "second" => base.confirm_twice(move |_| {
                poke();
                "sure?".into()
            }),
            _ => {
                let runs = Rc::clone(&w.runs);
                base.run(move |_p: Named| {
                    poke();
                    let runs = Rc::clone(&runs);
                    async move {
                        runs.borrow_mut().push("ran".into());
                        Ok::<_, String>(())
                    }
                })
            }
        };
        let _reg = w.exec.register(action).unwrap();
        let Step::Approval(card) = w.call("nosy", r#"{"name":"a"}"#, 0) else {
            panic!("{hook}")
        };
        armed.set(true);
        let step = w
            .exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap();
        let Step::Settled(s) = step else {
            panic!("{hook}: went on after its hook re-entered: {step:?}")
        };
        assert_eq!(s.outcome.reason().rule(), "hook_reentered", "{hook}");
        assert!(w.runs().is_empty(), "{hook}");
        assert!(w.exec.grants().is_empty(), "{hook}");
        assert_eq!(w.terminal(s.call).len(), 1, "{hook}");
    }
}

/// A Registration dropped inside a hook while the person approves: the action is gone
/// by the time it would run.
#[test]
fn a_registration_dropped_by_a_hook_during_approval_does_not_run() {
    let w = World::new();
    let slot: Rc<RefCell<Option<Registration>>> = Rc::default();
    let armed = Rc::new(std::cell::Cell::new(false));
    let (s2, a2) = (Rc::clone(&slot), Rc::clone(&armed));
    let action = w
        .action("w", Kind::Write, Confirm::Ask)
        .consequence(move |p| {
            if a2.get() {
                drop(s2.borrow_mut().take());
            }
            format!("set {}", p.name)
        });
    *slot.borrow_mut() = Some(w.exec.register(action).unwrap());
    let card = w.card("w", r#"{"name":"a"}"#, 0);
    armed.set(true);
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(1))
        .unwrap();
    let ran = matches!(step, Step::Perform(_));
    drive(&w.exec, step, 2);
    assert!(w.exec.action_ids().is_empty());
    assert!(
        !ran,
        "ran although its registration was dropped before the decision"
    );
}

// ---------------------------------------------------------------------------------
// Policy files.
// ---------------------------------------------------------------------------------

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
                    countersign::Rewrite::Action {
                        action: "save".into(),
                        arguments: json!({"name": "escaped"}),
                        why: "w".into(),
                    }
                } else {
                    countersign::Rewrite::Keep
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

// ---------------------------------------------------------------------------------
// Audit records and reasons.
// ---------------------------------------------------------------------------------

const SECRET: &str = "hunter2PLAINTEXT";

#[test]
fn no_refusal_path_puts_argument_text_in_the_audit() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.add(
        w.action("judged", Kind::Write, Confirm::Unset)
            .classify(|p| Verdict::Deny(format!("not {}", p.name))),
    );
    w.add(
        w.action("checked", Kind::Write, Confirm::Unset)
            .validate(|p| Err(format!("bad {}", p.name))),
    );
    w.add(
        w.action("verified", Kind::Write, Confirm::Unset)
            .verify(|p, _| Err(format!("no {}", p.name))),
    );
    w.regs.push(
        w.exec
            .register(
                Action::<Named>::new("failing", "f")
                    .run(|p: Named| async move { Err::<(), _>(format!("boom {}", p.name)) }),
            )
            .unwrap(),
    );
    let args = format!(r#"{{"name":"{SECRET}"}}"#);
    let card = w.card("save", &args, 0);
    w.exec.deny(card.call, Some(SECRET), at(1)).unwrap();
    for (action, args) in [
        ("judged", args.clone()),
        ("checked", args.clone()),
        ("verified", args.clone()),
        ("failing", args.clone()),
        ("save", format!(r#"{{"name":["{SECRET}"]}}"#)),
        ("save", format!(r#"{{"name":"a","{SECRET}":1}}"#)),
        ("save", format!(r#"{{"name":"{SECRET}"#)),
        ("save", format!(r#"["{SECRET}"]"#)),
        ("save", format!("{SECRET}{}", "x".repeat(20_000))),
    ] {
        drive(&w.exec, w.call(action, &args, 2), 3);
    }
    let all = serde_json::to_string(&w.audit.records()).unwrap();
    assert!(!all.contains(SECRET), "{all}");
    assert!(w.audit.records().iter().filter(|r| r.is_terminal()).count() == 10);
}

/// A rewrite hook that picks the replacement action from the arguments (a sloppy but
/// plausible "route to the named tool"): the reason must not carry the model's text.
#[test]
fn a_rewrite_target_taken_from_the_arguments_is_not_written_into_the_audit() {
    let mut w = World::new();
    w.add(w.action("route", Kind::Write, Confirm::Unset).rewrite(|p| {
        countersign::Rewrite::Action {
            action: p.name.clone(),
            arguments: json!({}),
            why: "route".into(),
        }
    }));
    let s = drive(
        &w.exec,
        w.call("route", &format!(r#"{{"name":"{SECRET}"}}"#), 0),
        1,
    )
    .unwrap();
    // Refused where the rewrite happened: the target is not registered.
    assert_eq!(code(&s), "UNAVAILABLE");
    assert_eq!(
        s.outcome.reason(),
        countersign::Reason::Rewritten { to: None }
    );
    let all = serde_json::to_string(&w.audit.records()).unwrap();
    assert!(!all.contains(SECRET), "{all}");
}

#[test]
fn refusals_carry_their_own_typed_reason() {
    let mut w = World::new();
    w.add(w.action("ask", Kind::Write, Confirm::Ask));
    w.add(
        w.action("loop", Kind::Write, Confirm::Unset).rewrite(|p| {
            countersign::Rewrite::Arguments(json!({ "name": format!("{}x", p.name) }))
        }),
    );
    // Expired.
    let card = w.card("ask", r#"{"name":"a"}"#, 0);
    let settled = w.exec.handle_timeout(at(10 * 60 * 1000));
    assert_eq!(settled[0].outcome.reason(), Reason::ApprovalTimeout);
    assert_eq!(
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(0))
            .unwrap_err(),
        TicketError::NotPending
    );
    // Rewrite loop.
    let s = drive(&w.exec, w.call("loop", r#"{"name":"a"}"#, 0), 0).unwrap();
    assert_eq!(s.outcome.reason(), Reason::RewriteLoop);
    assert!(w.runs().is_empty());
    // A too-long tool call id on an unknown action: the id is judged first, stated.
    let s = w
        .exec
        .submit(Call::new("x".repeat(300), "nope", "{}"), at(0))
        .unwrap();
    let Step::Settled(s) = s else { panic!() };
    assert_eq!(s.outcome.reason(), Reason::ToolCallIdTooLong);
    // Away + an Ask card: mode_refused, hint when_person_returns, decided by the mode.
    w.exec.set_mode(Mode::Away).unwrap();
    let Step::Settled(s) = w.call("ask", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    assert_eq!(s.outcome.reason(), Reason::ModeRefused { mode: Mode::Away });
    assert_eq!(w.terminal(s.call)[0].decided_by, countersign::Decider::Mode);
    // Every call so far has exactly one terminal record.
    let mut calls: Vec<u64> = w.audit.records().iter().map(|r| r.call).collect();
    calls.dedup();
    for c in calls {
        let n = w
            .audit
            .records()
            .iter()
            .filter(|r| r.call == c && r.is_terminal())
            .count();
        assert_eq!(n, 1, "call {c}");
    }
}

// ---------------------------------------------------------------------------------
// Executors that share a secret.
// ---------------------------------------------------------------------------------

/// Two executors in one page made with the same secret (a host that hard-codes it, or
/// two docks): a ticket minted on one must not approve the other's call.
#[test]
fn a_ticket_from_another_executor_with_the_same_secret_is_refused() {
    let mut a = World::new();
    let mut b = World::new();
    a.add(a.action("save", Kind::Write, Confirm::Ask));
    b.add(b.action("save", Kind::Write, Confirm::Ask));
    let card_a = a.card("save", r#"{"name":"x"}"#, 0);
    let _card_b = b.card("save", r#"{"name":"x"}"#, 0);
    let got = b
        .exec
        .approve(card_a.countersign(Gesture::AllowOnce), at(1));
    assert!(
        matches!(got, Err(TicketError::ForeignExecutor)),
        "b accepted a's ticket: {got:?}"
    );
    assert!(b.runs().is_empty());
}

/// `patternProperties` makes schema_check treat the object as open to *any* key, not
/// only keys matching the pattern; serde picks the struct alternative and drops the key.
#[test]
fn an_integer_keyed_map_alternative_does_not_open_an_object_to_every_key() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<shapes::HoldsNamedOrNumbered>("who"))
        .unwrap();
    assert!(matches!(
        w.call("who", r#"{"who":{"name":"a"}}"#, 0),
        Step::Approval(_)
    ));
    refused_as_invalid(&w, "who", r#"{"who":{"name":"a","confirmed":true}}"#).unwrap();
}

/// What the person saw is what runs: the card must not show `force: true` for a call
/// whose typed params (serde's first matching untagged alternative) dropped it.
#[test]
fn the_card_never_shows_a_field_the_typed_params_dropped() {
    let w = World::new();
    let seen = Rc::new(RefCell::new(String::new()));
    let log = Rc::clone(&seen);
    let _a = w
        .exec
        .register(
            Action::<shapes::HoldsRemoval>::new("rm", "remove")
                .kind(Kind::Danger)
                .run(move |p: shapes::HoldsRemoval| {
                    *log.borrow_mut() = format!("{:?}", p.removal);
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    match w.call("rm", r#"{"removal":{"path":"a","force":true}}"#, 0) {
        Step::Approval(card) => {
            assert_eq!(
                card.arguments["removal"]["force"], true,
                "the card shows force"
            );
            drive(
                &w.exec,
                w.exec
                    .approve(card.countersign(Gesture::AllowOnce), at(1))
                    .unwrap(),
                2,
            );
            assert!(
                seen.borrow().contains("Forced"),
                "the person approved force: true; what ran was {}",
                seen.borrow()
            );
        }
        Step::Settled(s) => assert_eq!(code(&s), "INVALID_ARGS"),
        other => panic!("{other:?}"),
    }
}

/// Drops that reach the executor while it is busy (a Registration captured by another
/// action's closure, a Job dropped inside a hook) never panic, and every call still
/// settles exactly once.
#[test]
fn drops_inside_the_executor_never_panic_and_settle_once() {
    let w = World::new();
    let b = w
        .exec
        .register(w.action("b", Kind::Write, Confirm::Unset))
        .unwrap();
    let held = RefCell::new(Some(b));
    let a = w
        .exec
        .register(
            w.action("a", Kind::Write, Confirm::Unset)
                .available(move || {
                    let _keep = &held; // `b` dies when `a`'s closures are dropped
                    true
                }),
        )
        .unwrap();
    // A job for `b`, dropped inside `c`'s classify hook.
    let Step::Perform(job) = w.call("b", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    let slot = Rc::new(RefCell::new(Some(job)));
    let s2 = Rc::clone(&slot);
    let _c = w
        .exec
        .register(
            w.action("c", Kind::Write, Confirm::Unset)
                .classify(move |_| {
                    drop(s2.borrow_mut().take());
                    Verdict::Allow
                }),
        )
        .unwrap();
    let step = w.call("c", r#"{"name":"y"}"#, 1);
    drive(&w.exec, step, 2);
    a.unregister(); // drops `a`'s closures, and with them `b`'s Registration
    assert!(w.exec.action_ids() == ["c"], "{:?}", w.exec.action_ids());
    assert_eq!(w.exec.live_calls(), 0);
    let mut calls: Vec<u64> = w.audit.records().iter().map(|r| r.call).collect();
    calls.sort_unstable();
    calls.dedup();
    assert_eq!(calls.len(), 2);
    for c in calls {
        let n = w
            .audit
            .records()
            .iter()
            .filter(|r| r.call == c && r.is_terminal())
            .count();
        assert_eq!(n, 1, "call {c}");
    }
}

// ---------------------------------------------------------------------------------
// An audit sink that fails while a record is written.
// ---------------------------------------------------------------------------------

/// A world whose sink stores each record and then panics on every `event` while `armed`
/// is set (a full disk, caught by a native host).
fn world_failing_on(event: countersign::AuditEvent) -> (World, Rc<std::cell::Cell<bool>>) {
    world_with_a_failing_sink(event, true)
}

/// As [`world_failing_on`], but the sink panics before it stores the record: the record
/// is lost.
fn world_losing(event: countersign::AuditEvent) -> (World, Rc<std::cell::Cell<bool>>) {
    world_with_a_failing_sink(event, false)
}

/// `f`, whose sink fails: it must panic (the host catches it).
fn failing(f: impl FnOnce()) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(caught.is_err(), "the sink failed");
}

/// A sink that panics on the record of a person's approval must not leave the ticket
/// usable: the step is done before the sink sees its records, so the job it made is
/// dropped with the panic and its call settles once, as interrupted; sent again, the
/// ticket finds nothing pending, and `run` is never reached.
#[test]
fn a_sink_panicking_on_an_approval_spends_the_ticket() {
    use countersign::AuditEvent;
    for gesture in [
        Gesture::AllowOnce,
        Gesture::AllowInBatch,
        Gesture::AllowForSession,
    ] {
        let (mut w, armed) = world_failing_on(if gesture == Gesture::AllowForSession {
            AuditEvent::Granted
        } else {
            AuditEvent::Approved
        });
        w.add(w.action("wipe", Kind::Write, Confirm::Ask));
        let card = w.card("wipe", r#"{"name":"a"}"#, 0);
        armed.set(true);
        failing(|| drop(w.exec.approve(card.countersign(gesture), at(1))));
        let again = w.exec.approve(card.countersign(gesture), at(2));
        assert!(
            matches!(again, Err(TicketError::NotPending)),
            "{gesture:?}: the same ticket was taken twice: {again:?}"
        );
        let told = w.exec.next_settled().expect("the model is told");
        assert_eq!((told.call, code(&told)), (card.call, "EXECUTION_FAILED"));
        assert!(w.runs().is_empty(), "{gesture:?}: run was reached");
        let approvals = w
            .audit
            .records()
            .iter()
            .filter(|r| matches!(r.event, AuditEvent::Approved | AuditEvent::Granted))
            .count();
        assert_eq!(approvals, 1, "{gesture:?}: one approval on the trail");
        // The sink may not have kept the grant's record: it is not put in force.
        assert!(
            w.exec.grants().is_empty(),
            "{gesture:?}: {:?}",
            w.exec.grants()
        );
        assert!(w.exec.shutdown(at(3)).is_empty(), "{gesture:?}: left live");
        assert_eq!(
            w.terminal(card.call).len(),
            1,
            "{gesture:?}: one terminal record"
        );
    }
}

/// Adds `wipe`, whose second question's hook panics once after the returned flag is set.
fn add_wipe_with_a_failing_question(w: &mut World) -> Rc<std::cell::Cell<bool>> {
    let armed = Rc::new(std::cell::Cell::new(false));
    let arm = Rc::clone(&armed);
    w.add(
        w.action("wipe", Kind::Write, Confirm::Ask)
            .confirm_twice(move |_| {
                if arm.replace(false) {
                    panic!("the page's hook failed");
                }
                "sure?".into()
            }),
    );
    armed
}

/// A sink that stores a call's terminal record and then panics must not leave the call
/// live: the trail already says it ended, so nothing may approve, run or settle it again.
#[test]
fn a_sink_panicking_on_the_terminal_record_leaves_nothing_live() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    armed.set(true);
    failing(|| drop(w.exec.deny(card.call, None, at(1))));
    assert_eq!(
        w.terminal(card.call).len(),
        1,
        "the trail says it was declined"
    );
    let told = w.exec.next_settled().expect("the model is still told");
    assert_eq!((told.call, code(&told)), (card.call, "PERMISSION_DENIED"));
    let step = w.exec.approve(card.countersign(Gesture::AllowOnce), at(2));
    assert!(
        matches!(step, Err(TicketError::NotPending)),
        "a declined call was approved: {step:?}"
    );
    assert!(w.runs().is_empty(), "run was reached");
    assert!(w.exec.shutdown(at(3)).is_empty(), "a call was left live");
    assert_eq!(w.terminal(card.call).len(), 1, "one terminal record");
}

/// The same for a call refused before it was live (an unknown action): its result is
/// queued even when the sink fails on its terminal record.
#[test]
fn a_sink_panicking_on_an_early_refusal_still_tells_the_model() {
    let (w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    armed.set(true);
    failing(|| drop(w.exec.submit(Call::new("tc", "nope", "{}"), at(0))));
    let told = w.exec.next_settled().expect("the model is still told");
    assert_eq!(code(&told), "UNKNOWN_ACTION");
    assert_eq!(
        w.audit.records().iter().filter(|r| r.is_terminal()).count(),
        1
    );
}

/// A sink failing on one call's record while a step settles several (shutdown) does
/// not stop the step half way: every call settles, and every record still reaches the
/// sink.
#[test]
fn a_sink_panicking_mid_shutdown_still_settles_every_call() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let first = w.card("wipe", r#"{"name":"a"}"#, 0);
    let second = w.card("wipe", r#"{"name":"b"}"#, 0);
    armed.set(true);
    failing(|| drop(w.exec.shutdown(at(1))));
    armed.set(false);
    assert_eq!(w.exec.live_calls(), 0, "a call was left waiting");
    let told: Vec<_> = w.exec.drain_settled().iter().map(|s| s.call).collect();
    assert_eq!(told, [first.call, second.call]);
    for call in [first.call, second.call] {
        assert_eq!(w.terminal(call).len(), 1, "one terminal record each");
        let step = w.exec.approve(
            if call == first.call { &first } else { &second }.countersign(Gesture::AllowOnce),
            at(2),
        );
        assert!(matches!(step, Err(TicketError::NotPending)), "{step:?}");
    }
    assert!(w.runs().is_empty());
}

/// Registrations a hook dropped wait in the executor's mailbox; a sink failing while
/// the first is applied must not lose the rest: the action the page removed is gone,
/// with its grant, and no call of it runs unasked.
#[test]
fn a_sink_panicking_while_removals_apply_loses_none_of_them() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    let regs: Rc<RefCell<Vec<Registration>>> = Rc::default();
    let kept = Rc::clone(&regs);
    let hook = w.action("h", Kind::Write, Confirm::Ask).classify(move |_| {
        kept.borrow_mut().clear();
        Verdict::Allow
    });
    w.add(hook);
    let waiting = w
        .exec
        .register(w.action("w", Kind::Write, Confirm::Ask))
        .unwrap();
    let granted = w
        .exec
        .register(w.action("g", Kind::Write, Confirm::Ask))
        .unwrap();
    regs.borrow_mut().extend([waiting, granted]);
    let card = w.card("g", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1);
    assert_eq!(w.runs(), ["g:a"]);
    w.card("w", r#"{"name":"a"}"#, 3);
    // The hook drops both registrations: the executor is busy, so they are posted.
    drive(&w.exec, w.call("h", r#"{"name":"x"}"#, 4), 5);
    armed.set(true);
    // Applying them settles w's card: the sink fails on its record.
    failing(|| {
        w.exec.live_calls();
    });
    armed.set(false);
    assert!(
        w.exec.grants().is_empty(),
        "the grant outlived its registration"
    );
    let step = w.call("g", r#"{"name":"b"}"#, 6);
    assert!(!matches!(step, Step::Perform(_)), "g ran unasked: {step:?}");
    drive(&w.exec, step, 7);
    assert_eq!(w.runs(), ["g:a"]);
}

/// A run that finished is on record as done even when the sink fails on a record the
/// step that applies it writes first (a removal a hook posted, applied before it).
#[test]
fn a_sink_panicking_before_a_run_is_applied_keeps_its_outcome() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    w.add(w.action("x", Kind::Read, Confirm::Unset));
    let card = a_card_a_hook_can_remove(&mut w);
    let Step::Perform(job) = w.call("x", r#"{"name":"a"}"#, 0) else {
        panic!("a read runs")
    };
    let (call, done) = (job.call(), pollster::block_on(job.run()));
    assert_eq!(w.runs(), ["x:a"]);
    // The hook drops w's registration while the executor is busy: it is posted, and
    // applied first by the next step, which settles w's card.
    let refused = post_the_removal(&w);
    armed.set(true);
    failing(|| {
        w.exec.complete(done, at(2));
    });
    armed.set(false);
    let told = told(&w.exec);
    assert_eq!(
        told,
        [
            (refused.call, "UNAVAILABLE"),
            (card, "UNAVAILABLE"),
            (call, "OK")
        ],
        "a run that happened was not reported as done"
    );
    assert!(w.exec.shutdown(at(3)).is_empty(), "left live");
    assert_eq!(w.terminal(call).len(), 1, "one terminal record");
}

/// A sink that fails on every record must not abort the process when the panic drops
/// a job (its drop settles a call while the panic unwinds): that call's record is still
/// handed over.
#[test]
fn a_sink_panicking_while_a_job_is_dropped_does_not_abort() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    w.add(w.action("x", Kind::Read, Confirm::Unset));
    let (Step::Perform(first), Step::Perform(second)) = (
        w.call("x", r#"{"name":"a"}"#, 0),
        w.call("x", r#"{"name":"b"}"#, 0),
    ) else {
        panic!("a read runs")
    };
    let (calls, done) = (
        [first.call(), second.call()],
        pollster::block_on(first.run()),
    );
    let exec = w.exec.clone();
    armed.set(true);
    failing(move || {
        let _held = second;
        exec.complete(done, at(1));
    });
    armed.set(false);
    let told = told(&w.exec);
    assert_eq!(
        told,
        [(calls[0], "OK"), (calls[1], "EXECUTION_FAILED")],
        "the finished run is done, the dropped one failed"
    );
    for call in calls {
        assert_eq!(w.terminal(call).len(), 1, "one terminal record each");
    }
}

/// A waiting card of `w`, whose registration the hook of `h` drops (see
/// [`post_the_removal`]). Returns the card's call.
fn a_card_a_hook_can_remove(w: &mut World) -> countersign::CallId {
    let slot: Rc<RefCell<Option<Registration>>> = Rc::default();
    let kept = Rc::clone(&slot);
    let hook = w.action("h", Kind::Write, Confirm::Ask).classify(move |_| {
        drop(kept.borrow_mut().take());
        Verdict::Allow
    });
    w.add(hook);
    *slot.borrow_mut() = Some(
        w.exec
            .register(w.action("w", Kind::Write, Confirm::Ask))
            .unwrap(),
    );
    w.card("w", r#"{"name":"a"}"#, 0).call
}

/// Calls `h`: its hook drops `w`'s registration while the executor is busy, so the
/// removal is posted, and the next operation applies it first, settling `w`'s card (a
/// `settled` record). Returns the refused call of `h`.
fn post_the_removal(w: &World) -> countersign::Settled {
    match w.call("h", r#"{"name":"x"}"#, 1) {
        Step::Settled(refused) => refused,
        step => panic!("{step:?}"),
    }
}

/// [`a_card_a_hook_can_remove`], its removal posted.
fn a_removal_posted(w: &mut World) -> countersign::CallId {
    let card = a_card_a_hook_can_remove(w);
    post_the_removal(w);
    card
}

/// A query that takes settlements off the queue raises a sink's panic (left by a
/// removal it applied first) before it takes them: none is lost with the panic.
#[test]
fn a_sink_panicking_before_a_drain_loses_no_settlement() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    let card = a_removal_posted(&mut w);
    armed.set(true);
    failing(|| drop(w.exec.drain_settled()));
    armed.set(false);
    let told = told(&w.exec);
    assert_eq!(told.len(), 2, "the refused call and the card: {told:?}");
    assert_eq!(told[1], (card, "UNAVAILABLE"));
}

/// Registering raises a sink's panic left pending before it registers: an action is
/// never left registered with no `Registration` to remove it.
#[test]
fn a_sink_panicking_before_a_registration_leaves_no_orphan() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    a_removal_posted(&mut w);
    armed.set(true);
    failing(|| drop(w.exec.register(w.action("y", Kind::Write, Confirm::Ask))));
    armed.set(false);
    let again = w.exec.register(w.action("y", Kind::Write, Confirm::Ask));
    assert!(
        again.is_ok(),
        "y was left registered with no handle: {again:?}"
    );
}

/// A sink's panic from a step a hook's panic then cut short is not raised later by an
/// unrelated step (the host already saw that step fail).
#[test]
fn a_sink_panic_from_a_step_cut_short_is_not_raised_later() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Approved);
    let hook_armed = add_wipe_with_a_failing_question(&mut w);
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    armed.set(true);
    hook_armed.set(true);
    failing(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    armed.set(false);
    let later = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.exec.approvals()));
    assert!(
        later.is_ok(),
        "an earlier step's sink panic was raised by a query"
    );
    let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.call("wipe", r#"{"name":"b"}"#, 2)
    }));
    assert!(
        next.is_ok(),
        "an earlier step's sink panic was raised by a call"
    );
}

/// An executor shut down by a host's guard while the host's own panic unwinds still
/// hands every record to its (healthy) sink.
#[test]
fn a_shutdown_during_a_host_panic_still_reaches_the_sink() {
    struct Teardown(countersign::Executor);
    impl Drop for Teardown {
        fn drop(&mut self) {
            self.0.shutdown(at(9));
        }
    }
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    let teardown = Teardown(w.exec.clone());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _teardown = teardown;
        panic!("the host's own bug");
    }));
    assert!(caught.is_err());
    assert_eq!(
        w.terminal(card.call).len(),
        1,
        "its terminal record was lost"
    );
}

/// A grant whose record the sink lost (it panicked before keeping it) is not in force:
/// no later call runs under a grant the trail does not hold. The same for a grant
/// restored from storage.
#[test]
fn a_grant_whose_record_was_lost_is_not_in_force() {
    use countersign::AuditEvent;
    let (mut w, armed) = world_losing(AuditEvent::Granted);
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    armed.set(true);
    failing(|| {
        drop(
            w.exec
                .approve(card.countersign(Gesture::AllowForSession), at(1)),
        )
    });
    armed.set(false);
    let step = w.call("wipe", r#"{"name":"a"}"#, 2);
    assert!(
        matches!(step, Step::Approval(_)),
        "a call ran under a grant that is on no record: {step:?}"
    );
    assert!(w.runs().is_empty());
    let basis = countersign::GrantBasis {
        action: "wipe".into(),
        registration: w.exec.registration("wipe").unwrap(),
        role: "admin".into(),
        arguments: json!({"name": "a"}),
        caller: countersign::Caller::Assistant,
    };
    let (mut w, armed) = world_losing(AuditEvent::Restored);
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    armed.set(true);
    failing(|| drop(w.exec.restore_grant(&basis, at(0))));
    armed.set(false);
    assert!(
        w.exec.grants().is_empty(),
        "a restored grant with no record"
    );
}

/// Setting the mode is a step like the others: if a sink's panic left by what it
/// applied first is raised, the mode is set all the same (as every step, it finishes
/// before it raises), so a host is never wrong about the mode in force.
#[test]
fn a_sink_panicking_while_the_mode_is_set_still_sets_it() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    a_card_a_hook_can_remove(&mut w);
    w.exec.set_mode(Mode::Away).unwrap();
    post_the_removal(&w);
    armed.set(true);
    failing(|| {
        let _ = w.exec.set_mode(Mode::Default);
    });
    assert_eq!(w.exec.mode(), Mode::Default);
}

/// A completion handed to the wrong executor, whose sink's panic is then raised, is
/// not lost: dropped armed, it settles its own executor's call.
#[test]
fn a_completion_refused_while_a_sink_panics_still_settles_its_call() {
    let (mut w, armed) = world_failing_on(countersign::AuditEvent::Settled);
    a_removal_posted(&mut w);
    let mut other = World::new();
    other.add(other.action("x", Kind::Read, Confirm::Unset));
    let Step::Perform(job) = other.call("x", r#"{"name":"a"}"#, 0) else {
        panic!("a read runs")
    };
    let done = pollster::block_on(job.run());
    armed.set(true);
    failing(|| {
        w.exec.complete(done, at(2));
    });
    armed.set(false);
    let told = other
        .exec
        .next_settled()
        .expect("the other executor's call settled");
    assert_eq!(code(&told), "EXECUTION_FAILED");
    assert_eq!(other.exec.live_calls(), 0);
}
