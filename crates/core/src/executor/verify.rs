//! verify: approval means "allowed to try", not "done". A run's `verify` and a handoff's
//! `expect` read real state; only then is there a receipt.

use serde_json::{json, Value};

use crate::audit::Decider;
use crate::call::CallId;
use crate::handoff::HandoffState;
use crate::outcome::{DoneBy, Outcome, Receipt};
use crate::reason::{Hook, Reason};
use crate::time::Timestamp;

use super::state::{ExecutorState, Stop};

impl ExecutorState {
    /// Checks a run's output with the action's `verify`, then settles with a receipt or
    /// `VERIFY_FAILED`.
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
            Ok(Ok(())) => {
                let receipt = self.receipt(call, DoneBy::Assistant, output);
                if let Some(receipt) = receipt {
                    self.settle(call, Outcome::Done(receipt), Decider::Action, now);
                }
            }
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
                if let Some(receipt) = self.receipt(call, DoneBy::Person, result) {
                    self.settle(call, Outcome::Done(receipt), Decider::Person, now);
                }
                return;
            }
            HandoffState::Cancelled => Stop::new(Reason::HandoffCancelled, Decider::Person),
            HandoffState::TimedOut => {
                Stop::new(Reason::HandoffTimeout, Decider::Timer).with(timeout_s.to_string())
            }
            HandoffState::Failed => Stop::new(Reason::HandoffFailed, Decider::Timer).with(expect),
        };
        self.settle_stop(call, stop, now);
    }

    fn receipt(&self, call: CallId, done_by: DoneBy, result: Value) -> Option<Receipt> {
        let live = self.live.get(&call)?;
        let meta = live.decided.action.meta();
        Some(Receipt {
            action: meta.id.clone(),
            title: meta.title.clone(),
            consequence: live.consequence.clone(),
            // Marked where the call settles, with the rest of what it brings in.
            untrusted: false,
            done_by,
            result,
        })
    }
}
