//! A panic in the page's code (a hook, a sink, a drop: possible only in a native host;
//! the page aborts) poisons the executor: the panic reaches the host, and from then on
//! nothing runs, no ticket is taken, no grant is made, and every operation says so.

use std::panic::{catch_unwind, AssertUnwindSafe};

use countersign::{
    ticket::RestoreError, ticket::TicketError, Blocked, Call, Confirm, Gesture, Kind, Step,
};

use crate::common::{at, World};

/// A world with `save` (asked) and `boom` (a write whose classifier panics).
fn world() -> World {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Ask));
    let boom = w
        .action("boom", Kind::Write, Confirm::Unset)
        .classify(|_| panic!("the page's classifier failed"));
    w.add(boom);
    w
}

/// Submits `boom`, whose hook panics: the panic reaches the host.
fn poison(w: &World) {
    let submitted = catch_unwind(AssertUnwindSafe(|| {
        w.exec
            .submit(Call::new("tc_boom", "boom", r#"{"name":"x"}"#), at(5))
    }));
    assert!(submitted.is_err(), "the hook's panic reaches the host");
    assert!(w.exec.is_poisoned());
}

#[test]
fn a_hook_that_panics_poisons_the_executor_and_nothing_runs_after() {
    let w = world();
    poison(&w);
    let records = w.audit.records().len();
    let later = w
        .exec
        .submit(Call::new("tc", "save", r#"{"name":"a"}"#), at(10));
    assert!(matches!(later, Err(Blocked::Poisoned)), "{later:?}");
    assert!(w.exec.approvals().is_empty(), "queries answer nothing");
    assert!(w.exec.projection().is_empty());
    assert!(w.runs().is_empty(), "run never called");
    assert_eq!(w.audit.records().len(), records, "nothing more recorded");
}

#[test]
fn a_card_drawn_before_the_panic_can_no_longer_be_approved() {
    let w = world();
    let card = w.card("save", r#"{"name":"a"}"#, 1);
    poison(&w);
    for gesture in [Gesture::AllowOnce, Gesture::AllowForSession] {
        let approved = w.exec.approve(card.countersign(gesture), at(10));
        assert!(
            matches!(approved, Err(TicketError::Blocked(Blocked::Poisoned))),
            "{approved:?}"
        );
    }
    assert!(w.runs().is_empty(), "run never called");
    assert!(w.exec.grants().is_empty(), "no grant made");
}

#[test]
fn a_job_made_before_the_panic_does_not_run() {
    let mut w = World::new();
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    let boom = w
        .action("boom", Kind::Write, Confirm::Unset)
        .classify(|_| panic!("the page's classifier failed"));
    w.add(boom);
    let Step::Perform(job) = w.call("note", r#"{"name":"a"}"#, 1) else {
        panic!("a write declared without confirm runs unasked");
    };
    poison(&w);
    let completion = pollster::block_on(job.run());
    assert!(!w.exec.complete(completion, at(10)), "nothing is settled");
    assert!(w.runs().is_empty(), "run never called");
}

#[test]
fn no_grant_is_restored_into_a_poisoned_executor() {
    let w = world();
    let card = w.card("save", r#"{"name":"a"}"#, 1);
    w.allow(&card, Gesture::AllowForSession, 2);
    let grant = w.exec.grants().pop().expect("a grant was made");
    poison(&w);
    let restored = w.exec.restore_grant(&grant.basis, at(10));
    assert!(
        matches!(restored, Err(RestoreError::Blocked(Blocked::Poisoned))),
        "{restored:?}"
    );
    assert_eq!(
        w.runs(),
        ["save:a"],
        "only the run approved before the panic"
    );
}

#[test]
fn a_sink_that_panics_poisons_the_executor_before_anything_runs() {
    use countersign::{
        audit::AuditEvent, AuditRecord, AuditSink, Config, Executor, MemoryAudit, Session,
    };
    let audit = MemoryAudit::new();
    let mut kept = audit.clone();
    let sink = move |r: AuditRecord| {
        if r.event == AuditEvent::Allowed {
            panic!("the disk is full");
        }
        kept.record(r);
    };
    let config = Config::new("test", Session::new("admin", ["workspace.write"]), [42; 32]);
    let mut w = World {
        exec: Executor::new(config, sink),
        audit,
        runs: std::rc::Rc::default(),
        regs: Vec::new(),
    };
    w.add(w.action("note", Kind::Write, Confirm::Unset));
    let submitted = catch_unwind(AssertUnwindSafe(|| {
        w.exec
            .submit(Call::new("tc", "note", r#"{"name":"a"}"#), at(1))
    }));
    assert!(submitted.is_err(), "the sink's panic reaches the host");
    assert!(w.exec.is_poisoned());
    assert!(
        w.runs().is_empty(),
        "no job was handed out: run never called"
    );
    let later = w
        .exec
        .submit(Call::new("tc2", "note", r#"{"name":"b"}"#), at(2));
    assert!(matches!(later, Err(Blocked::Poisoned)), "{later:?}");
}
