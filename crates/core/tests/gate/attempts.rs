//! A fresh reviewer's attacks on today's changes (one parse of the arguments, poisoning
//! after a panic, the pure decision, grants as a sub-state). Each test names the promise
//! it checks. Tests named `break_*` failed on the code they were written against: each
//! says what breaks. The others are attacks the gate held against.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use countersign::ticket::TicketError;
use countersign::{
    action::LocalBoxFuture, audit::ArgsDigest, audit::AuditEvent,
    countersignature::Countersignature, countersignature::Countersigner,
    countersignature::MintRequest, Action, Blocked, Call, Config, Confirm, Gesture, Kind, Reason,
    Session, Step,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::common::{at, code, drive, Named, World};

/// A world with `save` (asked, grant offered) and `boom` (a write whose classifier panics).
fn world() -> World {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let boom = w
        .action("boom", Kind::Write, Confirm::Unset)
        .classify(|_| panic!("the page's classifier failed"));
    w.add(boom);
    w
}

/// Submits `boom`: its hook's panic reaches the host, and the executor is poisoned.
fn poison(w: &World) {
    let submitted = catch_unwind(AssertUnwindSafe(|| {
        w.exec
            .submit(Call::new("tc_boom", "boom", r#"{"name":"x"}"#), at(5))
    }));
    assert!(submitted.is_err(), "the hook's panic reaches the host");
    assert!(w.exec.is_poisoned());
}

/// Runs `f` when dropped while the thread unwinds (a host's cleanup code).
struct OnUnwind<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.0)();
        }
    }
}

/// A signer that logs every request and mints `tok`.
#[derive(Clone, Default)]
struct Signer {
    asked: Rc<RefCell<Vec<MintRequest>>>,
}

impl Countersigner for Signer {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        self.asked.borrow_mut().push(request);
        Box::pin(async { Ok(Countersignature::new("tok")) })
    }
}

/// A countersigned action that logs `id:name` when it runs.
fn signed(w: &World, id: &str) -> Action<Named> {
    let runs = Rc::clone(&w.runs);
    let tag = id.to_owned();
    Action::<Named>::new(id, "a countersigned action")
        .kind(Kind::Danger)
        .run_countersigned(move |p: Named, _token: Countersignature| {
            let runs = Rc::clone(&runs);
            let tag = tag.clone();
            async move {
                runs.borrow_mut().push(format!("{tag}:{}", p.name));
                Ok::<_, String>(serde_json::json!({}))
            }
        })
}

// ---------------------------------------------------------------------------------
// 1. One parse of the arguments: card, ticket, audit and run see the same arguments.
// ---------------------------------------------------------------------------------

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

/// BREAK: the schema check chooses an untagged alternative by type, `const` and
/// `required` only, and ignores `minimum`/`maximum`/`format`; serde's own choice also
/// fails on a number out of the field's range. So `{"rows":[3, 4294967296]}` passes the
/// check judged against `Some { rows }` (every field declared), while serde cannot read
/// 4294967296 as a `u32` and falls through to `All {}`, dropping `rows`. The card shows
/// "rows 3 and 4294967296" as "the exact arguments that will run"; the ticket binds
/// them; `run` purges every row.
/// Likely fix: make `fits_scalar` honour the keywords schemars writes for serde's own
/// limits (`minimum`/`maximum`, integer `format`s such as `uint32`/`int8`, string
/// `minLength`/`maxLength` for `char`), so the check falls through to the next
/// alternative exactly where serde does; or refuse outright when the alternative serde
/// took is not the one the check judged (e.g. judge the value against every fitting
/// alternative in Closed mode and require them all to pass).
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

// ---------------------------------------------------------------------------------
// 2. Panics poison; nothing runs, no ticket is taken, no grant is made after one.
// ---------------------------------------------------------------------------------

