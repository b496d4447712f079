//! The trail records every decision with its typed reason, and never the model's text.

use countersign::{
    audit::Decider, audit::Dropped, outcome::RetryHint, outcome::Stage, policy::ApprovalPolicy,
    reason::CardChange, reason::Hook, reason::Level, reason::LevelSource, reason::RestoreMiss,
    ticket::TicketError, Action, AuditSink, Call, Caller, Code, Config, Confirm, Executor, Gesture,
    Kind, MemoryAudit, Mode, Reason, Session, Step, Verdict,
};
use serde_json::json;

use crate::common::{at, code, drain, drive, for_call, Named, World};

#[test]
fn the_audit_never_holds_argument_text_only_its_digest() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let secret = "hunter2-PLAINTEXT";
    let args = format!(r#"{{"name":"{secret}"}}"#);
    let card = w.card("save", &args, 0);
    w.exec.deny(card.call, Some("no"), at(1)).unwrap();
    w.call("save", &format!(r#"{{"name":7, "x":"{secret}"}}"#), 2);
    w.call("nope", &args, 3);
    let all = serde_json::to_string(&w.audit.records()).unwrap();
    assert!(!all.contains(secret), "{all}");
    // The digest is keyed: the session's audit key confirms the arguments, a plain
    // SHA-256 of a guess does not.
    let key = countersign::Config::new("test", countersign::Session::default(), [42; 32]).audit_key;
    let expected = key.digest_raw(&args).to_hex();
    let plain =
        countersign::audit::ArgsDigest::of_value(&serde_json::from_str(&args).unwrap()).to_hex();
    let records = for_call(&w.audit, card.call);
    assert!(records.iter().all(|r| r.args_digest == expected));
    assert!(records.iter().all(|r| r.args_digest != plain));
}

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
        countersign::action::Rewrite::Action {
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
fn audit_records_have_unique_ids_in_sequence_and_durations() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let card = w.card("save", r#"{"name":"x"}"#, 1_000);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1_250))
            .unwrap(),
        1_400,
    );
    let recs = w.audit.records();
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        recs.iter().map(|r| r.id.to_string()).collect::<Vec<_>>(),
        ["test-1", "test-2", "test-3"]
    );
    assert_eq!(
        recs.iter().map(|r| r.duration_ms).collect::<Vec<_>>(),
        [0, 250, 400]
    );
    assert_eq!(recs[1].decided_by, Decider::Person);
    assert_eq!(recs[2].outcome.as_deref(), Some("OK"));
    assert!(recs
        .iter()
        .all(|r| &*r.role == "admin" && &*r.session == "test"));
}

#[test]
fn refusals_are_worded_and_audited_for_their_own_reason() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    w.add(
        w.action("picky", Kind::Write, Confirm::Unset)
            .classify(|_| countersign::Verdict::Deny("never".into())),
    );
    w.exec.set_mode(Mode::Away).unwrap();
    let away = drive(&w.exec, w.call("save", r#"{"name":"a"}"#, 0), 1).unwrap();
    let denied = drive(&w.exec, w.call("picky", r#"{"name":"a"}"#, 0), 1).unwrap();
    let json = away.outcome.to_model_json();
    assert_eq!(json["error"]["retry"], "when_person_returns");
    assert_eq!(
        denied.outcome.to_model_json()["error"]["retry"],
        "do_not_retry"
    );
    let away_record = &w.terminal(away.call)[0];
    let denied_record = &w.terminal(denied.call)[0];
    assert_eq!(away_record.reason, Reason::ModeRefused { mode: Mode::Away });
    assert_eq!(denied_record.reason, Reason::ClassifierDenied);
    let away_words = json["error"]["message"].as_str().unwrap();
    assert!(!away_words.contains("classif"), "{away_words}");
    // A hostile id comes back escaped, not merely truncated.
    let s = match w
        .exec
        .submit(
            countersign::Call::new("t", "a\nb\u{0}c\u{202e}", "{}"),
            at(2),
        )
        .unwrap()
    {
        Step::Settled(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(
        !s.action.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{:?}",
        s.action
    );
    assert_eq!(&*s.action, "a\\nb\\u{0}c\\u{202e}");
}

#[test]
fn refusals_carry_their_own_typed_reason() {
    let mut w = World::new();
    w.add(w.action("ask", Kind::Write, Confirm::Ask));
    w.add(w.action("loop", Kind::Write, Confirm::Unset).rewrite(|p| {
        countersign::action::Rewrite::Arguments(json!({ "name": format!("{}x", p.name) }))
    }));
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
    // A call past the host's cap per turn: refused unread, one record, nothing run.
    let over = w
        .exec
        .refuse_over_cap(Call::new("tc-17", "ask", r#"{"name":"b"}"#), 16, at(0))
        .unwrap();
    let s = drain(&w.exec).pop().unwrap();
    assert_eq!(s.call, over);
    assert_eq!(s.outcome.reason(), Reason::TooManyCalls { cap: 16 });
    assert_eq!(w.terminal(over).len(), 1);
    assert_eq!(
        for_call(&w.audit, over).len(),
        1,
        "only the terminal record"
    );
    assert_eq!(w.terminal(over)[0].action, "ask");
    assert!(w.runs().is_empty());
    // Away + an Ask card: mode_refused, hint when_person_returns, decided by the mode.
    w.exec.set_mode(Mode::Away).unwrap();
    let Step::Settled(s) = w.call("ask", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    assert_eq!(s.outcome.reason(), Reason::ModeRefused { mode: Mode::Away });
    assert_eq!(
        w.terminal(s.call)[0].decided_by,
        countersign::audit::Decider::Mode
    );
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

/// The model reads hooks and modes by their declared names.
#[test]
fn messages_name_hooks_and_modes_as_declared() {
    #[rustfmt::skip]
    let hooks = [
        (Hook::Available, "available"), (Hook::Validate, "validate"),
        (Hook::Classify, "classify"), (Hook::Consequence, "consequence"),
        (Hook::Preview, "preview"), (Hook::Rewrite, "rewrite"),
        (Hook::Remember, "remember"), (Hook::SecondQuestion, "confirm_twice"),
        (Hook::Run, "run"), (Hook::Verify, "verify"), (Hook::Expect, "expect"),
    ];
    for (hook, name) in hooks {
        let message =
            countersign::outcome::Refusal::of(Reason::HookReentered { hook }, "a", None).message;
        assert!(message.contains(&format!("`{name}`")), "{message}");
    }
    let message =
        countersign::outcome::Refusal::of(Reason::ModeRefused { mode: Mode::Bypass }, "a", None)
            .message;
    assert!(message.contains("`bypass`"), "{message}");
}

fn level(policy: ApprovalPolicy, source: LevelSource) -> Reason {
    Reason::Level(Level { policy, source })
}

#[test]
fn every_reason_names_its_stage_code_and_hint() {
    use Code as C;
    use RetryHint as H;
    use Stage as S;
    let grant = serde_json::from_str("7").unwrap();
    let call_id = serde_json::from_str("3").unwrap();
    #[rustfmt::skip]
    let table: Vec<(Reason, S, Option<C>, H, &str)> = vec![
        (Reason::UnknownAction, S::Resolve, Some(C::UnknownAction), H::FixCall, "unknown_action"),
        (Reason::ToolCallIdTooLong, S::Validate, Some(C::InvalidArgs), H::FixCall, "tool_call_id_too_long"),
        (Reason::TooManyCalls { cap: 16 }, S::Validate, Some(C::InvalidArgs), H::FixCall, "too_many_calls"),
        (Reason::InvalidArguments, S::Validate, Some(C::InvalidArgs), H::FixCall, "invalid_arguments"),
        (Reason::ScopeMissing { scope: "w".into() }, S::Scope, Some(C::ScopeMissing), H::AskUser, "scope_missing"),
        (Reason::PolicyFileBroken { line: 3 }, S::Scope, Some(C::PolicyDenied), H::AskUser, "policy_file_broken"),
        (Reason::Unavailable, S::Availability, Some(C::Unavailable), H::AskUser, "unavailable"),
        (Reason::Unregistered, S::Availability, Some(C::Unavailable), H::AskUser, "unregistered"),
        (Reason::PageClosed, S::Availability, Some(C::Unavailable), H::AskUser, "page_closed"),
        (level(ApprovalPolicy::None, LevelSource::Declared), S::Decide, None, H::AskUser, "level"),
        (level(ApprovalPolicy::AskAlways, LevelSource::RoleOverride { role: "viewer".into(), line: 4 }), S::Decide, None, H::AskUser, "level"),
        (level(ApprovalPolicy::AskAlways, LevelSource::BrokenFileFallback { last_good: false }), S::Decide, None, H::AskUser, "level"),
        (Reason::ClassifierAsked, S::Decide, None, H::AskUser, "classifier_asked"),
        (Reason::ClassifierDenied, S::Decide, Some(C::PolicyDenied), H::DoNotRetry, "classifier_denied"),
        (Reason::Grant { grant }, S::Decide, None, H::AskUser, "grant"),
        (Reason::ModeAllowed { mode: Mode::Unattended }, S::Decide, None, H::AskUser, "mode_allowed"),
        (Reason::ModeRefused { mode: Mode::Away }, S::Decide, Some(C::PolicyDenied), H::WhenPersonReturns, "mode_refused"),
        (Reason::ModeRefused { mode: Mode::Unattended }, S::Decide, Some(C::PolicyDenied), H::WhenPersonReturns, "mode_refused"),
        (Reason::Handoff, S::Decide, None, H::AskUser, "handoff"),
        (Reason::Question, S::Decide, None, H::AskUser, "question"),
        (Reason::Answered, S::Verify, None, H::AskUser, "answered"),
        (Reason::QuestionDeclined, S::Approve, Some(C::QuestionDeclined), H::AskUser, "question_declined"),
        (Reason::Rewritten { to: Some("trash".into()) }, S::Decide, None, H::AskUser, "rewritten"),
        (Reason::Rewritten { to: None }, S::Decide, Some(C::Unavailable), H::AskUser, "rewritten"),
        (Reason::RewriteLoop, S::Decide, Some(C::InvalidArgs), H::DoNotRetry, "rewrite_loop"),
        (Reason::AllowedOnce, S::Approve, None, H::AskUser, "allowed_once"),
        (Reason::AllowedInBatch, S::Approve, None, H::AskUser, "allowed_in_batch"),
        (Reason::Granted { grant }, S::Approve, None, H::AskUser, "granted"),
        (Reason::SecondQuestion, S::Approve, None, H::AskUser, "second_question"),
        (Reason::StaleCard { changed: vec![CardChange::Consequence] }, S::Approve, None, H::AskUser, "stale_card"),
        (Reason::CardKeptChanging, S::Approve, Some(C::Unavailable), H::AskUser, "card_kept_changing"),
        (Reason::Declined, S::Approve, Some(C::PermissionDenied), H::AskUser, "declined"),
        (Reason::Restored, S::Approve, None, H::AskUser, "restored"),
        (Reason::SyntheticGesture { control: countersign::reason::Control::Deny }, S::Approve, None, H::AskUser, "synthetic_gesture"),
        (Reason::NotRestored { handoff: false, why: RestoreMiss::Expired }, S::Approve, Some(C::ApprovalExpired), H::AskUser, "not_restored"),
        (Reason::NotRestored { handoff: true, why: RestoreMiss::ElsewhereOrDone }, S::Approve, Some(C::HandoffTimeout), H::AskUser, "not_restored"),
        (Reason::EditedInto { call: call_id }, S::Approve, None, H::AskUser, "edited_into"),
        (Reason::EditedFrom { call: call_id, changed: vec!["name".into()] }, S::Approve, None, H::AskUser, "edited_from"),
        (Reason::ApprovalTimeout, S::Approve, Some(C::ApprovalTimeout), H::AskUser, "approval_timeout"),
        (Reason::NothingToRun, S::Perform, Some(C::ExecutionFailed), H::AskUser, "nothing_to_run"),
        (Reason::RunFailed, S::Perform, Some(C::ExecutionFailed), H::AskUser, "run_failed"),
        (Reason::Interrupted, S::Perform, Some(C::ExecutionFailed), H::AskUser, "interrupted"),
        (Reason::VerifyFailed, S::Verify, Some(C::VerifyFailed), H::AskUser, "verify_failed"),
        (Reason::Verified, S::Verify, None, H::AskUser, "verified"),
        (Reason::TrailGap { first_seq: 3, last_seq: 9, unconfirmed: 2 }, S::Verify, None, H::AskUser, "trail_gap"),
        (Reason::HandoffCancelled, S::Perform, Some(C::HandoffCancelled), H::AskUser, "handoff_cancelled"),
        (Reason::HandoffTimeout, S::Perform, Some(C::HandoffTimeout), H::AskUser, "handoff_timeout"),
        (Reason::HandoffCompleted, S::Verify, None, H::AskUser, "handoff_completed"),
        (Reason::HandoffFailed, S::Verify, Some(C::HandoffFailed), H::AskUser, "handoff_failed"),
        (Reason::HandoffNotYet, S::Verify, None, H::AskUser, "handoff_not_yet"),
        (Reason::HookReentered { hook: Hook::Classify }, S::Decide, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::TooManyLive { caller: Caller::Mcp }, S::Availability, Some(C::Unavailable), H::AskUser, "too_many_live"),
        (Reason::Withdrawn { caller: Caller::WebMcp }, S::Approve, Some(C::Cancelled), H::AskUser, "withdrawn"),
        (Reason::NeedsCountersignature, S::Decide, None, H::AskUser, "needs_countersignature"),
        (Reason::OutsideCaller { caller: Caller::Mcp }, S::Decide, None, H::AskUser, "outside_caller"),
        (Reason::AfterUntrusted { source: "comments".into() }, S::Decide, None, H::AskUser, "after_untrusted"),
        (Reason::HookReentered { hook: Hook::Available }, S::Availability, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Validate }, S::Validate, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Rewrite }, S::Decide, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Consequence }, S::Approve, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Preview }, S::Approve, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Remember }, S::Approve, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::SecondQuestion }, S::Approve, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Run }, S::Perform, Some(C::ExecutionFailed), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Verify }, S::Verify, Some(C::VerifyFailed), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Expect }, S::Verify, Some(C::HandoffFailed), H::AskUser, "hook_reentered"),
    ];
    for (reason, stage, code, retry, rule) in &table {
        assert_eq!(reason.stage(), *stage, "{reason:?}");
        assert_eq!(reason.code(), *code, "{reason:?}");
        if code.is_some() {
            assert_eq!(reason.retry(), *retry, "{reason:?}");
        }
        assert_eq!(reason.rule(), *rule, "{reason:?}");
        // Reasons round-trip as audit data.
        let text = serde_json::to_string(reason).unwrap();
        assert!(text.contains(&format!("\"rule\":\"{rule}\"")), "{text}");
        assert_eq!(&serde_json::from_str::<Reason>(&text).unwrap(), reason);
    }
}

/// Records from a real executor: each refused call leaves exactly one (`settled`).
fn trail(capacity: usize, calls: usize) -> MemoryAudit {
    let audit = MemoryAudit::with_capacity(capacity);
    let exec = Executor::new(
        Config::new("test", Session::new("admin", ["workspace.write"]), [7; 32]),
        audit.clone(),
    );
    for i in 0..calls {
        let _ = exec.submit(
            countersign::Call::new(format!("tc{i}"), "no_such_action", "{}"),
            countersign::Timestamp::from_millis(i as u64),
        );
    }
    audit
}

#[test]
fn positions_stay_absolute_when_acknowledged_records_are_let_go() {
    let audit = trail(100, 10);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 10, 0));
    let seqs = |v: Vec<countersign::AuditRecord>| v.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(audit.slice(4, 3)), [5, 6, 7]);
    audit.forget_before(6);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 4, 6));
    // A position before the first held record reads from the first held one.
    assert_eq!(seqs(audit.slice(4, 3)), [7, 8, 9]);
    assert_eq!(seqs(audit.slice(8, 100)), [9, 10]);
    assert!(audit.slice(10, 5).is_empty());
    // Forgetting is not dropping, and forgetting past the end stops at the end.
    assert_eq!(audit.dropped(), Dropped::default());
    audit.forget_before(1_000);
    assert_eq!((audit.len(), audit.held(), audit.first()), (10, 0, 10));
    assert!(!audit.is_empty());
}

