//! What a call ends in, and what the model is told about it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::call::CallId;
use crate::reason::{Reason, Said};

/// The stages of the gate pipeline, in the order every call passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Find the action by id; an unknown id is refused.
    Resolve,
    /// Deserialise the arguments into the action's typed params.
    Validate,
    /// Check that the session's role holds the action's scope.
    Scope,
    /// Ask the action whether it can run in the page's current state.
    Availability,
    /// Turn policy, grants and the action's own classification into allow / ask / deny.
    Decide,
    /// Wait for a person's ticket.
    Approve,
    /// Run the action, or wait for the person to do the handoff.
    Perform,
    /// Read real state to confirm the effect happened.
    Verify,
}

/// A stable code for every way a call can be refused. Exhaustive on purpose: adding
/// one breaks every `match`, so no caller silently mishandles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Code {
    /// The action id is not registered (including ids the model invented).
    UnknownAction,
    /// The arguments are not valid for the action's params.
    InvalidArgs,
    /// The session's role lacks the action's scope.
    ScopeMissing,
    /// The action is not available now (disabled in the page, or removed).
    Unavailable,
    /// The deployment or the session refused the call: the action's classifier denied
    /// these arguments, the mode needs a person who is not there, or the policy file is
    /// broken. The refusal's `reason` says which.
    PolicyDenied,
    /// The person declined.
    PermissionDenied,
    /// Nobody approved before the approval deadline.
    ApprovalTimeout,
    /// The request was waiting when the page reloaded and could not be brought back
    /// (expired meanwhile, its action changed or is unavailable, or another tab has it).
    ApprovalExpired,
    /// The person approved, but no countersignature could be minted for the call (no
    /// gateway, or it refused or could not be reached): its run was never reached.
    NotCountersigned,
    /// The action ran and reported failure, or its run was abandoned.
    ExecutionFailed,
    /// The action ran but its verification found the effect missing.
    VerifyFailed,
    /// The person cancelled the handoff.
    HandoffCancelled,
    /// The handoff was not completed before its timeout.
    HandoffTimeout,
    /// The person said the handoff was done but the expected state is not there.
    HandoffFailed,
    /// The person declined to answer the assistant's question.
    QuestionDeclined,
    /// The caller withdrew the call (cancelled it, or went away) while it waited for a
    /// person: nothing was done.
    Cancelled,
}

impl Code {
    /// Every code, in pipeline order.
    pub const ALL: [Code; 16] = [
        Code::UnknownAction,
        Code::InvalidArgs,
        Code::ScopeMissing,
        Code::Unavailable,
        Code::PolicyDenied,
        Code::PermissionDenied,
        Code::ApprovalTimeout,
        Code::ApprovalExpired,
        Code::NotCountersigned,
        Code::ExecutionFailed,
        Code::VerifyFailed,
        Code::HandoffCancelled,
        Code::HandoffTimeout,
        Code::HandoffFailed,
        Code::QuestionDeclined,
        Code::Cancelled,
    ];

