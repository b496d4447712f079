//! The trail's sentences: what each reason means, for the people who read the trail.
//! The page's records carry the typed reason only; the gateway writes the words.

use countersign::policy::ApprovalPolicy;
use countersign::reason::LevelSource;
use countersign::text::quote;
use countersign::Reason;

/// A sentence for people reading the trail, written into each record the gateway keeps.
/// It never holds argument text.
pub fn summary(reason: &Reason) -> String {
    use Reason as R;
    match reason {
        R::UnknownAction => "no action has this id".into(),
        R::ToolCallIdTooLong => "the tool call id was too long".into(),
        R::TooManyCalls { cap } => {
            format!("the turn held more than {cap} calls; refused unread")
        }
        R::InvalidArguments => "the arguments did not validate".into(),
        R::ScopeMissing { scope } => format!("the role lacks the scope `{scope}`"),
        R::PolicyFileBroken { line } => {
            format!("the policy file is broken (line {line}); only reversals run")
        }
        R::Unavailable => "the action's availability check said no".into(),
        R::Unregistered => "the action was removed from the page".into(),
        R::PageClosed => "the page closed".into(),
        R::TrailGap {
            first_seq,
            last_seq,
            unconfirmed,
        } => format!(
            "records {first_seq}–{last_seq} were pushed out of the page's trail before the gateway acknowledged them ({unconfirmed} of them had been sent without an answer)"
        ),
        R::TooManyLive { caller } => {
            format!("the agent ({caller}) already has its share of calls waiting")
        }
        R::Level(level) => {
            let from = match &level.source {
                LevelSource::Declared => String::from("the declaration"),
                LevelSource::RoleOverride { role, line } => {
                    format!("the policy file's override for role `{role}` (line {line})")
                }
                LevelSource::BrokenFileFallback { last_good: true } => {
                    String::from(
                        "the last policy file that loaded (a reversal under a broken file)",
                    )
                }
                LevelSource::BrokenFileFallback { last_good: false } => {
                    String::from("the broken-file rule: a reversal is asked every time")
                }
            };
            match level.policy {
                ApprovalPolicy::None => format!("no approval needed, by {from}"),
                policy => format!("level `{}` asks a person, by {from}", policy.as_str()),
            }
        }
        R::ClassifierAsked => "the action's classifier asked for a person".into(),
        R::ClassifierDenied => "the action's classifier denied these arguments".into(),
        R::Grant { grant } => format!("covered by grant {}", grant.get()),
        R::ModeAllowed { mode } => {
            format!("allowed without asking: `{}` mode", mode.as_str())
        }
        R::ModeRefused { mode } => format!(
            "it needs a person and the session is in `{}` mode",
            mode.as_str()
        ),
        R::Handoff => "the last step is the person's".into(),
        R::Question => "the action asks the person a question".into(),
        R::Answered => "the person answered the question".into(),
        R::QuestionDeclined => "the person declined to answer".into(),
        R::Rewritten { to: Some(to) } => {
            format!("the action rewrote the call; `{to}` runs instead")
        }
        R::Rewritten { to: None } => {
            "the action rewrote the call to an action that is not registered".into()
        }
        R::RewriteLoop => "the action kept rewriting the call".into(),
        R::AllowedOnce => "the person allowed it once".into(),
        R::AllowedInBatch => {
            "the person allowed it once, with \"allow all in this batch\"".into()
        }
        R::Granted { grant } => {
            format!("the person allowed it for the session (grant {})", grant.get())
        }
        R::SecondQuestion => "the action asks a second, differently worded question".into(),
        R::StaleCard { changed } => {
            let what: Vec<&str> = changed.iter().map(|c| c.as_str()).collect();
            format!(
                "the card changed before it was approved ({}); asked again",
                what.join(", ")
            )
        }
        R::CardKeptChanging => "the card kept changing before it was approved".into(),
        R::Declined => "the person declined".into(),
        R::Withdrawn { caller } => format!("the caller ({caller}) withdrew the call"),
        R::Restored => "waiting when the page reloaded; brought back and asked again".into(),
        R::SyntheticGesture { control } => format!(
            "`{}` was pressed by a script, not a person; refused",
            control.as_str()
        ),
        R::NotRestored { why, .. } => format!(
            "waiting when the page reloaded; not brought back: {}",
            why.as_str()
        ),
        R::EditedInto { call } => {
            format!(
                "the person edited the arguments; continued as call {}",
                call.get()
            )
        }
        R::EditedFrom { call, changed } => format!(
            "the person's edit of call {} ({}); asked again",
            call.get(),
            changed.join(", ")
        ),
        R::ApprovalTimeout => "nobody approved before the deadline".into(),
        R::NothingToRun => "the action has nothing to run".into(),
        R::NeedsCountersignature => {
            "its backend checks a person's countersignature, so it is always asked".into()
        }
        R::AfterUntrusted { source } => format!(
            "came after the assistant read untrusted content ({}), so a person is asked",
            quote(source, 64)
        ),
        R::OutsideCaller { caller } => {
            format!("asked for by an agent outside the page ({caller}), so a person is asked")
        }
        R::NotCountersigned => {
            "approved, but no countersignature could be minted; it did not run".into()
        }
        R::RunFailed => "the run failed".into(),
        R::Interrupted => "the run was interrupted".into(),
        R::VerifyFailed => "verification found no effect".into(),
        R::Verified => "done and verified".into(),
        R::HandoffCancelled => "the person cancelled the handoff".into(),
        R::HandoffTimeout => "the handoff timed out".into(),
        R::HandoffCompleted => "the person did the step and its expectation holds".into(),
        R::HandoffFailed => {
            "the person said it was done, but the handoff's expectation never held".into()
        }
        R::HandoffNotYet => "the person said it was done; the expectation does not hold yet".into(),
        R::HookReentered { hook } => format!(
            "the action's `{}` hook called back into the executor",
            hook.as_str()
        ),
        // `Reason` may grow (it is non-exhaustive): a newer core's reason is named by its rule.
        other => other.rule(),
    }
}