#[test]
fn a_full_trail_counts_what_it_pushed_out_and_holds_no_more_than_its_capacity() {
    let audit = trail(8, 20);
    assert_eq!((audit.len(), audit.held(), audit.first()), (20, 8, 12));
    assert_eq!(
        audit.dropped(),
        Dropped {
            count: 12,
            first_seq: 1,
            last_seq: 12
        }
    );
    let held: Vec<u64> = audit.records().iter().map(|r| r.seq).collect();
    assert_eq!(held, (13..=20).collect::<Vec<_>>(), "the newest are kept");
    // What the held records and the drop count say adds up to every record taken.
    assert_eq!(audit.dropped().count + audit.held(), audit.len());
}

#[test]
fn the_default_capacity_holds_a_long_session_within_bounds() {
    let audit = trail(countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY, 10_000);
    assert_eq!(
        audit.held(),
        countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY
    );
    assert_eq!(
        audit.dropped().count,
        10_000 - countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY
    );
    // One more record taken: the held count does not move.
    let mut sink = audit.clone();
    sink.record(audit.records().pop().unwrap());
    assert_eq!(
        audit.held(),
        countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY
    );
}

#[test]
fn a_trail_gap_is_a_record_of_its_own_naming_the_lost_seqs() {
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new("gap", Session::new("admin", ["workspace.write"]), [7; 32]),
        audit.clone(),
    );
    let seq = exec
        .record_trail_gap(1, 12, 2, countersign::Timestamp::from_millis(5))
        .unwrap();
    let gap = audit.records().pop().unwrap();
    assert_eq!(gap.seq, seq);
    assert_eq!(gap.event, countersign::audit::AuditEvent::TrailGap);
    assert_eq!(
        gap.reason,
        countersign::Reason::TrailGap {
            first_seq: 1,
            last_seq: 12,
            unconfirmed: 2
        }
    );
    assert_eq!(
        (gap.call, &*gap.action, gap.outcome.as_deref()),
        (0, "", None)
    );
    assert!(!gap.is_terminal());
    assert!(
        gap.summary.is_empty(),
        "the words are the gateway's to write"
    );
    let json = serde_json::to_value(&gap).unwrap();
    assert_eq!(json["event"], "trail_gap");
    assert_eq!(json["reason"]["rule"], "trail_gap");
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