/// BREAK: `Stepping` decides whether a step's panic is its own by comparing
/// `thread::panicking()` at its start and at its drop. A step that begins while an
/// unrelated panic unwinds (a host's cleanup code, a `Drop`) has `was_panicking`, so a
/// hook's panic inside it (caught by that cleanup code: nested panics are allowed since
/// Rust 1.71) leaves the step half made and the executor NOT poisoned. Here the approved
/// call's sync `run` hook panics after the ticket was spent: the call is stuck in
/// "performing" for ever (no terminal record), and the executor takes later tickets.
/// Likely fix: poison unless the step finished: set a `finished` flag on `Stepping`
/// after `f` returns (and after `begin`'s mailbox), and poison in `Drop` when it is not
/// set, instead of comparing `thread::panicking()`.
#[test]
fn break_a_hook_panic_inside_a_hosts_unwind_cleanup_still_poisons() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let armed = Rc::new(Cell::new(false));
    let trip = Rc::clone(&armed);
    let tripwire = Action::<Named>::new("tripwire", "a run whose sync part panics")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(move |_p: Named| {
            if trip.get() {
                panic!("the page's run closure failed");
            }
            async { Ok::<_, String>(()) }
        });
    w.add(tripwire);
    let first = w.card("tripwire", r#"{"name":"t"}"#, 0);
    let later = w.card("save", r#"{"name":"later"}"#, 0);
    armed.set(true);

    let exec = w.exec.clone();
    let inner_panicked = Rc::new(Cell::new(false));
    let seen = Rc::clone(&inner_panicked);
    let ticket = RefCell::new(Some(first.countersign(Gesture::AllowOnce)));
    let outer = catch_unwind(AssertUnwindSafe(|| {
        let _cleanup = OnUnwind(|| {
            // The host's cleanup approves the card the person had just pressed.
            let Some(ticket) = ticket.borrow_mut().take() else {
                return;
            };
            let inner = catch_unwind(AssertUnwindSafe(|| exec.approve(ticket, at(1))));
            seen.set(inner.is_err());
        });
        panic!("the host's own code failed");
    }));
    assert!(outer.is_err());
    assert!(
        inner_panicked.get(),
        "the run hook panicked inside the step"
    );
    assert!(
        w.exec.is_poisoned(),
        "a hook panicked in a step and left it half made (call {} performing with no job, \
         {} live calls, {} terminal records), but the executor is not poisoned",
        first.call,
        w.exec.live_calls(),
        w.terminal(first.call).len()
    );
    let approved = w.exec.approve(later.countersign(Gesture::AllowOnce), at(2));
    assert!(
        matches!(approved, Err(TicketError::Blocked(Blocked::Poisoned))),
        "a ticket was taken after a panic: {approved:?}"
    );
    assert!(w.runs().is_empty(), "run never called");
}

/// A ticket for a card drawn before the panic is refused when the panic came from
/// another call's hook *at approval* (the consequence drawn again), and neither call runs
/// nor is granted.
#[test]
fn a_ticket_is_refused_after_a_panic_in_another_calls_approval_hook() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let drawn = Rc::new(Cell::new(0u32));
    let count = Rc::clone(&drawn);
    w.add(
        w.action("fragile", Kind::Write, Confirm::Ask)
            .consequence(move |p| {
                count.set(count.get() + 1);
                if count.get() > 1 {
                    panic!("the page state vanished under the card");
                }
                format!("set the name to `{}`", p.name)
            }),
    );
    let fragile = w.card("fragile", r#"{"name":"f"}"#, 0);
    let save = w.card("save", r#"{"name":"s"}"#, 0);
    let approved = catch_unwind(AssertUnwindSafe(|| {
        w.exec
            .approve(fragile.countersign(Gesture::AllowForSession), at(1))
    }));
    assert!(approved.is_err(), "the redraw's panic reaches the host");
    assert!(w.exec.is_poisoned());
    for gesture in [
        Gesture::AllowOnce,
        Gesture::AllowForSession,
        Gesture::AllowInBatch,
    ] {
        let r = w.exec.approve(save.countersign(gesture), at(2));
        assert!(
            matches!(r, Err(TicketError::Blocked(Blocked::Poisoned))),
            "{r:?}"
        );
    }
    let r = w
        .exec
        .approve(fragile.countersign(Gesture::AllowOnce), at(2));
    assert!(
        matches!(r, Err(TicketError::Blocked(Blocked::Poisoned))),
        "{r:?}"
    );
    assert!(w.runs().is_empty(), "run never called");
    assert!(
        !w.audit
            .records()
            .iter()
            .any(|r| matches!(r.event, AuditEvent::Granted | AuditEvent::Approved)),
        "no approval or grant recorded"
    );
}

/// BREAK: a countersigned job handed out before the panic still asks the host's
/// countersigner to mint a token after it: `Work::finish` awaits the mint first and
/// asks `still_wanted` only after it. A token stating "a person approved call N" is
/// signed (and logged by the gateway) for a call of a poisoned executor that never
/// runs. Same for a call that ended (shut down) before its job was driven.
/// Likely fix: in `Work::finish`, ask `still_wanted()` before awaiting the mint too
/// (and build the mint future lazily, as it already is, inside that branch).
#[test]
fn break_no_countersignature_is_minted_for_a_job_made_before_the_panic() {
    let mut w = world();
    w.add(signed(&w, "archive"));
    let signer = Signer::default();
    w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let Step::Perform(job) = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(1))
        .unwrap()
    else {
        panic!("an approved call goes to perform");
    };
    poison(&w);
    let completion = pollster::block_on(job.run());
    assert!(!w.exec.complete(completion, at(10)));
    assert!(w.runs().is_empty(), "run never called");
    assert!(
        signer.asked.borrow().is_empty(),
        "a countersignature was minted after the executor was poisoned: {:?}",
        signer.asked.borrow()
    );
}

/// BREAK (same cause as above): a call that already ended (the page shut down) still
/// gets a countersignature minted when its job is driven afterwards.
#[test]
fn break_no_countersignature_is_minted_for_a_call_that_already_ended() {
    let mut w = World::new();
    w.add(signed(&w, "archive"));
    let signer = Signer::default();
    w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let Step::Perform(job) = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(1))
        .unwrap()
    else {
        panic!("an approved call goes to perform");
    };
    assert_eq!(w.exec.shutdown(at(2)).len(), 1);
    let completion = pollster::block_on(job.run());
    assert!(!w.exec.complete(completion, at(3)));
    assert!(w.runs().is_empty(), "run never called");
    assert_eq!(w.terminal(card.call).len(), 1);
    assert!(
        signer.asked.borrow().is_empty(),
        "a countersignature was minted for a call that had already ended: {:?}",
        signer.asked.borrow()
    );
}

