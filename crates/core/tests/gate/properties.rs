//! No random sequence of steps runs a gated call without its ticket, or settles a call twice.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use countersign::{
    audit::AuditEvent, audit::Decider, executor::Job, executor::Registration,
    policy::ApprovalPolicy, Action, ApprovalRequest, Call, CallId, Config, Confirm, Executor,
    Expect, Gesture, Handoff, Kind, MemoryAudit, Mode, Session, Step,
};
use proptest::prelude::*;

use crate::common::{at, drain, for_call, Named};

const ACTIONS: [(&str, Kind, Confirm); 6] = [
    ("plain", Kind::Write, Confirm::Unset),
    ("ask", Kind::Write, Confirm::Ask),
    ("always", Kind::Danger, Confirm::Ask),
    ("off", Kind::Danger, Confirm::Off),
    ("hand", Kind::Danger, Confirm::Unset),
    ("undo", Kind::Write, Confirm::Ask),
];

#[derive(Clone, Debug)]
enum Op {
    Submit(usize),
    SubmitUnknown,
    Approve(usize, bool),
    Replay(usize),
    Deny(usize),
    Advance(u64),
    Timeout,
    Unregister(usize),
    Register(usize),
    RevokeAll,
    HandoffDone(usize, bool),
    HandoffCancel(usize),
    RunJob(usize),
    DropJob(usize),
    SetMode(Mode),
    LoadPolicy(usize),
    /// The page changes (a no-approval call in the same turn, say).
    Touch,
    /// The action is registered again under its id, declared the other way.
    Redeclare(usize),
}

/// Policy files the sequences switch between: overrides that raise and lower levels
/// (never a handoff's), and one that is broken.
const POLICIES: [&str; 3] = [
    r#"{"roles":{"admin":{"overrides":{"plain":{"confirm":"always"},"always":{"confirm":"off"},"ask":{"confirm":"unset"}}}}}"#,
    r#"{"roles":{"admin":{"overrides":{"ask":{"kind":"danger"},"hand":{"confirm":"off"},"off":{"confirm":"ask"}}}}}"#,
    r#"{"roles":{"admin":{"overides":{}}}}"#,
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..ACTIONS.len()).prop_map(Op::Submit),
        1 => Just(Op::SubmitUnknown),
        3 => (0..8usize, any::<bool>()).prop_map(|(i, s)| Op::Approve(i, s)),
        1 => (0..8usize).prop_map(Op::Replay),
        2 => (0..8usize).prop_map(Op::Deny),
        2 => (1..200_000u64).prop_map(Op::Advance),
        1 => Just(Op::Timeout),
        1 => (0..ACTIONS.len()).prop_map(Op::Unregister),
        1 => (0..ACTIONS.len()).prop_map(Op::Register),
        1 => Just(Op::RevokeAll),
        2 => (0..4usize, any::<bool>()).prop_map(|(i, ok)| Op::HandoffDone(i, ok)),
        1 => (0..4usize).prop_map(Op::HandoffCancel),
        3 => (0..4usize).prop_map(Op::RunJob),
        1 => (0..4usize).prop_map(Op::DropJob),
        1 => prop_oneof![Just(Mode::Default), Just(Mode::Away), Just(Mode::Unattended), Just(Mode::Bypass)].prop_map(Op::SetMode),
        1 => (0..POLICIES.len()).prop_map(Op::LoadPolicy),
        2 => Just(Op::Touch),
        1 => (0..ACTIONS.len()).prop_map(Op::Redeclare),
    ]
}

struct Sim {
    exec: Executor,
    audit: MemoryAudit,
    ran: Rc<RefCell<Vec<String>>>,
    published: Rc<Cell<bool>>,
    regs: Vec<Option<Registration>>,
    now: u64,
    next_tag: u64,
    tag_call: BTreeMap<String, CallId>,
    call_action: BTreeMap<CallId, usize>,
    granted_at_submit: BTreeSet<CallId>,
    approved: BTreeMap<CallId, (Gesture, ApprovalPolicy)>,
    cards: Vec<ApprovalRequest>,
    jobs: Vec<Job>,
    submitted: Vec<CallId>,
    settled: Vec<CallId>,
    page: Rc<Cell<u64>>,
    /// Per action: how many times it was registered, and whether declared the other way.
    epoch: Vec<u64>,
    redeclared: Vec<bool>,
    /// (action, epoch) pairs a person granted "always allow" in.
    granted_in: BTreeSet<(usize, u64)>,
    call_epoch: BTreeMap<CallId, u64>,
}

