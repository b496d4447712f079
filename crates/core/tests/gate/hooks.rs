//! A hook may only read: one that calls back into the executor gets its call refused.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::{
    executor::Registration, ticket::GrantRule, Action, Blocked, Call, Confirm, Executor, Gesture,
    Kind, Mode, Reason, Step, Verdict,
};
use serde_json::json;

use crate::common::{at, code, drive, Named, World};

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
        assert_eq!(
            tried.borrow()[0],
            format!("{:?}", Err::<(), _>(Blocked::Reentered))
        );
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
                countersign::text::Preview::diff("-a\n+b").count("rows", 1)
            }),
            "remember" => base.remember(move |_| {
                poke();
                GrantRule::any("all")
            }),
            "rewrite" => base.rewrite(move |_| {
                poke();
                countersign::action::Rewrite::Keep
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
                    "preview" => countersign::reason::Hook::Preview,
                    "remember" => countersign::reason::Hook::Remember,
                    "rewrite" => countersign::reason::Hook::Rewrite,
                    "second" => countersign::reason::Hook::SecondQuestion,
                    "validate" => countersign::reason::Hook::Validate,
                    _ => countersign::reason::Hook::Run,
                }
            },
            "{hook}"
        );
        assert_eq!(w.terminal(s.call).len(), 1, "{hook}");
        assert_eq!(w.exec.live_calls(), 0, "{hook}");
    }
}

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
                countersign::text::Preview::diff("d")
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
