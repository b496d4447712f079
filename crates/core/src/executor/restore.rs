//! restore: a call that was waiting for a person when the page reloaded is brought back
//! only if its action registered again with the same declaration, is available, and its
//! deadline has not passed. Then it passes the pipeline again from resolve and is always
//! asked (a new card, a new nonce, the old deadline); nothing runs by itself. Otherwise it
//! settles at once as `APPROVAL_EXPIRED` (or `HANDOFF_TIMEOUT`), with one terminal record.

use std::time::Duration;

use crate::audit::{AuditEvent, Decider};
use crate::call::{Call, CallId};
use crate::reason::{Hook, Reason, RestoreMiss};
use crate::time::Timestamp;

use super::pipeline::Origin;
use super::settle::Trace;
use super::state::{ExecutorState, Stop};
use super::Next;

/// A call that was waiting when the page went away, as the page stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The model's call (its tool call id, the action, the arguments that were shown).
    pub call: Call,
    /// The digest of the action's declaration when it was waiting.
    pub declaration: String,
    /// Whether it waited as a handoff (else as an approval card).
    pub handoff: bool,
    /// How long it had left before its deadline, measured now.
    pub remaining: Duration,
}

impl ExecutorState {
    pub(crate) fn restore(&mut self, pending: Pending, now: Timestamp) -> Next {
        let now = self.tick(now);
        let id = self.new_call_id();
        match self.restorable(&pending) {
            Err(why) => self.not_restored(id, &pending, why, now),
            Ok(()) => {
                let trace = Trace::arriving(id, &pending.call, now);
                self.record(
                    &trace,
                    AuditEvent::Restored,
                    Decider::Host,
                    &Reason::Restored,
                    None,
                    now,
                );
                let origin = Origin {
                    edited: None,
                    restored: Some(now.saturating_add(pending.remaining)),
                };
                self.pipeline(id, pending.call, now, now, 0, origin)
            }
        }
    }

    /// Settles a stored call that will not be brought back (another tab has it, say).
    pub(crate) fn drop_pending(
        &mut self,
        pending: Pending,
        why: RestoreMiss,
        now: Timestamp,
    ) -> Next {
        let now = self.tick(now);
        let id = self.new_call_id();
        self.not_restored(id, &pending, why, now)
    }

    fn restorable(&self, pending: &Pending) -> Result<(), RestoreMiss> {
        if pending.remaining.is_zero() {
            return Err(RestoreMiss::Expired);
        }
        let entry = self
            .registry
            .get(&pending.call.action)
            .ok_or(RestoreMiss::Changed)?;
        if entry.action.meta().declaration != pending.declaration {
            return Err(RestoreMiss::Changed);
        }
        match self.hook(Hook::Available, || entry.action.is_available()) {
            Ok(true) => Ok(()),
            _ => Err(RestoreMiss::Unavailable),
        }
    }

    fn not_restored(
        &mut self,
        id: CallId,
        pending: &Pending,
        why: RestoreMiss,
        now: Timestamp,
    ) -> Next {
        let mut trace = Trace::arriving(id, &pending.call, now);
        if let Some(entry) = self.registry.get(&pending.call.action) {
            let action = std::rc::Rc::clone(&entry.action);
            trace.resolved(&action, self.level(action.meta()).policy);
        }
        trace.unvalidated(&pending.call.arguments, self);
        let stop = Stop::new(
            Reason::NotRestored {
                handoff: pending.handoff,
                why,
            },
            Decider::Host,
        );
        Next::Settled(self.refuse_early(&trace, stop, now))
    }

    pub(crate) fn new_call_id(&mut self) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        id
    }
}
