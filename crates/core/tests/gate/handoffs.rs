//! A handoff ends once, by the person or by its deadline; deadlines never wrap.

use std::time::Duration;

use std::cell::Cell;
use std::rc::Rc;

use countersign::executor::HandoffView;
use countersign::{Action, CallId, Expect, Handoff, Kind, Step, Timestamp};

use crate::common::{at, code, Named, World};

const MIN: Duration = Duration::from_secs(60);

/// A world with `by_hand`, whose handoff is `h`, and the handoff waiting for the person.
fn waiting(h: Handoff) -> (World, HandoffView) {
    let mut w = World::new();
    w.add(
        Action::<Named>::new("by_hand", "the person does it")
            .kind(Kind::Write)
            .handoff(h),
    );
    let Step::Handoff(view) = w.call("by_hand", r#"{"name":"a"}"#, 0) else {
        panic!("a handoff waits for the person")
    };
    (w, *view)
}

/// A world with `by_hand`: a handoff of `steps` steps, one minute long, whose
/// expectation is `holds`; and the call waiting for the person.
fn handoff(steps: usize) -> (World, Rc<Cell<bool>>, CallId) {
    let holds = Rc::new(Cell::new(false));
    let read = Rc::clone(&holds);
    let mut h = Handoff::new("r", Expect::new("e", move || read.get())).timeout(MIN);
    for i in 0..steps {
        h = h.step(format!("step {i}"), None);
    }
    let (w, view) = waiting(h);
    (w, holds, view.call)
}

fn view(w: &World) -> Option<HandoffView> {
    w.exec.handoffs().into_iter().next()
}

#[test]
fn done_with_the_expectation_holding_completes() {
    let (w, holds, call) = handoff(2);
    holds.set(true);
    let settled = w.exec.handoff_done(call, at(10)).unwrap().unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.exec.poll_timeout(), None);
    assert_eq!(w.terminal(call).len(), 1);
}

#[test]
fn done_too_early_keeps_waiting_and_fails_only_at_the_deadline() {
    let (w, holds, call) = handoff(1);
    assert!(w.exec.handoff_done(call, at(10)).unwrap().is_none());
    assert_eq!(view(&w).unwrap().tries, 1);
    assert_eq!(w.exec.poll_timeout(), Some(at(60_000)));
    holds.set(true);
    assert_eq!(
        code(&w.exec.handoff_done(call, at(20)).unwrap().unwrap()),
        "OK"
    );
    let (late, _, call) = handoff(1);
    assert!(late.exec.handoff_done(call, at(10)).unwrap().is_none());
    let settled = late.exec.handle_timeout(at(60_000));
    assert_eq!(
        settled.iter().map(code).collect::<Vec<_>>(),
        ["HANDOFF_FAILED"]
    );
    let (never, _, _) = handoff(1);
    let settled = never.exec.handle_timeout(at(60_000));
    assert_eq!(
        settled.iter().map(code).collect::<Vec<_>>(),
        ["HANDOFF_TIMEOUT"]
    );
}

#[test]
fn the_deadline_wins_over_a_late_done() {
    let (w, holds, call) = handoff(1);
    assert_eq!(w.exec.poll_timeout(), Some(at(60_000)));
    assert!(w.exec.handle_timeout(at(59_999)).is_empty());
    holds.set(true);
    let settled = w.exec.handoff_done(call, at(60_000)).unwrap().unwrap();
    assert_eq!(code(&settled), "HANDOFF_TIMEOUT");
    assert_eq!(w.terminal(call).len(), 1);
}

#[test]
fn an_ended_handoff_takes_no_later_event() {
    let (w, holds, call) = handoff(1);
    assert_eq!(
        code(&w.exec.handoff_cancel(call, at(1)).unwrap()),
        "HANDOFF_CANCELLED"
    );
    holds.set(true);
    assert!(w.exec.handoff_done(call, at(2)).is_err());
    assert!(w.exec.handle_timeout(at(1_000_000)).is_empty());
    assert!(view(&w).is_none());
    assert_eq!(w.terminal(call).len(), 1);
}

#[test]
fn the_current_step_moves_and_is_clamped() {
    let (w, _, call) = handoff(2);
    assert_eq!(view(&w).unwrap().current_step, Some(0));
    w.exec.show_step(call, 7).unwrap();
    assert_eq!(view(&w).unwrap().current_step, Some(1));
}

#[test]
fn the_default_timeout_is_five_minutes() {
    let (_, view) = waiting(Handoff::new("r", Expect::new("e", || true)).step("s", None));
    assert_eq!(view.deadline, at(300_000));
}

#[test]
fn adding_a_huge_duration_saturates_instead_of_wrapping() {
    let t = Timestamp::from_millis(u64::MAX - 1).saturating_add(Duration::from_secs(10));
    assert_eq!(t.as_millis(), u64::MAX);
}

#[test]
fn time_since_a_later_point_is_zero() {
    let early = Timestamp::from_millis(5);
    let late = Timestamp::from_millis(9);
    assert_eq!(early.saturating_since(late), Duration::ZERO);
    assert_eq!(late.saturating_since(early), Duration::from_millis(4));
}
