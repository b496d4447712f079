//! The pipeline in order, handoffs, verification and the host's endings: each call settles once.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use countersign::{
    action::NoParams, audit::AuditEvent, audit::Decider, outcome::Stage, wire::openai_tools,
    Action, Call, Confirm, Expect, Handoff, Kind, Session, Step, Verdict,
};

use crate::common::{at, code, drain, drive, for_call, Named, World};

#[test]
fn the_first_refusing_stage_wins_in_pipeline_order() {
    // An action that would fail scope, availability and decide: bad arguments are
    // reported first, then scope, then availability, then the classifier.
    let mut w = World::with_session(Session::new("viewer", ["workspace.read"]));
    w.add(
        w.action("save", Kind::Write, Confirm::Unset)
            .scope("workspace.write")
            .available(|| false)
            .classify(|_| Verdict::Deny("never".into())),
    );
    let Step::Settled(s) = w.call("save", "{}", 0) else {
        panic!()
    };
    assert_eq!(
        (code(&s), refusal_stage(&s)),
        ("INVALID_ARGS", Stage::Validate)
    );
    let Step::Settled(s) = w.call("save", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    assert_eq!(
        (code(&s), refusal_stage(&s)),
        ("SCOPE_MISSING", Stage::Scope)
    );
    assert!(s.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`workspace.write`"));

    let mut w = World::new();
    w.add(
        w.action("save", Kind::Write, Confirm::Unset)
            .available(|| false)
            .classify(|_| Verdict::Deny("never".into())),
    );
    let Step::Settled(s) = w.call("save", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    assert_eq!(
        (code(&s), refusal_stage(&s)),
        ("UNAVAILABLE", Stage::Availability)
    );

    let mut w = World::new();
    w.add(
        w.action("save", Kind::Write, Confirm::Unset)
            .classify(|_| Verdict::Deny("names are frozen".into())),
    );
    let Step::Settled(s) = w.call("save", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    assert_eq!(
        (code(&s), refusal_stage(&s)),
        ("POLICY_DENIED", Stage::Decide)
    );
    assert_eq!(s.outcome.to_model_json()["error"]["retry"], "do_not_retry");
    assert_eq!(w.terminal(s.call)[0].decided_by, Decider::Classifier);
    assert!(w.runs().is_empty());
}

fn refusal_stage(s: &countersign::Settled) -> Stage {
    match &s.outcome {
        countersign::Outcome::Refused(r) => r.stage,
        countersign::Outcome::Done(_) => Stage::Verify,
    }
}

#[test]
fn a_classifier_can_raise_the_bar_but_never_lower_it() {
    let mut w = World::new();
    w.add(
        w.action("write", Kind::Write, Confirm::Unset)
            .classify(|p| {
                if p.name == "config.json" {
                    Verdict::Ask
                } else {
                    Verdict::Allow
                }
            }),
    );
    w.add(
        w.action("danger", Kind::Danger, Confirm::Unset)
            .classify(|_| Verdict::Allow),
    );
    assert!(matches!(
        w.call("write", r#"{"name":"drafts/a"}"#, 0),
        Step::Perform(_)
    ));
    let card = w.card("write", r#"{"name":"config.json"}"#, 0);
    assert!(
        !card.offers_session_grant,
        "a flagged argument is asked every time"
    );
    assert!(matches!(
        w.call("danger", r#"{"name":"x"}"#, 0),
        Step::Approval(_)
    ));
}

#[test]
fn a_failed_run_is_execution_failed_and_a_missing_effect_is_verify_failed() {
    let mut w = World::new();
    w.add(
        Action::<Named>::new("boom", "fails")
            .kind(Kind::Write)
            .run(|_p: Named| async { Err::<(), _>("disk full") }),
    );
    let effect = Rc::new(Cell::new(false));
    let seen = Rc::clone(&effect);
    w.add(
        w.action("claims", Kind::Write, Confirm::Unset)
            .verify(move |_, _| {
                if seen.get() {
                    Ok(())
                } else {
                    Err("the name is unchanged".into())
                }
            }),
    );
    let s = drive(&w.exec, w.call("boom", r#"{"name":"x"}"#, 0), 1).unwrap();
    assert_eq!(code(&s), "EXECUTION_FAILED");
    assert!(s.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("disk full"));
    let s = drive(&w.exec, w.call("claims", r#"{"name":"x"}"#, 0), 1).unwrap();
    assert_eq!(code(&s), "VERIFY_FAILED");
    assert_eq!(w.terminal(s.call)[0].stage, Stage::Verify);
    effect.set(true);
    let s = drive(&w.exec, w.call("claims", r#"{"name":"y"}"#, 0), 1).unwrap();
    assert_eq!(code(&s), "OK");
    let json = s.outcome.to_model_json();
    assert_eq!(json["receipt"]["done_by"], "assistant");
    assert_eq!(json["receipt"]["result"]["name"], "y");
    assert_eq!(json["receipt"]["consequence"], "set the name to `y`");
}

#[test]
fn the_receipt_repeats_the_consequence_computed_before_the_run() {
    let name = Rc::new(std::cell::RefCell::new(String::from("Atlas")));
    let (shown, state) = (Rc::clone(&name), Rc::clone(&name));
    let mut w = World::new();
    w.regs.push(
        w.exec
            .register(
                Action::<Named>::new("rename", "Rename.")
                    .consequence(move |p| format!("rename `{}` to `{}`", shown.borrow(), p.name))
                    .run(move |p: Named| {
                        let state = Rc::clone(&state);
                        async move {
                            *state.borrow_mut() = p.name;
                            Ok::<_, String>(())
                        }
                    }),
            )
            .unwrap(),
    );
    let s = drive(&w.exec, w.call("rename", r#"{"name":"Apollo"}"#, 0), 1).unwrap();
    assert_eq!(
        s.outcome.to_model_json()["receipt"]["consequence"],
        "rename `Atlas` to `Apollo`"
    );
}

#[test]
fn run_gets_the_model_params_with_or_without_verify() {
    for with_verify in [false, true] {
        let w = World::new();
        let seen = Rc::new(std::cell::RefCell::new(String::new()));
        let kept = Rc::clone(&seen);
        let mut action = Action::<Named>::new("store", "Store a text.")
            .kind(Kind::Read)
            .run(move |p: Named| {
                let kept = Rc::clone(&kept);
                async move {
                    *kept.borrow_mut() = p.name.clone();
                    Ok::<_, String>(serde_json::json!({ "len": p.name.len() }))
                }
            });
        if with_verify {
            action = action.verify(|p: &Named, out| {
                (out["len"] == p.name.len())
                    .then_some(())
                    .ok_or("wrong length".to_owned())
            });
        }
        let _reg = w.exec.register(action).unwrap();
        let text = "x".repeat(4096);
        let raw = serde_json::json!({ "name": text }).to_string();
        let step = w.exec.submit(Call::new("tc", "store", raw), at(0)).unwrap();
        let settled = drive(&w.exec, step, 1).unwrap();
        assert_eq!(code(&settled), "OK");
        assert_eq!(*seen.borrow(), text, "run got the model's params");
    }
}

#[test]
fn the_model_sees_the_denial_reason_and_is_told_not_to_retry_silently() {
    let mut w = World::new();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    let card = w.card("archive", r#"{"name":"Apollo"}"#, 0);
    let s = w
        .exec
        .deny(card.call, Some("we still use it"), at(1))
        .unwrap();
    let json = s.outcome.to_model_json();
    let message = json["error"]["message"].as_str().unwrap();
    assert_eq!(json["error"]["code"], "PERMISSION_DENIED");
    assert_eq!(json["error"]["retry"], "ask_user");
    assert!(
        message.contains("`archive`") && message.contains("set the name to `Apollo`"),
        "{message}"
    );
    assert!(
        message.contains("we still use it") && message.contains("do not retry"),
        "{message}"
    );
    assert!(
        w.exec.deny(card.call, None, at(2)).is_err(),
        "a second deny finds nothing"
    );
}

#[test]
fn the_projection_lists_available_in_scope_actions_with_the_validating_schema() {
    let open = Rc::new(Cell::new(true));
    let flag = Rc::clone(&open);
    let mut w = World::with_session(Session::new("editor", ["workspace.write"]));
    w.add(
        w.action("save", Kind::Write, Confirm::Ask)
            .scope("workspace.write"),
    );
    w.add(
        w.action("purge", Kind::Danger, Confirm::Unset)
            .scope("workspace.admin"),
    );
    w.add(
        w.action("read", Kind::Read, Confirm::Unset)
            .available(move || flag.get()),
    );
    let names = |w: &World| {
        w.exec
            .projection()
            .into_iter()
            .map(|t| t.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&w), ["read", "save"]);
    open.set(false);
    assert_eq!(names(&w), ["save"]);

    let tools = w.exec.projection();
    let save = &tools[0];
    assert_eq!(save.parameters["type"], "object");
    assert_eq!(save.parameters["required"], serde_json::json!(["name"]));
    assert_eq!(save.parameters["properties"]["name"]["type"], "string");
    assert!(save.parameters.get("$schema").is_none());
    assert!(save.description.contains("asked to approve"));
    assert!(!save.annotations.read_only_hint && !save.annotations.destructive_hint);
    let openai = openai_tools(&tools);
    assert_eq!(openai[0]["type"], "function");
    assert_eq!(openai[0]["function"]["name"], "save");
    assert!(openai[0].get("annotations").is_none());
}

struct Publish {
    published: Rc<Cell<bool>>,
}

impl Publish {
    fn action(&self, timeout: Duration) -> Action<NoParams> {
        let published = Rc::clone(&self.published);
        Action::<NoParams>::new("publish_changes", "Publish the workspace.")
            .kind(Kind::Danger)
            .handoff(
                Handoff::new(
                    "Publishing needs your verification code.",
                    Expect::new("the page shows published", move || published.get()),
                )
                .step("Type the code", Some("verification_code"))
                .step("Press Publish", Some("publish_changes"))
                .timeout(timeout),
            )
    }
}

fn handoff_world(timeout: Duration) -> (World, Rc<Cell<bool>>) {
    let mut w = World::new();
    let published = Rc::new(Cell::new(false));
    let p = Publish {
        published: Rc::clone(&published),
    };
    w.regs.push(w.exec.register(p.action(timeout)).unwrap());
    (w, published)
}

#[test]
fn a_handoff_is_never_approval_gated_and_receipts_only_after_expect_holds() {
    let (w, published) = handoff_world(Duration::from_secs(60));
    let Step::Handoff(view) = w.call("publish_changes", "{}", 0) else {
        panic!("danger handoff was asked")
    };
    assert!(w.exec.approvals().is_empty());
    assert_eq!(view.steps.len(), 2);
    assert_eq!(view.current_step, Some(0));
    w.exec.show_step(view.call, 1).unwrap();
    assert_eq!(w.exec.handoffs()[0].current_step, Some(1));
    published.set(true); // the person typed the code and pressed Publish
    let s = w.exec.handoff_done(view.call, at(10)).unwrap().unwrap();
    assert_eq!(code(&s), "OK");
    assert_eq!(s.outcome.to_model_json()["receipt"]["done_by"], "person");
    let trail: Vec<_> = for_call(&w.audit, view.call)
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(trail, [AuditEvent::HandedOff, AuditEvent::Settled]);
    assert!(w.exec.handoffs().is_empty());
}

/// One early press loses nothing: "I've done it" before the step is done says "not yet"
/// (in the trail too), the handoff keeps waiting, and the real step done a moment later
/// completes it; the model hears the outcome once.
#[test]
fn done_too_early_keeps_the_handoff_open_until_the_step_is_done() {
    let (w, published) = handoff_world(Duration::from_secs(60));
    let Step::Handoff(view) = w.call("publish_changes", "", 0) else {
        panic!()
    };
    assert_eq!(w.exec.handoff_done(view.call, at(10)).unwrap(), None);
    assert_eq!(w.exec.handoff_done(view.call, at(20)).unwrap(), None);
    assert_eq!(w.exec.handoffs()[0].tries, 2);
    assert!(drain(&w.exec).is_empty(), "the model hears nothing yet");
    assert_eq!(w.terminal(view.call).len(), 0);
    published.set(true);
    let s = w.exec.handoff_done(view.call, at(30)).unwrap().unwrap();
    assert_eq!(code(&s), "OK");
    let trail: Vec<_> = for_call(&w.audit, view.call)
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(
        trail,
        [
            AuditEvent::HandedOff,
            AuditEvent::NotYet,
            AuditEvent::NotYet,
            AuditEvent::Settled
        ]
    );
    assert_eq!(drain(&w.exec).len(), 1, "one outcome for the model");
}

/// A step never done after a press that came too early ends at the deadline as
/// `HANDOFF_FAILED` (the person said done; it never held), decided by the timer.
#[test]
fn a_handoff_tried_but_never_done_fails_at_its_deadline() {
    let (w, _published) = handoff_world(Duration::from_secs(60));
    let Step::Handoff(view) = w.call("publish_changes", "", 0) else {
        panic!()
    };
    assert_eq!(w.exec.handoff_done(view.call, at(10)).unwrap(), None);
    let settled = w.exec.handle_timeout(at(60_000));
    assert_eq!(code(&settled[0]), "HANDOFF_FAILED");
    assert!(settled[0].outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("did not happen"));
    assert_eq!(w.terminal(view.call).len(), 1);
    assert_eq!(
        w.terminal(view.call)[0].decided_by,
        countersign::audit::Decider::Timer
    );
}

#[test]
fn cancel_and_timeout_end_the_handoff_and_the_model_is_told_to_ask() {
    let (w, published) = handoff_world(Duration::from_millis(500));
    let Step::Handoff(a) = w.call("publish_changes", "{}", 0) else {
        panic!()
    };
    let Step::Handoff(b) = w.call("publish_changes", "{}", 100) else {
        panic!()
    };
    assert_eq!(
        code(&w.exec.handoff_cancel(a.call, at(50)).unwrap()),
        "HANDOFF_CANCELLED"
    );
    assert_eq!(w.exec.poll_timeout(), Some(at(600)));
    assert!(w.exec.handle_timeout(at(599)).is_empty());
    let timed_out = w.exec.handle_timeout(at(600));
    assert_eq!(timed_out.len(), 1);
    assert_eq!(code(&timed_out[0]), "HANDOFF_TIMEOUT");
    assert_eq!(
        timed_out[0].outcome.to_model_json()["error"]["retry"],
        "ask_user"
    );
    // Late "done" after the timeout changes nothing, even if the page now shows published.
    published.set(true);
    assert!(w.exec.handoff_done(b.call, at(700)).is_err());
    assert_eq!(w.terminal(b.call).len(), 1);
    assert_eq!(w.exec.poll_timeout(), None);
}

#[test]
fn a_late_handoff_done_with_a_stale_now_is_a_timeout() {
    let w = World::new();
    let _r = w
        .exec
        .register(
            Action::<countersign::action::NoParams>::new("publish", "p").handoff(
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
    let s = w.exec.handoff_done(view.call, at(10)).unwrap().unwrap();
    assert_eq!(code(&s), "HANDOFF_TIMEOUT");
}

#[test]
fn unmounting_a_handoff_action_settles_its_handoff_unavailable() {
    let (mut w, _) = handoff_world(Duration::from_secs(60));
    let Step::Handoff(view) = w.call("publish_changes", "{}", 0) else {
        panic!()
    };
    w.regs.clear();
    assert_eq!(code(&drain(&w.exec)[0]), "UNAVAILABLE");
    assert!(w.exec.handoff_done(view.call, at(1)).is_err());
}

#[test]
fn a_job_dropped_before_completion_settles_instead_of_hanging() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Unset));
    let Step::Perform(job) = w.call("save", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    let call = job.call();
    drop(job);
    assert_eq!(w.exec.live_calls(), 0);
    let settled = drain(&w.exec);
    assert_eq!(code(&settled[0]), "EXECUTION_FAILED");
    assert_eq!(w.terminal(call).len(), 1);
    assert!(w.runs().is_empty());

    // A completion that is never handed back settles the same way.
    let Step::Perform(job) = w.call("save", r#"{"name":"y"}"#, 0) else {
        panic!()
    };
    let completion = pollster::block_on(job.run());
    drop(completion);
    assert_eq!(code(&drain(&w.exec)[0]), "EXECUTION_FAILED");
    assert_eq!(w.exec.live_calls(), 0);
}

#[test]
fn shutdown_settles_every_live_call_once() {
    let (mut w, _) = handoff_world(Duration::from_secs(60));
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    w.add(w.action("save", Kind::Write, Confirm::Unset));
    let Step::Handoff(h) = w.call("publish_changes", "{}", 0) else {
        panic!()
    };
    let a = w.card("archive", r#"{"name":"x"}"#, 0);
    let Step::Perform(job) = w.call("save", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    let settled = w.exec.shutdown(at(5));
    assert_eq!(settled.len(), 3);
    assert!(settled.iter().all(|s| code(s) == "UNAVAILABLE"));
    // A run that finishes after shutdown changes nothing: the call already settled.
    assert!(!w.exec.complete(pollster::block_on(job.run()), at(6)));
    for call in [h.call, a.call] {
        assert_eq!(w.terminal(call).len(), 1);
    }
    assert_eq!(
        w.audit.records().iter().filter(|r| r.is_terminal()).count(),
        3
    );
}
