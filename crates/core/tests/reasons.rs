//! One row per reason: the code, stage, retry hint and rule name a decision's reason
//! gives. The model's message and the audit's summary are derived from the same value.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use countersign::{
    ApprovalPolicy, CardChange, Code, Hook, Level, LevelSource, Mode, Reason, RestoreMiss,
    RetryHint, Stage,
};

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
        (Reason::SyntheticGesture { control: countersign::Control::Deny }, S::Approve, None, H::AskUser, "synthetic_gesture"),
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
        (Reason::HookReentered { hook: Hook::Classify }, S::Decide, Some(C::Unavailable), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Verify }, S::Verify, Some(C::VerifyFailed), H::AskUser, "hook_reentered"),
        (Reason::HookReentered { hook: Hook::Expect }, S::Verify, Some(C::HandoffFailed), H::AskUser, "hook_reentered"),
        (Reason::HookFailed { hook: Hook::Consequence }, S::Approve, Some(C::Unavailable), H::AskUser, "hook_failed"),
        (Reason::HookFailed { hook: Hook::Run }, S::Perform, Some(C::ExecutionFailed), H::AskUser, "hook_failed"),
    ];
    for (reason, stage, code, retry, rule) in &table {
        assert_eq!(reason.stage(), *stage, "{reason:?}");
        assert_eq!(reason.code(), *code, "{reason:?}");
        if code.is_some() {
            assert_eq!(reason.retry(), *retry, "{reason:?}");
        }
        assert_eq!(reason.rule(), *rule, "{reason:?}");
        assert!(!reason.summary().is_empty());
        // Reasons round-trip as audit data.
        let text = serde_json::to_string(reason).unwrap();
        assert!(text.contains(&format!("\"rule\":\"{rule}\"")), "{text}");
        assert_eq!(&serde_json::from_str::<Reason>(&text).unwrap(), reason);
    }
    // POLICY_DENIED no longer says one thing for three causes.
    let policy_denied: Vec<String> = table
        .iter()
        .filter(|row| row.2 == Some(C::PolicyDenied))
        .map(|row| row.0.summary().into_owned())
        .collect();
    let mut unique = policy_denied.clone();
    unique.dedup();
    assert_eq!(unique.len(), policy_denied.len());
    assert!(table.iter().any(|row| matches!(row.0, Reason::Level(Level { source: LevelSource::RoleOverride { line: 4, .. }, .. }) if row.0.summary().contains("line 4"))));
}
