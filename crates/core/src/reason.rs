//! A typed reason on every allow, ask and refusal. The code, the model's sentence and the
//! retry hint derive from it (the gateway words it for the trail); it never holds text the
//! model wrote.

use serde::{Deserialize, Serialize};

pub use crate::codes::CardChange;
use crate::mode::Mode;

use crate::codes::{quote, Code, GrantId, RetryHint, Stage};
use crate::policy::ApprovalPolicy;

/// Where an action's approval level came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum LevelSource {
    /// The declaration's kind and confirm (no policy file, or no override for the role).
    Declared,
    /// A policy file's override for the session's role.
    RoleOverride {
        /// The role whose override applied (perhaps the file's `default_role`).
        role: String,
        /// The override's line in the file.
        line: usize,
    },
    /// A reversal under a broken policy file: the last good file's level, else "ask every time".
    BrokenFileFallback {
        /// Whether a file had loaded before this one broke.
        last_good: bool,
    },
}

/// The level a call got, and from where.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Level {
    /// The approval policy in force.
    pub policy: ApprovalPolicy,
    /// Where it came from.
    pub source: LevelSource,
}

named! {
    /// A hook an action declares, named when it misbehaves.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Hook as "The hook's name as declarations spell it." {
        /// `available`.
        Available = "available",
        /// `validate`.
        Validate = "validate",
        /// `classify`.
        Classify = "classify",
        /// `consequence`.
        Consequence = "consequence",
        /// `preview`.
        Preview = "preview",
        /// `rewrite`.
        Rewrite = "rewrite",
        /// `remember`.
        Remember = "remember",
        /// `confirm_twice`'s question.
        SecondQuestion = "confirm_twice",
        /// `run` (its synchronous part).
        Run = "run",
        /// `verify`.
        Verify = "verify",
        /// A handoff's `expect`.
        Expect = "expect",
    }
}

named! {
    /// A control in the dock that only a person's gesture may press.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Control as "The control's name as the trail writes it." {
        /// "Allow once".
        AllowOnce = "allow_once",
        /// "Always allow this session".
        AlwaysAllow = "always_allow",
        /// "Allow all in this batch".
        AllowBatch = "allow_batch",
        /// "Deny".
        Deny = "deny",
        /// "Edit" and the edit's submit.
        Edit = "edit",
        /// A handoff's "I've done it".
        Done = "done",
        /// A handoff's "Cancel".
        Cancel = "cancel",
        /// A question's "Answer".
        Answer = "answer",
        /// A question's "Decline".
        Decline = "decline",
    }
}

named! {
    /// Why a call waiting when the page reloaded was not brought back.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RestoreMiss as "The cause in a few words." {
        /// Its deadline passed.
        Expired = "its deadline passed",
        /// Its action is not registered again, or is declared differently now.
        Changed = "the action is gone or declared differently",
        /// Its action says it is not available.
        Unavailable = "the action is not available",
        /// Another tab of the page has it.
        ElsewhereOrDone = "another tab of the page has it",
        /// Not waiting for a person: arriving, queued or running (whether it took effect is unknown).
        NotWaiting = "it was not waiting for a person (still arriving, queued or running: whether it took effect is unknown)",
        /// An MCP client asked for it; that pairing ended with the page.
        CallerGone = "the MCP client that asked was paired with the page before it reloaded",
    }
}

