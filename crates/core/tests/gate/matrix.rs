//! Every kind × confirm × person response ends as the table says: outcome, run, audit trail.

use std::rc::Rc;

use countersign::{
    audit::AuditEvent, audit::Decider, policy::ApprovalPolicy, ticket::TicketError, Call, Confirm,
    Gesture, Kind, Step,
};

use crate::common::{at, code, drive, for_call, signed, Signer, World};

#[derive(Clone, Copy, Debug)]
enum Response {
    AllowOnce,
    AllowForSession,
    Deny,
    Timeout,
}

const KINDS: [Kind; 3] = [Kind::Read, Kind::Write, Kind::Danger];
const CONFIRMS: [Confirm; 4] = [Confirm::Unset, Confirm::Ask, Confirm::Always, Confirm::Off];
const RESPONSES: [Response; 4] = [
    Response::AllowOnce,
    Response::AllowForSession,
    Response::Deny,
    Response::Timeout,
];

/// What the matrix expects: outcome code, whether run ran, the audit events in order.
fn expected(policy: ApprovalPolicy, response: Response) -> (&'static str, bool, Vec<AuditEvent>) {
    use AuditEvent::*;
    match (policy, response) {
        (ApprovalPolicy::None, _) => ("OK", true, vec![Allowed, Settled]),
        (_, Response::AllowOnce) => ("OK", true, vec![Asked, Approved, Settled]),
        (ApprovalPolicy::Ask, Response::AllowForSession) => {
            ("OK", true, vec![Asked, Granted, Settled])
        }
        // AskAlways never offers a grant: the gesture is refused and the call stays
        // pending until it times out.
        (_, Response::AllowForSession) => ("APPROVAL_TIMEOUT", false, vec![Asked, Settled]),
        (_, Response::Deny) => ("PERMISSION_DENIED", false, vec![Asked, Settled]),
        (_, Response::Timeout) => ("APPROVAL_TIMEOUT", false, vec![Asked, Settled]),
    }
}

#[test]
fn the_resolution_table_matches_the_design() {
    use ApprovalPolicy as P;
    let table = [
        (Kind::Read, Confirm::Unset, P::None),
        (Kind::Write, Confirm::Unset, P::None),
        (Kind::Danger, Confirm::Unset, P::AskAlways),
        (Kind::Read, Confirm::Ask, P::Ask),
        (Kind::Write, Confirm::Ask, P::Ask),
        (Kind::Danger, Confirm::Ask, P::AskAlways),
        (Kind::Read, Confirm::Always, P::AskAlways),
        (Kind::Write, Confirm::Always, P::AskAlways),
        (Kind::Danger, Confirm::Always, P::AskAlways),
        (Kind::Read, Confirm::Off, P::None),
        (Kind::Write, Confirm::Off, P::None),
        (Kind::Danger, Confirm::Off, P::None),
    ];
    for (kind, confirm, expected) in table {
        assert_eq!(
            ApprovalPolicy::resolve(kind, confirm),
            expected,
            "{kind:?} × {confirm:?}"
        );
    }
}

#[test]
fn only_ask_offers_a_session_grant() {
    assert!(ApprovalPolicy::Ask.offers_session_grant());
    assert!(!ApprovalPolicy::AskAlways.offers_session_grant());
    assert!(!ApprovalPolicy::None.offers_session_grant());
}