impl Sim {
    fn new() -> Self {
        let audit = MemoryAudit::new();
        let mut config = Config::new("prop", Session::new("admin", Vec::<String>::new()), [3; 32]);
        config.approval_timeout = Duration::from_secs(60);
        let exec = Executor::new(config, audit.clone());
        let mut sim = Self {
            exec,
            audit,
            ran: Rc::default(),
            published: Rc::default(),
            regs: (0..ACTIONS.len()).map(|_| None).collect(),
            now: 0,
            next_tag: 0,
            tag_call: BTreeMap::new(),
            call_action: BTreeMap::new(),
            granted_at_submit: BTreeSet::new(),
            approved: BTreeMap::new(),
            cards: Vec::new(),
            jobs: Vec::new(),
            submitted: Vec::new(),
            settled: Vec::new(),
            page: Rc::default(),
            epoch: vec![0; ACTIONS.len()],
            redeclared: vec![false; ACTIONS.len()],
            granted_in: BTreeSet::new(),
            call_epoch: BTreeMap::new(),
        };
        for i in 0..ACTIONS.len() {
            sim.register(i);
        }
        sim
    }

    fn register(&mut self, i: usize) {
        if self.regs[i].is_some() {
            return;
        }
        let (id, kind, confirm) = ACTIONS[i];
        self.epoch[i] += 1;
        let other_way = self.redeclared[i];
        let reg = if id == "hand" {
            let published = Rc::clone(&self.published);
            self.exec.register(
                Action::<Named>::new(id, "handoff").kind(kind).handoff(
                    Handoff::new("r", Expect::new("published", move || published.get()))
                        .step("do it", Some("target"))
                        .timeout(Duration::from_secs(30)),
                ),
            )
        } else {
            let ran = Rc::clone(&self.ran);
            let page = Rc::clone(&self.page);
            let mut action = Action::<Named>::new(id, "test")
                .kind(kind)
                .confirm(confirm)
                .consequence(move |_| format!("page {}", page.get()))
                .run(move |p: Named| {
                    let ran = Rc::clone(&ran);
                    async move {
                        ran.borrow_mut().push(p.name);
                        Ok::<_, String>(())
                    }
                });
            if id == "undo" {
                action = action.reversal();
            }
            if other_way {
                // Another declaration under the same id: asked twice.
                action = action.confirm_twice(|_| "sure?".into());
            }
            self.exec.register(action)
        };
        self.regs[i] = Some(reg.expect("registers"));
    }

    fn take(&mut self, step: Step) {
        match step {
            // Settlements are counted once, from the executor's queue, which reports
            // every one (the returned step repeats it for convenience).
            Step::Settled(_) => {}
            Step::Approval(card) => self.cards.push(*card),
            Step::Handoff(_) | Step::Question(_) => {}
            Step::Perform(job) => self.jobs.push(job),
        }
    }

    fn drain(&mut self) {
        for s in drain(&self.exec) {
            self.settled.push(s.call);
        }
    }

