//! scope: the session's role must hold the action's scope (from the policy file in force,
//! else the session's own), and a broken policy file stops everything but reversals.

use crate::action::ActionMeta;
use crate::audit::Decider;
use crate::reason::Reason;

use super::state::{ExecutorState, Stop};

impl ExecutorState {
    pub(crate) fn scope(&self, meta: &ActionMeta) -> Result<(), Stop> {
        if let Some(stop) = self.policy.blocked(meta) {
            return Err(stop);
        }
        match &meta.scope {
            Some(scope) if !self.holds(scope) => Err(Stop::new(
                Reason::ScopeMissing {
                    scope: scope.clone(),
                },
                Decider::Pipeline,
            )
            .with(self.config.session.role.clone())),
            _ => Ok(()),
        }
    }
}