#[test]
fn every_kind_confirm_and_response_ends_as_the_table_says() {
    let timeout = countersign::executor::DEFAULT_APPROVAL_TIMEOUT.as_millis() as u64;
    for kind in KINDS {
        for confirm in CONFIRMS {
            for response in RESPONSES {
                let label = format!("{kind:?} × {confirm:?} × {response:?}");
                let mut w = World::new();
                w.add(w.action("act", kind, confirm));
                let policy = ApprovalPolicy::resolve(kind, confirm);
                let step = w.call("act", r#"{"name":"x"}"#, 0);
                let settled = match step {
                    Step::Approval(card) => {
                        assert_ne!(
                            policy,
                            ApprovalPolicy::None,
                            "{label}: asked under policy None"
                        );
                        assert_eq!(card.policy, policy, "{label}");
                        assert_eq!(
                            card.offers_session_grant,
                            policy == ApprovalPolicy::Ask,
                            "{label}"
                        );
                        assert_eq!(
                            card.consequence.as_deref(),
                            Some("set the name to `x`"),
                            "{label}"
                        );
                        match response {
                            Response::AllowOnce => drive(
                                &w.exec,
                                w.exec
                                    .approve(card.countersign(Gesture::AllowOnce), at(5))
                                    .unwrap(),
                                6,
                            ),
                            Response::AllowForSession => match w
                                .exec
                                .approve(card.countersign(Gesture::AllowForSession), at(5))
                            {
                                Ok(step) => drive(&w.exec, step, 6),
                                Err(TicketError::GrantNotOffered) => {
                                    assert!(w.runs().is_empty(), "{label}");
                                    w.exec.handle_timeout(at(timeout)).pop()
                                }
                                Err(e) => panic!("{label}: {e}"),
                            },
                            Response::Deny => {
                                Some(w.exec.deny(card.call, Some("not now"), at(5)).unwrap())
                            }
                            Response::Timeout => {
                                assert!(
                                    w.exec.handle_timeout(at(timeout - 1)).is_empty(),
                                    "{label}"
                                );
                                w.exec.handle_timeout(at(timeout)).pop()
                            }
                        }
                    }
                    other => {
                        assert_eq!(policy, ApprovalPolicy::None, "{label}: not asked");
                        drive(&w.exec, other, 1)
                    }
                }
                .unwrap_or_else(|| panic!("{label}: never settled"));

                let (code, ran, events) = expected(policy, response);
                assert_eq!(settled.outcome.code_str(), code, "{label}");
                assert_eq!(w.runs().len(), usize::from(ran), "{label}: run count");
                let trail: Vec<AuditEvent> = for_call(&w.audit, settled.call)
                    .iter()
                    .map(|r| r.event)
                    .collect();
                assert_eq!(trail, events, "{label}: audit trail");
                let terminal = w.terminal(settled.call);
                assert_eq!(terminal.len(), 1, "{label}");
                assert_eq!(terminal[0].outcome.as_deref(), Some(code), "{label}");
                assert_eq!(terminal[0].confirm, Some(confirm), "{label}");
                assert_eq!(terminal[0].policy, Some(policy), "{label}");
                assert_eq!(w.exec.live_calls(), 0, "{label}");
            }
        }
    }
}

#[test]
fn a_session_grant_lets_the_next_ask_call_through_and_revoking_it_asks_again() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"a"}"#, 0);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    let grants = w.exec.grants();
    assert_eq!(grants.len(), 1);

    let second = w.call("save", r#"{"name":"b"}"#, 3);
    let Step::Perform(_) = &second else {
        panic!("granted call was asked: {second:?}")
    };
    let settled = drive(&w.exec, second, 4).unwrap();
    let trail = for_call(&w.audit, settled.call);
    assert_eq!(trail[0].event, AuditEvent::Allowed);
    assert_eq!(trail[0].decided_by, Decider::SessionGrant);

    assert!(w.exec.revoke(grants[0].id).unwrap());
    assert!(!w.exec.revoke(grants[0].id).unwrap(), "revoking twice");
    assert!(matches!(
        w.call("save", r#"{"name":"c"}"#, 5),
        Step::Approval(_)
    ));
    assert_eq!(w.runs(), ["save:a", "save:b"]);
}

#[test]
fn ask_always_is_asked_every_time_even_after_an_allow() {
    let mut w = World::new();
    w.add(w.action("archive", Kind::Danger, Confirm::Ask));
    for i in 0..3 {
        let Step::Approval(card) = w.call("archive", r#"{"name":"w"}"#, i * 10) else {
            panic!("archive was not asked on round {i}")
        };
        assert!(!card.offers_session_grant);
        assert_eq!(
            w.exec
                .approve(card.countersign(Gesture::AllowForSession), at(i * 10 + 1))
                .unwrap_err(),
            TicketError::GrantNotOffered
        );
        drive(
            &w.exec,
            w.exec
                .approve(card.countersign(Gesture::AllowOnce), at(i * 10 + 2))
                .unwrap(),
            i * 10 + 3,
        );
    }
    assert!(w.exec.grants().is_empty());
    assert_eq!(w.runs().len(), 3);
}

#[test]
fn an_action_s_own_approval_timeout_sets_its_card_s_deadline_and_expiry_is_its_own_outcome() {
    let mut w = World::new();
    w.add(
        w.action("quick", Kind::Write, Confirm::Ask)
            .approval_timeout(std::time::Duration::from_secs(20)),
    );
    w.add(w.action("slow", Kind::Write, Confirm::Ask));
    let quick = w.card("quick", r#"{"name":"a"}"#, 0);
    let slow = w.card("slow", r#"{"name":"b"}"#, 0);
    assert_eq!(quick.deadline, at(20_000));
    assert_eq!(slow.deadline, at(5 * 60 * 1000), "the executor's default");
    assert!(w.exec.handle_timeout(at(19_999)).is_empty());
    let expired = w.exec.handle_timeout(at(20_000));
    assert_eq!(expired.len(), 1, "only the short card expired");
    assert_eq!(expired[0].call, quick.call);
    assert_eq!(code(&expired[0]), "APPROVAL_TIMEOUT");
    assert_eq!(w.exec.approvals().len(), 1, "the other card still waits");
    // A late press of the expired card is refused and runs nothing.
    assert!(w
        .exec
        .approve(quick.countersign(Gesture::AllowOnce), at(20_001))
        .is_err());
    assert!(w.runs().is_empty());
    let terminal = w.terminal(quick.call);
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].event, AuditEvent::Settled);
    assert_eq!(terminal[0].decided_by, Decider::Timer);
}

#[test]
fn an_approval_timeout_of_zero_is_refused_at_registration() {
    let w = World::new();
    let refused = w
        .exec
        .register(
            w.action("never", Kind::Write, Confirm::Ask)
                .approval_timeout(std::time::Duration::ZERO),
        )
        .unwrap_err();
    assert_eq!(
        refused,
        countersign::executor::RegisterError::ZeroApprovalTimeout("never".into())
    );
    assert!(w.exec.action_ids().iter().all(|id| id != "never"));
}

#[test]
fn the_trail_records_the_level_the_card_asks_under_from_the_first_card_on() {
    let mut w = World::new();
    // Declared `Ask`; the classifier raises these arguments to "ask every time".
    w.add(
        w.action("flagged", Kind::Write, Confirm::Ask)
            .classify(|p| {
                if p.name == "risky" {
                    countersign::Verdict::Ask
                } else {
                    countersign::Verdict::Allow
                }
            }),
    );
    let Step::Approval(card) = w.call("flagged", r#"{"name":"risky"}"#, 0) else {
        panic!("asked")
    };
    assert_eq!(card.policy, countersign::policy::ApprovalPolicy::AskAlways);
    let step = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(1))
        .unwrap();
    drive(&w.exec, step, 2).unwrap();
    let levels: Vec<_> = for_call(&w.audit, card.call)
        .iter()
        .map(|r| r.policy)
        .collect();
    assert_eq!(
        levels,
        [Some(countersign::policy::ApprovalPolicy::AskAlways); 3],
        "asked, approved and settled under the card's level"
    );
}

