//! Registrations and the mailbox: dropping a [`Registration`] (or a job) may happen inside
//! an action's hook, while the executor is busy; the drop is posted and applied before the
//! executor's next operation.

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

/// The state borrowed for one step, with what was posted meanwhile applied.
///
/// A step that does not finish (a hook, a sink or a drop panicked: possible only in a
/// native host, the page aborts) poisons the executor, as `std::sync::Mutex` is
/// poisoned: the step may be half made, so every later one is [`Blocked::Poisoned`].
pub(crate) struct Stepping<'a> {
    state: RefMut<'a, ExecutorState>,
    /// Set once the step is done; a step dropped before (a panic left it) poisons.
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

/// Where a drop posts its change: the executor's state, its mailbox, and the flag that
/// says a hook reached into the executor.
pub(crate) struct Post {
    pub(crate) state: Weak<RefCell<ExecutorState>>,
    pub(crate) mailbox: Weak<RefCell<Vec<Deferred>>>,
    pub(crate) reentered: Weak<Cell<bool>>,
}

impl Post {
    /// Posts `item` and applies it now if the executor is idle. If it is busy, a hook
    /// dropped a registration or a job while its call was decided: the next step applies
    /// it first, and the call whose hook did it is refused (the page changed under it).
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
