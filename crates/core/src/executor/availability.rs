//! availability: the action's own check against live page state.

use crate::action::ErasedAction;
use crate::audit::Decider;
use crate::reason::{Hook, Reason};

use super::state::{ExecutorState, Stop};

impl ExecutorState {
    pub(crate) fn availability(&self, action: &dyn ErasedAction) -> Result<(), Stop> {
        if self.hook(Hook::Available, || action.is_available())? {
            Ok(())
        } else {
            Err(Stop::new(Reason::Unavailable, Decider::Pipeline))
        }
    }
}
