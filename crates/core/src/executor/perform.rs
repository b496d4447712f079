//! perform and verify: host-driven jobs (dropped first: `EXECUTION_FAILED`), `verify`, and
//! handoff events. Approval means "allowed to try"; only a check of real state gives a receipt.

use serde_json::{json, Value};

use crate::audit::{AuditEvent, Decider};
use crate::call::CallId;
use crate::handoff::HandoffState;
use crate::outcome::{DoneBy, Settled};
use crate::reason::{Hook, Reason};
use crate::ticket::TicketError;
use crate::time::Timestamp;

use super::countersign::{RunError, Task};
use super::live::LiveState;
use super::registration::{Deferred, Post};
use super::state::{ExecutorState, Stop};

/// Settles its call as interrupted (`EXECUTION_FAILED`) if dropped while armed: none hangs.
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

    /// Runs the action (a countersigned one mints its token first, and runs only with one).
    pub async fn run(self) -> Completion {
        let Job { task, guard } = self;
        let (state, call) = (std::rc::Weak::clone(&guard.to.state), guard.call);
        // INVARIANT: nothing runs once its call ended (page shut down) or the executor is poisoned.
        let still_wanted = move || {
            state.upgrade().is_some_and(|state| {
                state.try_borrow().is_ok_and(|state| {
                    !state.poisoned
                        && state
                            .live
                            .get(&call)
                            .is_some_and(|live| matches!(live.state, LiveState::Performing))
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

impl ExecutorState {
    /// Settles a finished `run`: `EXECUTION_FAILED`, or on to verify.
    pub(crate) fn complete(
        &mut self,
        call: CallId,
        result: Result<Value, RunError>,
        now: Timestamp,
    ) -> bool {
        let now = self.tick(now);
        let Some(live) = self.live.get(&call) else {
            return false;
        };
        if !matches!(live.state, LiveState::Performing) {
            return false;
        }
        match result {
            Err(RunError::Failed(e)) => self.settle_stop(
                call,
                Stop::new(Reason::RunFailed, Decider::Action).with(e),
                now,
            ),
            Err(RunError::NotCountersigned(why)) => self.settle_stop(
                call,
                Stop::new(Reason::NotCountersigned, Decider::Host).with(why),
                now,
            ),
            Ok(output) => self.verify_run(call, output, now),
        }
        !self.live.contains_key(&call)
    }

    /// A job or completion was dropped before `complete`.
    pub(crate) fn abandon(&mut self, call: CallId) {
        if self
            .live
            .get(&call)
            .is_some_and(|l| matches!(l.state, LiveState::Performing))
        {
            let now = self.clock;
            self.settle_stop(call, Stop::new(Reason::Interrupted, Decider::Host), now);
        }
    }

    pub(crate) fn handoff_event(
        &mut self,
        call: CallId,
        done: bool,
        now: Timestamp,
    ) -> Result<Option<Settled>, TicketError> {
        let now = self.tick(now);
        let live = self.live.get(&call).ok_or(TicketError::NotPending)?;
        let LiveState::Handoff(machine) = &live.state else {
            return Err(TicketError::NotPending);
        };
        if machine.state.is_terminal() {
            return Err(TicketError::NotPending);
        }
        let expect = live
            .decided
            .action
            .meta()
            .handoff
            .as_ref()
            .map(|h| h.expect.clone());
        let holds = if done {
            match self.hook(Hook::Expect, || expect.is_some_and(|e| e.holds())) {
                Ok(holds) => Some(holds),
                Err(stop) => return self.refuse(call, stop, now).map(Some),
            }
        } else {
            None
        };
        let Some(LiveState::Handoff(machine)) = self.live.get_mut(&call).map(|l| &mut l.state)
        else {
            return Err(TicketError::NotPending);
        };
        let state = match holds {
            Some(holds) => machine.done(now, holds),
            None => machine.cancel(now),
        };
        if state == HandoffState::Waiting {
            // Not yet: said in the trail, and the person may try again.
            let reason = Reason::HandoffNotYet;
            self.record_live(call, AuditEvent::NotYet, Decider::Action, &reason, now);
            return Ok(None);
        }
        self.settle_handoff(call, state, now);
        self.last_settled_for(call).map(Some)
    }

    pub(crate) fn show_step(&mut self, call: CallId, index: usize) -> Result<(), TicketError> {
        match self.live.get_mut(&call).map(|l| &mut l.state) {
            Some(LiveState::Handoff(machine)) if !machine.state.is_terminal() => {
                machine.show_step(index);
                Ok(())
            }
            _ => Err(TicketError::NotPending),
        }
    }
    /// Checks a run's output with `verify`, then settles: a receipt or `VERIFY_FAILED`.
    pub(crate) fn verify_run(&mut self, call: CallId, output: Value, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let prepared = std::rc::Rc::clone(&live.decided.prepared);
        let checked = self.hook(Hook::Verify, || prepared.verify(&output));
        // Not kept past the settlement: the call's params are let go of there (this
        // copy would otherwise be their last owner, dropped outside the step's catch).
        drop(prepared);
        match checked {
            Err(stop) => self.settle_stop(call, stop, now),
            Ok(Err(e)) => self.settle_stop(
                call,
                Stop::new(Reason::VerifyFailed, Decider::Action).with(e),
                now,
            ),
            Ok(Ok(())) => self.settle_done(call, DoneBy::Assistant, output, Decider::Action, now),
        }
    }

    /// Settles a handoff whose machine reached a terminal state.
    pub(crate) fn settle_handoff(&mut self, call: CallId, state: HandoffState, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let handoff = live.decided.action.meta().handoff.clone();
        let expect = handoff
            .as_ref()
            .map(|h| h.expect.description.clone())
            .unwrap_or_default();
        let timeout_s = handoff.as_ref().map_or(0, |h| h.timeout.as_secs());
        let stop = match state {
            HandoffState::Waiting => return,
            HandoffState::Completed => {
                let result = json!({ "handoff": "completed", "expect": expect });
                return self.settle_done(call, DoneBy::Person, result, Decider::Person, now);
            }
            HandoffState::Cancelled => Stop::new(Reason::HandoffCancelled, Decider::Person),
            HandoffState::TimedOut => {
                Stop::new(Reason::HandoffTimeout, Decider::Timer).with(timeout_s.to_string())
            }
            HandoffState::Failed => Stop::new(Reason::HandoffFailed, Decider::Timer).with(expect),
        };
        self.settle_stop(call, stop, now);
    }
}
