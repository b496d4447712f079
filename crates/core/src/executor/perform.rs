//! perform: a finished or abandoned run, and the person's events on a handoff.

use serde_json::Value;

use crate::audit::{AuditEvent, Decider};
use crate::call::CallId;
use crate::handoff::HandoffState;
use crate::outcome::Settled;
use crate::reason::{Hook, Reason};
use crate::ticket::TicketError;
use crate::time::Timestamp;

use super::countersign::RunError;
use super::live::LiveState;
use super::state::{ExecutorState, Stop};

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

    /// The person says the handoff is done, or cancels it.
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
        if machine.state().is_terminal() {
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
                Err(stop) => {
                    self.settle_stop(call, stop, now);
                    return self.last_settled_for(call).map(Some);
                }
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
            Some(LiveState::Handoff(machine)) if !machine.state().is_terminal() => {
                machine.show_step(index);
                Ok(())
            }
            _ => Err(TicketError::NotPending),
        }
    }

    /// The handoff machine's state after a timeout, if it just ended.
    pub(crate) fn handoff_timed_out(&mut self, call: CallId, now: Timestamp) {
        if let Some(LiveState::Handoff(m)) = self.live.get_mut(&call).map(|l| &mut l.state) {
            let state: HandoffState = m.handle_timeout(now);
            self.settle_handoff(call, state, now);
        }
    }
}
