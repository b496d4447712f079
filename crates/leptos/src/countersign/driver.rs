//! The driver: after every executor step it delivers settlements to whoever waits,
//! refreshes the dock's signals, re-arms the deadline timer and lets each page service
//! follow.

use std::rc::Rc;

use countersign::{CallId, Settled, Step};
use futures_channel::oneshot;
use leptos::prelude::*;

use crate::clock::now;
use crate::countersign::Countersign;
use crate::dock_state::{Activity, LogEntry};

/// How many automatic decisions the activity list keeps.
const MAX_ACTIVITY: usize = 50;

impl Countersign {
    /// Drives a step: a job runs outside the executor and is handed back when done.
    pub(crate) fn handle(&self, step: Step) {
        if let Step::Perform(job) = step {
            let weak = Rc::downgrade(&self.0);
            leptos::task::spawn_local(async move {
                let completion = job.run().await;
                if let Some(shared) = weak.upgrade() {
                    let cs = Countersign(shared);
                    let _ = cs.0.executor.complete(completion, now());
                    cs.pump();
                }
            });
        }
    }

    /// A receiver for the call's settlement (already there, or later).
    pub(crate) fn wait(&self, call: CallId) -> oneshot::Receiver<Settled> {
        let (tx, rx) = oneshot::channel();
        match self.0.unclaimed.borrow_mut().remove(&call) {
            Some(settled) => {
                let _ = tx.send(settled);
            }
            None => {
                self.0.waiters.borrow_mut().insert(call, tx);
            }
        }
        rx
    }

    /// Delivers settlements, refreshes the dock's signals, re-arms the timer and brings
    /// every page service up to date. Called after every executor step.
    pub(crate) fn pump(&self) {
        // Settling a batch item may let a later one be submitted, which may settle at
        // once: deliver until nothing more moves.
        loop {
            while let Some(settled) = self.0.executor.next_settled() {
                self.deliver(settled);
            }
            if !self.advance_batches() {
                break;
            }
        }
        let exec = &self.0.executor;
        let dock = self.0.dock;
        dock.approvals.set(exec.approvals());
        dock.handoffs.set(exec.handoffs());
        dock.questions.set(exec.questions());
        dock.grants.set(exec.grants());
        dock.batches
            .set(self.0.batches.borrow().iter().map(|b| b.view()).collect());
        dock.now_ms.set(now().as_millis());
        self.note_activity();
        self.rearm();
        for service in self.services() {
            service.after_step(self);
        }
    }

    /// A person's edit moved a call: whoever waited for `from` now waits for `to`.
    pub(crate) fn moved(&self, from: CallId, to: CallId) {
        if self
            .0
            .batches
            .borrow_mut()
            .iter_mut()
            .any(|b| b.moved(from, to))
        {
            return;
        }
        let waiter = self.0.waiters.borrow_mut().remove(&from);
        if let Some(tx) = waiter {
            self.0.waiters.borrow_mut().insert(to, tx);
        }
    }

    /// Submits every batch item whose dependencies have settled, and finishes batches
    /// whose items all have. `true` if anything was submitted.
    fn advance_batches(&self) -> bool {
        let mut ready = Vec::new();
        for batch in self.0.batches.borrow_mut().iter_mut() {
            ready.extend(batch.ready().into_iter().map(|(i, c)| (batch.id, i, c)));
        }
        let mut any = false;
        for (id, index, call) in ready {
            // From inside an action's hook the executor is busy: the item waits for the
            // next pump (and this one does not loop on it).
            let Ok(step) = self.0.executor.submit(call, now()) else {
                continue;
            };
            any = true;
            let call = crate::countersign::step_call(&step);
            if let Some(batch) = self.0.batches.borrow_mut().iter_mut().find(|b| b.id == id) {
                batch.started(index, call);
            }
            self.handle(step);
        }
        self.0
            .batches
            .borrow_mut()
            .retain_mut(|b| !b.finish_if_done());
        any
    }

