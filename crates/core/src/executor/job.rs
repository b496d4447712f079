//! Jobs and completions: a call allowed to run, driven by the host outside the executor,
//! and settled as `EXECUTION_FAILED` if dropped before it is handed back.

use std::cell::{Cell, RefCell};
use std::rc::Weak;

use serde_json::Value;

use crate::call::CallId;

use super::countersign::{RunError, Work};
use super::registration::{post, Deferred, Post};
use super::state::ExecutorState;
use super::trail::Caught;

pub(crate) struct Guard {
    pub(crate) call: CallId,
    pub(crate) executor: u64,
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
    pub(crate) reentered: Weak<Cell<bool>>,
    pub(crate) armed: bool,
    /// A panic of the page's code the step that made the job caught (a drop of params
    /// it let go of, not this call's), raised when the job is handed back or dropped,
    /// so that it does not end this call.
    pub(crate) carried: Option<Caught>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A job or completion dropped before `complete`: settle instead of hanging. A
        // panic it carried goes the same way, first: raised by the step that applies
        // them (now, if the executor is idle; its next step, if a hook dropped the job
        // while the executor was busy), never here inside someone else's code.
        let carried = self.carried.take().map(Deferred::Raise);
        let abandoned = self.armed.then_some(Deferred::Abandoned(self.call));
        if carried.is_some() || abandoned.is_some() {
            let to = Post {
                state: Weak::clone(&self.state),
                mailbox: Weak::clone(&self.mailbox),
                reentered: Weak::clone(&self.reentered),
            };
            post(&to, carried.into_iter().chain(abandoned));
        }
    }
}

/// A call allowed to run. Await [`Job::run`] and pass its [`Completion`] to
/// [`crate::Executor::complete`]. Dropping either first settles the call as `EXECUTION_FAILED`.
///
/// A panic of the page's code that the step making the job caught, not this call's own
/// (params of another call panicking as they were dropped), travels with it: `complete`
/// raises it once the call is settled, or dropping the job or completion does (if that
/// happens inside a hook, while the executor is busy, its next operation does).
#[must_use = "a job does nothing until run; dropping it settles the call as failed"]
pub struct Job {
    pub(crate) work: Work,
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
        let Job { work, guard } = self;
        let (state, call) = (std::rc::Weak::clone(&guard.state), guard.call);
        let still_wanted = move || {
            state.upgrade().is_some_and(|state| {
                state.try_borrow().is_ok_and(|state| {
                    state.live.get(&call).is_some_and(|live| {
                        matches!(live.state, super::state::LiveState::Performing)
                    })
                })
            })
        };
        let result = work.finish(still_wanted).await;
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
