//! validate: raw text → JSON object → typed params (unknown fields refused in every serde
//! shape) → the action's own validator.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ErasedAction, PreparedCall};
use crate::audit::Decider;
use crate::call::Call;
use crate::digest::ArgsDigest;
use crate::reason::{Hook, Reason};

use super::state::{ExecutorState, Stop};

/// What the validate stage hands on: the params, the arguments, and their keyed digest.
pub(crate) struct Validated {
    /// The call's params bound to the action's hooks.
    pub(crate) prepared: Rc<dyn PreparedCall>,
    /// The arguments as parsed.
    pub(crate) arguments: Value,
    /// The keyed digest of the canonical arguments, as the audit records it.
    pub(crate) audit_digest: ArgsDigest,
}

impl ExecutorState {
    /// Parses the arguments once, reads them into the action's params (checked against
    /// the schema the model saw) and digests the same value.
    pub(crate) fn validate(
        &self,
        action: &dyn ErasedAction,
        call: &Call,
    ) -> Result<Validated, Stop> {
        let invalid =
            |detail: String| Stop::new(Reason::InvalidArguments, Decider::Pipeline).with(detail);
        let value = crate::arguments::parse_object(&call.arguments, self.config.max_argument_bytes)
            .map_err(invalid)?;
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&value))?
            .map_err(invalid)?;
        Ok(Validated {
            prepared,
            audit_digest: self.config.audit_key.digest(&value),
            arguments: value,
        })
    }
}