    /// The code as the model sees it, e.g. `PERMISSION_DENIED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::UnknownAction => "UNKNOWN_ACTION",
            Code::InvalidArgs => "INVALID_ARGS",
            Code::ScopeMissing => "SCOPE_MISSING",
            Code::Unavailable => "UNAVAILABLE",
            Code::PolicyDenied => "POLICY_DENIED",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ApprovalTimeout => "APPROVAL_TIMEOUT",
            Code::ApprovalExpired => "APPROVAL_EXPIRED",
            Code::NotCountersigned => "NOT_COUNTERSIGNED",
            Code::ExecutionFailed => "EXECUTION_FAILED",
            Code::VerifyFailed => "VERIFY_FAILED",
            Code::HandoffCancelled => "HANDOFF_CANCELLED",
            Code::HandoffTimeout => "HANDOFF_TIMEOUT",
            Code::HandoffFailed => "HANDOFF_FAILED",
            Code::QuestionDeclined => "QUESTION_DECLINED",
            Code::Cancelled => "CANCELLED",
        }
    }

    /// A fixed sentence for audit records: never any argument text.
    pub const fn summary(self) -> &'static str {
        match self {
            Code::UnknownAction => "no action has this id",
            Code::InvalidArgs => "the arguments did not validate",
            Code::ScopeMissing => "the role lacks the action's scope",
            Code::Unavailable => "the action was not available",
            Code::PolicyDenied => "the deployment or the session refused the call",
            Code::PermissionDenied => "the person declined",
            Code::ApprovalTimeout => "nobody approved before the deadline",
            Code::ApprovalExpired => "the request did not survive a reload of the page",
            Code::NotCountersigned => "approved, but no countersignature could be minted",
            Code::ExecutionFailed => "the run failed or was interrupted",
            Code::VerifyFailed => "verification found no effect",
            Code::HandoffCancelled => "the person cancelled the handoff",
            Code::HandoffTimeout => "the handoff timed out",
            Code::HandoffFailed => "the handoff's expectation did not hold",
            Code::QuestionDeclined => "the person declined to answer",
            Code::Cancelled => "the caller withdrew the call before it ran",
        }
    }

    /// The usual hint for the code; a refusal's own hint comes from its reason
    /// ([`Refusal::retry`]), which is more precise (an away-mode refusal says to ask again
    /// when the person is back).
    pub const fn retry(self) -> RetryHint {
        match self {
            Code::UnknownAction | Code::InvalidArgs => RetryHint::FixCall,
            Code::PolicyDenied => RetryHint::DoNotRetry,
            Code::ScopeMissing
            | Code::Unavailable
            | Code::PermissionDenied
            | Code::ApprovalTimeout
            | Code::ApprovalExpired
            | Code::NotCountersigned
            | Code::ExecutionFailed
            | Code::VerifyFailed
            | Code::HandoffCancelled
            | Code::HandoffTimeout
            | Code::HandoffFailed
            | Code::QuestionDeclined
            | Code::Cancelled => RetryHint::AskUser,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hint sent with a refusal: how the model may react.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryHint {
    /// The call itself was wrong (unknown id, bad arguments): the model may correct it.
    FixCall,
    /// A person decided or a boundary held: tell the user, ask what to do; never retry silently.
    AskUser,
    /// The deployment forbids this call: do not retry it in any form.
    DoNotRetry,
    /// It needs a person and nobody is there: ask again when the person is back.
    WhenPersonReturns,
}

/// A refusal: the reason, and the code, stage, sentence and retry hint derived from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The stable code (derived from the reason).
    pub code: Code,
    /// The stage that refused (derived from the reason).
    pub stage: Stage,
    /// The rule that refused.
    pub reason: Reason,
    /// A human sentence naming the action and what did not happen (derived from the reason).
    pub message: String,
}

impl Refusal {
    /// The refusal for `reason` of a call of `action` (for hosts that must settle a call
    /// themselves, e.g. when the page closes before the executor answers).
    pub fn of(reason: Reason, action: &str) -> Self {
        Self::new(
            reason,
            Said {
                action,
                ..Said::default()
            },
        )
    }

    /// [`Refusal::of`] with the moment's detail in its sentence (the validation error,
    /// say), for hosts that refuse a call before it reaches the executor.
    pub fn of_detail(reason: Reason, action: &str, detail: &str) -> Self {
        Self::new(
            reason,
            Said {
                action,
                detail: Some(detail),
                ..Said::default()
            },
        )
    }

    /// The refusal for `reason`, worded for the action `said.action`.
    ///
    /// A reason that does not refuse (an allow or an ask) never reaches here; if it did,
    /// it would still refuse, as `UNAVAILABLE` (fail closed).
    pub(crate) fn new(reason: Reason, said: Said<'_>) -> Self {
        Self {
            code: reason.code().unwrap_or(Code::Unavailable),
            stage: reason.stage(),
            message: reason.message(said),
            reason,
        }
    }

    /// What the model should do next (derived from the reason).
    pub fn retry(&self) -> RetryHint {
        self.reason.retry()
    }
}

/// What a successful call returns, only after verification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The action that ran (shared with the registration).
    pub action: std::sync::Arc<str>,
    /// The action's title, as the person saw it (shared with the registration).
    pub title: std::sync::Arc<str>,
    /// What happened, in the registry's words (the consequence text), when the action has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consequence: Option<String>,
    /// Who did the last step: `assistant` (run) or `person` (handoff).
    pub done_by: DoneBy,
    /// The action's own result (`run`'s output; for a handoff, the expectation that was met).
    pub result: Value,
}

/// Who performed a successful call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoneBy {
    /// The action's `run`, after the gate allowed it.
    Assistant,
    /// The person, through a handoff.
    Person,
    /// The person, answering the assistant's question (the result is the answer).
    Answer,
}

/// How a call ended: exactly one per call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// It happened, and verification saw it.
    Done(Receipt),
    /// It did not happen.
    Refused(Refusal),
}

impl Outcome {
    /// The refusal code, or `None` for success.
    pub fn code(&self) -> Option<Code> {
        match self {
            Outcome::Done(_) => None,
            Outcome::Refused(refusal) => Some(refusal.code),
        }
    }