#[cfg(test)]
mod tests {
    use countersign::reason::{CardChange, Control, Hook, Level, RestoreMiss};
    use countersign::{Caller, Mode};

    use super::*;

    fn says(reason: Reason, words: &str) {
        let summary = summary(&reason);
        assert!(summary.contains(words), "{summary}");
    }

    fn level(policy: ApprovalPolicy, source: LevelSource) -> Reason {
        Reason::Level(Level { policy, source })
    }

    /// Every reason has a sentence of its own, not merely its rule's name (the match
    /// above ends in a fallback, since `Reason` may grow).
    #[test]
    fn every_reason_has_its_own_sentence() {
        let grant = serde_json::from_str("7").unwrap();
        let call_id = serde_json::from_str("3").unwrap();
        #[rustfmt::skip]
        let reasons = [
            Reason::UnknownAction,
            Reason::ToolCallIdTooLong,
            Reason::TooManyCalls { cap: 16 },
            Reason::InvalidArguments,
            Reason::ScopeMissing { scope: "w".into() },
            Reason::PolicyFileBroken { line: 3 },
            Reason::Unavailable,
            Reason::Unregistered,
            Reason::PageClosed,
            level(ApprovalPolicy::None, LevelSource::Declared),
            level(ApprovalPolicy::AskAlways, LevelSource::RoleOverride { role: "viewer".into(), line: 4 }),
            level(ApprovalPolicy::AskAlways, LevelSource::BrokenFileFallback { last_good: false }),
            Reason::ClassifierAsked,
            Reason::ClassifierDenied,
            Reason::Grant { grant },
            Reason::ModeAllowed { mode: Mode::Unattended },
            Reason::ModeRefused { mode: Mode::Away },
            Reason::Handoff,
            Reason::Question,
            Reason::Answered,
            Reason::QuestionDeclined,
            Reason::Rewritten { to: Some("trash".into()) },
            Reason::Rewritten { to: None },
            Reason::RewriteLoop,
            Reason::AllowedOnce,
            Reason::AllowedInBatch,
            Reason::Granted { grant },
            Reason::SecondQuestion,
            Reason::StaleCard { changed: vec![CardChange::Consequence] },
            Reason::CardKeptChanging,
            Reason::Declined,
            Reason::Restored,
            Reason::SyntheticGesture { control: Control::Deny },
            Reason::NotRestored { handoff: false, why: RestoreMiss::Expired },
            Reason::EditedInto { call: call_id },
            Reason::EditedFrom { call: call_id, changed: vec!["name".into()] },
            Reason::ApprovalTimeout,
            Reason::NothingToRun,
            Reason::RunFailed,
            Reason::Interrupted,
            Reason::VerifyFailed,
            Reason::Verified,
            Reason::TrailGap { first_seq: 3, last_seq: 9, unconfirmed: 2 },
            Reason::HandoffCancelled,
            Reason::HandoffTimeout,
            Reason::HandoffCompleted,
            Reason::HandoffFailed,
            Reason::HandoffNotYet,
            Reason::HookReentered { hook: Hook::Classify },
            Reason::TooManyLive { caller: Caller::Mcp },
            Reason::Withdrawn { caller: Caller::WebMcp },
            Reason::NeedsCountersignature,
            Reason::OutsideCaller { caller: Caller::Mcp },
            Reason::AfterUntrusted { source: "comments".into() },
        ];
        let mut sentences = Vec::new();
        for reason in &reasons {
            let sentence = summary(reason);
            assert!(
                !sentence.is_empty() && sentence != reason.rule(),
                "{reason:?}"
            );
            sentences.push(sentence);
        }
        sentences.sort();
        sentences.dedup();
        assert_eq!(sentences.len(), reasons.len());
        let away = summary(&Reason::ModeRefused { mode: Mode::Away });
        assert!(!away.contains("classif"), "{away}");
    }

