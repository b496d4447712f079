//! Registration rules: what makes a declaration acceptable.

use crate::action::Action;

/// The longest action id accepted (OpenAI's function-name limit).
pub const MAX_ACTION_ID_LEN: usize = 64;

/// Why a declaration was refused at registration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The id is empty, too long, or has characters other than ASCII letters, digits, `_`, `-`.
    #[error("action id `{0}` must be 1 to 64 ASCII letters, digits, `_` or `-`")]
    InvalidId(String),
    /// Another live registration has the id.
    #[error("action `{0}` is already registered")]
    Duplicate(String),
    /// The action has neither `run` nor a handoff: it could never do anything.
    #[error("action `{0}` has neither a run nor a handoff")]
    NothingToDo(String),
    /// The action has both: a handoff is the person's step, so the executor never runs one.
    #[error("action `{0}` has both a run and a handoff; a handoff action is done by the person")]
    RunAndHandoff(String),
    /// The handoff lists no steps for the person.
    #[error("the handoff of action `{0}` has no steps")]
    HandoffWithoutSteps(String),
}

pub(crate) fn check_declaration<P>(action: &Action<P>) -> Result<(), RegisterError> {
    let id = &action.id;
    let id_ok = !id.is_empty()
        && id.len() <= MAX_ACTION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        let shown: String = id.chars().take(MAX_ACTION_ID_LEN).collect();
        return Err(RegisterError::InvalidId(shown.escape_default().to_string()));
    }
    match (&action.run, &action.handoff) {
        (None, None) => Err(RegisterError::NothingToDo(id.clone())),
        (Some(_), Some(_)) => Err(RegisterError::RunAndHandoff(id.clone())),
        (None, Some(handoff)) if handoff.steps.is_empty() => {
            Err(RegisterError::HandoffWithoutSteps(id.clone()))
        }
        _ => Ok(()),
    }
}
