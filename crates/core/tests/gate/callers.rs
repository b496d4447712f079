//! An agent outside the page goes through the same gate, named, covered only by its own grants.

use countersign::{Call, Caller, Confirm, Gesture, Kind, Step};

use crate::common::{at, code, drive, for_call, World};

fn submit(w: &World, caller: Caller, id: &str, action: &str, args: &str, now: u64) -> Step {
    w.exec
        .submit(Call::new(id, action, args).by(caller), at(now))
        .unwrap()
}

/// Submits a call that must wait for a card, and returns the card.
fn asked(
    w: &World,
    caller: Caller,
    id: &str,
    action: &str,
    args: &str,
    now: u64,
) -> countersign::ApprovalRequest {
    match submit(w, caller, id, action, args, now) {
        Step::Approval(card) => *card,
        other => panic!("{caller} {action} must be asked, got {other:?}"),
    }
}

fn world() -> World {
    let mut w = World::new();
    w.add(w.action("rename", Kind::Write, Confirm::Ask));
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    w.add(w.action("look", Kind::Read, Confirm::Unset));
    w.add(
        w.action("wipe", Kind::Danger, Confirm::Unset)
            .only_for([Caller::Assistant]),
    );
    w
}

#[test]
fn an_agents_card_and_every_record_name_it() {
    let w = world();
    let card = asked(&w, Caller::WebMcp, "wm-1", "rename", r#"{"name":"A"}"#, 0);
    assert_eq!(card.caller, Caller::WebMcp);
    let settled = w.allow(&card, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(code(&settled), "OK");
    let records = for_call(&w.audit, card.call);
    assert!(records.len() >= 2, "{records:?}");
    assert!(records.iter().all(|r| r.caller == Caller::WebMcp));
    let line = serde_json::to_string(&records[0]).unwrap();
    assert!(line.contains(r#""caller":"webmcp""#), "{line}");
    // The assistant's records stay as they were: no caller field at all.
    let own = asked(
        &w,
        Caller::Assistant,
        "a-1",
        "rename",
        r#"{"name":"B"}"#,
        10,
    );
    assert_eq!(own.caller, Caller::Assistant);
    let line = serde_json::to_string(&for_call(&w.audit, own.call)[0]).unwrap();
    assert!(!line.contains("caller"), "{line}");
    // The card's digest binds who asked: the same call from another caller is another card.
    let mcp = asked(&w, Caller::Mcp, "m-1", "rename", r#"{"name":"B"}"#, 20);
    assert_eq!(mcp.args_sha256, own.args_sha256);
    assert_ne!(mcp.card_sha256, own.card_sha256);
}

#[test]
fn a_grant_covers_only_the_caller_it_was_made_for() {
    let w = world();
    let card = asked(&w, Caller::Assistant, "a-1", "rename", r#"{"name":"A"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 1).unwrap();
    // The assistant's next call runs under the grant...
    let step = submit(&w, Caller::Assistant, "a-2", "rename", r#"{"name":"B"}"#, 2);
    assert!(matches!(step, Step::Perform(_)), "{step:?}");
    drive(&w.exec, step, 3);
    // ...but an agent outside the page is asked, and so is the other agent.
    for caller in [Caller::WebMcp, Caller::Mcp] {
        let card = asked(&w, caller, "x", "rename", r#"{"name":"C"}"#, 4);
        w.exec.deny(card.call, None, at(5)).unwrap();
    }
    assert_eq!(w.runs(), ["rename:A", "rename:B"]);
    // A grant made on an agent's card covers that agent only.
    let card = asked(&w, Caller::WebMcp, "wm-2", "rename", r#"{"name":"D"}"#, 6);
    w.allow(&card, Gesture::AllowForSession, 7).unwrap();
    let grants = w.exec.grants();
    assert_eq!(grants.len(), 2);
    assert!(grants.iter().any(|g| g.basis.caller == Caller::WebMcp));
    assert!(matches!(
        submit(&w, Caller::WebMcp, "wm-3", "rename", r#"{"name":"E"}"#, 8),
        Step::Perform(_)
    ));
    assert!(matches!(
        submit(&w, Caller::Mcp, "m-3", "rename", r#"{"name":"F"}"#, 9),
        Step::Approval(_)
    ));
}

#[test]
fn an_action_kept_from_a_caller_does_not_exist_for_it() {
    let w = world();
    let names = |caller| {
        w.exec
            .projection_for(caller)
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(Caller::Assistant), ["look", "note", "rename", "wipe"]);
    assert_eq!(names(Caller::WebMcp), ["look", "note", "rename"]);
    assert_eq!(names(Caller::Mcp), ["look", "note", "rename"]);
    assert_eq!(w.exec.projection().len(), 4);
    let Step::Settled(settled) = submit(&w, Caller::WebMcp, "wm", "wipe", r#"{"name":"A"}"#, 0)
    else {
        panic!("refused at once");
    };
    assert_eq!(code(&settled), "UNKNOWN_ACTION");
    // The same words as an id nobody registered: the caller learns nothing more.
    let Step::Settled(unknown) = submit(&w, Caller::WebMcp, "wm", "nope", "{}", 0) else {
        panic!("refused at once");
    };
    let (countersign::Outcome::Refused(a), countersign::Outcome::Refused(b)) =
        (&settled.outcome, &unknown.outcome)
    else {
        panic!("refusals");
    };
    assert_eq!(a.reason, b.reason);
    assert!(w.runs().is_empty());
    assert_eq!(w.terminal(settled.call).len(), 1);
}

#[test]
fn a_withdrawn_call_is_cancelled_without_run_and_one_terminal_record() {
    let w = world();
    let card = asked(&w, Caller::Mcp, "m-1", "rename", r#"{"name":"A"}"#, 0);
    // Another caller's call with the same id is not touched, nor is a call of another id.
    let other = asked(&w, Caller::WebMcp, "m-1", "rename", r#"{"name":"B"}"#, 1);
    assert!(w.exec.withdraw(Caller::Mcp, "m-2", at(2)).is_empty());
    let settled = w.exec.withdraw(Caller::Mcp, "m-1", at(3));
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].call, card.call);
    assert_eq!(code(&settled[0]), "CANCELLED");
    let terminal = w.terminal(card.call);
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].decided_by, countersign::audit::Decider::Caller);
    assert_eq!(terminal[0].outcome.as_deref(), Some("CANCELLED"));
    // The person's late approval changes nothing; withdrawing twice settles nothing more.
    assert!(w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(4))
        .is_err());
    assert!(w.exec.withdraw(Caller::Mcp, "m-1", at(5)).is_empty());
    assert_eq!(w.exec.approvals().len(), 1);
    assert_eq!(w.exec.approvals()[0].call, other.call);
    assert!(w.runs().is_empty());
    assert_eq!(w.terminal(card.call).len(), 1);
}

#[test]
fn a_run_under_way_is_not_withdrawn() {
    let w = world();
    let step = submit(&w, Caller::WebMcp, "wm-1", "look", r#"{"name":"A"}"#, 0);
    let Step::Perform(job) = step else {
        panic!("a read runs");
    };
    assert!(w.exec.withdraw(Caller::WebMcp, "wm-1", at(1)).is_empty());
    let settled = drive(&w.exec, Step::Perform(job), 2).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["look:A"]);
}

#[test]
fn an_edited_agent_call_stays_the_agents() {
    let w = world();
    let card = asked(&w, Caller::WebMcp, "wm-1", "rename", r#"{"name":"A"}"#, 0);
    let Step::Approval(edited) = w.exec.edit(card.call, r#"{"name":"Z"}"#, at(1)).unwrap() else {
        panic!("the edit is asked again");
    };
    assert_eq!(edited.caller, Caller::WebMcp);
    // Withdrawing by the agent's id reaches the edited call too.
    let settled = w.exec.withdraw(Caller::WebMcp, "wm-1", at(2));
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].call, edited.call);
    assert!(w.runs().is_empty());
}

#[test]
fn an_outside_agents_write_is_asked_whatever_the_level_and_no_mode_runs_it() {
    let w = world();
    // The page's assistant runs `note` unasked (its declared level is `None`)...
    let step = submit(&w, Caller::Assistant, "a-1", "note", r#"{"name":"A"}"#, 0);
    assert!(matches!(step, Step::Perform(_)), "{step:?}");
    drive(&w.exec, step, 1);
    // ...an agent outside the page is asked, and says why; its reads still run.
    for caller in [Caller::WebMcp, Caller::Mcp] {
        let card = asked(&w, caller, "x-1", "note", r#"{"name":"B"}"#, 2);
        let records = for_call(&w.audit, card.call);
        assert_eq!(
            records.last().map(|r| r.reason.clone()),
            Some(countersign::Reason::OutsideCaller { caller })
        );
        w.exec.deny(card.call, None, at(3)).unwrap();
        let step = submit(&w, caller, "x-2", "look", r#"{"name":"C"}"#, 4);
        assert!(matches!(step, Step::Perform(_)), "{step:?}");
        drive(&w.exec, step, 5);
    }
    // No mode speaks for an outside agent: bypass still asks, unattended and away refuse.
    for (mode, asked) in [
        (countersign::Mode::Bypass, true),
        (countersign::Mode::Unattended, false),
        (countersign::Mode::Away, false),
    ] {
        w.exec.set_mode(mode).unwrap();
        let step = submit(&w, Caller::WebMcp, "wm", "note", r#"{"name":"D"}"#, 6);
        match step {
            Step::Approval(card) if asked => {
                w.exec.deny(card.call, None, at(7)).unwrap();
            }
            Step::Settled(settled) if !asked => assert_eq!(code(&settled), "POLICY_DENIED"),
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    assert_eq!(w.runs(), ["note:A", "look:C", "look:C"]);
}

#[test]
fn no_mode_runs_an_outside_agents_read_the_page_asks_for() {
    let mut w = world();
    w.add(w.action("peek", Kind::Read, Confirm::Ask));
    w.exec.set_mode(countersign::Mode::Bypass).unwrap();
    let card = asked(&w, Caller::WebMcp, "wm-1", "peek", r#"{"name":"A"}"#, 0);
    w.exec.deny(card.call, None, at(1)).unwrap();
    // The page's assistant is still run by bypass.
    let step = submit(&w, Caller::Assistant, "a-1", "peek", r#"{"name":"B"}"#, 2);
    assert!(matches!(step, Step::Perform(_)), "{step:?}");
    drive(&w.exec, step, 3);
    w.exec.set_mode(countersign::Mode::Unattended).unwrap();
    let Step::Settled(settled) = submit(&w, Caller::Mcp, "m-1", "peek", r#"{"name":"C"}"#, 4)
    else {
        panic!("unattended must refuse an agent's asked read");
    };
    assert_eq!(code(&settled), "POLICY_DENIED");
    assert_eq!(w.runs(), ["peek:B"]);
}

#[test]
fn an_agent_has_only_its_share_of_live_calls() {
    let w = world();
    let mut cards = Vec::new();
    for n in 0..3 {
        let card = asked(
            &w,
            Caller::WebMcp,
            &format!("wm-{n}"),
            "rename",
            r#"{"name":"A"}"#,
            n,
        );
        cards.push(card);
    }
    let Step::Settled(refused) = submit(&w, Caller::WebMcp, "wm-3", "rename", r#"{"name":"B"}"#, 5)
    else {
        panic!("a fourth live call must be refused");
    };
    assert_eq!(code(&refused), "UNAVAILABLE");
    assert_eq!(w.terminal(refused.call).len(), 1);
    // Not even a read gets in; other callers are not affected.
    let Step::Settled(read) = submit(&w, Caller::WebMcp, "wm-4", "look", r#"{"name":"C"}"#, 6)
    else {
        panic!("refused");
    };
    assert_eq!(code(&read), "UNAVAILABLE");
    assert!(matches!(
        submit(&w, Caller::Mcp, "m-1", "rename", r#"{"name":"D"}"#, 7),
        Step::Approval(_)
    ));
    assert!(matches!(
        submit(&w, Caller::Assistant, "a-1", "rename", r#"{"name":"E"}"#, 8),
        Step::Approval(_)
    ));
    // An edit of a waiting call is not a new call: it goes through.
    assert!(w.exec.edit(cards[0].call, r#"{"name":"Z"}"#, at(9)).is_ok());
    // Once the person decides one, the agent may ask again.
    w.exec.deny(cards[1].call, None, at(10)).unwrap();
    assert!(matches!(
        submit(&w, Caller::WebMcp, "wm-5", "rename", r#"{"name":"F"}"#, 11),
        Step::Approval(_)
    ));
    assert!(w.runs().is_empty());
}

#[test]
fn a_handoff_is_the_persons_and_is_not_withdrawn() {
    let mut w = world();
    w.add(
        countersign::Action::<crate::common::Named>::new("publish", "Publish.")
            .kind(Kind::Danger)
            .handoff(
                countersign::Handoff::new(
                    "only you can",
                    countersign::Expect::new("published", || true),
                )
                .step("Press Publish", None),
            ),
    );
    let Step::Handoff(view) = submit(&w, Caller::WebMcp, "wm-1", "publish", r#"{"name":"A"}"#, 0)
    else {
        panic!("a handoff");
    };
    assert_eq!(view.caller, Caller::WebMcp);
    // The agent leaving does not undo what the person may already have done.
    assert!(w.exec.withdraw(Caller::WebMcp, "wm-1", at(1)).is_empty());
    assert_eq!(w.exec.handoffs().len(), 1);
    let settled = w.exec.handoff_done(view.call, at(2)).unwrap().unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.terminal(view.call).len(), 1);
}

#[test]
fn an_outside_agent_is_told_its_write_is_asked() {
    let w = world();
    let tool = |caller: Caller, name: &str| {
        w.exec
            .projection_for(caller)
            .unwrap()
            .into_iter()
            .find(|t| t.name == name)
            .unwrap()
    };
    // The page's assistant is told `note` runs unasked, as it does for it...
    let own = tool(Caller::Assistant, "note");
    assert_eq!(
        own.annotations.approval,
        countersign::policy::ApprovalPolicy::None
    );
    assert!(
        own.description.ends_with("Runs without asking."),
        "{}",
        own.description
    );
    // ...an agent outside the page is told what happens to it: it is asked.
    for caller in [Caller::WebMcp, Caller::Mcp] {
        let theirs = tool(caller, "note");
        assert_eq!(
            theirs.annotations.approval,
            countersign::policy::ApprovalPolicy::Ask
        );
        assert!(
            theirs.description.contains("asked to approve"),
            "{}",
            theirs.description
        );
        let read = tool(caller, "look");
        assert_eq!(
            read.annotations.approval,
            countersign::policy::ApprovalPolicy::None
        );
    }
}

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn only_a_well_formed_traceparent_is_kept() {
    assert!(countersign::call::is_traceparent(TRACE));
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0G",
    ] {
        assert!(!countersign::call::is_traceparent(bad), "{bad:?} passed");
        assert_eq!(Call::new("c", "a", "{}").traced(bad).trace, None);
    }
    assert_eq!(
        Call::new("c", "a", "{}").traced(TRACE).trace.as_deref(),
        Some(TRACE)
    );
}

#[test]
fn every_record_of_a_traced_call_carries_its_trace_and_no_other_does() {
    let w = world();
    let call = Call::new("t-1", "rename", r#"{"name":"A"}"#).traced(TRACE);
    let Step::Approval(card) = w.exec.submit(call, at(0)).unwrap() else {
        panic!("rename is asked");
    };
    assert_eq!(code(&w.allow(&card, Gesture::AllowOnce, 5).unwrap()), "OK");
    let records = for_call(&w.audit, card.call);
    assert!(records.len() >= 3, "{records:?}");
    assert!(records.iter().all(|r| r.trace.as_deref() == Some(TRACE)));
    let line = serde_json::to_string(&records[0]).unwrap();
    assert!(line.contains(&format!(r#""trace":"{TRACE}""#)), "{line}");
    // A refusal before the action resolves carries it too; an untraced call has none.
    let refused = w
        .exec
        .submit(Call::new("t-2", "nope", "{}").traced(TRACE), at(10))
        .unwrap();
    let settled = drive(&w.exec, refused, 10).unwrap();
    assert_eq!(code(&settled), "UNKNOWN_ACTION");
    assert!(w
        .audit
        .records()
        .iter()
        .filter(|r| &*r.tool_call_id == "t-2")
        .all(|r| r.trace.as_deref() == Some(TRACE)));
    let plain = asked(
        &w,
        Caller::Assistant,
        "t-3",
        "rename",
        r#"{"name":"B"}"#,
        20,
    );
    let line = serde_json::to_string(&for_call(&w.audit, plain.call)[0]).unwrap();
    assert!(!line.contains("trace"), "{line}");
}