    /// The trail names modes, levels, controls and hooks as they are declared.
    #[test]
    fn summaries_name_modes_levels_controls_and_hooks_as_declared() {
        for (mode, name) in [
            (Mode::Default, "`default`"),
            (Mode::Away, "`away`"),
            (Mode::Unattended, "`unattended`"),
            (Mode::Bypass, "`bypass`"),
        ] {
            says(Reason::ModeAllowed { mode }, name);
            says(Reason::ModeRefused { mode }, name);
        }
        for (policy, name) in [
            (ApprovalPolicy::Ask, "`ask`"),
            (ApprovalPolicy::AskAlways, "`ask_always`"),
        ] {
            let source = LevelSource::Declared;
            says(Reason::Level(Level { policy, source }), name);
        }
        #[rustfmt::skip]
        let controls = [
            (Control::AllowOnce, "`allow_once`"), (Control::AlwaysAllow, "`always_allow`"),
            (Control::AllowBatch, "`allow_batch`"), (Control::Deny, "`deny`"),
            (Control::Edit, "`edit`"), (Control::Done, "`done`"), (Control::Cancel, "`cancel`"),
            (Control::Answer, "`answer`"), (Control::Decline, "`decline`"),
        ];
        for (control, name) in controls {
            says(Reason::SyntheticGesture { control }, name);
        }
        #[rustfmt::skip]
        let hooks = [
            (Hook::Available, "`available`"), (Hook::Validate, "`validate`"),
            (Hook::Classify, "`classify`"), (Hook::Consequence, "`consequence`"),
            (Hook::Preview, "`preview`"), (Hook::Rewrite, "`rewrite`"),
            (Hook::Remember, "`remember`"), (Hook::SecondQuestion, "`confirm_twice`"),
            (Hook::Run, "`run`"), (Hook::Verify, "`verify`"), (Hook::Expect, "`expect`"),
        ];
        for (hook, name) in hooks {
            says(Reason::HookReentered { hook }, name);
        }
    }

    /// Causes that share a code are told apart, and the trail says where a rule came from.
    #[test]
    fn summaries_tell_causes_apart_and_name_their_source() {
        let policy_denied = [
            Reason::PolicyFileBroken { line: 3 },
            Reason::ClassifierDenied,
            Reason::ModeRefused { mode: Mode::Away },
            Reason::ModeRefused {
                mode: Mode::Unattended,
            },
        ];
        let mut words: Vec<_> = policy_denied.iter().map(summary).collect();
        words.sort();
        words.dedup();
        assert_eq!(words.len(), policy_denied.len(), "{words:?}");
        let role = "viewer".to_owned();
        let source = LevelSource::RoleOverride { role, line: 4 };
        let policy = ApprovalPolicy::AskAlways;
        says(Reason::Level(Level { policy, source }), "line 4");
        let gap = Reason::TrailGap {
            first_seq: 1,
            last_seq: 12,
            unconfirmed: 2,
        };
        says(gap, "1–12");
        says(
            Reason::AfterUntrusted {
                source: "a\nb`".into(),
            },
            "`a\\nb'`",
        );
    }
}