    /// The code as written in audit records: `OK` or the refusal code.
    pub fn code_str(&self) -> &'static str {
        self.code().map_or("OK", Code::as_str)
    }

    /// The stage the call ended at: the refusing stage, or `verify` for success.
    pub fn stage(&self) -> Stage {
        match self {
            Outcome::Done(_) => Stage::Verify,
            Outcome::Refused(refusal) => refusal.stage,
        }
    }

    /// The reason the call ended as it did.
    pub fn reason(&self) -> Reason {
        match self {
            Outcome::Done(receipt) if receipt.done_by == DoneBy::Person => Reason::HandoffCompleted,
            Outcome::Done(receipt) if receipt.done_by == DoneBy::Answer => Reason::Answered,
            Outcome::Done(_) => Reason::Verified,
            Outcome::Refused(refusal) => refusal.reason.clone(),
        }
    }

    /// Whether the model should see this as an error (Anthropic's `is_error`).
    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Refused(_))
    }

    /// The JSON the model gets back: `{"ok":true,"receipt":{..}}` or
    /// `{"ok":false,"error":{"code","reason","message","retry"}}`.
    pub fn to_model_json(&self) -> Value {
        match self {
            Outcome::Done(receipt) => json!({ "ok": true, "receipt": receipt }),
            Outcome::Refused(refusal) => json!({
                "ok": false,
                "error": {
                    "code": refusal.code,
                    "reason": refusal.reason.rule(),
                    "message": refusal.message,
                    "retry": refusal.retry(),
                }
            }),
        }
    }

    /// [`Outcome::to_model_json`] as a string: the content of an OpenAI-style `tool`
    /// message or an Anthropic-style `tool_result`. Never empty.
    pub fn to_model_content(&self) -> String {
        self.to_model_json().to_string()
    }
}

/// A call's terminal outcome, as the executor reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settled {
    /// The executor's id for the call.
    pub call: CallId,
    /// The id the model gave its tool call, to answer it.
    pub tool_call_id: std::sync::Arc<str>,
    /// Who asked (the result goes back to it).
    #[serde(skip_serializing_if = "crate::call::Caller::is_assistant")]
    pub caller: crate::call::Caller,
    /// The action id as the model sent it: at most 64 characters, with control and
    /// format characters escaped (`\u{0}`, `\n`, `\u{202e}`), so a hostile id cannot
    /// break a log line or reorder it. Look-alike letters stay: display them with
    /// [`crate::reveal::reveal_name`]. Shared with the registration once the call was live.
    pub action: std::sync::Arc<str>,
    /// How it ended.
    pub outcome: Outcome,
    /// The person's edit, when the call went ahead (or was refused) with the person's
    /// arguments instead of the model's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited: Option<crate::edit::EditDiff>,
}

impl Settled {
    /// What the model gets back for its tool call: [`Outcome::to_model_json`], plus
    /// `edited_by_person` (the fields the person changed, and to what) when the call
    /// carried an edit, so the model never believes its own version ran.
    pub fn to_model_json(&self) -> Value {
        let mut json = self.outcome.to_model_json();
        if let (Some(edit), Some(map)) = (&self.edited, json.as_object_mut()) {
            map.insert("edited_by_person".into(), edit.to_model_json());
        }
        json
    }

    /// [`Settled::to_model_json`] as a string: the content of the model's tool message.
    pub fn to_model_content(&self) -> String {
        self.to_model_json().to_string()
    }
}

/// Quotes text from outside (the model, the page) for a message: at most `max` chars,
/// control characters escaped, so a message stays one readable line.
pub(crate) fn quote(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 2);
    out.push('`');
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '`' => out.push('\''),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('`');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_never_an_empty_string_and_never_ok() {
        for code in Code::ALL {
            let outcome = Outcome::Refused(Refusal {
                code,
                stage: Stage::Approve,
                reason: Reason::Declined,
                message: "x".into(),
            });
            let json = outcome.to_model_json();
            assert_eq!(json["ok"], false);
            assert_eq!(json["error"]["code"], code.as_str());
            assert!(json["error"]["retry"].is_string());
            assert!(outcome.is_error());
        }
    }

    #[test]
    fn decisions_of_a_person_tell_the_model_to_ask_the_user() {
        for code in [
            Code::PermissionDenied,
            Code::ApprovalTimeout,
            Code::HandoffCancelled,
            Code::HandoffTimeout,
        ] {
            assert_eq!(code.retry(), RetryHint::AskUser);
        }
    }

    #[test]
    fn quoting_escapes_control_characters_and_truncates() {
        assert_eq!(quote("a\u{0}b\nc", 10), "`a\\u{0}b\\nc`");
        assert_eq!(quote("abcdef", 3), "`abc…`");
        assert_eq!(quote("x`y", 10), "`x'y`");
    }

    #[test]
    fn code_names_serialise_as_the_model_sees_them() {
        for code in Code::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
