//! validate: raw text → JSON object → typed params (unknown fields refused in every serde
//! shape) → the action's own validator. A flat object (strings, booleans and null; see
//! [`crate::flat`]) is read as its fields, and a JSON value parsed from its text only
//! when a later stage asks for one.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

use crate::action::{ErasedAction, PreparedCall};
use crate::arguments::Arguments;
use crate::audit::Decider;
use crate::call::Call;
use crate::digest::ArgsDigest;
use crate::flat::FlatArgs;
use crate::reason::{Hook, Reason};

use super::state::{ExecutorState, Stop};

/// What the validate stage hands on: the params, the arguments, and their keyed digest.
pub(crate) struct Validated<'h> {
    /// The call's params bound to the action's hooks (in the gate's `held`).
    pub(crate) prepared: &'h Rc<dyn PreparedCall>,
    /// The arguments, as a value when asked for.
    pub(crate) arguments: Arguments,
    /// The keyed digest of the canonical arguments, as the audit records it.
    pub(crate) audit_digest: ArgsDigest,
}

impl ExecutorState {
    /// The arguments, and in `held` the call's params bound to the action's hooks, put
    /// there as soon as they are read (also when they are then refused), for the caller
    /// to let go of: their drop is the page's code.
    ///
    /// Arguments whose text reads as flat fields (see [`crate::flat`]) are checked,
    /// hashed and read from the fields, and parsed to a value only if a later stage asks;
    /// any other text is parsed to a value first, as ever.
    pub(crate) fn validate<'h>(
        &self,
        action: &dyn ErasedAction,
        call: &Call,
        held: &'h mut Option<Rc<dyn PreparedCall>>,
    ) -> Result<Validated<'h>, Stop> {
        let invalid =
            |detail: String| Stop::new(Reason::InvalidArguments, Decider::Pipeline).with(detail);
        let raw = &call.arguments;
        let max = self.config.max_argument_bytes;
        let key = &self.config.audit_key;
        let mut flat = FlatArgs::new();
        if raw.len() <= max && !crate::arguments::means_no_arguments(raw) && flat.read(raw) {
            let arguments = Arguments::flat(raw);
            let prepared = self
                .hook(Hook::Validate, || {
                    action.prepare_flat(&flat, &arguments, held)
                })?
                .map_err(invalid)?;
            return Ok(Validated {
                prepared,
                audit_digest: key.digest_flat(&flat),
                arguments,
            });
        }
        let value = crate::arguments::parse_object(raw, max).map_err(invalid)?;
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&value, held))?
            .map_err(invalid)?;
        Ok(Validated {
            prepared,
            audit_digest: key.digest(&value),
            arguments: Arguments::parsed(value),
        })
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
