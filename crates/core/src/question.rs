//! Asking the person a typed question: the dock renders a form from the answer type's schema,
//! every label from the declaration; no model text reaches the form.

use std::rc::Rc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

type Check = Rc<dyn Fn(&Value) -> Result<Value, String>>;

/// A question for the person, with the answer's type `A` (see [`Question::new`]).
#[derive(Clone)]
pub struct Question {
    pub(crate) prompt: String,
    pub(crate) schema: Value,
    pub(crate) check: Check,
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Question {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Question")
            .field("prompt", &self.prompt)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Question {
    /// A question whose answer must read as an `A`, unknown fields refused; its schema is the form.
    pub fn new<A>(prompt: impl Into<String>) -> Self
    where
        A: DeserializeOwned + Serialize + JsonSchema + 'static,
    {
        Self::checked::<A>(prompt, |_| Ok(()))
    }

    /// [`Question::new`] with a check of the answer; its error is shown in the form.
    pub fn checked<A>(
        prompt: impl Into<String>,
        check: impl Fn(&A) -> Result<(), String> + 'static,
    ) -> Self
    where
        A: DeserializeOwned + Serialize + JsonSchema + 'static,
    {
        let schema = crate::projection::schema_for::<A>();
        let shape = schema.clone();
        Self {
            prompt: prompt.into(),
            schema,
            check: Rc::new(move |value: &Value| {
                let answer: A = crate::arguments::into_params(value)?;
                if let Some(why) = crate::schema_check::misfit(&shape, value) {
                    return Err(why);
                }
                check(&answer)?;
                serde_json::to_value(&answer).map_err(|e| e.to_string())
            }),
            timeout: Duration::from_secs(5 * 60),
        }
    }

    /// How long the question waits for an answer (default five minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// A question waiting for the person, as the dock shows it.
#[derive(Clone, Debug, Serialize)]
pub struct QuestionView {
    /// The call waiting.
    pub call: crate::call::CallId,
    /// Who asked.
    pub caller: crate::call::Caller,
    /// The action's id.
    pub action: String,
    /// The action's title.
    pub title: String,
    /// The question, from the declaration.
    pub prompt: String,
    /// The answer's JSON Schema (the form is generated from it).
    pub schema: Value,
    /// When it times out.
    pub deadline: crate::time::Timestamp,
}

/// Why an answer was not taken. Nothing changed: the question still waits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The call is not waiting on a question.
    #[error(transparent)]
    Ticket(#[from] crate::ticket::TicketError),
    /// The answer is not an answer of the declared type; the form shows why.
    #[error("{0}")]
    Invalid(String),
}

impl From<crate::ticket::Blocked> for AnswerError {
    fn from(blocked: crate::ticket::Blocked) -> Self {
        AnswerError::Ticket(crate::ticket::TicketError::Blocked(blocked))
    }
}