    fn deliver(&self, s: Settled) {
        self.0.shown.borrow_mut().remove(&s.call);
        for service in self.services() {
            service.call_settled(self, &s);
        }
        // The conversation is the assistant's: an agent's outcomes are on its cards and
        // in the list of what ran unasked.
        if s.caller.is_assistant() {
            let title = self.title_of(&s.action);
            self.push_log(LogEntry::Outcome {
                action: s.action.to_string(),
                title,
                code: s.outcome.code(),
            });
        }
        if self.0.batches.borrow_mut().iter_mut().any(|b| b.take(&s)) {
            return;
        }
        let waiter = self.0.waiters.borrow_mut().remove(&s.call);
        match waiter {
            Some(tx) => {
                let _ = tx.send(s);
            }
            None => {
                self.0.unclaimed.borrow_mut().insert(s.call, s);
            }
        }
    }

    /// Adds the calls allowed without a card since the last look to the activity list,
    /// with the reason the gate recorded.
    fn note_activity(&self) {
        let from = self.0.activity_seen.get();
        let total = self.0.audit.len();
        if from >= total {
            return;
        }
        let fresh: Vec<Activity> = self
            .0
            .audit
            .slice(from, total - from)
            .into_iter()
            .filter(|r| r.event == countersign::audit::AuditEvent::Allowed)
            .map(|r| Activity {
                call: r.call,
                title: self.title_of(&r.action),
                action: r.action.to_string(),
                grant: r.grant,
                reason: r.reason,
                caller: r.caller,
            })
            .collect();
        self.0.activity_seen.set(total);
        if !fresh.is_empty() {
            self.0.dock.activity.update(|list| {
                list.extend(fresh);
                // Over the limit, agents' entries go first: an agent's many reads must
                // not push out what the page's assistant did (and its revoke buttons).
                let mut excess = list.len().saturating_sub(MAX_ACTIVITY);
                list.retain(|a| {
                    let drop = excess > 0 && !a.caller.is_assistant();
                    excess -= usize::from(drop);
                    !drop
                });
                list.drain(..excess);
            });
        }
    }

    fn rearm(&self) {
        /// The longest wait `setTimeout` honours (2^31 - 1 ms, about 24.8 days).
        const MAX_TIMER_MS: u64 = i32::MAX as u64;
        let deadline = self.0.executor.poll_timeout();
        let timer = deadline.map(|deadline| {
            let wait = deadline
                .as_millis()
                .saturating_sub(now().as_millis())
                .saturating_add(1);
            let weak = Rc::downgrade(&self.0);
            gloo_timers::callback::Timeout::new(
                // setTimeout takes an i32: a longer wait would fire at once, find
                // nothing due and re-arm in a loop. Wake early instead and re-arm.
                u32::try_from(wait.min(MAX_TIMER_MS)).unwrap_or(u32::MAX),
                move || {
                    if let Some(shared) = weak.upgrade() {
                        let cs = Countersign(shared);
                        cs.0.executor.handle_timeout(now());
                        cs.pump();
                    }
                },
            )
        });
        // Replacing the old Timeout cancels it.
        *self.0.timer.borrow_mut() = timer;
        let waiting = deadline.is_some();
        let mut ticker = self.0.ticker.borrow_mut();
        if waiting && ticker.is_none() {
            let now_ms = self.0.dock.now_ms;
            *ticker = Some(gloo_timers::callback::Interval::new(1_000, move || {
                now_ms.set(now().as_millis());
            }));
        } else if !waiting {
            *ticker = None;
        }
    }

    /// Settles every live call (the page is going away) and stops the timers.
    pub(crate) fn shutdown(&self) {
        for service in self.services() {
            service.close(self);
        }
        self.0.executor.shutdown(now());
        self.pump();
        *self.0.timer.borrow_mut() = None;
        *self.0.ticker.borrow_mut() = None;
    }
}
