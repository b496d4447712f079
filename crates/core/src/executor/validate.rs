//! validate: raw text → JSON object → typed params (unknown fields refused in every serde
//! shape) → the action's own validator.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

use serde_json::Value;

use crate::action::{ErasedAction, PreparedCall};
use crate::audit::Decider;
use crate::call::Call;
use crate::reason::{Hook, Reason};

use super::state::{ExecutorState, Stop};

impl ExecutorState {
    /// The arguments as a value, and in `held` the call's params bound to the action's
    /// hooks, put there as soon as they are read (also when they are then refused), for
    /// the caller to let go of: their drop is the page's code.
    pub(crate) fn validate<'h>(
        &self,
        action: &dyn ErasedAction,
        call: &Call,
        held: &'h mut Option<Rc<dyn PreparedCall>>,
    ) -> Result<(&'h Rc<dyn PreparedCall>, Value), Stop> {
        let invalid =
            |detail: String| Stop::new(Reason::InvalidArguments, Decider::Pipeline).with(detail);
        let value = crate::arguments::parse_object(&call.arguments, self.config.max_argument_bytes)
            .map_err(invalid)?;
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&value, held))?
            .map_err(invalid)?;
        Ok((prepared, value))
    }
}

/// Runs `f`, which reads a call's params into `held`, for a caller outside the gate's
/// catch (an edit's check, a form's, a restored grant's): if a hook in it panics, the
/// params are let go of before the panic goes on, not dropped while it unwinds (where a
/// drop that panics too aborts the process). Their own panic is then forgotten: the
/// hook's goes on.
pub(crate) fn holding<R>(
    held: &mut Option<Rc<dyn PreparedCall>>,
    f: impl FnOnce(&mut Option<Rc<dyn PreparedCall>>) -> R,
) -> R {
    match catch_unwind(AssertUnwindSafe(|| f(held))) {
        Ok(out) => out,
        Err(panic) => {
            let params = held.take();
            if let Err(also) = catch_unwind(AssertUnwindSafe(move || drop(params))) {
                // Not dropped: a payload's drop could panic too.
                std::mem::forget(also);
            }
            resume_unwind(panic)
        }
    }
}
