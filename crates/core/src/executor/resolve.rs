//! resolve: the call names a registered action, or it is refused. Nothing is guessed.

use std::rc::Rc;

use crate::action::ErasedAction;
use crate::audit::Decider;
use crate::call::Call;
use crate::reason::Reason;

use super::state::{ExecutorState, Stop};

/// The longest tool call id accepted from the model.
pub(crate) const MAX_TOOL_CALL_ID_LEN: usize = 256;

impl ExecutorState {
    /// The registered action the call names, and its generation.
    pub(crate) fn resolve(&self, call: &Call) -> Result<(Rc<dyn ErasedAction>, u64), Stop> {
        if call.tool_call_id.len() > MAX_TOOL_CALL_ID_LEN {
            return Err(
                Stop::new(Reason::ToolCallIdTooLong, Decider::Pipeline).with(format!(
                    "{} bytes, over the limit of {MAX_TOOL_CALL_ID_LEN}",
                    call.tool_call_id.len()
                )),
            );
        }
        // No registered id is longer: not even hashed.
        if call.action.len() > crate::executor::MAX_ACTION_ID_LEN {
            return Err(Stop::new(Reason::UnknownAction, Decider::Pipeline));
        }
        // INVARIANT: an action kept from a caller does not exist for it: the same
        // refusal as an id nobody registered, so the caller learns nothing more.
        self.registry
            .get(&call.action)
            .filter(|entry| entry.action.meta().callers.contains(&call.caller))
            .map(|entry| (Rc::clone(&entry.action), entry.generation))
            .ok_or_else(|| Stop::new(Reason::UnknownAction, Decider::Pipeline))
    }
}
