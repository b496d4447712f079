//! A small world for the gate's tests: an executor, its audit trail, and a log of
//! every `run` that actually happened; and the steps many tests take in it.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::expect_used)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use countersign::{
    executor::Completion, executor::Pending, executor::Registration, ticket::GrantRule, Action,
    ApprovalRequest, AuditRecord, Call, CallId, Config, Confirm, Executor, Kind, MemoryAudit,
    Session, Settled, Step, Timestamp,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct Named {
    /// A name.
    pub name: String,
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

    /// A world with `rename`, a write action asked on a card (`Confirm::Ask`).
    pub fn with_rename() -> Self {
        let mut w = Self::new();
        w.add(w.action("rename", Kind::Write, Confirm::Ask));
        w
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
    pub fn card(&self, action: &str, args: &str, at: u64) -> ApprovalRequest {
        match self.call(action, args, at) {
            Step::Approval(card) => *card,
            other => panic!("expected a card for {action}, got {other:?}"),
        }
    }

    /// The person presses `gesture` on `card` at `at`; the call is driven to its end
    /// (`None` if it waits again: a second question, a redrawn card).
    pub fn allow(
        &self,
        card: &ApprovalRequest,
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

    pub fn terminal(&self, call: CallId) -> Vec<AuditRecord> {
        for_call(&self.audit, call)
            .into_iter()
            .filter(|r| r.is_terminal())
            .collect()
    }
}

/// The held records of one call, in order.
pub fn for_call(audit: &MemoryAudit, call: CallId) -> Vec<AuditRecord> {
    let call = call.get();
    audit
        .records()
        .into_iter()
        .filter(|r| r.call == call)
        .collect()
}

pub fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

pub fn finish(exec: &Executor, completion: Completion, now: u64) -> Settled {
    let call = completion.call();
    assert!(exec.complete(completion, at(now)), "the call was live");
    drain(exec)
        .into_iter()
        .rfind(|s| s.call == call)
        .expect("its settlement is queued")
}

/// Every settlement queued since the last drain, in order.
pub fn drain(exec: &Executor) -> Vec<Settled> {
    std::iter::from_fn(|| exec.next_settled()).collect()
}

/// Whether a panic poisoned `exec`: a later operation is then refused.
pub fn is_poisoned(exec: &Executor) -> bool {
    matches!(
        exec.set_mode(exec.mode()),
        Err(countersign::ticket::Blocked::Poisoned)
    )
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

/// The card `step` must be (`what` names it in the failure).
pub fn approval(step: Step, what: &str) -> ApprovalRequest {
    match step {
        Step::Approval(card) => *card,
        other => panic!("{what}: expected a card, got {other:?}"),
    }
}

/// The person edits `card` to `args`; the edited call must be asked again.
pub fn edit(w: &World, card: &ApprovalRequest, args: &str, now: u64) -> ApprovalRequest {
    approval(
        w.exec
            .edit(card.call, args, at(now))
            .expect("the edit is taken"),
        "an edit is asked again",
    )
}

/// A call of `action` as the page stored it before a reload, `remaining` left on it.
pub fn pending(w: &World, action: &str, args: &str, remaining: Duration) -> Pending {
    Pending {
        call: Call::new("tc-old", action, args),
        declaration: w.exec.registration(action).unwrap_or_default(),
        handoff: false,
        remaining,
        edited: None,
        untrusted: None,
    }
}

/// Every call in the trail has at most one terminal record.
pub fn at_most_one_terminal_each(w: &World) {
    let mut terminals: BTreeMap<u64, usize> = BTreeMap::new();
    for r in w.audit.records() {
        if r.is_terminal() {
            *terminals.entry(r.call).or_default() += 1;
        }
    }
    for (call, n) in terminals {
        assert_eq!(n, 1, "call {call} has {n} terminal records");
    }
}

/// An action whose consequence and "always allow" rule read a shared cell (the page
/// state).
pub fn stateful(
    w: &World,
    id: &str,
    confirm: Confirm,
    state: &Rc<RefCell<String>>,
) -> Action<Named> {
    let shown = Rc::clone(state);
    let rule = Rc::clone(state);
    w.action(id, Kind::Write, confirm)
        .consequence(move |p| format!("{} -> {}", shown.borrow(), p.name))
        .remember(move |p| {
            GrantRule::exact(
                format!("{} {}", rule.borrow(), p.name),
                "/name",
                p.name.clone(),
            )
        })
}

/// Submits a call that must be refused at once: one terminal record and no decision
/// record before it. Returns its code and the message the model reads.
pub fn refused(w: &World, action: &str, args: &str) -> (String, String) {
    match w.call(action, args, 0) {
        Step::Settled(s) => {
            assert_eq!(w.terminal(s.call).len(), 1, "one terminal record");
            assert_eq!(
                for_call(&w.audit, s.call).len(),
                1,
                "no decision record before a refusal"
            );
            let json = s.outcome.to_model_json();
            assert_eq!(json["ok"], false);
            (
                code(&s).to_owned(),
                json["error"]["message"].as_str().unwrap().to_owned(),
            )
        }
        other => panic!("{action} {args}: not refused: {other:?}"),
    }
}

/// A signer that logs every request and mints `tok`.
#[derive(Clone, Default)]
pub struct Signer {
    pub asked: Rc<RefCell<Vec<countersign::countersignature::MintRequest>>>,
}

impl countersign::countersignature::Countersigner for Signer {
    fn mint(
        &self,
        request: countersign::countersignature::MintRequest,
    ) -> countersign::action::LocalBoxFuture<
        Result<countersign::countersignature::Countersignature, String>,
    > {
        self.asked.borrow_mut().push(request);
        Box::pin(async { Ok(countersign::countersignature::Countersignature::new("tok")) })
    }
}

/// A countersigned action that logs `id:name` when it runs.
pub fn signed(w: &World, id: &str) -> Action<Named> {
    let runs = Rc::clone(&w.runs);
    let tag = id.to_owned();
    Action::<Named>::new(id, "a countersigned action")
        .kind(Kind::Danger)
        .run_countersigned(
            move |p: Named, _token: countersign::countersignature::Countersignature| {
                let runs = Rc::clone(&runs);
                let tag = tag.clone();
                async move {
                    runs.borrow_mut().push(format!("{tag}:{}", p.name));
                    Ok::<_, String>(serde_json::json!({}))
                }
            },
        )
}

/// A world with a signer and one action `id`: [`World::action`], or with `countersigned`
/// a countersigned action of the same kind and confirm.
pub fn with_one(id: &str, kind: Kind, confirm: Confirm, countersigned: bool) -> World {
    let mut w = World::new();
    w.exec
        .set_countersigner(Rc::new(Signer::default()))
        .expect("a signer");
    let action = if countersigned {
        Action::<Named>::new(id, "a countersigned action")
            .kind(kind)
            .confirm(confirm)
            .run_countersigned(
                |_: Named, _: countersign::countersignature::Countersignature| async {
                    Ok::<_, String>(serde_json::json!({}))
                },
            )
    } else {
        w.action(id, kind, confirm)
    };
    w.add(action);
    w
}