    fn apply(&mut self, op: Op) {
        let now = at(self.now);
        match op {
            Op::Register(i) => self.register(i),
            Op::Submit(i) => {
                let tag = format!("t{}", self.next_tag);
                self.next_tag += 1;
                let id = ACTIONS[i].0;
                let granted = self.exec.grants().iter().any(|g| g.action == id);
                let step = self
                    .exec
                    .submit(Call::new("tc", id, format!(r#"{{"name":"{tag}"}}"#)), now)
                    .unwrap();
                let call = step_call(&step);
                self.submitted.push(call);
                self.tag_call.insert(tag, call);
                self.call_action.insert(call, i);
                if granted {
                    self.granted_at_submit.insert(call);
                }
                self.call_epoch.insert(call, self.epoch[i]);
                self.take(step);
            }
            Op::SubmitUnknown => {
                let step = self
                    .exec
                    .submit(Call::new("tc", "invented", "{}"), now)
                    .unwrap();
                self.submitted.push(step_call(&step));
                self.take(step);
            }
            Op::Approve(k, session) => {
                let pending = self.exec.approvals();
                if let Some(card) = pending.get(k % pending.len().max(1)) {
                    let gesture = if session {
                        Gesture::AllowForSession
                    } else {
                        Gesture::AllowOnce
                    };
                    if let Ok(step) = self.exec.approve(card.countersign(gesture), now) {
                        if let Step::Perform(job) = &step {
                            assert_eq!(job.call(), card.call, "a ticket ran another call");
                            assert_eq!(
                                card.consequence,
                                Some(format!("page {}", self.page.get())),
                                "a card that went stale was approved into a run"
                            );
                            self.approved.insert(card.call, (gesture, card.policy));
                        }
                        if gesture == Gesture::AllowForSession
                            && !matches!(step, Step::Approval(ref c) if c.round == card.round)
                        {
                            let i = self.call_action[&card.call];
                            self.granted_in.insert((i, self.call_epoch[&card.call]));
                        }
                        self.take(step);
                    }
                }
            }
            Op::Replay(k) => {
                // Any card ever shown, pressed again: only a still-pending one may pass.
                if let Some(card) = self.cards.get(k % self.cards.len().max(1)).cloned() {
                    let pending = self.exec.approvals().iter().any(|c| c.call == card.call);
                    if let Ok(step) = self.exec.approve(card.countersign(Gesture::AllowOnce), now) {
                        assert!(pending, "a settled card approved again");
                        if let Step::Perform(job) = &step {
                            assert_eq!(job.call(), card.call);
                            self.approved
                                .insert(card.call, (Gesture::AllowOnce, card.policy));
                        }
                        self.take(step);
                    }
                }
            }
            Op::Deny(k) => {
                let pending = self.exec.approvals();
                if let Some(card) = pending.get(k % pending.len().max(1)) {
                    self.exec
                        .deny(card.call, None, now)
                        .expect("pending card can be denied");
                }
            }
            Op::Advance(ms) => self.now += ms,
            Op::Timeout => {
                self.exec.handle_timeout(now);
            }
            Op::Unregister(i) => {
                self.regs[i] = None;
            }
            Op::RevokeAll => {
                for g in self.exec.grants() {
                    assert!(self.exec.revoke(g.id).unwrap());
                }
            }
            Op::HandoffDone(k, ok) => {
                let open = self.exec.handoffs();
                if let Some(h) = open.get(k % open.len().max(1)) {
                    self.published.set(ok);
                    self.exec
                        .handoff_done(h.call, now)
                        .expect("waiting handoff");
                    self.published.set(false);
                }
            }
            Op::HandoffCancel(k) => {
                let open = self.exec.handoffs();
                if let Some(h) = open.get(k % open.len().max(1)) {
                    self.exec
                        .handoff_cancel(h.call, now)
                        .expect("waiting handoff");
                }
            }
            Op::RunJob(k) => {
                if !self.jobs.is_empty() {
                    let job = self.jobs.remove(k % self.jobs.len());
                    let done = pollster::block_on(job.run());
                    let _ = self.exec.complete(done, now);
                }
            }
            Op::SetMode(mode) => self.exec.set_mode(mode).unwrap(),
            Op::Touch => self.page.set(self.page.get() + 1),
            Op::Redeclare(i) => {
                self.regs[i] = None;
                self.redeclared[i] = !self.redeclared[i];
                self.register(i);
            }
            Op::LoadPolicy(i) => {
                let _ = self.exec.load_policy(POLICIES[i]);
            }
            Op::DropJob(k) => {
                if !self.jobs.is_empty() {
                    drop(self.jobs.remove(k % self.jobs.len()));
                }
            }
        }
        self.drain();
    }

    fn check_runs(&self) {
        let ran = self.ran.borrow();
        let unique: BTreeSet<&String> = ran.iter().collect();
        assert_eq!(unique.len(), ran.len(), "a call ran twice");
        for tag in ran.iter() {
            let call = self.tag_call[tag];
            let first = &for_call(&self.audit, call)[0];
            // The level that applied is the one in force when the call was decided
            // (declaration, or the policy file's override), as its first record says.
            // A card redrawn after the policy file changed carries the new level, and the
            // person countersigned that card: judge an approved call by what it showed.
            let policy = match self.approved.get(&call) {
                Some((_, shown)) => *shown,
                None => first.policy.expect("a call that ran was resolved"),
            };
            // Only the mode the call was decided in may stand in for a person.
            let by_mode = first.decided_by == Decider::Mode;
            match policy {
                ApprovalPolicy::None => assert_eq!(first.event, AuditEvent::Allowed),
                ApprovalPolicy::Ask => {
                    assert!(
                        self.approved.contains_key(&call)
                            || (self.granted_at_submit.contains(&call)
                                && first.decided_by == Decider::SessionGrant)
                            || (by_mode && matches!(first.mode, Mode::Unattended | Mode::Bypass)),
                        "an Ask call ran without a ticket or grant"
                    );
                    if first.decided_by == Decider::SessionGrant {
                        let i = self.call_action[&call];
                        assert!(
                            self.granted_in.contains(&(i, self.call_epoch[&call])),
                            "a grant covered a call of another registration"
                        );
                    }
                }
                ApprovalPolicy::AskAlways => {
                    assert!(
                        matches!(self.approved.get(&call), Some((Gesture::AllowOnce, _)))
                            || (by_mode && first.mode == Mode::Bypass),
                        "AskAlways ran without its own ticket"
                    );
                    assert_ne!(
                        first.decided_by,
                        Decider::SessionGrant,
                        "AskAlways ran on a grant"
                    );
                }
            }
            assert!(
                first.mode != Mode::Away
                    || matches!(first.decided_by, Decider::Policy | Decider::SessionGrant),
                "something gated ran while away"
            );
        }
        assert!(
            self.exec
                .grants()
                .iter()
                .all(|g| g.action == "ask" || g.action == "undo"),
            "a grant for a non-Ask action"
        );
    }

    fn finish(mut self) {
        let jobs = std::mem::take(&mut self.jobs);
        for job in jobs {
            let done = pollster::block_on(job.run());
            let _ = self.exec.complete(done, at(self.now));
        }
        self.exec.shutdown(at(self.now));
        self.drain();
        self.check_runs();
        assert_eq!(self.exec.live_calls(), 0);
        let mut settled = self.settled.clone();
        settled.sort();
        let mut submitted = self.submitted.clone();
        submitted.sort();
        assert_eq!(settled, submitted, "every call settles exactly once");
        let records = self.audit.records();
        for call in &submitted {
            let terminal = records
                .iter()
                .filter(|r| r.call == call.get() && r.is_terminal())
                .count();
            assert_eq!(terminal, 1, "call {call} has {terminal} terminal records");
        }
    }
}

fn step_call(step: &Step) -> CallId {
    match step {
        Step::Settled(s) => s.call,
        Step::Approval(c) => c.call,
        Step::Handoff(h) => h.call,
        Step::Question(q) => q.call,
        Step::Perform(j) => j.call(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Over random sequences of calls, approvals, denials, timeouts, unregisters and
    /// handoff events:
    /// - nothing with policy `Ask`/`AskAlways` runs without a ticket minted from its own
    ///   card (or, for `Ask` only, a session grant that existed when it arrived);
    /// - `AskAlways` never runs on a grant;
    /// - under every mode: away lets nothing gated run, unattended stands in for a person
    ///   only on `Ask`, bypass never turns a handoff into a run;
    /// - every call ends in exactly one terminal outcome and one terminal audit record;
    /// - a card approved after the page changed under it never runs: what runs is what the
    ///   countersigned card showed (the `ask` action's consequence reads the page);
    /// - a grant only covers calls of the registration it was made for, even when an
    ///   action is registered again under the same id with another declaration;
    /// - reversals are never lowered by a mode, and a broken-then-repaired file is followed.
    #[test]
    fn no_gated_call_runs_without_its_ticket_and_every_call_settles_once(ops in prop::collection::vec(op(), 1..60)) {
        let mut sim = Sim::new();
        for op in ops {
            sim.apply(op);
            sim.check_runs();
        }
        sim.finish();
    }
}
