//! A handoff ends once, by the person or by its deadline; deadlines never wrap.

use std::time::Duration;

use countersign::handoff::{HandoffMachine, HandoffState};
use countersign::{Action, Expect, Handoff, Kind, Step, Timestamp};

use crate::common::{at, Named, World};

const MIN: Duration = Duration::from_secs(60);

#[test]
fn done_with_the_expectation_holding_completes() {
    let mut m = HandoffMachine::new(2, at(0), MIN);
    assert_eq!(m.done(at(10), true), HandoffState::Completed);
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn done_too_early_keeps_waiting_and_fails_only_at_the_deadline() {
    let mut m = HandoffMachine::new(1, at(0), MIN);
    assert_eq!(m.done(at(10), false), HandoffState::Waiting);
    assert_eq!(m.tries(), 1);
    assert_eq!(m.poll_timeout(), Some(at(60_000)));
    assert_eq!(m.done(at(20), true), HandoffState::Completed);
    let mut late = HandoffMachine::new(1, at(0), MIN);
    assert_eq!(late.done(at(10), false), HandoffState::Waiting);
    assert_eq!(late.handle_timeout(at(60_000)), HandoffState::Failed);
    let mut never = HandoffMachine::new(1, at(0), MIN);
    assert_eq!(never.handle_timeout(at(60_000)), HandoffState::TimedOut);
}

#[test]
fn the_deadline_wins_over_a_late_done() {
    let mut m = HandoffMachine::new(1, at(0), MIN);
    assert_eq!(m.poll_timeout(), Some(at(60_000)));
    assert_eq!(m.handle_timeout(at(59_999)), HandoffState::Waiting);
    assert_eq!(m.done(at(60_000), true), HandoffState::TimedOut);
}

#[test]
fn a_terminal_machine_ignores_later_events() {
    let mut m = HandoffMachine::new(1, at(0), MIN);
    m.cancel(at(1));
    assert_eq!(m.done(at(2), true), HandoffState::Cancelled);
    assert_eq!(m.handle_timeout(at(1_000_000)), HandoffState::Cancelled);
    assert_eq!(m.current_step(), None);
}

#[test]
fn the_current_step_moves_and_is_clamped() {
    let mut m = HandoffMachine::new(2, at(0), MIN);
    assert_eq!(m.current_step(), Some(0));
    m.show_step(7);
    assert_eq!(m.current_step(), Some(1));
    let mut none = HandoffMachine::new(0, at(0), MIN);
    none.show_step(3);
    assert_eq!(none.current_step(), None);
}

#[test]
fn the_default_timeout_is_five_minutes() {
    let mut w = World::new();
    let h = Handoff::new("r", Expect::new("e", || true)).step("s", None);
    w.add(
        Action::<Named>::new("by_hand", "the person does it")
            .kind(Kind::Write)
            .handoff(h),
    );
    let Step::Handoff(view) = w.call("by_hand", r#"{"name":"a"}"#, 0) else {
        panic!("a handoff waits for the person")
    };
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