/// Why a decision came out as it did. One per audit record; every refusal carries one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// resolve: no action has the id.
    UnknownAction,
    /// validate: the tool call id is longer than the executor accepts.
    ToolCallIdTooLong,
    /// validate: the turn held more calls than the host takes; this one was refused unread.
    TooManyCalls {
        /// How many calls a turn may hold.
        cap: usize,
    },
    /// validate: the arguments are not the action's params.
    InvalidArguments,
    /// scope: the session's role lacks the action's scope.
    ScopeMissing {
        /// The scope the action needs.
        scope: String,
    },
    /// scope: the policy file is broken, so nothing but reversals runs.
    PolicyFileBroken {
        /// The line of the file's first error (0 when it is not at one place).
        line: usize,
    },
    /// availability: the action's `available` check says no.
    Unavailable,
    /// availability: the outside agent already has as many calls live as
    /// [`max_live_per_agent`](crate::executor::Config::max_live_per_agent) allows.
    TooManyLive {
        /// Who asked.
        caller: crate::call::Caller,
    },
    /// availability: the action was unregistered before the call ended.
    Unregistered,
    /// availability: the page closed before the call ended.
    PageClosed,
    /// verify (of the trail): records were pushed out before the gateway acknowledged them.
    TrailGap {
        /// The `seq` of the first record pushed out.
        first_seq: u64,
        /// The `seq` of the last record pushed out.
        last_seq: u64,
        /// How many had been sent without an answer (they may have arrived).
        unconfirmed: u64,
    },
    /// decide: the level applies as it is: `None` runs, `Ask`/`AskAlways` asks.
    Level(Level),
    /// decide: the action's classifier asked for a person for these arguments.
    ClassifierAsked,
    /// decide: the action's classifier refused these arguments.
    ClassifierDenied,
    /// decide: a session grant (or a remembered rule) made by a person covers the call.
    Grant {
        /// The grant.
        grant: GrantId,
    },
    /// decide: the mode stands in for the person (unattended `Ask`, bypass).
    ModeAllowed {
        /// The mode.
        mode: Mode,
    },
    /// decide: the call needs a person and the mode says nobody is there.
    ModeRefused {
        /// The mode.
        mode: Mode,
    },
    /// decide: the last step is the person's.
    Handoff,
    /// decide: the action asks the person a question.
    Question,
    /// verify: the person answered the question, and the answer is of the declared type.
    Answered,
    /// approve: the person declined to answer the question.
    QuestionDeclined,
    /// decide: the action rewrote the call, which re-entered the pipeline.
    Rewritten {
        /// What runs instead (same id if only arguments changed); `None`: unregistered, refused.
        to: Option<String>,
    },
    /// decide: the action kept rewriting the call.
    RewriteLoop,
    /// approve: the person allowed this call once.
    AllowedOnce,
    /// approve: the person pressed "allow all in this batch": this call once, no grant.
    AllowedInBatch,
    /// approve: the person allowed it for the session, making this grant.
    Granted {
        /// The grant made.
        grant: GrantId,
    },
    /// approve: the action asks a second, differently worded question.
    SecondQuestion,
    /// approve: what the card showed changed before the person approved; asked again.
    StaleCard {
        /// What changed.
        changed: Vec<CardChange>,
    },
    /// approve: the card kept changing under the person; given up.
    CardKeptChanging,
    /// approve: the person declined.
    Declined,
    /// approve: the person edited the arguments; the edited call carries on as `call`.
    EditedInto {
        /// The new call.
        call: crate::call::CallId,
    },
    /// approve: a script, not a person, pressed this control; nothing changed.
    SyntheticGesture {
        /// The control.
        control: Control,
    },
    /// approve: the call was brought back after a reload; it is always asked again.
    Restored,
    /// approve: the call was waiting when the page reloaded and could not be brought back.
    NotRestored {
        /// Whether it was a handoff (its code is then `HANDOFF_TIMEOUT`).
        handoff: bool,
        /// Why not.
        why: RestoreMiss,
    },
    /// approve: this call holds the person's edit of `call`, and is always asked again.
    EditedFrom {
        /// The call that was edited.
        call: crate::call::CallId,
        /// The declared fields changed (`…` for any other).
        changed: Vec<String>,
    },
    /// approve: nobody approved in time.
    ApprovalTimeout,
    /// perform: the action has no `run`.
    NothingToRun,
    /// decide: the action's run takes a countersignature, so a person is always asked.
    NeedsCountersignature,
    /// decide: an agent outside the page asked for more than a read, so a person is asked.
    OutsideCaller {
        /// Who asked.
        caller: crate::call::Caller,
    },
    /// decide: the call came after untrusted content (`source`), so it is asked one level higher.
    AfterUntrusted {
        /// The title of the action that returned it, or the page's name for the content.
        source: String,
    },
    /// perform: approved, but no countersignature could be minted; it did not run.
    NotCountersigned,
    /// perform: `run` reported failure.
    RunFailed,
    /// perform: the run was dropped before it finished.
    Interrupted,
    /// verify: `verify` found the effect missing.
    VerifyFailed,
    /// verify: done, and verification saw it.
    Verified,
    /// perform: the person cancelled the handoff.
    HandoffCancelled,
    /// perform: the handoff timed out.
    HandoffTimeout,
    /// verify: the person said done, and `expect` holds.
    HandoffCompleted,
    /// verify: the deadline passed after the person said done and `expect` did not hold.
    HandoffFailed,
    /// verify: the person said done, but `expect` does not hold yet; it still waits.
    HandoffNotYet,
    /// approve: the caller withdrew the call while it waited; nothing was done.
    Withdrawn {
        /// Who asked, and withdrew.
        caller: crate::call::Caller,
    },
    /// A hook called back into the executor while it was deciding; the call was refused.
    HookReentered {
        /// The hook.
        hook: Hook,
    },
}