/// What a decision is, in a word: `run by`, `ask policy`, `refuse by`, `handoff`, `question`.
fn shape(decision: &countersign::policy::Decision) -> String {
    use countersign::policy::Decision as D;
    match decision {
        D::Run { by, .. } => format!("run {by:?}"),
        D::Ask { policy, .. } => format!("ask {policy:?}"),
        D::Refuse { by, .. } => format!("refuse {by:?}"),
        D::Handoff => "handoff".into(),
        D::Question => "question".into(),
    }
}

/// The pure decision, row by row: each row the facts that differ from a plain call, and
/// the decision they must give.
#[test]
fn the_decision_follows_its_table_row_by_row() {
    use countersign::policy::{decide, Facts};
    use countersign::{ticket::GrantId, Caller, Mode, Verdict};
    use ApprovalPolicy::{Ask, AskAlways, None};
    let grant: Option<GrantId> = serde_json::from_value(serde_json::json!(7)).ok();
    // A plain call from the page's assistant under `level`: allowed, default mode, no grant.
    let f = |kind: Kind, level: ApprovalPolicy| Facts {
        kind,
        level: countersign::reason::Level {
            policy: level,
            source: countersign::reason::LevelSource::Declared,
        },
        verdict: Verdict::Allow,
        mode: Mode::Default,
        caller: Caller::Assistant,
        grant: Option::None,
        handoff: false,
        question: false,
        countersigned: false,
        confirm_twice: false,
        reversal: false,
        untrusted: Option::None,
        untrusted_always: false,
    };
    let after = |facts: Facts| Facts {
        untrusted: Some("comments".into()),
        ..facts
    };
    let rows: Vec<(Facts, &str)> = vec![
        (after(f(Kind::Read, None)), "run Policy"),
        (after(f(Kind::Write, None)), "ask Ask"),
        (after(f(Kind::Write, Ask)), "ask AskAlways"),
        (after(f(Kind::Danger, AskAlways)), "ask AskAlways"),
        (
            Facts {
                untrusted_always: true,
                ..after(f(Kind::Write, None))
            },
            "ask AskAlways",
        ),
        (
            Facts {
                grant,
                ..after(f(Kind::Write, Ask))
            },
            "ask AskAlways",
        ),
        (
            Facts {
                mode: Mode::Bypass,
                ..after(f(Kind::Write, None))
            },
            "ask Ask",
        ),
        (
            Facts {
                mode: Mode::Unattended,
                ..after(f(Kind::Write, Ask))
            },
            "refuse Mode",
        ),
        (
            Facts {
                caller: Caller::Mcp,
                ..after(f(Kind::Write, None))
            },
            "ask AskAlways",
        ),
        (f(Kind::Write, None), "run Policy"),
        (f(Kind::Write, Ask), "ask Ask"),
        (f(Kind::Danger, AskAlways), "ask AskAlways"),
        (
            Facts {
                grant,
                ..f(Kind::Write, Ask)
            },
            "run SessionGrant",
        ),
        (
            Facts {
                grant,
                ..f(Kind::Write, AskAlways)
            },
            "ask AskAlways",
        ),
        (
            Facts {
                grant,
                confirm_twice: true,
                ..f(Kind::Write, Ask)
            },
            "ask Ask",
        ),
        (
            Facts {
                verdict: Verdict::Ask,
                ..f(Kind::Write, None)
            },
            "ask AskAlways",
        ),
        (
            Facts {
                verdict: Verdict::Ask,
                grant,
                ..f(Kind::Write, Ask)
            },
            "ask AskAlways",
        ),
        (
            Facts {
                verdict: Verdict::Deny("no".into()),
                ..f(Kind::Read, None)
            },
            "refuse Classifier",
        ),
        (
            Facts {
                countersigned: true,
                ..f(Kind::Write, None)
            },
            "ask Ask",
        ),
        (
            Facts {
                countersigned: true,
                grant,
                ..f(Kind::Write, None)
            },
            "run SessionGrant",
        ),
        (
            Facts {
                countersigned: true,
                mode: Mode::Bypass,
                ..f(Kind::Write, Ask)
            },
            "ask Ask",
        ),
        (
            Facts {
                caller: Caller::WebMcp,
                ..f(Kind::Write, None)
            },
            "ask Ask",
        ),
        (
            Facts {
                caller: Caller::Mcp,
                ..f(Kind::Read, None)
            },
            "run Policy",
        ),
        (
            Facts {
                caller: Caller::Mcp,
                mode: Mode::Bypass,
                ..f(Kind::Write, Ask)
            },
            "ask Ask",
        ),
        (
            Facts {
                caller: Caller::Mcp,
                mode: Mode::Unattended,
                ..f(Kind::Write, Ask)
            },
            "refuse Mode",
        ),
        (
            Facts {
                handoff: true,
                ..f(Kind::Danger, None)
            },
            "handoff",
        ),
        (
            Facts {
                handoff: true,
                mode: Mode::Bypass,
                ..f(Kind::Write, None)
            },
            "handoff",
        ),
        (
            Facts {
                handoff: true,
                mode: Mode::Away,
                ..f(Kind::Write, None)
            },
            "refuse Mode",
        ),
        (
            Facts {
                question: true,
                ..f(Kind::Read, None)
            },
            "question",
        ),
        (
            Facts {
                question: true,
                mode: Mode::Unattended,
                ..f(Kind::Read, None)
            },
            "refuse Mode",
        ),
        (
            Facts {
                mode: Mode::Bypass,
                ..f(Kind::Danger, AskAlways)
            },
            "run Mode",
        ),
        (
            Facts {
                mode: Mode::Bypass,
                reversal: true,
                ..f(Kind::Write, Ask)
            },
            "ask Ask",
        ),
        (
            Facts {
                mode: Mode::Unattended,
                ..f(Kind::Write, Ask)
            },
            "run Mode",
        ),
        (
            Facts {
                mode: Mode::Unattended,
                ..f(Kind::Write, AskAlways)
            },
            "refuse Mode",
        ),
        (
            Facts {
                mode: Mode::Unattended,
                confirm_twice: true,
                ..f(Kind::Write, Ask)
            },
            "refuse Mode",
        ),
        (
            Facts {
                mode: Mode::Away,
                ..f(Kind::Write, Ask)
            },
            "refuse Mode",
        ),
        (
            Facts {
                mode: Mode::Away,
                ..f(Kind::Write, None)
            },
            "run Policy",
        ),
    ];
    for (facts, expected) in rows {
        assert_eq!(shape(&decide(&facts)), expected, "{facts:?}");
    }
}

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
                            for (untrusted, always) in [
                                (None, false),
                                (Some("comments"), false),
                                (Some("comments"), true),
                            ] {
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
                                    untrusted: untrusted.map(str::to_owned),
                                    untrusted_always: always,
                                };
                                let decision = decide(&facts);
                                let outside = caller != Caller::Assistant;
                                let flagged = verdict == Verdict::Ask;
                                let raised = untrusted.is_some() && kind != Kind::Read;
                                let unasked = level == ApprovalPolicy::None
                                    && !flagged
                                    && !countersigned
                                    && !(outside && kind != Kind::Read);
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
                                    // After untrusted content a change is asked one level
                                    // up (every time if the file says so), or refused.
                                    Decision::Run { .. } if raised => false,
                                    Decision::Ask { policy, reason, .. } if raised => {
                                        mode != Mode::Away
                                            && mode != Mode::Unattended
                                            && matches!(
                                                reason,
                                                countersign::Reason::AfterUntrusted { .. }
                                            )
                                            && (*policy == ApprovalPolicy::AskAlways
                                                || (unasked && !always))
                                    }
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

