//! A page's hook that panics, caught by a native host: the call it was deciding ends
//! there, refused with the hook named (`hook_failed`), told to the model once, with one
//! terminal record, nothing left live and `run` never reached. Without this, a call
//! would be left half way: a record with no end, a tool call never answered, or an
//! approved call performing with no job until shutdown.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::cell::Cell;
use std::rc::Rc;

use common::{arm, at, told, Brittle, Loud, Named, World};
use countersign::{Action, Confirm, Gesture, Hook, Kind, Pending, Reason, Step, TicketError};

/// A flag: the hook that reads it panics once after it is set.
type Armed = Rc<Cell<bool>>;

fn armed() -> Armed {
    Rc::new(Cell::new(false))
}

/// Panics if `armed` is set (and clears it, so the hook fails once).
fn fail_if(armed: &Armed) {
    if armed.replace(false) {
        panic!("the page's hook failed");
    }
}

/// `f`, in which a hook panics: the host catches it.
fn caught(f: impl FnOnce()) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(caught.is_err(), "the hook failed");
}

/// A world with `rename`, asked on a card, whose `consequence` hook panics once the
/// returned flag is set.
fn failing_rename() -> (World, Armed) {
    let mut w = World::new();
    let armed = armed();
    let fail = Rc::clone(&armed);
    w.add(
        w.action("rename", Kind::Write, Confirm::Ask)
            .consequence(move |p| {
                fail_if(&fail);
                format!("set the name to `{}`", p.name)
            }),
    );
    (w, armed)
}

/// The call settled as refused by `hook`'s failure: told once, one terminal record
/// naming it, nothing live, nothing run.
fn assert_refused_by(w: &World, call: u64, hook: Hook, code: &str) {
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    let told: Vec<(u64, &str)> = told(&w.exec)
        .into_iter()
        .map(|(c, s)| (c.get(), s))
        .collect();
    assert_eq!(told, [(call, code)], "what the model is told");
    let ends = w.ends_of(call);
    assert_eq!(ends.len(), 1, "one terminal record");
    assert_eq!(ends[0].reason, Reason::HookFailed { hook });
    assert!(w.runs().is_empty(), "run was reached");
    assert!(w.exec.shutdown(at(99)).is_empty(), "left for shutdown");
}

/// The call of the trail's first record.
fn first_call(w: &World) -> u64 {
    w.audit.records().first().map(|r| r.call).unwrap()
}

/// Every call on the trail has exactly one terminal record.
fn every_call_ends_once(w: &World) {
    let mut calls: Vec<u64> = w.audit.records().iter().map(|r| r.call).collect();
    calls.retain(|c| *c != 0);
    calls.dedup();
    for call in calls {
        let ends = w.ends_of(call).len();
        assert_eq!(ends, 1, "call {call} has {ends} terminal records");
    }
}