/// What a reason's sentence needs besides the reason: the action, and the moment's detail.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MessageContext<'a> {
    pub(crate) action: &'a str,
    pub(crate) consequence: Option<&'a str>,
    pub(crate) detail: Option<&'a str>,
}

impl Reason {
    /// The stage that decided.
    pub fn stage(&self) -> Stage {
        self.decided().0
    }

    /// The refusal code, for the reasons that refuse; `None` for allow, ask and done.
    pub fn code(&self) -> Option<Code> {
        self.decided().1
    }

    fn decided(&self) -> (Stage, Option<Code>) {
        use Code as C;
        use Reason as R;
        use Stage as S;
        let (stage, code) = match self {
            R::UnknownAction => (S::Resolve, C::UnknownAction),
            R::ToolCallIdTooLong | R::TooManyCalls { .. } | R::InvalidArguments => {
                (S::Validate, C::InvalidArgs)
            }
            R::ScopeMissing { .. } => (S::Scope, C::ScopeMissing),
            R::PolicyFileBroken { .. } => (S::Scope, C::PolicyDenied),
            R::Unavailable | R::Unregistered | R::PageClosed | R::TooManyLive { .. } => {
                (S::Availability, C::Unavailable)
            }
            R::ClassifierDenied | R::ModeRefused { .. } => (S::Decide, C::PolicyDenied),
            R::RewriteLoop => (S::Decide, C::InvalidArgs),
            R::Rewritten { to: None } => (S::Decide, C::Unavailable),
            R::QuestionDeclined => (S::Approve, C::QuestionDeclined),
            R::CardKeptChanging => (S::Approve, C::Unavailable),
            R::Declined => (S::Approve, C::PermissionDenied),
            R::Withdrawn { .. } => (S::Approve, C::Cancelled),
            R::NotRestored { handoff: false, .. } => (S::Approve, C::ApprovalExpired),
            R::NotRestored { handoff: true, .. } => (S::Approve, C::HandoffTimeout),
            R::ApprovalTimeout => (S::Approve, C::ApprovalTimeout),
            R::NothingToRun | R::RunFailed | R::Interrupted => (S::Perform, C::ExecutionFailed),
            R::NotCountersigned => (S::Perform, C::NotCountersigned),
            R::HandoffCancelled => (S::Perform, C::HandoffCancelled),
            R::HandoffTimeout => (S::Perform, C::HandoffTimeout),
            R::VerifyFailed => (S::Verify, C::VerifyFailed),
            R::HandoffFailed => (S::Verify, C::HandoffFailed),
            R::HookReentered { hook } => match hook {
                Hook::Available => (S::Availability, C::Unavailable),
                Hook::Validate => (S::Validate, C::Unavailable),
                Hook::Classify | Hook::Rewrite => (S::Decide, C::Unavailable),
                Hook::Consequence | Hook::Preview | Hook::Remember | Hook::SecondQuestion => {
                    (S::Approve, C::Unavailable)
                }
                Hook::Run => (S::Perform, C::ExecutionFailed),
                Hook::Verify => (S::Verify, C::VerifyFailed),
                Hook::Expect => (S::Verify, C::HandoffFailed),
            },
            // Allow, ask and done: no code.
            R::Level(_)
            | R::ClassifierAsked
            | R::Grant { .. }
            | R::ModeAllowed { .. }
            | R::Handoff
            | R::Question
            | R::Rewritten { to: Some(_) }
            | R::NeedsCountersignature
            | R::OutsideCaller { .. }
            | R::AfterUntrusted { .. } => return (S::Decide, None),
            R::AllowedOnce
            | R::AllowedInBatch
            | R::Granted { .. }
            | R::SecondQuestion
            | R::StaleCard { .. }
            | R::EditedInto { .. }
            | R::EditedFrom { .. }
            | R::Restored
            | R::SyntheticGesture { .. } => return (S::Approve, None),
            R::Answered
            | R::Verified
            | R::HandoffCompleted
            | R::HandoffNotYet
            | R::TrailGap { .. } => return (S::Verify, None),
        };
        (stage, Some(code))
    }

