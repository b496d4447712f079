//! Registrations and the mailbox: dropping a [`Registration`] (or a job) may happen inside
//! an action's hook, while the executor is busy; the drop is posted and applied before the
//! executor's next operation.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::call::CallId;

use super::state::ExecutorState;
use super::trail::Caught;

pub(crate) enum Deferred {
    Unregister {
        id: String,
        generation: u64,
    },
    Abandoned(CallId),
    /// A panic a job carried (see `Guard::carried`), raised by the step that applies it.
    Raise(Caught),
}

pub(crate) type Mailbox = Rc<RefCell<Vec<Deferred>>>;

/// The start of every step: a sink's panic a step cut short left is forgotten (the host
/// saw that step's panic, and this one must not raise it as its own), then what was
/// posted meanwhile is applied.
pub(crate) fn begin_step(state: &mut ExecutorState, mailbox: &RefCell<Vec<Deferred>>) {
    state.trail.forget_failure();
    state.in_hook.set(None);
    let deferred = std::mem::take(&mut *mailbox.borrow_mut());
    for item in deferred {
        match item {
            Deferred::Unregister { id, generation } => state.unregister(&id, generation),
            Deferred::Abandoned(call) => state.abandon(call),
            Deferred::Raise(panic) => state.trail.keep(panic),
        }
    }
}

/// Where a drop posts its change: the executor's state, its mailbox, and the flag that
/// says a hook reached into the executor.
pub(crate) struct Post {
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
    pub(crate) reentered: Weak<Cell<bool>>,
}

pub(crate) fn post(to: &Post, items: impl IntoIterator<Item = Deferred>) {
    let (Some(state), Some(mailbox)) = (to.state.upgrade(), to.mailbox.upgrade()) else {
        return;
    };
    mailbox.borrow_mut().extend(items);
    // Apply now if the executor is idle. If it is busy, a hook dropped a registration or
    // a job while its call was being decided: the next operation applies the change
    // first, and the call whose hook did it is refused (its answer was made while the
    // page changed under it).
    let busy = match state.try_borrow_mut() {
        Ok(mut idle) => {
            begin_step(&mut idle, &mailbox);
            idle.trail.finish_step();
            false
        }
        Err(_) => true,
    };
    if busy {
        if let Some(flag) = to.reentered.upgrade() {
            flag.set(true);
        }
    }
}

/// A live registration. Dropping it unregisters the action, revokes its grants and
/// settles its waiting calls as `UNAVAILABLE`.
#[must_use = "dropping a Registration unregisters the action at once"]
pub struct Registration {
    pub(crate) id: String,
    pub(crate) generation: u64,
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
    pub(crate) reentered: Weak<Cell<bool>>,
    pub(crate) done: bool,
}

impl Registration {
    /// The action's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Removes the action now; its grants are revoked and its waiting calls settle as
    /// `UNAVAILABLE`.
    pub fn unregister(mut self) {
        self.release();
    }

    /// Keeps the action registered for the executor's whole life.
    pub fn forget(mut self) {
        self.done = true;
    }

    fn release(&mut self) {
        if !self.done {
            self.done = true;
            let item = Deferred::Unregister {
                id: self.id.clone(),
                generation: self.generation,
            };
            let to = Post {
                state: Weak::clone(&self.state),
                mailbox: Weak::clone(&self.mailbox),
                reentered: Weak::clone(&self.reentered),
            };
            post(&to, [item]);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
