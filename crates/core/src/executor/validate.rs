//! validate: raw text → JSON object → typed params (unknown fields refused in every serde
//! shape) → the action's own validator.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ErasedAction, PreparedCall};
use crate::audit::Decider;
use crate::call::Call;
use crate::reason::{Hook, Reason};

use super::state::{ExecutorState, Stop};

impl ExecutorState {
    /// The call's params bound to the action's hooks, and the arguments as a value.
    pub(crate) fn validate(
        &self,
        action: &dyn ErasedAction,
        call: &Call,
    ) -> Result<(Rc<dyn PreparedCall>, Value), Stop> {
        let invalid =
            |detail: String| Stop::new(Reason::InvalidArguments, Decider::Pipeline).with(detail);
        let value = crate::arguments::parse_object(&call.arguments, self.config.max_argument_bytes)
            .map_err(invalid)?;
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&value))?
            .map_err(invalid)?;
        Ok((prepared, value))
    }
}