#[test]
fn the_tool_list_tells_each_caller_the_level_its_call_is_decided_at() {
    use countersign::call::Caller;
    for kind in KINDS {
        for confirm in CONFIRMS {
            for countersigned in [false, true] {
                for caller in [Caller::Assistant, Caller::WebMcp] {
                    let label = format!("{kind:?} × {confirm:?} × {countersigned} × {caller}");
                    let w = crate::common::with_one("act", kind, confirm, countersigned);
                    let told = w.exec.projection_for(caller).unwrap();
                    let [tool] = told.as_slice() else {
                        panic!("{label}: one tool");
                    };
                    let step = w
                        .exec
                        .submit(Call::new("tc", "act", r#"{"name":"x"}"#).by(caller), at(0))
                        .unwrap();
                    let decided = match step {
                        Step::Approval(card) => card.policy,
                        _ => ApprovalPolicy::None,
                    };
                    assert_eq!(tool.annotations.approval, decided, "{label}");
                    let raised =
                        countersigned || (caller != Caller::Assistant && kind != Kind::Read);
                    let resolved = ApprovalPolicy::resolve(kind, confirm);
                    let floor = match resolved {
                        ApprovalPolicy::None if raised => ApprovalPolicy::Ask,
                        level => level,
                    };
                    assert_eq!(decided, floor, "{label}");
                }
            }
        }
    }
}
