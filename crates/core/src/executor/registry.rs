//! The registry: which actions are registered now, each with its generation, and the
//! rules a declaration must meet to get in.

use std::rc::Rc;

use crate::action::{Action, ErasedAction};

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
    /// The action needs a passkey but its run takes no countersignature (use
    /// `run_countersigned`): nothing would ever check the passkey.
    #[error(
        "action `{0}` needs a passkey or the approval window but its run takes no countersignature"
    )]
    PasskeyWithoutCountersignature(String),
    /// The action has both: a handoff is the person's step, so the executor never runs one.
    #[error("action `{0}` has both a run and a handoff; a handoff action is done by the person")]
    RunAndHandoff(String),
    /// A question nobody could answer: its timeout is zero, or its answer type is not
    /// an object (a form answers with fields; wrap a choice in a struct).
    #[error("the question of action `{0}` could never be answered (zero timeout, or an answer type that is not a struct)")]
    Unanswerable(String),
    /// A question is the person's to answer: it has no run and no handoff.
    #[error("action `{0}` is a question and also has a run or a handoff")]
    QuestionAndMore(String),
    /// The handoff lists no steps for the person.
    #[error("the handoff of action `{0}` has no steps")]
    HandoffWithoutSteps(String),
    /// The action's approval timeout is zero: its cards would expire as they are drawn,
    /// so nobody could ever approve it.
    #[error("action `{0}` has an approval timeout of zero; nobody could approve it")]
    ZeroApprovalTimeout(String),
    /// The params offer alternatives the arguments alone cannot tell apart (an untagged
    /// enum whose variants overlap): the card could show one and `run` get another.
    #[error("the params of action `{0}` are ambiguous: {1}")]
    Ambiguous(String, String),
    /// The executor took no step (see [`crate::ticket::Blocked`]).
    #[error(transparent)]
    Blocked(#[from] crate::ticket::Blocked),
}

/// Checks a declaration before it is registered.
pub(crate) fn check_declaration<P>(action: &Action<P>) -> Result<(), RegisterError> {
    let meta = &action.meta;
    let id = &meta.id.to_string();
    let id_ok = !id.is_empty()
        && id.len() <= MAX_ACTION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        let shown: String = id.chars().take(MAX_ACTION_ID_LEN).collect();
        return Err(RegisterError::InvalidId(shown.escape_default().to_string()));
    }
    if meta.approval_timeout.is_some_and(|t| t.is_zero()) {
        return Err(RegisterError::ZeroApprovalTimeout(id.clone()));
    }
    if let Some(question) = &meta.question {
        if action.run.is_some() || action.run_signed.is_some() || meta.handoff.is_some() {
            return Err(RegisterError::QuestionAndMore(id.clone()));
        }
        // An answer is a form's object; a question nobody could answer is refused.
        let object = question.schema.get("type").and_then(|t| t.as_str()) == Some("object");
        if question.timeout.is_zero() || !object {
            return Err(RegisterError::Unanswerable(id.clone()));
        }
        return Ok(());
    }
    if meta.presence != crate::countersignature::Presence::Click && action.run_signed.is_none() {
        return Err(RegisterError::PasskeyWithoutCountersignature(id.clone()));
    }
    let runs = action.run.is_some() || action.run_signed.is_some();
    match (runs, &meta.handoff) {
        (false, None) => Err(RegisterError::NothingToDo(id.clone())),
        (true, Some(_)) => Err(RegisterError::RunAndHandoff(id.clone())),
        (false, Some(handoff)) if handoff.steps.is_empty() => {
            Err(RegisterError::HandoffWithoutSteps(id.clone()))
        }
        _ => Ok(()),
    }
}

/// One registration: the action and the generation that tells it from an earlier or a
/// later registration under the same id.
pub(crate) struct Entry {
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
}

/// The registered actions, sorted by id (a list, not a map: a map's code would be copied
/// into the page once more), and the last generation given (they start at 1).
#[derive(Default)]
pub(crate) struct Registry {
    actions: Vec<Entry>,
    last_generation: u64,
}

impl Registry {
    /// Where `id` is, or would go.
    fn find(&self, id: &str) -> Result<usize, usize> {
        self.actions
            .binary_search_by(|e| (*e.action.meta().id).cmp(id))
    }

    /// Adds an action; its generation is new.
    pub(crate) fn insert(&mut self, action: Rc<dyn ErasedAction>) -> Result<u64, RegisterError> {
        let at = match self.find(&action.meta().id) {
            Ok(_) => return Err(RegisterError::Duplicate(action.meta().id.to_string())),
            Err(at) => at,
        };
        self.last_generation += 1;
        let generation = self.last_generation;
        self.actions.insert(at, Entry { action, generation });
        Ok(generation)
    }

    /// Removes the registration `generation` of `id`; a later one under the same id stays.
    pub(crate) fn remove(&mut self, id: &str, generation: u64) -> Option<Entry> {
        let at = self.find(id).ok()?;
        let current = self.actions.get(at)?.generation == generation;
        current.then(|| self.actions.remove(at))
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Entry> {
        self.actions.get(self.find(id).ok()?)
    }

    /// Whether `generation` is still the registration of `id`.
    pub(crate) fn is_current(&self, id: &str, generation: u64) -> bool {
        self.get(id).is_some_and(|e| e.generation == generation)
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.actions.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.actions.len()
    }

    /// The registered ids, sorted.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.actions
            .iter()
            .map(|e| e.action.meta().id.to_string())
            .collect()
    }
}
