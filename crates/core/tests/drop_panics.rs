//! The page's params (or an action's hooks) whose drop panics, caught by a native host.
//! The executor lets go of them where a call settles or an action is removed; a drop
//! that panics there must not stop the step half way (calls left live, a removal lost
//! with its grants still in force), nor drop a panic already in hand while it unwinds.
//! The drop's panic is raised once the step is done.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{arm, at, told, world_with_a_failing_sink, Brittle, Loud, World, ARMED};
use countersign::{Action, Call, Confirm, Gesture, Kind, Registration, Step};

/// An action asked on a card, with `Brittle` params.
fn brittle(id: &str) -> Action<Brittle> {
    Action::<Brittle>::new(id, "Save.")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(|p: Brittle| async move { Ok::<_, String>(p.name.clone()) })
}

/// Drops `regs` inside a hook (the `tidy` action's, called here) after arming
/// [`ARMED`]: the executor is busy, so their removals are posted, to be applied by
/// the next operation, whatever that is.
fn removed_in_a_hook(w: &mut World, regs: Vec<Registration>) {
    let held = RefCell::new(regs);
    w.add(
        w.action("tidy", Kind::Write, Confirm::Ask)
            .consequence(move |_| {
                arm();
                held.borrow_mut().clear();
                "tidy up".into()
            }),
    );
    drop(w.call("tidy", r#"{"name":"a"}"#, 1));
}

/// `f`, which panics: the host catches it and gets its payload.
fn caught(f: impl FnOnce()) -> Box<dyn std::any::Any + Send> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err()
}

/// `run` panics as it starts after the person approved, and the call's params panic as
/// the approval settles the call: `run`'s panic (in hand while the call is settled) is
/// what reaches the host, and it is never dropped while the params' panic unwinds.
#[test]
fn a_params_drop_panicking_as_a_panicked_run_settles_keeps_the_runs_panic() {
    let mut w = World::new();
    let dropped_unwinding = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dropped_unwinding);
    let action = brittle("save")
        // With a `verify`, the call keeps its params after `run` takes a copy.
        .verify(|_, _| Ok(()))
        .run(
            move |_: Brittle| -> std::future::Ready<Result<(), String>> {
                arm();
                std::panic::panic_any(Loud(Arc::clone(&flag)))
            },
        );
    w.regs.push(w.exec.register(action).unwrap());
    let card = w.card("save", r#"{"name":"brittle"}"#, 0);
    let payload = caught(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    assert!(
        !dropped_unwinding.load(Ordering::SeqCst),
        "run's panic was dropped while the params' panic unwound"
    );
    assert!(
        payload.is::<Loud>(),
        "the host got another panic than run's"
    );
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    assert_eq!(told(&w.exec).len(), 1, "told once");
    assert_eq!(w.terminal(card.call).len(), 1, "one terminal record");
}

/// Two registrations dropped inside a hook (the executor busy) are posted; applying the
/// first settles a card whose params panic as they are dropped. The second is still
/// applied: its action is no longer offered and its waiting card ends, where before it
/// stayed registered (with its session grants in force) and its card waited on.
#[test]
fn a_params_drop_panicking_while_posted_removals_apply_loses_none_of_them() {
    let mut w = World::new();
    let regs = vec![
        w.exec.register(brittle("first")).unwrap(),
        w.exec.register(brittle("second")).unwrap(),
    ];
    let first = w.card("first", r#"{"name":"brittle"}"#, 0);
    let second = w.card("second", r#"{"name":"calm"}"#, 0);
    removed_in_a_hook(&mut w, regs);
    // The next operation applies what was posted; the params' panic is raised after.
    caught(|| {
        w.exec.live_calls();
    });
    assert_eq!(w.exec.registration("first"), None, "first still offered");
    assert_eq!(w.exec.registration("second"), None, "second still offered");
    for call in [first.call, second.call] {
        let ends = w.terminal(call);
        assert_eq!(ends.len(), 1, "call {call:?} did not end once");
        assert_eq!(ends[0].reason, countersign::Reason::Unregistered);
    }
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    assert!(w.runs().is_empty(), "run was reached");
}

/// A shutdown whose first settled call's params panic as they are dropped still ends
/// every call: each told once, one terminal record each, nothing left live.
#[test]
fn a_params_drop_panicking_during_shutdown_still_ends_every_call() {
    let mut w = World::new();
    w.regs.push(w.exec.register(brittle("save")).unwrap());
    let cards: Vec<_> = (0..3)
        .map(|i| w.card("save", r#"{"name":"brittle"}"#, i))
        .collect();
    arm();
    caught(|| drop(w.exec.shutdown(at(5))));
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    let told = told(&w.exec);
    assert_eq!(told.len(), cards.len(), "each call told once: {told:?}");
    for card in &cards {
        let ends = w.terminal(card.call);
        assert_eq!(ends.len(), 1, "call {:?} did not end once", card.call);
        assert_eq!(ends[0].reason, countersign::Reason::PageClosed);
    }
}

/// A timeout that settles cards whose params panic as they are dropped settles every
/// card that timed out in the same step.
#[test]
fn a_params_drop_panicking_as_cards_time_out_still_ends_every_one() {
    let mut w = World::new();
    w.regs.push(w.exec.register(brittle("save")).unwrap());
    let cards: Vec<_> = (0..3)
        .map(|_| w.card("save", r#"{"name":"brittle"}"#, 0))
        .collect();
    arm();
    caught(|| drop(w.exec.handle_timeout(at(10 * 60 * 1000))));
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    for card in &cards {
        assert_eq!(w.terminal(card.call).len(), 1, "a card did not end once");
    }
}

/// Something an action's hook holds, whose drop panics once [`ARMED`] is set.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() && ARMED.with(|a| a.replace(false)) {
            panic!("the page's hook failed as it was dropped");
        }
    }
}

/// The same where what panics is the removed action itself (a hook's captured state):
/// the executor lets go of it only once the removal is made, and the next removal
/// posted is still applied.
#[test]
fn an_action_whose_hooks_panic_as_they_are_dropped_loses_no_posted_removal() {
    let mut w = World::new();
    let bomb = Bomb;
    let first = w
        .action("first", Kind::Write, Confirm::Ask)
        .available(move || {
            let _held = &bomb;
            true
        });
    let regs = vec![
        w.exec.register(first).unwrap(),
        w.exec
            .register(w.action("second", Kind::Write, Confirm::Ask))
            .unwrap(),
    ];
    let second = w.card("second", r#"{"name":"a"}"#, 0);
    removed_in_a_hook(&mut w, regs);
    caught(|| {
        w.exec.live_calls();
    });
    assert_eq!(w.exec.registration("first"), None, "first still offered");
    assert_eq!(w.exec.registration("second"), None, "second still offered");
    assert_eq!(
        w.terminal(second.call).len(),
        1,
        "second's card did not end"
    );
    assert!(w.runs().is_empty(), "run was reached");
}

/// Posts the removal of an action whose waiting card's params panic as they are
/// dropped: a hook drops its registration while the executor is busy, so the removal
/// is applied by the next operation, whatever that is.
fn post_a_panicking_removal(w: &mut World) {
    let regs = vec![w.exec.register(brittle("first")).unwrap()];
    drop(w.card("first", r#"{"name":"brittle"}"#, 0));
    removed_in_a_hook(w, regs);
}

/// The panic a posted removal left is raised before the next approval takes anything:
/// the person's approval is not spent on it, and the call it approves is not ended
/// interrupted by a failure not its own. Approved again, it runs, under its grant.
#[test]
fn a_panic_posted_before_an_approval_spoils_neither_it_nor_its_grant() {
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    post_a_panicking_removal(&mut w);
    let gesture = Gesture::AllowForSession;
    caught(|| drop(w.exec.approve(card.countersign(gesture), at(2))));
    assert!(w.terminal(card.call).is_empty(), "the approved call ended");
    assert!(
        w.allow(&card, gesture, 3).is_some(),
        "approved again, it ran"
    );
    assert_eq!(w.runs(), ["wipe:a"]);
    let again = w.call("wipe", r#"{"name":"b"}"#, 4);
    assert!(
        matches!(again, countersign::Step::Perform(_)),
        "the grant the trail holds is not in force: {again:?}"
    );
}

/// A trail gap recorded by the operation that raises a posted removal's panic is not
/// recorded: the host, which gets no `seq` back, records it again, and the trail holds
/// one gap, not two.
#[test]
fn a_panic_posted_before_a_trail_gap_does_not_record_it_twice() {
    let mut w = World::new();
    post_a_panicking_removal(&mut w);
    caught(|| {
        let _gap = w.exec.record_trail_gap(1, 2, 0, at(2));
    });
    w.exec.record_trail_gap(1, 2, 0, at(3)).unwrap();
    let gaps = w
        .audit
        .records()
        .iter()
        .filter(|r| r.event == countersign::AuditEvent::TrailGap)
        .count();
    assert_eq!(gaps, 1, "the trail holds the gap {gaps} times");
}

/// The same for a grant restored from storage: restored once, not twice (a second
/// grant the host has no id for would stay in force after it revokes the first).
#[test]
fn a_panic_posted_before_a_grant_is_restored_does_not_restore_it_twice() {
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let basis = countersign::GrantBasis {
        action: "wipe".into(),
        registration: w.exec.registration("wipe").unwrap_or_default(),
        role: "admin".into(),
        arguments: serde_json::json!({ "name": "a" }),
        caller: countersign::Caller::Assistant,
    };
    post_a_panicking_removal(&mut w);
    caught(|| {
        drop(w.exec.restore_grant(&basis, at(2)));
    });
    let grant = w.exec.restore_grant(&basis, at(3)).unwrap();
    assert_eq!(w.exec.grants().len(), 1, "restored twice");
    assert!(w.exec.revoke(grant).unwrap());
    assert!(w.exec.grants().is_empty(), "a grant stayed in force");
}

/// A call rewritten to other arguments: the original params, let go of once the
/// rewritten call is decided, panic as they are dropped. The rewritten call's card
/// stays, waiting for the person (before, the panic passed for a hook's failure and cut
/// the card short as interrupted), and the panic reaches the host after.
#[test]
fn a_params_drop_panicking_after_a_rewrite_leaves_the_rewritten_card_waiting() {
    let mut w = World::new();
    let action = brittle("save").rewrite(|p| {
        if p.name == "brittle" {
            countersign::Rewrite::Arguments(serde_json::json!({ "name": "calm" }))
        } else {
            countersign::Rewrite::Keep
        }
    });
    w.regs.push(w.exec.register(action).unwrap());
    arm();
    caught(|| drop(w.call("save", r#"{"name":"brittle"}"#, 0)));
    let cards = w.exec.approvals();
    assert_eq!(cards.len(), 1, "the rewritten card was cut short");
    assert!(w.terminal(cards[0].call).is_empty(), "it ended");
    assert!(
        w.allow(&cards[0], Gesture::AllowOnce, 1).is_some(),
        "it ran"
    );
}

/// A call refused after its params were read (here by its classifier): their drop's
/// panic does not pass for a hook's failure; the call ends refused for its own reason.
#[test]
fn a_params_drop_panicking_as_a_call_is_refused_keeps_the_refusals_reason() {
    let mut w = World::new();
    let action = brittle("save").classify(|_| countersign::Verdict::Deny("no".into()));
    w.regs.push(w.exec.register(action).unwrap());
    arm();
    caught(|| drop(w.call("save", r#"{"name":"brittle"}"#, 0)));
    let ends = w.first_calls_ends();
    assert_eq!(ends.len(), 1, "one terminal record");
    assert_eq!(ends[0].reason, countersign::Reason::ClassifierDenied);
    assert_eq!(told(&w.exec).len(), 1, "told once");
}

thread_local! {
    static DROPPED_UNWINDING: Cell<bool> = const { Cell::new(false) };
}

/// Params that note whether the ones named `orig` were dropped while a panic unwound
/// (where a drop that panics aborts the process).
#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Witness {
    /// A name.
    name: String,
}

impl Drop for Witness {
    fn drop(&mut self) {
        if self.name == "orig" && std::thread::panicking() {
            DROPPED_UNWINDING.with(|d| d.set(true));
        }
    }
}

/// A `save` action of `Witness` params, asked on a card.
fn witness() -> Action<Witness> {
    Action::<Witness>::new("save", "Save.")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(|p: Witness| async move { Ok::<_, String>(p.name.clone()) })
}

/// A person's edit whose new call's hook panics: the original call's params were let go
/// of before the edited call was decided, never while the hook's panic unwinds.
#[test]
fn an_edit_whose_hook_panics_lets_go_of_the_original_before() {
    let mut w = World::new();
    let action = witness().consequence(|p| {
        if p.name == "boom" {
            panic!("the page's hook failed");
        }
        format!("save {}", p.name)
    });
    w.regs.push(w.exec.register(action).unwrap());
    let card = w.card("save", r#"{"name":"orig"}"#, 0);
    caught(|| drop(w.exec.edit(card.call, r#"{"name":"boom"}"#, at(1))));
    assert!(
        !DROPPED_UNWINDING.with(Cell::get),
        "the original params were dropped while the hook's panic unwound"
    );
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
}

/// A call rewritten (depth 1), whose new params' hook panics before it is live: those
/// params are let go of before the panic goes on, never dropped while it unwinds.
#[test]
fn a_rewritten_call_whose_hook_panics_lets_go_of_its_params_before() {
    let mut w = World::new();
    let action = witness()
        .rewrite(|p| {
            if p.name == "a" {
                countersign::Rewrite::Arguments(serde_json::json!({ "name": "orig" }))
            } else {
                countersign::Rewrite::Keep
            }
        })
        .consequence(|p| {
            if p.name == "orig" {
                panic!("the page's hook failed");
            }
            format!("save {}", p.name)
        });
    w.regs.push(w.exec.register(action).unwrap());
    caught(|| drop(w.call("save", r#"{"name":"a"}"#, 0)));
    assert!(
        !DROPPED_UNWINDING.with(Cell::get),
        "the rewritten call's params were dropped while the hook's panic unwound"
    );
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
    assert_eq!(told(&w.exec).len(), 1, "told once");
}

/// A new call submitted as a posted removal's panic is raised is still taken: it is
/// recorded, ended and told once (the host cannot tell this panic from a hook's, which
/// ends its call, so a call that vanished would never be answered).
#[test]
fn a_panic_posted_before_a_call_arrives_does_not_lose_the_call() {
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    post_a_panicking_removal(&mut w);
    let call = countersign::Call::new("t9", "wipe", r#"{"name":"a"}"#);
    caught(|| drop(w.exec.submit(call, at(2))));
    let mine: Vec<_> = w
        .audit
        .records()
        .into_iter()
        .filter(|r| &*r.tool_call_id == "t9")
        .collect();
    assert!(!mine.is_empty(), "the call vanished: no record of it");
    let waiting = w
        .exec
        .approvals()
        .iter()
        .any(|c| c.call.get() == mine[0].call);
    let ended = mine.iter().filter(|r| r.is_terminal()).count();
    assert!(
        waiting || ended == 1,
        "the call neither waits nor ended once ({ended} terminal records)"
    );
}

/// An action whose call is rewritten to other arguments and then runs unasked, its
/// `run` reading the executor; the original params panic as they are let go of once
/// the rewritten call is decided. The returned flag makes the sink fail on terminal
/// records.
fn rewritten_to_run() -> (World, std::rc::Rc<Cell<bool>>) {
    let (mut w, failing) = world_with_a_failing_sink(countersign::AuditEvent::Settled, true);
    failing.set(false);
    let exec = w.exec.clone();
    let action = Action::<Brittle>::new("peek", "Peek.")
        .kind(Kind::Read)
        .rewrite(|p| {
            if p.name == "brittle" {
                arm();
                countersign::Rewrite::Arguments(serde_json::json!({ "name": "calm" }))
            } else {
                countersign::Rewrite::Keep
            }
        })
        .run(move |p: Brittle| {
            let exec = exec.clone();
            async move {
                // The page's run reads the executor as it goes.
                let seen = exec.live_calls();
                Ok::<_, String>(format!("{} of {seen}", p.name))
            }
        });
    w.regs.push(w.exec.register(action).unwrap());
    (w, failing)
}

/// A call rewritten to other arguments that then runs unasked: the original params,
/// let go of once the rewritten call is decided, panic as they are dropped. The job is
/// still handed back, and neither the host reading the queue first (as its loop does)
/// nor `run` reading the executor meets the panic: `complete` raises it, once the call
/// is settled as done. Before, it was raised as the job was handed back (dropping the
/// job ended the call interrupted by a failure not its own), and then, held over, by
/// whatever step came next.
#[test]
fn a_params_drop_panicking_after_a_rewrite_does_not_interrupt_the_job() {
    let (w, _) = rewritten_to_run();
    let step = w.call("peek", r#"{"name":"brittle"}"#, 0);
    let Step::Perform(job) = step else {
        panic!("expected the rewritten call to run, got {step:?}")
    };
    assert!(told(&w.exec).is_empty(), "nothing settled yet");
    let completion = pollster::block_on(job.run());
    let call = completion.call();
    let payload = caught(|| {
        w.exec.complete(completion, at(1));
    });
    assert_eq!(
        message(&*payload),
        "the page's params failed as they were dropped"
    );
    assert_eq!(told(&w.exec), [(call, "OK")], "told once, as done");
    assert_eq!(w.terminal(call).len(), 1, "one terminal record");
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
}

/// The same where the call's terminal record fails in the sink: the host gets the
/// sink's panic (a record may be lost), not the params' one the job carried.
#[test]
fn a_job_carrying_a_drop_panic_raises_the_sinks_first() {
    let (w, failing) = rewritten_to_run();
    let completion = ran(&w, "peek", r#"{"name":"brittle"}"#, 0);
    failing.set(true);
    let payload = caught(|| {
        w.exec.complete(completion, at(1));
    });
    failing.set(false);
    assert_eq!(message(&*payload), "the disk is full");
}

/// A job carrying a drop's panic that the host drops instead of running: the call
/// settles as interrupted (the host gave it up) and the panic is raised there.
#[test]
fn a_job_carrying_a_drop_panic_raises_it_when_dropped() {
    let (w, _) = rewritten_to_run();
    let Step::Perform(job) = w.call("peek", r#"{"name":"brittle"}"#, 0) else {
        panic!("expected the rewritten call to run")
    };
    let call = job.call();
    let payload = caught(|| drop(job));
    assert_eq!(
        message(&*payload),
        "the page's params failed as they were dropped"
    );
    assert_eq!(told(&w.exec), [(call, "EXECUTION_FAILED")]);
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
}

/// The same where the panic was posted (a removal applied as the call arrives) and the
/// call runs under the person's session grant: the call runs, and the panic reaches the
/// host from the next step instead of ending the call interrupted.
#[test]
fn a_panic_posted_before_a_granted_call_does_not_interrupt_it() {
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    let card = w.card("wipe", r#"{"name":"a"}"#, 0);
    assert!(w.allow(&card, Gesture::AllowForSession, 1).is_some());
    told(&w.exec);
    post_a_panicking_removal(&mut w);
    let step = w
        .exec
        .submit(Call::new("tc_2", "wipe", r#"{"name":"a"}"#), at(2));
    let Ok(Step::Perform(job)) = step else {
        panic!("expected the granted call to run, got {step:?}")
    };
    let completion = pollster::block_on(job.run());
    let call = completion.call();
    caught(|| {
        w.exec.complete(completion, at(3));
    });
    let told_of_it: Vec<_> = told(&w.exec).into_iter().filter(|t| t.0 == call).collect();
    assert_eq!(told_of_it, [(call, "OK")], "told once, as done");
    assert_eq!(w.terminal(call).len(), 1, "one terminal record");
    assert_eq!(w.runs(), ["wipe:a", "wipe:a"]);
}

/// A grant restored from storage whose params panic as they are let go of: no grant is
/// made behind the panic (the host, which gets no id back, tries again, and revoking
/// the id it then gets leaves none in force).
#[test]
fn a_params_drop_panicking_as_a_grant_is_restored_makes_no_grant() {
    let mut w = World::new();
    w.regs.push(w.exec.register(brittle("wipe")).unwrap());
    let basis = countersign::GrantBasis {
        action: "wipe".into(),
        registration: w.exec.registration("wipe").unwrap_or_default(),
        role: "admin".into(),
        arguments: serde_json::json!({ "name": "brittle" }),
        caller: countersign::Caller::Assistant,
    };
    arm();
    caught(|| {
        drop(w.exec.restore_grant(&basis, at(2)));
    });
    assert!(
        w.exec.grants().is_empty(),
        "a grant was made behind the panic"
    );
    let grant = w.exec.restore_grant(&basis, at(3)).unwrap();
    assert!(w.exec.revoke(grant).unwrap());
    assert!(w.exec.grants().is_empty(), "a grant stayed in force");
}

/// Params the action's validator refuses, or with a field the model was not shown,
/// panic as they are dropped: the call is refused for its arguments (the params are let
/// go of once it is refused), not as the validate hook's failure.
#[test]
fn a_params_drop_panicking_as_arguments_are_refused_keeps_invalid_arguments() {
    let refusing = || {
        brittle("save").validate(|p| match p.name.as_str() {
            "brittle" => Err("no such name".into()),
            _ => Ok(()),
        })
    };
    let cases = [
        (refusing(), r#"{"name":"brittle"}"#),
        (brittle("save"), r#"{"name":"brittle","extra":1}"#),
    ];
    for (action, args) in cases {
        let mut w = World::new();
        w.regs.push(w.exec.register(action).unwrap());
        arm();
        caught(|| drop(w.call("save", args, 0)));
        let ends = w.first_calls_ends();
        assert_eq!(ends.len(), 1, "one terminal record for {args}");
        assert_eq!(
            ends[0].reason,
            countersign::Reason::InvalidArguments,
            "for {args}"
        );
        let told: Vec<_> = told(&w.exec).into_iter().map(|t| t.1).collect();
        assert_eq!(told, ["INVALID_ARGS"], "for {args}");
        assert!(w.runs().is_empty());
    }
}

/// An action's validator that panics: the params it was given are not dropped while its
/// panic unwinds (a drop that panicked then would abort the process); the call is
/// refused as the validate hook's failure.
#[test]
fn a_validator_panicking_lets_go_of_its_params_after() {
    let mut w = World::new();
    let action = witness().validate(|p| {
        if p.name == "orig" {
            panic!("the page's validator failed");
        }
        Ok(())
    });
    w.regs.push(w.exec.register(action).unwrap());
    caught(|| drop(w.call("save", r#"{"name":"orig"}"#, 0)));
    assert!(
        !DROPPED_UNWINDING.with(Cell::get),
        "the params were dropped while the validator's panic unwound"
    );
    let ends = w.first_calls_ends();
    assert_eq!(ends.len(), 1, "one terminal record");
    assert_eq!(
        ends[0].reason,
        countersign::Reason::HookFailed {
            hook: countersign::Hook::Validate
        }
    );
    assert_eq!(told(&w.exec).len(), 1, "told once");
}

/// Submits a call that runs unasked and runs its job: the completion, not yet handed
/// back.
fn ran(w: &World, action: &str, args: &str, at: u64) -> countersign::Completion {
    let Step::Perform(job) = w.call(action, args, at) else {
        panic!("expected {action} to run unasked")
    };
    pollster::block_on(job.run())
}

/// The message of a panic's payload.
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|m| (*m).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// A call checked by `verify` settles, its terminal record fails in the sink, and then
/// the call's params (last held by the step's own copy) panic as they are dropped:
/// they are let go of inside the step, so the sink's panic, the first, is the one the
/// host gets. Before, the copy was dropped as the step unwound, outside its catch, and
/// the host got the params' panic, never told that the record may be lost.
#[test]
fn a_params_drop_panicking_after_a_failing_terminal_record_raises_the_sinks() {
    let (mut w, failing) = world_with_a_failing_sink(countersign::AuditEvent::Settled, true);
    let action = Action::<Brittle>::new("peek", "Peek.")
        .kind(Kind::Read)
        .verify(|_, _| Ok(()))
        .run(|p: Brittle| async move { Ok::<_, String>(p.name.clone()) });
    w.regs.push(w.exec.register(action).unwrap());
    let completion = ran(&w, "peek", r#"{"name":"brittle"}"#, 0);
    let call = completion.call();
    failing.set(true);
    arm();
    let payload = caught(|| {
        w.exec.complete(completion, at(1));
    });
    failing.set(false);
    assert_eq!(message(&*payload), "the disk is full");
    assert_eq!(w.terminal(call).len(), 1, "one terminal record");
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
}

/// The same after a person's approval, where the card drawn again is refused (the
/// classifier now denies): the step's own copy of the call's params is let go of inside
/// the step, and the host gets the sink's panic, the first.
#[test]
fn a_params_drop_panicking_after_a_refused_redraw_raises_the_sinks() {
    let (mut w, failing) = world_with_a_failing_sink(countersign::AuditEvent::Settled, true);
    let deny = std::rc::Rc::new(Cell::new(false));
    let denying = std::rc::Rc::clone(&deny);
    let action = brittle("save").classify(move |_| match denying.get() {
        true => countersign::Verdict::Deny("no longer".into()),
        false => countersign::Verdict::Allow,
    });
    w.regs.push(w.exec.register(action).unwrap());
    let card = w.card("save", r#"{"name":"brittle"}"#, 0);
    deny.set(true);
    failing.set(true);
    arm();
    let payload = caught(|| drop(w.exec.approve(card.countersign(Gesture::AllowOnce), at(1))));
    failing.set(false);
    assert_eq!(message(&*payload), "the disk is full");
    assert_eq!(w.terminal(card.call).len(), 1, "one terminal record");
    assert!(w.runs().is_empty(), "run was reached");
}

/// A posted removal's drop panics as the next call arrives, and that call's record
/// then fails in the sink: the host gets the sink's panic (a record may be lost), not
/// the drop's.
#[test]
fn a_sink_panic_after_a_posted_drop_panic_is_the_one_raised() {
    let (mut w, failing) = world_with_a_failing_sink(countersign::AuditEvent::Asked, true);
    w.add(w.action("wipe", Kind::Write, Confirm::Ask));
    post_a_panicking_removal(&mut w);
    failing.set(true);
    let payload = caught(|| drop(w.call("wipe", r#"{"name":"a"}"#, 2)));
    failing.set(false);
    assert_eq!(message(&*payload), "the disk is full");
}

/// A `save` action of `Witness` params, asked on a card, whose validator and `remember`
/// hook panic for the params named `orig`.
fn witness_panicking_on_orig() -> Action<Witness> {
    let fail = |p: &Witness| {
        if p.name == "orig" {
            panic!("the page's hook failed");
        }
    };
    witness()
        .validate(move |p| {
            fail(p);
            Ok(())
        })
        .remember(move |p| {
            fail(p);
            countersign::GrantRule::every_call()
        })
}

/// Outside the gate (an edit checked before anything changes, a form's check, a grant
/// restored from storage), a validator or `remember` hook that panics: the params it
/// was given are let go of before its panic goes on, never dropped while it unwinds.
#[test]
fn hooks_panicking_outside_the_gate_let_go_of_their_params_first() {
    fn basis(w: &World) -> countersign::GrantBasis {
        countersign::GrantBasis {
            action: "save".into(),
            registration: w.exec.registration("save").unwrap_or_default(),
            role: "admin".into(),
            arguments: serde_json::json!({ "name": "orig" }),
            caller: countersign::Caller::Assistant,
        }
    }
    type Step3 = fn(&World, countersign::CallId);
    let steps: [(&str, Step3); 3] = [
        ("edit", |w, call| {
            drop(w.exec.edit(call, r#"{"name":"orig"}"#, at(1)))
        }),
        ("check_arguments", |w, _| {
            drop(w.exec.check_arguments("save", r#"{"name":"orig"}"#))
        }),
        ("restore_grant", |w, _| {
            drop(w.exec.restore_grant(&basis(w), at(1)))
        }),
    ];
    for (name, step) in steps {
        let mut w = World::new();
        w.regs
            .push(w.exec.register(witness_panicking_on_orig()).unwrap());
        let card = w.card("save", r#"{"name":"a"}"#, 0);
        DROPPED_UNWINDING.with(|d| d.set(false));
        caught(|| step(&w, card.call));
        assert!(
            !DROPPED_UNWINDING.with(Cell::get),
            "{name}: the params were dropped while the hook's panic unwound"
        );
        assert_eq!(w.exec.live_calls(), 1, "{name}: the card no longer waits");
        assert!(w.exec.grants().is_empty(), "{name}: a grant was made");
    }
}

/// A hook that hands back a completion carrying a drop's panic while the executor is
/// busy (here `verify`, completing another call): `complete` answers `Reentered` and
/// the completion is dropped there, as ever, but the panic it carried is not raised
/// inside the hook (where it passed for the hook's own failure and ended the hook's
/// call interrupted): the hook's call is refused as `hook_reentered`, like any hook
/// that reaches into the executor, and the executor's next operation raises the panic.
#[test]
fn a_carried_panic_handed_back_inside_a_hook_is_raised_by_the_next_step() {
    let (mut w, _) = rewritten_to_run();
    let carrying = ran(&w, "peek", r#"{"name":"brittle"}"#, 0);
    let first = carrying.call();
    let slot = std::rc::Rc::new(RefCell::new(Some(carrying)));
    let (exec, held) = (w.exec.clone(), std::rc::Rc::clone(&slot));
    let check = Action::<Brittle>::new("check", "Check.")
        .kind(Kind::Read)
        .verify(move |_, _| {
            if let Some(completion) = held.borrow_mut().take() {
                exec.complete(completion, at(1));
            }
            Ok(())
        })
        .run(|p: Brittle| async move { Ok::<_, String>(p.name.clone()) });
    w.regs.push(w.exec.register(check).unwrap());
    let completion = ran(&w, "check", r#"{"name":"calm"}"#, 1);
    let second = completion.call();
    assert!(
        w.exec.complete(completion, at(2)),
        "complete panicked or failed"
    );
    let ends = w.terminal(second);
    assert_eq!(ends.len(), 1, "one terminal record");
    assert_eq!(
        ends[0].reason,
        countersign::Reason::HookReentered {
            hook: countersign::Hook::Verify
        }
    );
    let payload = caught(|| {
        w.exec.live_calls();
    });
    assert_eq!(
        message(&*payload),
        "the page's params failed as they were dropped"
    );
    assert_eq!(
        w.terminal(first).len(),
        1,
        "the first call did not end once"
    );
    assert_eq!(w.exec.live_calls(), 0, "a call was left live");
}