/// Every record of a call that ran, as `(event, policy)`.
fn levels(w: &World, call: countersign::CallId) -> Vec<(String, Option<ApprovalPolicy>)> {
    for_call(&w.audit, call)
        .iter()
        .map(|r| (format!("{:?}", r.event), r.policy))
        .collect()
}

#[test]
fn a_call_that_runs_is_recorded_at_the_level_it_was_decided_under() {
    // A countersigned write and an outside agent's write are never below `Ask`, even at
    // level `None`: a grant's run of them is recorded as `ask`, never as `none`.
    for (countersigned, caller) in [(true, Caller::Assistant), (false, Caller::WebMcp)] {
        let label = format!("countersigned {countersigned}, {caller}");
        let w = crate::common::with_one("note", Kind::Write, Confirm::Unset, countersigned);
        let submit = |id: &str, t: u64| {
            w.exec
                .submit(Call::new(id, "note", r#"{"name":"a"}"#).by(caller), at(t))
                .unwrap()
        };
        let Step::Approval(card) = submit("tc-1", 0) else {
            panic!("{label}: asked");
        };
        assert_eq!(card.policy, ApprovalPolicy::Ask, "{label}");
        let step = w
            .exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap();
        drive(&w.exec, step, 2).unwrap();
        let settled = drive(&w.exec, submit("tc-2", 3), 4).expect("runs by the grant");
        assert_eq!(code(&settled), "OK", "{label}");
        let records = for_call(&w.audit, settled.call);
        assert_eq!(records[0].decided_by, Decider::SessionGrant, "{label}");
        let trail = levels(&w, settled.call);
        assert!(
            trail.iter().all(|(_, p)| *p == Some(ApprovalPolicy::Ask)),
            "{label}: {trail:?}"
        );
    }
    // Bypass runs what the classifier asks for: the trail says it was `ask_always`.
    let mut w = World::new();
    w.add(
        w.action("flagged", Kind::Write, Confirm::Unset)
            .classify(|_| Verdict::Ask),
    );
    w.exec.set_mode(Mode::Bypass).unwrap();
    let settled = drive(&w.exec, w.call("flagged", r#"{"name":"a"}"#, 0), 1).expect("runs");
    assert_eq!(code(&settled), "OK");
    assert_eq!(
        levels(&w, settled.call),
        [
            ("Allowed".to_owned(), Some(ApprovalPolicy::AskAlways)),
            ("Settled".to_owned(), Some(ApprovalPolicy::AskAlways))
        ],
    );
    // A call that runs unasked at level `None` stays `none`.
    let mut w = World::new();
    w.add(w.action("plain", Kind::Write, Confirm::Unset));
    let settled = drive(&w.exec, w.call("plain", r#"{"name":"a"}"#, 0), 1).expect("runs");
    assert!(levels(&w, settled.call)
        .iter()
        .all(|(_, p)| *p == Some(ApprovalPolicy::None)));
}

#[test]
fn a_call_the_mode_refuses_is_recorded_at_the_level_it_needed() {
    // A countersigned write and an outside agent's write at level `None` need a person:
    // away and unattended refuse them for that, and the trail says `ask`, never `none`.
    for mode in [Mode::Away, Mode::Unattended] {
        for (countersigned, caller) in [(true, Caller::Assistant), (false, Caller::WebMcp)] {
            let label = format!("{mode:?}, countersigned {countersigned}, {caller}");
            let w = crate::common::with_one("note", Kind::Write, Confirm::Unset, countersigned);
            w.exec.set_mode(mode).unwrap();
            let step = w
                .exec
                .submit(
                    Call::new("tc-1", "note", r#"{"name":"a"}"#).by(caller),
                    at(0),
                )
                .unwrap();
            let Step::Settled(settled) = step else {
                panic!("{label}: refused")
            };
            assert_eq!(
                settled.outcome.reason(),
                Reason::ModeRefused { mode },
                "{label}"
            );
            assert_eq!(
                levels(&w, settled.call),
                [("Settled".to_owned(), Some(ApprovalPolicy::Ask))],
                "{label}"
            );
            assert!(w.runs().is_empty(), "{label}");
        }
    }
}
