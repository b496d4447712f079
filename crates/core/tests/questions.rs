//! Asking the person a typed question: the answer must be of the declared type before
//! it reaches the model; declining and expiry are their own outcomes; nothing runs.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

mod common;

use common::{at, code, World};
use countersign::{
    Action, AnswerError, AuditEvent, DoneBy, NoParams, Outcome, Question, Reason, Step, TicketError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Workspace {
    Atlas,
    Apollo,
    Zeus,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Pick {
    /// The workspace to open.
    workspace: Workspace,
    /// How many days to look back (1 to 30).
    days: u32,
}

fn world() -> World {
    let mut w = World::new();
    let question = Question::checked::<Pick>("Which workspace, and how far back?", |p| {
        if (1..=30).contains(&p.days) {
            Ok(())
        } else {
            Err("days must be 1 to 30".into())
        }
    });
    w.regs.push(
        w.exec
            .register(Action::<NoParams>::new("pick", "Ask which workspace.").question(question))
            .unwrap(),
    );
    w
}

fn asked(w: &World) -> countersign::QuestionView {
    match w.call("pick", "{}", 0) {
        Step::Question(view) => *view,
        other => panic!("a question: {other:?}"),
    }
}

#[test]
fn a_valid_answer_is_the_result_and_only_words_from_the_declaration_are_shown() {
    let w = world();
    let view = asked(&w);
    assert_eq!(view.prompt, "Which workspace, and how far back?");
    assert_eq!(
        view.schema["properties"]["days"]["description"],
        "How many days to look back (1 to 30)."
    );
    assert_eq!(w.exec.questions().len(), 1);
    assert!(
        w.exec.approvals().is_empty(),
        "a question is not an approval card"
    );
    let settled = w
        .exec
        .answer(view.call, r#"{"workspace":"apollo","days":7}"#, at(5))
        .unwrap();
    assert_eq!(code(&settled), "OK");
    let Outcome::Done(receipt) = &settled.outcome else {
        panic!()
    };
    assert_eq!(receipt.done_by, DoneBy::Answer);
    assert_eq!(
        receipt.result,
        serde_json::json!({"workspace":"apollo","days":7})
    );
    let records = w.audit.for_call(view.call);
    assert_eq!(records[0].event, AuditEvent::Asked);
    assert_eq!(records[0].reason, Reason::Question);
    assert_eq!(records.last().unwrap().reason, Reason::Answered);
    assert_eq!(w.terminal(view.call).len(), 1);
    assert!(w.runs().is_empty());
}

#[test]
fn an_invalid_answer_changes_nothing_and_says_why() {
    let w = world();
    let view = asked(&w);
    let records = w.audit.len();
    let huge = format!(
        r#"{{"workspace":"atlas","days":1,"x":"{}"}}"#,
        "y".repeat(20_000)
    );
    for bad in [
        r#"{"workspace":"mars","days":7}"#,
        r#"{"workspace":"atlas","days":99}"#,
        r#"{"workspace":"atlas","days":-1}"#,
        r#"{"workspace":"atlas","days":7,"approved":true}"#,
        r#"{"workspace":"atlas"}"#,
        "not json",
        huge.as_str(),
    ] {
        match w.exec.answer(view.call, bad, at(5)) {
            Err(AnswerError::Invalid(why)) => assert!(!why.is_empty(), "{bad:.40}"),
            other => panic!("{bad:.40}: {other:?}"),
        }
    }
    assert!(w
        .exec
        .answer(view.call, r#"{"workspace":"atlas","days":99}"#, at(5))
        .unwrap_err()
        .to_string()
        .contains("1 to 30"));
    assert_eq!(w.audit.len(), records, "no record for a refused answer");
    assert_eq!(w.exec.questions().len(), 1, "the question still waits");
    assert!(w.exec.drain_settled().is_empty());
}

#[test]
fn declining_and_expiry_are_their_own_outcomes() {
    let w = world();
    let view = asked(&w);
    let declined = w.exec.decline_question(view.call, at(1)).unwrap();
    assert_eq!(code(&declined), "QUESTION_DECLINED");
    assert_eq!(w.terminal(view.call).len(), 1);
    assert_eq!(
        w.exec
            .answer(view.call, r#"{"workspace":"atlas","days":1}"#, at(2))
            .unwrap_err(),
        AnswerError::Ticket(TicketError::NotPending)
    );
    let late = asked(&w);
    let expired = w.exec.handle_timeout(late.deadline);
    assert_eq!(expired.len(), 1);
    assert_eq!(code(&expired[0]), "APPROVAL_TIMEOUT");
    assert_eq!(
        w.exec
            .answer(
                late.call,
                r#"{"workspace":"atlas","days":1}"#,
                at(late.deadline.as_millis() + 1)
            )
            .unwrap_err(),
        AnswerError::Ticket(TicketError::NotPending)
    );
}

#[test]
fn a_question_is_never_approved_edited_or_answered_by_a_ticket() {
    let w = world();
    let view = asked(&w);
    assert!(w.exec.deny(view.call, None, at(1)).is_err());
    assert!(w.exec.edit(view.call, r#"{}"#, at(1)).is_err());
    assert!(w.exec.handoff_done(view.call, at(1)).is_err());
    assert_eq!(w.exec.questions().len(), 1);
}

#[test]
fn a_question_with_a_run_is_refused_at_registration() {
    let w = World::new();
    let refused = w
        .exec
        .register(
            w.action("both", countersign::Kind::Write, countersign::Confirm::Ask)
                .question(Question::new::<Pick>("?")),
        )
        .unwrap_err();
    assert_eq!(
        refused,
        countersign::RegisterError::QuestionAndMore("both".into())
    );
}