/// A job dropped while the host unwinds from its own panic (not the executor's) settles
/// its call once as interrupted, and does not poison the executor.
#[test]
fn a_job_dropped_during_a_hosts_unwind_settles_once_and_does_not_poison() {
    let mut w = World::new();
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    let Step::Perform(job) = w.call("note", r#"{"name":"a"}"#, 1) else {
        panic!("a write declared without confirm runs unasked");
    };
    let call = job.call();
    let dropped = catch_unwind(AssertUnwindSafe(move || {
        let _job = job;
        panic!("the host's own code failed");
    }));
    assert!(dropped.is_err());
    assert!(!w.exec.is_poisoned(), "the panic was not the executor's");
    assert!(w.runs().is_empty(), "run never called");
    let ends = w.terminal(call);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].reason, Reason::Interrupted);
    // The executor goes on.
    let s = drive(&w.exec, w.call("note", r#"{"name":"b"}"#, 2), 2).unwrap();
    assert_eq!(code(&s), "OK");
    assert_eq!(w.runs(), ["note:b"]);
}

/// A `run` future that panics while the host drives it (outside the executor) still
/// ends its call: once, as failed, never as done.
#[test]
fn a_run_that_panics_while_driven_settles_its_call_once() {
    let mut w = World::new();
    w.add(
        Action::<Named>::new("crash", "a run that panics")
            .kind(Kind::Write)
            .run(|_p: Named| async {
                panic!("the backend client failed");
                #[allow(unreachable_code)]
                Ok::<_, String>(())
            }),
    );
    let Step::Perform(job) = w.call("crash", r#"{"name":"a"}"#, 1) else {
        panic!("runs unasked");
    };
    let call = job.call();
    let driven = catch_unwind(AssertUnwindSafe(move || pollster::block_on(job.run())));
    assert!(driven.is_err());
    let ends = w.terminal(call);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_ne!(ends[0].outcome.as_deref(), Some("OK"));
    assert_eq!(w.exec.live_calls(), 0, "nothing left hanging");
}

/// Params whose drop panics (dropped when the call settles, inside the step) poison the
/// executor: the next ticket is refused.
#[test]
fn params_that_panic_when_dropped_poison_the_executor() {
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    struct Bomb {
        /// A name.
        name: String,
    }
    impl Drop for Bomb {
        fn drop(&mut self) {
            if self.name == "bomb" && !std::thread::panicking() {
                panic!("the params' drop failed");
            }
        }
    }
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let _bomb = w
        .exec
        .register(
            Action::<Bomb>::new("bomb", "params that panic when dropped")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .run(|_p: Bomb| async { Ok::<_, String>(()) }),
        )
        .unwrap();
    let bomb = match w.call("bomb", r#"{"name":"bomb"}"#, 0) {
        Step::Approval(card) => *card,
        other => panic!("{other:?}"),
    };
    let save = w.card("save", r#"{"name":"s"}"#, 0);
    let denied = catch_unwind(AssertUnwindSafe(|| w.exec.deny(bomb.call, None, at(1))));
    assert!(denied.is_err(), "the drop's panic reaches the host");
    assert!(w.exec.is_poisoned());
    let r = w.exec.approve(save.countersign(Gesture::AllowOnce), at(2));
    assert!(
        matches!(r, Err(TicketError::Blocked(Blocked::Poisoned))),
        "{r:?}"
    );
    assert!(w.runs().is_empty());
}

/// A hook that gets hold of another call's ticket cannot spend it: the hook's call is
/// refused, the other card still waits, and the person's own press later runs it once.
#[test]
fn a_hook_cannot_spend_another_calls_ticket() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let stash: Rc<RefCell<Option<countersign::Ticket>>> = Rc::default();
    let taken = Rc::clone(&stash);
    let exec = w.exec.clone();
    let tried = Rc::new(RefCell::new(String::new()));
    let said = Rc::clone(&tried);
    w.add(
        w.action("sly", Kind::Write, Confirm::Unset)
            .consequence(move |_| {
                if let Some(ticket) = taken.borrow_mut().take() {
                    *said.borrow_mut() = format!("{:?}", exec.approve(ticket, at(1)).map(|_| ()));
                }
                "nothing".into()
            }),
    );
    let save = w.card("save", r#"{"name":"s"}"#, 0);
    *stash.borrow_mut() = Some(save.countersign(Gesture::AllowForSession));
    let Step::Settled(s) = w.call("sly", r#"{"name":"x"}"#, 1) else {
        panic!("a hook that reentered must refuse its call");
    };
    assert_eq!(
        s.outcome.reason(),
        Reason::HookReentered {
            hook: countersign::reason::Hook::Consequence
        }
    );
    assert!(tried.borrow().contains("Reentered"), "{}", tried.borrow());
    assert!(w.runs().is_empty(), "run never called");
    assert!(w.exec.grants().is_empty(), "no grant made");
    assert_eq!(w.exec.approvals().len(), 1, "the card still waits");
    let settled = w.allow(&save, Gesture::AllowOnce, 2).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["save:s"]);
    assert_eq!(w.terminal(save.call).len(), 1);
    assert_eq!(w.terminal(s.call).len(), 1);
}

// ---------------------------------------------------------------------------------
// 3. The pure decision: nothing runs unasked that the table asks for.
// ---------------------------------------------------------------------------------

/// Every combination of facts: a run is always one of the table's few reasons, a
/// handoff or question is never run or put behind a card, and no grant or mode covers
/// what must be decided by the person.
#[test]
#[allow(clippy::nonminimal_bool)] // Written as the table reads.
fn decide_runs_only_for_the_tables_reasons_over_every_combination_of_facts() {
    use countersign::audit::Decider;
    use countersign::policy::{decide, ApprovalPolicy, Decision, Facts};
    use countersign::reason::{Level, LevelSource};
    use countersign::{ticket::GrantId, Caller, Mode, Verdict};
    let grant: GrantId = serde_json::from_value(serde_json::json!(7)).unwrap();
    let bools = [false, true];
    let mut wrong = Vec::new();
    for kind in [Kind::Read, Kind::Write, Kind::Danger] {
        for level in [
            ApprovalPolicy::None,
            ApprovalPolicy::Ask,
            ApprovalPolicy::AskAlways,
        ] {
            for verdict in [Verdict::Allow, Verdict::Ask, Verdict::Deny("no".into())] {
                for mode in [Mode::Default, Mode::Away, Mode::Unattended, Mode::Bypass] {
                    for caller in Caller::ALL {
                        for (g, handoff, question, countersigned, twice, reversal) in bools
                            .iter()
                            .flat_map(|a| bools.iter().map(move |b| (*a, *b)))
                            .flat_map(|(a, b)| bools.iter().map(move |c| (a, b, *c)))
                            .flat_map(|(a, b, c)| bools.iter().map(move |d| (a, b, c, *d)))
                            .flat_map(|(a, b, c, d)| bools.iter().map(move |e| (a, b, c, d, *e)))
                            .flat_map(|(a, b, c, d, e)| {
                                bools.iter().map(move |f| (a, b, c, d, e, *f))
                            })
                        {
                            let facts = Facts {
                                kind,
                                level: Level {
                                    policy: level,
                                    source: LevelSource::Declared,
                                },
                                verdict: verdict.clone(),
                                mode,
                                caller,
                                grant: g.then_some(grant),
                                handoff,
                                question,
                                countersigned,
                                confirm_twice: twice,
                                reversal,
                            };
                            let decision = decide(&facts);
                            let outside = caller != Caller::Assistant;
                            let flagged = verdict == Verdict::Ask;
                            let ok = match &decision {
                                _ if matches!(verdict, Verdict::Deny(_)) => {
                                    matches!(decision, Decision::Refuse { .. })
                                }
                                _ if handoff || question => matches!(
                                    decision,
                                    Decision::Handoff
                                        | Decision::Question
                                        | Decision::Refuse { .. }
                                ),
                                Decision::Handoff | Decision::Question => false,
                                Decision::Run { by, .. } => match by {
                                    Decider::Policy => {
                                        level == ApprovalPolicy::None
                                            && !flagged
                                            && !countersigned
                                            && !(outside && kind != Kind::Read)
                                    }
                                    Decider::SessionGrant => {
                                        g && !twice
                                            && !flagged
                                            && level != ApprovalPolicy::AskAlways
                                    }
                                    Decider::Mode => match mode {
                                        Mode::Bypass => !outside && !countersigned && !reversal,
                                        Mode::Unattended => {
                                            !outside
                                                && !countersigned
                                                && !twice
                                                && !flagged
                                                && level == ApprovalPolicy::Ask
                                        }
                                        _ => false,
                                    },
                                    _ => false,
                                },
                                Decision::Ask { policy, .. } => {
                                    mode != Mode::Away
                                        && (*policy != ApprovalPolicy::Ask
                                            || (!flagged && level != ApprovalPolicy::AskAlways))
                                }
                                Decision::Refuse { .. } => true,
                            };
                            if !ok {
                                wrong.push(format!("{facts:?} -> {decision:?}"));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(10)].join("\n")
    );
}

/// A grant made while the level was `Ask` covers nothing once a policy file raises the
/// action to "always", nor a call its classifier flags: both are asked, without a grant
/// offer, and nothing runs.
#[test]
fn a_grant_never_covers_an_ask_always_call_however_the_level_got_there() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask).classify(|p| {
        if p.name.starts_with('!') {
            countersign::Verdict::Ask
        } else {
            countersign::Verdict::Allow
        }
    }));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1).unwrap();
    assert_eq!(w.exec.grants().len(), 1);
    // Covered: runs unasked.
    let s = drive(&w.exec, w.call("save", r#"{"name":"b"}"#, 2), 2).unwrap();
    assert_eq!(code(&s), "OK");
    // Flagged by the classifier: asked every time.
    let flagged = w.card("save", r#"{"name":"!c"}"#, 3);
    assert_eq!(
        flagged.policy,
        countersign::policy::ApprovalPolicy::AskAlways
    );
    assert!(!flagged.offers_session_grant);
    w.exec.deny(flagged.call, None, at(3)).unwrap();
    // Raised by the deployment: asked every time.
    w.exec
        .load_policy(r#"{"roles":{"admin":{"scopes":["workspace.write"],"overrides":{"save":{"confirm":"always"}}}}}"#)
        .unwrap();
    let raised = w.card("save", r#"{"name":"d"}"#, 4);
    assert_eq!(
        raised.policy,
        countersign::policy::ApprovalPolicy::AskAlways
    );
    assert!(!raised.offers_session_grant);
    let r = w
        .exec
        .approve(raised.countersign(Gesture::AllowForSession), at(5));
    assert_eq!(r.unwrap_err(), TicketError::GrantNotOffered);
    w.exec.deny(raised.call, None, at(5)).unwrap();
    assert_eq!(w.runs(), ["save:a", "save:b"]);
    for c in [flagged.call, raised.call] {
        assert_eq!(w.terminal(c).len(), 1);
    }
}

/// A rewrite from a granted action into an `AskAlways` one does not carry the grant: the
/// replacement is decided on its own terms and asked.
#[test]
fn a_rewrite_does_not_carry_a_grant_into_an_ask_always_action() {
    use countersign::action::Rewrite;
    let mut w = World::new();
    w.add(w.action("wipe", Kind::Danger, Confirm::Unset));
    w.add(w.action("tidy", Kind::Write, Confirm::Ask).rewrite(|p| {
        if p.name == "all" {
            Rewrite::Action {
                action: "wipe".into(),
                arguments: serde_json::json!({ "name": p.name }),
                why: "escalate".into(),
            }
        } else {
            Rewrite::Keep
        }
    }));
    let card = w.card("tidy", r#"{"name":"one"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1).unwrap();
    assert_eq!(w.runs(), ["tidy:one"]);
    match w.call("tidy", r#"{"name":"all"}"#, 2) {
        Step::Approval(card) => {
            assert_eq!(card.action, "wipe");
            assert_eq!(card.policy, countersign::policy::ApprovalPolicy::AskAlways);
            w.exec.deny(card.call, None, at(3)).unwrap();
            assert_eq!(w.terminal(card.call).len(), 1);
        }
        other => panic!("the rewritten call was not asked: {other:?}"),
    }
    assert_eq!(w.runs(), ["tidy:one"]);
}

/// No mode speaks for an outside agent, and no mode answers for a countersigned action,
/// even where the page's own assistant would be let through.
#[test]
fn no_mode_runs_an_outside_agents_write_or_a_countersigned_call_unasked() {
    use countersign::{Caller, Mode};
    for mode in [Mode::Default, Mode::Away, Mode::Unattended, Mode::Bypass] {
        let mut w = World::new();
        w.add(w.action("ask", Kind::Write, Confirm::Ask));
        w.add(w.action("none", Kind::Write, Confirm::Unset));
        w.add(w.action("off", Kind::Danger, Confirm::Off));
        w.add(signed(&w, "signed"));
        w.exec
            .set_countersigner(Rc::new(Signer::default()))
            .unwrap();
        w.exec.set_mode(mode).unwrap();
        for caller in [Caller::WebMcp, Caller::Mcp] {
            for action in ["ask", "none", "off"] {
                let step = w
                    .exec
                    .submit(Call::new("t", action, r#"{"name":"x"}"#).by(caller), at(0))
                    .unwrap();
                assert!(
                    !matches!(step, Step::Perform(_)),
                    "{mode:?} {caller:?} {action}: ran unasked"
                );
                if let Step::Approval(card) = step {
                    w.exec.deny(card.call, None, at(0)).unwrap();
                }
            }
        }
        let step = w.call("signed", r#"{"name":"x"}"#, 0);
        assert!(
            !matches!(step, Step::Perform(_)),
            "{mode:?}: a countersigned action ran unasked"
        );
        drive(&w.exec, step, 1);
        assert!(w.runs().is_empty(), "{mode:?}: {:?}", w.runs());
        crate::common::at_most_one_terminal_each(&w);
    }
}
