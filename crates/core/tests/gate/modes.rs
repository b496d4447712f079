//! Each mode treats each kind of decision as its table says, and never answers a waiting card.

use std::time::Duration;

use countersign::{
    action::NoParams, audit::Decider, Action, Confirm, Expect, Handoff, Kind, Mode, Step, Verdict,
};

use crate::common::{code, drive, for_call, World};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    Ran,
    Card,
    Handoff,
    Question,
    Denied,
}

fn world() -> World {
    let mut w = World::new();
    w.add(w.action("none", Kind::Write, Confirm::Unset));
    w.add(w.action("ask", Kind::Write, Confirm::Ask));
    w.add(w.action("always", Kind::Danger, Confirm::Unset));
    w.add(
        w.action("flagged", Kind::Write, Confirm::Unset)
            .classify(|_| Verdict::Deny("never".into())),
    );
    w.regs.push(
        w.exec
            .register(
                Action::<NoParams>::new("hand", "h")
                    .kind(Kind::Danger)
                    .handoff(
                        Handoff::new("r", Expect::new("e", || false))
                            .step("s", None)
                            .timeout(Duration::from_secs(9)),
                    ),
            )
            .unwrap(),
    );
    w
}

fn observe(w: &World, action: &str) -> (Seen, Option<Decider>) {
    let args = if action == "hand" || action == "pick" {
        "{}"
    } else {
        r#"{"name":"x"}"#
    };
    match w.call(action, args, 0) {
        Step::Approval(_) => (Seen::Card, None),
        Step::Handoff(_) => (Seen::Handoff, None),
        Step::Question(_) => (Seen::Question, None),
        step @ Step::Perform(_) => {
            let s = drive(&w.exec, step, 1).unwrap();
            assert_eq!(code(&s), "OK");
            (Seen::Ran, Some(for_call(&w.audit, s.call)[0].decided_by))
        }
        Step::Settled(s) => {
            assert_eq!(code(&s), "POLICY_DENIED", "{action}");
            (Seen::Denied, Some(w.terminal(s.call)[0].decided_by))
        }
    }
}

#[test]
fn each_mode_treats_each_decision_as_the_table_says() {
    use Seen::*;
    let table = [
        // (mode, none, ask, always, flagged, hand)
        (Mode::Default, Ran, Card, Card, Denied, Handoff),
        (Mode::Away, Ran, Denied, Denied, Denied, Denied),
        (Mode::Unattended, Ran, Ran, Denied, Denied, Denied),
        (Mode::Bypass, Ran, Ran, Ran, Denied, Handoff),
    ];
    for (mode, none, ask, always, flagged, hand) in table {
        let w = world();
        w.exec.set_mode(mode).unwrap();
        assert_eq!(w.exec.mode(), mode);
        for (action, expected) in [
            ("none", none),
            ("ask", ask),
            ("always", always),
            ("flagged", flagged),
            ("hand", hand),
        ] {
            let (seen, by) = observe(&w, action);
            assert_eq!(seen, expected, "{mode:?} × {action}");
            let expected_by = match (seen, action) {
                (Ran, "none") => Some(Decider::Policy),
                (Ran, _) => Some(Decider::Mode),
                (Denied, "flagged") => Some(Decider::Classifier),
                (Denied, _) => Some(Decider::Mode),
                _ => None,
            };
            assert_eq!(by, expected_by, "{mode:?} × {action}: who decided");
        }
        // Every record carries the mode it was made in.
        assert!(w.audit.records().iter().all(|r| r.mode == mode), "{mode:?}");
        // Nothing ran but what the table allows.
        let ran: Vec<String> = w
            .runs()
            .into_iter()
            .map(|r| r.split(':').next().unwrap().to_owned())
            .collect();
        let allowed: Vec<&str> = [("none", none), ("ask", ask), ("always", always)]
            .into_iter()
            .filter(|(_, s)| *s == Ran)
            .map(|(a, _)| a)
            .collect();
        assert_eq!(ran, allowed, "{mode:?}");
    }
}

#[test]
fn away_tells_the_model_nobody_is_there() {
    let w = world();
    w.exec.set_mode(Mode::Away).unwrap();
    let Step::Settled(s) = w.call("ask", r#"{"name":"x"}"#, 0) else {
        panic!()
    };
    let message = s.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("nobody is at the page"), "{message}");
}

#[test]
fn a_mode_switch_does_not_approve_cards_already_waiting() {
    let w = world();
    let card = w.card("ask", r#"{"name":"x"}"#, 0);
    w.exec.set_mode(Mode::Bypass).unwrap();
    assert_eq!(
        w.exec.approvals().len(),
        1,
        "the waiting card still waits for a person"
    );
    assert!(w.runs().is_empty());
    w.exec
        .deny(card.call, None, countersign::Timestamp::from_millis(1))
        .unwrap();
    assert!(w.runs().is_empty());
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Pick {
    /// Which one.
    which: String,
}

#[test]
fn a_question_needs_a_person_in_every_mode() {
    for (mode, expected) in [
        (Mode::Default, Seen::Question),
        (Mode::Away, Seen::Denied),
        (Mode::Unattended, Seen::Denied),
        (Mode::Bypass, Seen::Question),
    ] {
        let mut w = world();
        w.regs.push(
            w.exec
                .register(
                    Action::<NoParams>::new("pick", "Ask which.")
                        .question(countersign::Question::new::<Pick>("Which one?")),
                )
                .unwrap(),
        );
        w.exec.set_mode(mode).unwrap();
        let (seen, _) = observe(&w, "pick");
        assert_eq!(seen, expected, "{mode:?}");
    }
}
