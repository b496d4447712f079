//! A small world for integration tests: an executor, its audit trail, and a log of
//! every `run` that actually happened.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::expect_used)]

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use countersign::{
    Action, AuditRecord, Call, CallId, Completion, Config, Confirm, Executor, Kind, MemoryAudit,
    Registration, Session, Settled, Step, Timestamp,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct Named {
    /// A name.
    pub name: String,
}

thread_local! {
    static CLONES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Params that count their copies (on this thread).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Counted {
    /// A name.
    pub name: String,
}

impl Counted {
    /// Copies made since the last [`Counted::reset`].
    pub fn clones() -> u32 {
        CLONES.with(std::cell::Cell::get)
    }

    pub fn reset() {
        CLONES.with(|c| c.set(0));
    }
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        CLONES.with(|c| c.set(c.get() + 1));
        Self {
            name: self.name.clone(),
        }
    }
}

pub struct World {
    pub exec: Executor,
    pub audit: MemoryAudit,
    pub runs: Rc<RefCell<Vec<String>>>,
    pub regs: Vec<Registration>,
}

impl World {
    pub fn new() -> Self {
        Self::with_session(Session::new("admin", ["workspace.write"]))
    }

    pub fn with_session(session: Session) -> Self {
        Self::with_config(Config::new("test", session, [42; 32]))
    }

    pub fn with_config(config: Config) -> Self {
        let audit = MemoryAudit::new();
        let exec = Executor::new(config, audit.clone());
        Self {
            exec,
            audit,
            runs: Rc::default(),
            regs: Vec::new(),
        }
    }

    /// An action that logs `id:name` when it runs.
    pub fn action(&self, id: &str, kind: Kind, confirm: Confirm) -> Action<Named> {
        let runs = Rc::clone(&self.runs);
        let tag = id.to_owned();
        Action::<Named>::new(id, format!("test action {id}"))
            .kind(kind)
            .confirm(confirm)
            .consequence(|p| format!("set the name to `{}`", p.name))
            .run(move |p: Named| {
                let runs = Rc::clone(&runs);
                let tag = tag.clone();
                async move {
                    runs.borrow_mut().push(format!("{tag}:{}", p.name));
                    Ok::<_, String>(serde_json::json!({ "name": p.name }))
                }
            })
    }

    pub fn add(&mut self, action: Action<Named>) {
        self.regs
            .push(self.exec.register(action).expect("registers"));
    }

    pub fn call(&self, action: &str, args: &str, at: u64) -> Step {
        self.exec
            .submit(Call::new("tc", action, args), Timestamp::from_millis(at))
            .unwrap()
    }

    /// Submits a call that must wait for a card, and returns the card.
    pub fn card(&self, action: &str, args: &str, at: u64) -> countersign::ApprovalRequest {
        match self.call(action, args, at) {
            Step::Approval(card) => *card,
            other => panic!("expected a card for {action}, got {other:?}"),
        }
    }

    /// The person presses `gesture` on `card` at `at`; the call is driven to its end
    /// (`None` if it waits again: a second question, a redrawn card).
    pub fn allow(
        &self,
        card: &countersign::ApprovalRequest,
        gesture: countersign::Gesture,
        at_ms: u64,
    ) -> Option<Settled> {
        let step = self
            .exec
            .approve(card.countersign(gesture), at(at_ms))
            .expect("the ticket is accepted");
        drive(&self.exec, step, at_ms)
    }

    pub fn runs(&self) -> Vec<String> {
        self.runs.borrow().clone()
    }

    /// The terminal records of the call numbered `call` on the trail.
    pub fn ends_of(&self, call: u64) -> Vec<AuditRecord> {
        self.audit
            .records()
            .into_iter()
            .filter(|r| r.call == call && r.is_terminal())
            .collect()
    }

    /// The terminal records of the first call on the trail.
    pub fn first_calls_ends(&self) -> Vec<AuditRecord> {
        let call = self.audit.records().first().map_or(0, |r| r.call);
        self.ends_of(call)
    }

    pub fn terminal(&self, call: CallId) -> Vec<AuditRecord> {
        self.audit
            .for_call(call)
            .into_iter()
            .filter(|r| r.is_terminal())
            .collect()
    }
}

/// What the model is told, in order: every settlement queued, taken off the queue.
pub fn told(exec: &Executor) -> Vec<(CallId, &'static str)> {
    exec.drain_settled()
        .iter()
        .map(|s| (s.call, code(s)))
        .collect()
}

pub fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

pub fn finish(exec: &Executor, completion: Completion, now: u64) -> Settled {
    let call = completion.call();
    assert!(exec.complete(completion, at(now)), "the call was live");
    exec.settlement(call).expect("its settlement is queued")
}

/// Runs a `Perform` step to its settlement; returns other steps' settlement if terminal.
pub fn drive(exec: &Executor, step: Step, now: u64) -> Option<Settled> {
    match step {
        Step::Settled(s) => Some(s),
        Step::Perform(job) => Some(finish(exec, pollster::block_on(job.run()), now)),
        Step::Approval(_) | Step::Handoff(_) | Step::Question(_) => None,
    }
}

pub fn code(settled: &Settled) -> &'static str {
    settled.outcome.code_str()
}

/// A panic's payload that notes whether it was dropped while a panic unwound (where a
/// drop that panics would abort the process).
pub struct Loud(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for Loud {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

thread_local! {
    pub static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Params whose drop panics once after [`ARMED`] is set, while their name is
/// `brittle` (and no panic unwinds: then a drop that panics would abort).
#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct Brittle {
    /// A name.
    pub name: String,
}

impl Drop for Brittle {
    fn drop(&mut self) {
        if self.name == "brittle" && !std::thread::panicking() && ARMED.with(|a| a.replace(false)) {
            panic!("the page's params failed as they were dropped");
        }
    }
}

pub fn arm() {
    ARMED.with(|a| a.set(true));
}

/// A world whose sink stores each record (unless `keeps` is false) and then panics
/// with "the disk is full" on every `event` while the returned flag is set.
pub fn world_with_a_failing_sink(
    event: countersign::AuditEvent,
    keeps: bool,
) -> (World, std::rc::Rc<Cell<bool>>) {
    use countersign::{AuditRecord, AuditSink, Config, Executor, MemoryAudit, Session};
    let audit = MemoryAudit::new();
    let armed = std::rc::Rc::new(Cell::new(false));
    let (mut kept, arm) = (audit.clone(), std::rc::Rc::clone(&armed));
    let sink = move |r: AuditRecord| {
        let fail = arm.get() && r.event == event;
        if fail && !keeps {
            panic!("the disk is full");
        }
        kept.record(r);
        if fail {
            panic!("the disk is full");
        }
    };
    let config = Config::new("test", Session::new("admin", ["workspace.write"]), [42; 32]);
    let world = World {
        exec: Executor::new(config, sink),
        audit,
        runs: std::rc::Rc::default(),
        regs: Vec::new(),
    };
    (world, armed)
}
