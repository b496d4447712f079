//! The pipeline's synchronous stages, each a small pure function, and the sentences
//! the model is told when one refuses.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ActionMeta, ErasedAction, PreparedCall, Verdict};
use crate::audit::Decider;
use crate::call::Session;
use crate::outcome::{quote, Code, Refusal, Stage};
use crate::policy::ApprovalPolicy;

/// Builds a refusal at `stage` with `message`.
pub(crate) fn refusal(code: Code, stage: Stage, message: String) -> Refusal {
    Refusal {
        code,
        stage,
        message,
    }
}

/// How an action is named in messages: its id, quoted.
pub(crate) fn name(id: &str) -> String {
    quote(id, 64)
}

/// Appends the consequence, when there is one, as "(what it would do)".
pub(crate) fn with_consequence(id: &str, consequence: Option<&str>) -> String {
    match consequence {
        Some(text) => format!("{} ({})", name(id), text),
        None => name(id),
    }
}

/// resolve: an unregistered id is refused; nothing is guessed.
pub(crate) fn resolve<'a, E>(found: Option<&'a E>, id: &str) -> Result<&'a E, Refusal> {
    found.ok_or_else(|| {
        refusal(
            Code::UnknownAction,
            Stage::Resolve,
            format!(
                "there is no action {}; nothing was done. call only the tools listed",
                name(id)
            ),
        )
    })
}

/// validate: raw text → JSON object → typed params (+ the action's own validator).
pub(crate) fn validate(
    action: &dyn ErasedAction,
    raw: &str,
    max_bytes: usize,
) -> Result<(Rc<dyn PreparedCall>, Value), Refusal> {
    let invalid = |detail: String| {
        refusal(
            Code::InvalidArgs,
            Stage::Validate,
            format!("{} was not run: {detail}", name(&action.meta().id)),
        )
    };
    let value = crate::arguments::parse_object(raw, max_bytes).map_err(invalid)?;
    let prepared = action.prepare(&value).map_err(invalid)?;
    Ok((prepared, value))
}

/// scope: the session's role must hold the action's scope (`scopes` is the role's
/// scopes from the policy file when one is loaded, else the session's own).
pub(crate) fn scope(
    meta: &ActionMeta,
    session: &Session,
    holds: impl Fn(&str) -> bool,
) -> Result<(), Refusal> {
    match &meta.scope {
        Some(scope) if !holds(scope) => Err(refusal(
            Code::ScopeMissing,
            Stage::Scope,
            format!(
                "{} needs the scope {}, which the role {} does not hold; nothing was done",
                name(&meta.id),
                quote(scope, 64),
                quote(&session.role, 64)
            ),
        )),
        _ => Ok(()),
    }
}

/// availability: the action's own check against live page state.
pub(crate) fn availability(action: &dyn ErasedAction) -> Result<(), Refusal> {
    if action.is_available() {
        Ok(())
    } else {
        Err(unavailable(
            &action.meta().id,
            "is not available in the page right now",
        ))
    }
}

/// A broken policy file: nothing runs until it is fixed (fail closed).
pub(crate) fn policy_broken(id: &str, error: &crate::PolicyError) -> Refusal {
    refusal(
        Code::PolicyDenied,
        Stage::Scope,
        format!(
            "{} was not done: the deployment's policy file is invalid ({}), so nothing runs until it is fixed",
            name(id),
            quote(&error.to_string(), 200)
        ),
    )
}

/// An `UNAVAILABLE` refusal saying why.
pub(crate) fn unavailable(id: &str, why: &str) -> Refusal {
    refusal(
        Code::Unavailable,
        Stage::Availability,
        format!("{} {why}; nothing was done", name(id)),
    )
}

/// What the decide stage concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Go straight to perform.
    Run(Decider),
    /// Wait for a person's ticket under this effective policy.
    Ask(ApprovalPolicy, Decider),
    /// Hand the last step to the person.
    Handoff,
    /// Refuse with `POLICY_DENIED`, and who decided so.
    Deny(Refusal, Decider),
}

/// decide, second half: the session's mode turns an "ask" into a run or a refusal.
///
/// INVARIANT: no mode turns a handoff into a run, and no mode lifts an action's own deny.
pub(crate) fn apply_mode(
    decision: Decision,
    mode: crate::Mode,
    id: &str,
    reversal: bool,
) -> Decision {
    use crate::Mode;
    // INVARIANT: a reversal (undo, close, cancel) is never blocked by a mode: escape must
    // stay possible when nobody can approve.
    if reversal && mode != Mode::Default {
        if let Decision::Ask(..) = decision {
            return Decision::Run(Decider::Mode);
        }
    }
    let refuse = |why: &str| {
        Decision::Deny(
            refusal(
                Code::PolicyDenied,
                Stage::Decide,
                format!("{} was not done: {why}", name(id)),
            ),
            Decider::Mode,
        )
    };
    match (mode, decision) {
        (Mode::Default, d) | (_, d @ (Decision::Run(_) | Decision::Deny(..))) => d,
        (Mode::Away, _) => {
            refuse("nobody is at the page to approve it. ask again when the person is back")
        }
        (Mode::Unattended, Decision::Ask(ApprovalPolicy::Ask, _)) => Decision::Run(Decider::Mode),
        (Mode::Unattended, Decision::Handoff) => {
            refuse("its last step needs a person, and this session runs unattended")
        }
        (Mode::Unattended, _) => refuse("it is asked every time, and this session runs unattended"),
        (Mode::Bypass, Decision::Handoff) => Decision::Handoff,
        (Mode::Bypass, Decision::Ask(..)) => Decision::Run(Decider::Mode),
    }
}

/// decide: policy, session grants and the action's classification → allow / ask / deny.
///
/// A classifier can only raise the bar: its `Ask` is treated as `AskAlways`, because a
/// grant for the whole action must not cover the arguments the action itself flagged.
pub(crate) fn decide(
    meta: &ActionMeta,
    policy: ApprovalPolicy,
    prepared: &dyn PreparedCall,
    granted: bool,
) -> Decision {
    let verdict = prepared.classify();
    if let Verdict::Deny(reason) = verdict {
        return Decision::Deny(
            refusal(
                Code::PolicyDenied,
                Stage::Decide,
                format!(
                    "{} is not allowed with these arguments: {}; nothing was done. do not retry it",
                    name(&meta.id),
                    quote(&reason, 200)
                ),
            ),
            Decider::Classifier,
        );
    }
    if meta.handoff.is_some() {
        // INVARIANT: a handoff is never also put behind an approval.
        return Decision::Handoff;
    }
    match (policy, verdict) {
        (_, Verdict::Ask) => Decision::Ask(ApprovalPolicy::AskAlways, Decider::Classifier),
        (ApprovalPolicy::None, _) => Decision::Run(Decider::Policy),
        (ApprovalPolicy::Ask, _) if granted => Decision::Run(Decider::SessionGrant),
        (policy, _) => Decision::Ask(policy, Decider::Policy),
    }
}
