//! Handoffs: a last step only a person may do, and the sans-IO machine that waits for it.

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use crate::time::Timestamp;

/// A step the person does, with the page element to highlight while it is current.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandoffStep {
    /// What to do, in the person's language.
    pub text: String,
    /// The name of a page target (e.g. `verification_code`) to highlight, if any.
    pub target: Option<String>,
}

/// The check that proves the step happened, reading real page state.
#[derive(Clone)]
pub struct Expect {
    pub(crate) description: String,
    pub(crate) check: Rc<dyn Fn() -> bool>,
}

impl Expect {
    /// An expectation, checked when the person says the step is done. If `check` calls
    /// back into the executor, the handoff settles as `HANDOFF_FAILED`.
    pub fn new(description: impl Into<String>, check: impl Fn() -> bool + 'static) -> Self {
        Self {
            description: description.into(),
            check: Rc::new(check),
        }
    }

    /// Reads the page state now.
    pub fn holds(&self) -> bool {
        (self.check)()
    }
}

impl std::fmt::Debug for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expect")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// A handoff declaration: why, the steps, the expectation and the timeout.
#[derive(Clone, Debug)]
pub struct Handoff {
    pub(crate) reason: String,
    pub(crate) steps: Vec<HandoffStep>,
    pub(crate) expect: Expect,
    pub(crate) timeout: Duration,
}

impl Handoff {
    /// A handoff with a reason and an expectation; add steps with [`Handoff::step`].
    pub fn new(reason: impl Into<String>, expect: Expect) -> Self {
        Self {
            reason: reason.into(),
            steps: Vec::new(),
            expect,
            timeout: Duration::from_secs(5 * 60),
        }
    }

    /// Adds a step, optionally pointing at a page target.
    pub fn step(mut self, text: impl Into<String>, target: Option<&str>) -> Self {
        self.steps.push(HandoffStep {
            text: text.into(),
            target: target.map(str::to_owned),
        });
        self
    }

    /// How long to wait for the person. Default five minutes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Where a handoff stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandoffState {
    Waiting,
    Completed,
    Cancelled,
    /// The deadline passed first.
    TimedOut,
    /// The deadline passed after the person said done and the expectation did not hold.
    Failed,
}

impl HandoffState {
    pub(crate) const fn is_terminal(self) -> bool {
        !matches!(self, Self::Waiting)
    }
}

/// The handoff state machine. It never reads a clock: `now` is passed in. Once
/// terminal, it stays so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandoffMachine {
    pub(crate) state: HandoffState,
    pub(crate) deadline: Timestamp,
    steps: usize,
    current: usize,
    /// How many times the person said done while the expectation did not hold yet.
    pub(crate) tries: u32,
}

impl HandoffMachine {
    pub(crate) fn new(steps: usize, now: Timestamp, timeout: Duration) -> Self {
        Self {
            state: HandoffState::Waiting,
            deadline: now.saturating_add(timeout),
            steps,
            current: 0,
            tries: 0,
        }
    }

    /// When the host must call [`HandoffMachine::handle_timeout`], while waiting.
    pub(crate) fn poll_timeout(&self) -> Option<Timestamp> {
        (self.state == HandoffState::Waiting).then_some(self.deadline)
    }

    /// Times out if `now` is at or past the deadline: `Failed` if the person said done
    /// and the expectation did not hold, `TimedOut` otherwise.
    pub(crate) fn handle_timeout(&mut self, now: Timestamp) -> HandoffState {
        if self.state == HandoffState::Waiting && now >= self.deadline {
            self.state = if self.tries > 0 {
                HandoffState::Failed
            } else {
                HandoffState::TimedOut
            };
        }
        self.state
    }

    /// The person says done; `expect_holds` is the expectation read now. If it does not
    /// hold yet, the handoff keeps waiting. A claim after the deadline is a timeout.
    pub(crate) fn done(&mut self, now: Timestamp, expect_holds: bool) -> HandoffState {
        if self.handle_timeout(now) == HandoffState::Waiting {
            if expect_holds {
                self.state = HandoffState::Completed;
            } else {
                self.tries = self.tries.saturating_add(1);
            }
        }
        self.state
    }

    /// The person cancels. Ignored once terminal.
    pub(crate) fn cancel(&mut self, now: Timestamp) -> HandoffState {
        if self.handle_timeout(now) == HandoffState::Waiting {
            self.state = HandoffState::Cancelled;
        }
        self.state
    }

    /// The step whose target is highlighted, while waiting.
    pub(crate) fn current_step(&self) -> Option<usize> {
        (self.state == HandoffState::Waiting && self.current < self.steps).then_some(self.current)
    }

    /// Moves the highlight to step `index` (clamped to the last step).
    pub(crate) fn show_step(&mut self, index: usize) {
        if self.steps > 0 {
            self.current = index.min(self.steps - 1);
        }
    }
}
