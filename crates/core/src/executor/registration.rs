//! Registrations and the mailbox: a drop inside a hook is posted, applied at the next step.

use std::cell::{Cell, RefCell, RefMut};
use std::rc::Weak;

use crate::call::CallId;
use crate::ticket::Blocked;

use super::state::ExecutorState;

/// A change a drop posts, applied at the start of the executor's next step.
pub(crate) enum Deferred {
    Unregister { id: String, generation: u64 },
    Abandoned(CallId),
}

pub(crate) type Mailbox = std::rc::Rc<RefCell<Vec<Deferred>>>;

/// The state borrowed for one step, with what was posted meanwhile applied. A step that
/// does not finish (a hook, sink or drop panicked in a native host; the page aborts) may be
/// half made: like a `std::sync::Mutex`, the executor is poisoned ([`Blocked::Poisoned`]).
pub(crate) struct Stepping<'a> {
    state: RefMut<'a, ExecutorState>,
    done: bool,
}

impl Stepping<'_> {
    /// The step is done: nothing it began is left half made.
    pub(crate) fn finish(mut self) {
        self.done = true;
    }
}

/// Begins a step: [`Blocked::Reentered`] from inside a hook (the state is borrowed; the
/// flag tells the hook's call), [`Blocked::Poisoned`] after a panic left a step.
pub(crate) fn begin<'a>(
    state: &'a RefCell<ExecutorState>,
    mailbox: &RefCell<Vec<Deferred>>,
    reentered: &Cell<bool>,
) -> Result<Stepping<'a>, Blocked> {
    let Ok(state) = state.try_borrow_mut() else {
        reentered.set(true);
        return Err(Blocked::Reentered);
    };
    if state.poisoned {
        return Err(Blocked::Poisoned);
    }
    let mut step = Stepping { state, done: false };
    let deferred = std::mem::take(&mut *mailbox.borrow_mut());
    for item in deferred {
        match item {
            Deferred::Unregister { id, generation } => step.unregister(&id, generation),
            Deferred::Abandoned(call) => step.abandon(call),
        }
    }
    Ok(step)
}

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        // INVARIANT: only a step that finished leaves the executor usable; whatever
        // stopped it (a panic, caught anywhere) poisons it.
        if !self.done {
            self.state.poisoned = true;
        }
    }
}

impl std::ops::Deref for Stepping<'_> {
    type Target = ExecutorState;
    fn deref(&self) -> &ExecutorState {
        &self.state
    }
}

impl std::ops::DerefMut for Stepping<'_> {
    fn deref_mut(&mut self) -> &mut ExecutorState {
        &mut self.state
    }
}

/// Where a drop posts its change.
pub(crate) struct Post {
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
    pub(crate) reentered: Weak<Cell<bool>>,
}

impl Post {
    /// Posts `item`, applied now if the executor is idle. If busy, a hook dropped a registration
    /// or job mid-decision: the next step applies it first and refuses that hook's call.
    pub(crate) fn send(&self, item: Deferred) {
        let (Some(state), Some(mailbox), Some(reentered)) = (
            self.state.upgrade(),
            self.mailbox.upgrade(),
            self.reentered.upgrade(),
        ) else {
            return;
        };
        mailbox.borrow_mut().push(item);
        if let Ok(step) = begin(&state, &mailbox, &reentered) {
            step.finish();
        };
    }
}

/// A live registration. Dropping it unregisters the action, revokes its grants and
/// settles its waiting calls as `UNAVAILABLE`.
#[must_use = "dropping a Registration unregisters the action at once"]
pub struct Registration {
    pub(crate) id: String,
    pub(crate) generation: u64,
    pub(crate) to: Post,
    pub(crate) done: bool,
}

impl Registration {
    /// The action's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Removes the action now, as dropping it does.
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
            self.to.send(Deferred::Unregister {
                id: self.id.clone(),
                generation: self.generation,
            });
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
