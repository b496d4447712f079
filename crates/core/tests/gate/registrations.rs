//! An action is only what its live registration declares; a new one inherits nothing.

use countersign::{
    action::NoParams, executor::RegisterError, ticket::TicketError, Action, Confirm, Expect,
    Gesture, Handoff, Kind, Step,
};

use crate::common::{at, code, drain, drive, refused, World};

#[test]
fn registration_refuses_declarations_that_could_never_work() {
    let w = World::new();
    let bad_ids = ["", "has space", "ünï", &"x".repeat(65), "a.b"];
    for id in bad_ids {
        let err = w
            .exec
            .register(w.action(id, Kind::Read, Confirm::Unset))
            .unwrap_err();
        assert!(matches!(err, RegisterError::InvalidId(_)), "{id:?}");
    }
    let nothing = Action::<NoParams>::new("nothing", "does nothing");
    assert_eq!(
        w.exec.register(nothing).unwrap_err(),
        RegisterError::NothingToDo("nothing".into())
    );
    let both = w
        .action("both", Kind::Danger, Confirm::Unset)
        .handoff(Handoff::new("r", Expect::new("e", || true)).step("s", None));
    assert_eq!(
        w.exec.register(both).unwrap_err(),
        RegisterError::RunAndHandoff("both".into())
    );
    let stepless = Action::<NoParams>::new("stepless", "x")
        .handoff(Handoff::new("r", Expect::new("e", || true)));
    assert_eq!(
        w.exec.register(stepless).unwrap_err(),
        RegisterError::HandoffWithoutSteps("stepless".into())
    );
}

#[test]
fn a_stale_registration_handle_does_not_remove_a_newer_registration() {
    let mut w = World::new();
    w.add(w.action("save", Kind::Write, Confirm::Unset));
    let old = w.regs.pop().unwrap();
    old.unregister();
    w.add(w.action("save", Kind::Write, Confirm::Unset));
    assert_eq!(w.exec.action_ids(), ["save"]);
    assert_eq!(
        w.exec
            .register(w.action("save", Kind::Write, Confirm::Unset))
            .unwrap_err(),
        RegisterError::Duplicate("save".into())
    );
}

#[test]
fn unregistering_while_pending_settles_unavailable_and_never_runs() {
    let mut w = World::new();
    w.add(w.action("archive", Kind::Danger, Confirm::Unset));
    let card = w.card("archive", r#"{"name":"x"}"#, 0);
    drop(w.regs.pop()); // the component unmounts
    let settled = drain(&w.exec);
    assert_eq!(settled.len(), 1);
    assert_eq!(code(&settled[0]), "UNAVAILABLE");
    assert!(w.exec.approvals().is_empty(), "the card is gone");
    assert_eq!(
        w.exec
            .approve(card.countersign(Gesture::AllowOnce), at(1))
            .unwrap_err(),
        TicketError::NotPending
    );
    assert_eq!(w.terminal(card.call).len(), 1);
    assert!(w.runs().is_empty());
    // The id is free again, and the projection no longer lists it.
    assert!(w.exec.projection().is_empty());
    assert_eq!(
        refused(&w, "archive", r#"{"name":"x"}"#).0,
        "UNKNOWN_ACTION"
    );
}

/// Registered again with the same id while a job runs: the old job's completion does
/// not settle anything of the new registration, and the new one inherits no grant.
#[test]
fn a_job_of_an_old_registration_completes_once() {
    let w = World::new();
    let reg = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Unset))
        .unwrap();
    let Step::Perform(job) = w.call("save", r#"{"name":"a"}"#, 0) else {
        panic!()
    };
    reg.unregister();
    let _again = w
        .exec
        .register(w.action("save", Kind::Write, Confirm::Ask))
        .unwrap();
    let s = drive(&w.exec, Step::Perform(job), 1).unwrap();
    assert_eq!(code(&s), "OK");
    assert_eq!(w.terminal(s.call).len(), 1);
    assert!(matches!(
        w.call("save", r#"{"name":"b"}"#, 2),
        Step::Approval(_)
    ));
}