/// A hook that panics after the person's approval was taken (the second question's)
/// must not leave the ticket usable: it was spent first. Nor may it leave the call
/// performing with no job until shutdown, counted against its agent's live calls.
#[test]
fn a_hook_panicking_after_an_approval_spends_the_ticket() {
    let mut w = World::new();
    let armed = armed();
    let fail = Rc::clone(&armed);
    w.add(
        w.action("wipe", Kind::Write, Confirm::Ask)
            .confirm_twice(move |_| {
                fail_if(&fail);
                "sure?".into()
            }),
    );
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    armed.set(true);
    caught(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    let again = w.exec.approve(card.countersign(Gesture::AllowOnce), at(2));
    assert!(
        matches!(again, Err(TicketError::NotPending)),
        "the same ticket was taken twice: {again:?}"
    );
    assert_refused_by(&w, card.call.get(), Hook::SecondQuestion, "UNAVAILABLE");
}

/// The same where the action's own `run` panics while it makes its future, after the
/// person approved.
#[test]
fn a_run_panicking_as_it_starts_after_an_approval_leaves_nothing_live() {
    let mut w = World::new();
    w.add(
        Action::<Named>::new("wipe", "Wipe.")
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .run(|_: Named| -> std::future::Ready<Result<(), String>> {
                panic!("the page's run failed")
            }),
    );
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    caught(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    assert_refused_by(&w, card.call.get(), Hook::Run, "EXECUTION_FAILED");
}

/// A `run` that panics as it starts on the path with no card: the model is told, and
/// the trail ends the call (before, it had no record at all).
#[test]
fn a_run_panicking_as_it_starts_unasked_is_told_and_ended() {
    let mut w = World::new();
    w.add(Action::<Named>::new("peek", "Peek.").kind(Kind::Read).run(
        |_: Named| -> std::future::Ready<Result<(), String>> { panic!("the page's run failed") },
    ));
    caught(|| drop(w.call("peek", r#"{"name":"a"}"#, 0)));
    assert_refused_by(&w, first_call(&w), Hook::Run, "EXECUTION_FAILED");
    every_call_ends_once(&w);
}

/// A hook that panics while a new call is decided (its card drawn).
#[test]
fn a_hook_panicking_while_a_call_is_decided_refuses_it() {
    let (w, armed) = failing_rename();
    armed.set(true);
    caught(|| drop(w.call("rename", r#"{"name":"a"}"#, 0)));
    assert_refused_by(&w, first_call(&w), Hook::Consequence, "UNAVAILABLE");
    // The executor goes on: the next call is asked as usual.
    assert!(matches!(
        w.call("rename", r#"{"name":"b"}"#, 1),
        Step::Approval(_)
    ));
}

/// A person's edit ends the original call (superseded) and enters the edited one: a
/// hook panicking then must not leave the edited call with a record and no end, and
/// the model's tool call unanswered.
#[test]
fn a_hook_panicking_on_an_edited_call_still_ends_it() {
    let (w, armed) = failing_rename();
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    armed.set(true);
    caught(|| drop(w.exec.edit(card.call, r#"{"name":"b"}"#, at(1))));
    let edited = w.audit.records().last().map(|r| r.call).unwrap();
    assert_ne!(edited, card.call.get(), "the edit made a new call");
    assert_refused_by(&w, edited, Hook::Consequence, "UNAVAILABLE");
    every_call_ends_once(&w);
}

/// A call rewritten into another action: the panic in the target's hook ends the call.
#[test]
fn a_hook_panicking_after_a_rewrite_ends_the_call() {
    let (mut w, armed) = failing_rename();
    w.add(
        w.action("route", Kind::Write, Confirm::Ask)
            .rewrite(|p| countersign::Rewrite::Action {
                action: "rename".into(),
                arguments: serde_json::json!({ "name": p.name }),
                why: "route".into(),
            }),
    );
    armed.set(true);
    caught(|| drop(w.call("route", r#"{"name":"a"}"#, 0)));
    assert_refused_by(&w, first_call(&w), Hook::Consequence, "UNAVAILABLE");
    every_call_ends_once(&w);
}

/// A call brought back after a reload whose hook panics as it is asked again: its
/// `restored` record has an end, and the model is told.
#[test]
fn a_hook_panicking_on_a_restored_call_still_ends_it() {
    let (w, armed) = failing_rename();
    let pending = Pending {
        call: countersign::Call::new("tc-old", "rename", r#"{"name":"a"}"#),
        declaration: w.exec.registration("rename").unwrap_or_default(),
        handoff: false,
        remaining: std::time::Duration::from_millis(9_000),
        edited: None,
    };
    armed.set(true);
    caught(|| drop(w.exec.restore_pending(pending, at(0))));
    assert_refused_by(&w, first_call(&w), Hook::Consequence, "UNAVAILABLE");
    every_call_ends_once(&w);
}

/// A call rewritten, refused at once, and then a panic as the first gate lets go of the
/// original params: the call already ended, so it is not ended (nor told) again.
#[test]
fn a_panic_after_a_rewritten_call_was_refused_does_not_end_it_twice() {
    let w = World::new();
    let action = Action::<Brittle>::new("save", "Save.")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .rewrite(|p| {
            if p.name == "brittle" {
                arm();
                countersign::Rewrite::Arguments(serde_json::json!({ "name": "new" }))
            } else {
                countersign::Rewrite::Keep
            }
        })
        .classify(|p| match p.name.as_str() {
            "new" => countersign::Verdict::Deny("no".into()),
            _ => countersign::Verdict::Allow,
        })
        .run(|_: Brittle| async { Ok::<_, String>(()) });
    let _reg = w.exec.register(action).unwrap();
    caught(|| drop(w.call("save", r#"{"name":"brittle"}"#, 0)));
    let told: Vec<_> = told(&w.exec).into_iter().map(|(_, code)| code).collect();
    assert_eq!(told, ["POLICY_DENIED"], "told once, as refused");
    every_call_ends_once(&w);
    assert_eq!(w.exec.live_calls(), 0);
}

/// An edited call that a rewrite sends round the gate again, cut short there: the model
/// is still told what the person edited (so it does not send the old arguments again).
#[test]
fn an_edited_call_cut_short_after_a_rewrite_still_says_it_was_edited() {
    let mut w = World::new();
    w.add(
        w.action("rename", Kind::Write, Confirm::Ask)
            .rewrite(|p| match p.name.as_str() {
                "b" => countersign::Rewrite::Arguments(serde_json::json!({ "name": "B" })),
                _ => countersign::Rewrite::Keep,
            })
            .consequence(|p| {
                assert_ne!(p.name, "B", "the page's hook failed");
                format!("set the name to `{}`", p.name)
            }),
    );
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    caught(|| drop(w.exec.edit(card.call, r#"{"name":"b"}"#, at(1))));
    let told = w.exec.drain_settled();
    assert_eq!(told.len(), 1, "told once");
    assert_eq!(common::code(&told[0]), "UNAVAILABLE");
    assert!(told[0].edited.is_some(), "the person's edit was not told");
    every_call_ends_once(&w);
}

/// A hook that panics while a waiting card is drawn again, before the ticket is spent,
/// changes nothing: the card still waits, and the same ticket approves it afterwards.
#[test]
fn a_hook_panicking_as_a_card_is_redrawn_leaves_it_waiting() {
    let (w, armed) = failing_rename();
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    armed.set(true);
    caught(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    assert!(told(&w.exec).is_empty(), "nothing ended");
    assert_eq!(w.exec.live_calls(), 1, "the card still waits");
    let settled = w.allow(&card, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(common::code(&settled), "OK");
    assert_eq!(w.runs(), ["rename:a"]);
    every_call_ends_once(&w);
}

/// The sink fails on a rewrite's record, then the target's hook panics in the same
/// step, and the host drops the executor while that panic unwinds: the sink's payload,
/// still kept to be raised, is forgotten, never dropped then (a payload whose drop
/// panics would abort the process).
#[test]
fn an_executor_dropped_while_a_hook_panic_unwinds_forgets_the_sinks_panic() {
    use countersign::{AuditEvent, AuditRecord, AuditSink, Config, Executor, MemoryAudit};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let audit = MemoryAudit::new();
    let dropped_unwinding = Arc::new(AtomicBool::new(false));
    let (mut kept, flag) = (audit.clone(), Arc::clone(&dropped_unwinding));
    let sink = move |r: AuditRecord| {
        let fail = r.event == AuditEvent::Rewritten;
        kept.record(r);
        if fail {
            std::panic::panic_any(Loud(Arc::clone(&flag)));
        }
    };
    let config = Config::new(
        "test",
        countersign::Session::new("admin", ["workspace.write"]),
        [42; 32],
    );
    let mut w = World {
        exec: Executor::new(config, sink),
        audit,
        runs: Rc::default(),
        regs: Vec::new(),
    };
    let armed = armed();
    let fail = Rc::clone(&armed);
    w.add(
        w.action("rename", Kind::Write, Confirm::Ask)
            .consequence(move |p| {
                fail_if(&fail);
                format!("set the name to `{}`", p.name)
            }),
    );
    w.add(
        w.action("route", Kind::Write, Confirm::Ask)
            .rewrite(|p| countersign::Rewrite::Action {
                action: "rename".into(),
                arguments: serde_json::json!({ "name": p.name }),
                why: "route".into(),
            }),
    );
    armed.set(true);
    let audit = w.audit.clone();
    // The host owns the executor in the frame the hook's panic unwinds through.
    caught(move || {
        let w = w;
        drop(w.call("route", r#"{"name":"a"}"#, 0));
    });
    assert!(
        audit
            .records()
            .iter()
            .any(|r| r.event == AuditEvent::Rewritten),
        "the sink failed on the rewrite"
    );
    assert!(
        !dropped_unwinding.load(Ordering::SeqCst),
        "the sink's panic was dropped while the hook's panic unwound"
    );
}
