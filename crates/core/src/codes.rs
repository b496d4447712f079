//! The shared vocabulary of outcomes, reasons and tickets: the stages, the codes the
//! model sees, retry hints, grant ids and what can change on a card.

use serde::{Deserialize, Serialize};

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

named! {
    /// A stable code for every way a call can be refused. Exhaustive on purpose: adding
    /// one breaks every `match`, so no caller silently mishandles it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum Code as "The code as the model sees it, e.g. `PERMISSION_DENIED`." {
        /// The action id is not registered (including ids the model invented).
        UnknownAction = "UNKNOWN_ACTION",
        /// The arguments are not valid for the action's params.
        InvalidArgs = "INVALID_ARGS",
        /// The session's role lacks the action's scope.
        ScopeMissing = "SCOPE_MISSING",
        /// The action is not available now (disabled in the page, or removed).
        Unavailable = "UNAVAILABLE",
        /// The deployment or session refused: the classifier denied these arguments, the mode
        /// needs an absent person, or the policy file is broken. `reason` says which.
        PolicyDenied = "POLICY_DENIED",
        /// The person declined.
        PermissionDenied = "PERMISSION_DENIED",
        /// Nobody approved before the approval deadline.
        ApprovalTimeout = "APPROVAL_TIMEOUT",
        /// The request was waiting when the page reloaded and could not be brought back
        /// (expired meanwhile, its action changed or is unavailable, or another tab has it).
        ApprovalExpired = "APPROVAL_EXPIRED",
        /// The person approved, but no countersignature could be minted; nothing ran.
        NotCountersigned = "NOT_COUNTERSIGNED",
        /// The action ran and reported failure, or its run was abandoned.
        ExecutionFailed = "EXECUTION_FAILED",
        /// The action ran but its verification found the effect missing.
        VerifyFailed = "VERIFY_FAILED",
        /// The person cancelled the handoff.
        HandoffCancelled = "HANDOFF_CANCELLED",
        /// The handoff was not completed before its timeout.
        HandoffTimeout = "HANDOFF_TIMEOUT",
        /// The person said the handoff was done but the expected state is not there.
        HandoffFailed = "HANDOFF_FAILED",
        /// The person declined to answer the assistant's question.
        QuestionDeclined = "QUESTION_DECLINED",
        /// The caller withdrew the call while it waited for a person; nothing was done.
        Cancelled = "CANCELLED",
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

named! {
    /// A part of an approval card that changed between the person seeing it and approving.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum CardChange as "The change in a few words, for the card's \"this changed since you looked\" line." {
        /// The consequence text.
        Consequence = "what it will do",
        /// The dry run's preview.
        Preview = "the preview",
        /// The approval level (the policy file, a classifier, a grant offer).
        Level = "how often it is asked",
        /// The second question's words.
        Question = "the second question",
        /// What "always allow" would remember.
        GrantRule = "what \"always allow\" covers",
    }
}

/// An id for a session grant.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct GrantId(pub(crate) u64);

impl GrantId {
    /// The number inside, for display and logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// Quotes text from outside (the model, the page) for a message: at most `max` chars,
/// control characters escaped, so a message stays one readable line.
pub fn quote(text: &str, max: usize) -> String {
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
