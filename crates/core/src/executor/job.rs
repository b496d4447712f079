//! Jobs and completions: a call allowed to run, driven by the host outside the executor,
//! and settled as `EXECUTION_FAILED` if dropped before it is handed back.

use serde_json::Value;

use crate::call::CallId;

use super::countersign::{RunError, Task};
use super::registration::{Deferred, Post};

/// Settles its call as `EXECUTION_FAILED` (interrupted) if dropped while armed: a job or
/// completion dropped before [`crate::executor::Executor::complete`] never leaves a call hanging.
pub(crate) struct Guard {
    pub(crate) call: CallId,
    pub(crate) executor: u64,
    pub(crate) to: Post,
    pub(crate) armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            self.to.send(Deferred::Abandoned(self.call));
        }
    }
}

/// A call allowed to run. Await [`Job::run`] and pass its [`Completion`] to
/// [`crate::executor::Executor::complete`]. Dropping either first settles the call as `EXECUTION_FAILED`.
#[must_use = "a job does nothing until run; dropping it settles the call as failed"]
pub struct Job {
    pub(crate) task: Task,
    pub(crate) guard: Guard,
}

impl Job {
    /// The call this job runs.
    pub fn call(&self) -> CallId {
        self.guard.call
    }

    /// Runs the action's `run` (for an action that takes a countersignature: mints its
    /// token first, and runs only with one).
    pub async fn run(self) -> Completion {
        let Job { task, guard } = self;
        let (state, call) = (std::rc::Weak::clone(&guard.to.state), guard.call);
        // INVARIANT: nothing runs once its call has ended (the page shut down) or the
        // executor is poisoned.
        let still_wanted = move || {
            state.upgrade().is_some_and(|state| {
                state.try_borrow().is_ok_and(|state| {
                    !state.poisoned
                        && state.live.get(&call).is_some_and(|live| {
                            matches!(live.state, super::live::LiveState::Performing)
                        })
                })
            })
        };
        let result = task.finish(still_wanted).await;
        Completion { result, guard }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("call", &self.guard.call)
            .finish_non_exhaustive()
    }
}

/// A finished run, only obtainable from [`Job::run`].
#[must_use = "hand the completion to Executor::complete"]
pub struct Completion {
    pub(crate) result: Result<Value, RunError>,
    pub(crate) guard: Guard,
}

impl Completion {
    /// The call it belongs to.
    pub fn call(&self) -> CallId {
        self.guard.call
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("call", &self.guard.call)
            .field("ok", &self.result.is_ok())
            .finish()
    }
}
