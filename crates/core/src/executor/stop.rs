//! A refusal on its way to becoming a settlement.

use crate::audit::Decider;
use crate::reason::Reason;

/// A refusal on its way to becoming a settlement: why, who decided, and the detail the
/// model's sentence may quote.
#[derive(Debug)]
pub(crate) struct Stop {
    pub(crate) reason: Reason,
    pub(crate) by: Decider,
    pub(crate) detail: Option<String>,
}

impl Stop {
    pub(crate) fn new(reason: Reason, by: Decider) -> Self {
        Self {
            reason,
            by,
            detail: None,
        }
    }

    /// A refusal the decision made.
    pub(crate) fn refusing(reason: Reason, by: Decider, detail: Option<String>) -> Self {
        Self { reason, by, detail }
    }

    pub(crate) fn with(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}