    /// What the model should do next after a refusal for this reason.
    pub fn retry(&self) -> RetryHint {
        use Reason as R;
        match self {
            R::UnknownAction
            | R::ToolCallIdTooLong
            | R::TooManyCalls { .. }
            | R::InvalidArguments => RetryHint::FixCall,
            R::ClassifierDenied | R::RewriteLoop => RetryHint::DoNotRetry,
            R::ModeRefused { .. } => RetryHint::WhenPersonReturns,
            _ => RetryHint::AskUser,
        }
    }

    /// The grant a reason names, if any (audit records carry it on its own too).
    pub fn grant(&self) -> Option<GrantId> {
        match self {
            Reason::Grant { grant } | Reason::Granted { grant } => Some(*grant),
            _ => None,
        }
    }

    /// The rule's name (the `rule` tag), as audit records and the model's error JSON spell it.
    pub fn rule(&self) -> String {
        // Read from the JSON text, tag first (`{"rule":"…"`): the page already writes reasons
        // as text, and a second way (into a `Value`) would cost it kilobytes.
        let text = serde_json::to_string(self).unwrap_or_default();
        text.strip_prefix(r#"{"rule":""#)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_owned()
    }

    /// The sentence the model is told when this reason refuses a call.
    pub(crate) fn message(&self, context: MessageContext<'_>) -> String {
        use Reason as R;
        let name = quote(context.action, 64);
        let what = match context.consequence {
            Some(text) => format!("{name} ({text})"),
            None => name.clone(),
        };
        let detail = |max| context.detail.map(|d| quote(d, max)).unwrap_or_default();
        let raw = || context.detail.unwrap_or_default();
        match self {
            R::UnknownAction => {
                format!("there is no action {name}; nothing was done. call only the tools listed")
            }
            R::ToolCallIdTooLong => format!("the tool call id is too long ({}); nothing was done", raw()),
            R::TooManyCalls { cap } => format!(
                "{name} was not run: at most {cap} tool calls are taken per turn. ask for fewer at a time"
            ),
            R::InvalidArguments => format!("{name} was not run: {}", raw()),
            R::ScopeMissing { scope } => format!(
                "{name} needs the scope {}, which the role {} does not hold; nothing was done",
                quote(scope, 64),
                detail(64)
            ),
            R::PolicyFileBroken { .. } => format!(
                "{name} was not done: the deployment's policy file is invalid ({}), so nothing but reversals runs until it is fixed. tell the user",
                detail(200)
            ),
            R::Unavailable if context.detail.is_some() => {
                format!("{name} is not available right now: {}", raw())
            }
            R::Unavailable => format!("{name} is not available in the page right now; nothing was done"),
            R::Unregistered => format!("{name} was removed from the page before it was done; nothing was done"),
            R::PageClosed => format!("{name} could not finish: the page was closed; nothing was done"),
            R::TooManyLive { .. } => format!(
                "{name} was not asked: {}; wait until the person has decided them. nothing was done",
                raw()
            ),
            R::ClassifierDenied => format!(
                "{name} is not allowed with these arguments: {}; nothing was done. do not retry it",
                detail(200)
            ),
            R::ModeRefused { mode: Mode::Away } => format!(
                "{name} was not done: it needs a person, and nobody is at the page (away mode). ask again when the person is back"
            ),
            R::ModeRefused { mode } => format!(
                "{name} was not done: it needs a person, and this session runs in `{}` mode. ask again when a person is back",
                mode.as_str()
            ),
            R::RewriteLoop => format!("{name} kept rewriting itself; nothing was done. do not retry it"),
            R::Rewritten { to: None } => format!(
                "{name} was rewritten by the page into an action that does not exist; nothing was done. tell the user"
            ),
            R::CardKeptChanging => format!(
                "{what} was not done: the page kept changing while the person looked at it. ask the user"
            ),
            R::Withdrawn { .. } => format!("{what} was withdrawn before it ran; it was not done"),
            R::Declined => {
                let mut message = format!("the person declined {what}; it was not done");
                if let Some(reason) = context.detail.filter(|r| !r.trim().is_empty()) {
                    message.push_str(&format!(". their reason: {}", quote(reason, 500)));
                }
                message.push_str(". do not retry without asking the user");
                message
            }
            R::ApprovalTimeout => format!(
                "nobody approved {what} in time; it was not done. ask the user before trying again"
            ),
            R::NotRestored { why, .. } => format!(
                "{what} was waiting for the person when the page was reloaded, and was not brought back ({}); it was not done here. ask the user before trying again",
                why.as_str()
            ),
            R::NothingToRun => format!("{name} has nothing to run; nothing was done"),
            R::NotCountersigned => format!(
                "the person approved {name}, but no countersignature could be minted for it ({}), so it did not run; nothing was done. tell the user",
                detail(200)
            ),
            R::QuestionDeclined => format!(
                "the person declined to answer {name}. do not ask again unless the user brings it up"
            ),
            R::RunFailed => format!("{name} failed: {}", detail(500)),
            R::Interrupted => format!(
                "{name} was interrupted before it finished; whether it took effect is unknown. ask the user"
            ),
            R::VerifyFailed => format!(
                "{name} ran, but the check found it did not take effect: {}. tell the user; do not claim it was done",
                detail(500)
            ),
            R::HandoffCancelled => format!(
                "the person cancelled the handoff for {name}; the step was not done. ask the user what to do next"
            ),
            R::HandoffTimeout => format!(
                "the handoff for {name} timed out after {} s; the step was not done. ask the user what to do next",
                raw()
            ),
            R::HandoffFailed => format!(
                "the person said the step for {name} was done, but {} does not hold; it did not happen. ask the user what to do next",
                detail(200)
            ),
            R::HookReentered { hook } => format!(
                "{name} could not be decided safely: its `{}` hook called back into the assistant's gate; nothing more was done. tell the user",
                hook.as_str()
            ),
            // Reasons that never refuse: named by their rule.
            other => format!("{name}: {}", other.rule()),
        }
    }
}
