//! Registrations and the mailbox: dropping a [`Registration`] (or a job) may happen inside
//! an action's hook, while the executor is busy; the drop is posted and applied before the
//! executor's next operation.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use crate::call::CallId;

use super::state::ExecutorState;

pub(crate) enum Deferred {
    Unregister { id: String, generation: u64 },
    Abandoned(CallId),
}

pub(crate) type Mailbox = Rc<RefCell<Vec<Deferred>>>;

pub(crate) fn apply(state: &mut ExecutorState, deferred: Vec<Deferred>) {
    for item in deferred {
        match item {
            Deferred::Unregister { id, generation } => state.unregister(&id, generation),
            Deferred::Abandoned(call) => state.abandon(call),
        }
    }
}

pub(crate) fn post(
    state: &Weak<RefCell<ExecutorState>>,
    mailbox: &Weak<RefCell<Vec<Deferred>>>,
    item: Deferred,
) {
    let (Some(state), Some(mailbox)) = (state.upgrade(), mailbox.upgrade()) else {
        return;
    };
    mailbox.borrow_mut().push(item);
    // Apply now if the executor is idle; if it is busy (a drop inside a hook), the
    // next operation applies it before doing anything else.
    if let Ok(mut idle) = state.try_borrow_mut() {
        let deferred = std::mem::take(&mut *mailbox.borrow_mut());
        apply(&mut idle, deferred);
    };
}

/// A live registration. Dropping it unregisters the action, revokes its grants and
/// settles its waiting calls as `UNAVAILABLE`.
#[must_use = "dropping a Registration unregisters the action at once"]
pub struct Registration {
    pub(crate) id: String,
    pub(crate) generation: u64,
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
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
            post(&self.state, &self.mailbox, item);
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
