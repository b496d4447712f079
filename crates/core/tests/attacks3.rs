//! Third review: attacks on approve-with-edits, batches ("allow all in this batch") and
//! reload survival (restore_pending / drop_pending).
//!
//! Tests named `break_*` each demonstrated a break (they failed on the code reviewed) and
//! now guard its fix; the others pin a property the attacks tried and could not break.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::expect_used
)]

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use common::{at, code, World};
use countersign::{
    Action, ApprovalPolicy, ApprovalRequest, AuditEvent, Call, CallId, CardChange, Confirm,
    EditError, Expect, Gesture, Handoff, Kind, Mode, Pending, Reason, RestoreMiss, Rewrite, Step,
    TicketError, DEFAULT_APPROVAL_TIMEOUT,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

fn world() -> World {
    let mut w = World::new();
    w.add(w.action("rename", Kind::Write, Confirm::Ask));
    w
}

fn approval(step: Step, what: &str) -> ApprovalRequest {
    match step {
        Step::Approval(card) => *card,
        other => panic!("{what}: expected a card, got {other:?}"),
    }
}

fn edit(w: &World, card: &ApprovalRequest, args: &str, now: u64) -> ApprovalRequest {
    approval(
        w.exec
            .edit(card.call, args, at(now))
            .expect("the edit is taken"),
        "an edit is asked again",
    )
}

fn pending_of(w: &World, action: &str, args: &str, remaining: Duration) -> Pending {
    Pending {
        call: Call::new("tc-old", action, args),
        declaration: w.exec.registration(action).unwrap_or_default(),
        handoff: false,
        remaining,
        edited: None,
    }
}

/// Every call in the trail has at most one terminal record.
fn at_most_one_terminal_each(w: &World) {
    let mut terminals: BTreeMap<u64, usize> = BTreeMap::new();
    for r in w.audit.records() {
        if r.is_terminal() {
            *terminals.entry(r.call).or_default() += 1;
        }
    }
    for (call, n) in terminals {
        assert_eq!(n, 1, "call {call} has {n} terminal records");
    }
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

// ---------------------------------------------------------------------------------------
// Breaks
// ---------------------------------------------------------------------------------------

/// An edited call that is still waiting when the page reloads is stored by
/// `Executor::waiting` with the person's arguments only; `restore_pending` brings it back
/// as a plain call. The person's card no longer shows original → edited, and the model's
/// result carries no `edited_by_person`: the model believes its own version ran.
#[test]
fn break_a_reload_forgets_the_persons_edit_and_the_model_believes_its_version_ran() {
    let before = world();
    let card = before.card("rename", r#"{"name":"Acme"}"#, 0);
    let edited = edit(&before, &card, r#"{"name":"Evil"}"#, 10);
    assert!(edited.edited.is_some());
    let stored: Vec<Pending> = before
        .exec
        .waiting(at(20))
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(&*stored[0].call.tool_call_id, "tc", "the model's tool call");

    // The page reloads: a new executor, the same declaration.
    let after = world();
    let back = approval(
        after
            .exec
            .restore_pending(stored[0].clone(), at(0))
            .unwrap(),
        "restored",
    );
    let settled = after.allow(&back, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(after.runs(), ["rename:Evil"], "the person's version ran");
    let told = settled.to_model_json();
    assert_eq!(
        told["edited_by_person"]["changes"][0]["you_sent"], "Acme",
        "the model sent `Acme` and `Evil` ran, but it is not told: {told}"
    );
    assert!(back.edited.is_some(), "the restored card shows no edit");
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
    let w = world();
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

/// `Pending::remaining` comes from storage (a wall-clock deadline the page wrote, or a
/// hostile one). `restore_pending` adds it to now unchecked: a card restored with a
/// huge `remaining` never times out, far beyond the action's approval timeout.
#[test]
fn break_a_restored_card_can_outlive_the_approval_timeout() {
    let w = world();
    let now = 1_000;
    let card = approval(
        w.exec
            .restore_pending(
                pending_of(&w, "rename", r#"{"name":"a"}"#, Duration::MAX),
                at(now),
            )
            .unwrap(),
        "restored",
    );
    let cap = at(now).saturating_add(DEFAULT_APPROVAL_TIMEOUT);
    assert!(
        card.deadline <= cap,
        "restored deadline {:?} is past now + approval timeout {:?}",
        card.deadline,
        cap
    );
}

/// The same for a handoff: its declared timeout is 60 s, a restored one waits for ever.
#[test]
fn break_a_restored_handoff_can_outlive_its_declared_timeout() {
    let w = World::new();
    let publish = Action::<common::Named>::new("publish", "publishes")
        .kind(Kind::Write)
        .handoff(
            Handoff::new("needs you", Expect::new("published", || true))
                .step("press publish", None)
                .timeout(Duration::from_secs(60)),
        );
    w.exec.register(publish).unwrap().forget();
    let mut pending = pending_of(&w, "publish", r#"{"name":"a"}"#, Duration::MAX);
    pending.handoff = true;
    let Step::Handoff(view) = w.exec.restore_pending(pending, at(0)).unwrap() else {
        panic!("a restored handoff waits for the person");
    };
    assert!(
        view.deadline <= at(60_000),
        "restored handoff deadline {:?} is past its 60 s timeout",
        view.deadline
    );
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
                            pending_of(&w, "archive", r#"{"name":"a"}"#, Duration::from_secs(60)),
                            at(1),
                        )
                        .unwrap(),
                    "restored",
                )
            }
        };
        let asked = w.audit.for_call(card.call).last().unwrap().clone();
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

/// A stored call is restored once per item; the core does not notice the same model
/// call (same tool call id, same arguments) brought back twice (a duplicated or hostile
/// sessionStorage entry): two cards, two runs, two answers for one tool call.
#[test]
fn break_one_stored_call_brought_back_twice_runs_twice() {
    let w = world();
    let item = pending_of(&w, "rename", r#"{"name":"a"}"#, Duration::from_secs(60));
    let mut answers = 0;
    for now in [0, 1] {
        match w.exec.restore_pending(item.clone(), at(now)).unwrap() {
            Step::Approval(card) => {
                let settled = w.allow(&card, Gesture::AllowOnce, now + 10).unwrap();
                assert_eq!(&*settled.tool_call_id, "tc-old");
                answers += 1;
            }
            Step::Settled(s) => assert_eq!(&*s.tool_call_id, "tc-old"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(w.runs().len(), 1, "one model call ran {} times", answers);
}

// ---------------------------------------------------------------------------------------
// Pinned properties (attacks that did not break the rule)
// ---------------------------------------------------------------------------------------

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
                    pending_of(&w, "rename", r#"{"name":"x"}"#, Duration::from_secs(60)),
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

/// A level lowered to `None` by the policy file while the card waits: the edit is asked.
#[test]
fn an_edit_after_the_level_was_lowered_to_none_is_still_asked() {
    let w = world();
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
        w.audit.for_call(edited.call).last().unwrap().reason,
        Reason::EditedFrom { .. }
    ));
}

/// In every mode an edit runs nothing by itself, and every call of an edit chain ends
/// with exactly one terminal record; the model's tool call gets exactly one answer.
#[test]
fn an_edit_chain_in_every_mode_runs_nothing_and_settles_each_call_once() {
    for mode in [Mode::Default, Mode::Bypass, Mode::Unattended, Mode::Away] {
        let w = world();
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
        let answers = w.exec.drain_settled();
        assert_eq!(answers.len(), 1, "{mode:?}: one answer for the tool call");
        assert_eq!(&*answers[0].tool_call_id, "tc");
        assert!(answers[0].edited.is_some());
    }
}

/// Tickets of every earlier card of an edit chain approve nothing; only the last card's
/// ticket runs, and only with its arguments.
#[test]
fn tickets_of_superseded_cards_approve_nothing() {
    let w = world();
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
                pending_of(&w, "archive", r#"{"name":"c"}"#, Duration::from_secs(60)),
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

/// Model-written keys (a map's keys) never reach the trail through an edit's reason
/// or summary: only declared field names, else `…`.
#[test]
fn model_written_keys_never_reach_the_trail_through_an_edit() {
    let w = World::new();
    let runs = Rc::clone(&w.runs);
    let labels = Action::<BTreeMap<String, String>>::new("labels", "sets labels")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(move |p: BTreeMap<String, String>| {
            let runs = Rc::clone(&runs);
            async move {
                runs.borrow_mut().push(format!("labels:{}", p.len()));
                Ok::<_, String>(json!({}))
            }
        });
    w.exec.register(labels).unwrap().forget();
    let secret = "sk-live-SECRET-0xdeadbeef";
    let card = w.card("labels", &format!(r#"{{"{secret}":"v"}}"#), 0);
    let edited = edit(&w, &card, &format!(r#"{{"{secret}":"w","name":"x"}}"#), 1);
    w.allow(&edited, Gesture::AllowOnce, 2).unwrap();
    let trail = serde_json::to_string(&w.audit.records()).unwrap();
    assert!(!trail.contains("SECRET"), "{trail}");
    let from = w
        .audit
        .for_call(edited.call)
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

/// Hostile stored calls (forged but public declaration digests, odd ids, huge or deep
/// arguments, a huge `remaining`) never panic, never run, and end with one terminal
/// record each; a forged declaration that matches only brings back a card.
#[test]
fn hostile_stored_calls_never_panic_or_run() {
    let w = world();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let deep_obj = format!(r#"{{"name":{}}}"#, "[".repeat(5_000));
    let long_id = "x".repeat(100_000);
    let cases: Vec<Pending> = vec![
        pending_of(&w, "rename", &deep, Duration::MAX),
        pending_of(&w, "rename", &deep_obj, Duration::MAX),
        Pending {
            call: Call::new(long_id.clone(), "rename", r#"{"name":"a"}"#),
            ..pending_of(&w, "rename", "{}", Duration::from_secs(1))
        },
        Pending {
            call: Call::new("tc", long_id.clone(), r#"{"name":"a"}"#),
            declaration: long_id.clone(),
            handoff: true,
            remaining: Duration::MAX,
            edited: None,
        },
        Pending {
            call: Call::new("tc\u{202e}\n", "rename\u{0}", "\u{feff}{}"),
            declaration: String::new(),
            handoff: false,
            remaining: Duration::from_nanos(1),
            edited: None,
        },
        pending_of(
            &w,
            "rename",
            r#"{"name":"a","__proto__":{}}"#,
            Duration::MAX,
        ),
        pending_of(&w, "rename", r#"{"name":"a"}"#, Duration::from_nanos(1)),
    ];
    let mut cards = 0;
    for (i, item) in cases.into_iter().enumerate() {
        match w.exec.restore_pending(item.clone(), at(10)).unwrap() {
            Step::Settled(s) => assert!(s.outcome.is_error(), "{i}"),
            Step::Approval(card) => {
                cards += 1;
                w.exec.deny(card.call, None, at(11)).unwrap();
            }
            other => panic!("{i}: {other:?}"),
        }
        let dropped = w
            .exec
            .drop_pending(item, RestoreMiss::ElsewhereOrDone, at(12))
            .unwrap();
        assert!(
            ["APPROVAL_EXPIRED", "HANDOFF_TIMEOUT"].contains(&code(&dropped)),
            "{i}"
        );
    }
    // A remaining of one nanosecond rounds to zero milliseconds: the card is drawn
    // with a deadline of now, and cannot be approved.
    assert!(cards <= 1, "{cards}");
    assert!(w.runs().is_empty());
    at_most_one_terminal_each(&w);
    assert!(w.exec.approvals().is_empty());
}

/// A restored card whose `remaining` rounds to zero milliseconds is drawn already
/// expired: it can neither be approved nor edited into a fresh deadline.
#[test]
fn a_restored_card_with_sub_millisecond_time_left_cannot_be_revived_by_an_edit() {
    let w = world();
    let step = w
        .exec
        .restore_pending(
            pending_of(&w, "rename", r#"{"name":"a"}"#, Duration::from_micros(500)),
            at(100),
        )
        .unwrap();
    match step {
        Step::Approval(card) => {
            assert!(card.deadline <= at(100));
            assert_eq!(
                w.exec
                    .edit(card.call, r#"{"name":"b"}"#, at(100))
                    .unwrap_err(),
                EditError::Ticket(TicketError::Expired)
            );
            assert_eq!(w.terminal(card.call).len(), 1);
        }
        Step::Settled(s) => assert_eq!(code(&s), "APPROVAL_EXPIRED"),
        other => panic!("{other:?}"),
    }
    assert!(w.runs().is_empty());
    assert!(w.exec.approvals().is_empty());
}

/// An edit of a restored call keeps the restored deadline (a reload and an edit
/// together do not buy a fresh timeout).
#[test]
fn an_edit_of_a_restored_call_keeps_the_old_deadline() {
    let w = world();
    let card = approval(
        w.exec
            .restore_pending(
                pending_of(&w, "rename", r#"{"name":"a"}"#, Duration::from_secs(10)),
                at(0),
            )
            .unwrap(),
        "restored",
    );
    let edited = edit(&w, &card, r#"{"name":"b"}"#, 5_000);
    assert_eq!(edited.deadline, card.deadline);
    let again = edit(&w, &edited, r#"{"name":"c"}"#, 6_000);
    assert_eq!(again.deadline, card.deadline);
    // And the stored copy of the edited call carries the same deadline on.
    let stored = w.exec.waiting(at(7_000));
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].1.remaining, Duration::from_secs(3));
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
    assert!(w.exec.drain_settled().is_empty());
    w.allow(&card, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(w.runs(), ["rename:a"]);
}

/// `drop_pending` always answers, never runs, and one terminal record per drop, even for
/// a call whose action needs no approval.
#[test]
fn drop_pending_never_runs() {
    let mut w = world();
    w.add(w.action("quiet", Kind::Write, Confirm::Off));
    for why in [
        RestoreMiss::Expired,
        RestoreMiss::Changed,
        RestoreMiss::Unavailable,
        RestoreMiss::ElsewhereOrDone,
        RestoreMiss::NotWaiting,
        RestoreMiss::CallerGone,
    ] {
        let settled = w
            .exec
            .drop_pending(
                pending_of(&w, "quiet", r#"{"name":"a"}"#, Duration::from_secs(60)),
                why,
                at(0),
            )
            .unwrap();
        assert_eq!(code(&settled), "APPROVAL_EXPIRED");
        assert_eq!(w.terminal(settled.call).len(), 1);
        assert_ne!(settled.call, CallId::default());
    }
    assert!(w.runs().is_empty());
}

/// A call stored while its second question waited comes back at the first question:
/// a reload never turns one ticket into the two a double confirmation needs.
#[test]
fn a_double_confirmation_restored_after_its_first_ticket_asks_both_again() {
    let mut before = World::new();
    before.add(
        before
            .action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    let first = before.card("twice", r#"{"name":"a"}"#, 0);
    let second = approval(
        before
            .exec
            .approve(first.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        "second question",
    );
    assert_eq!(second.round, 2);
    let stored = before.exec.waiting(at(2));
    let mut after = World::new();
    after.add(
        after
            .action("twice", Kind::Write, Confirm::Ask)
            .confirm_twice(|p| format!("really {}?", p.name)),
    );
    let back = approval(
        after
            .exec
            .restore_pending(stored[0].1.clone(), at(0))
            .unwrap(),
        "restored",
    );
    assert_eq!(back.round, 1);
    let again = approval(
        after
            .exec
            .approve(back.countersign(Gesture::AllowOnce), at(1))
            .unwrap(),
        "asked twice again",
    );
    assert_eq!(again.round, 2);
    assert!(after.runs().is_empty());
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
    assert_eq!(w.exec.drain_settled().len(), 1);
    assert!(w.runs().is_empty());
}
