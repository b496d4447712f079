//! A question the page asks the person for the model: answered from a form of its
//! declared type, checked before it is sent, or declined.

use countersign_testing::{code, tick};
use wasm_bindgen_test::*;

use super::harness::{disabled, mount, set_select, Setup};

#[wasm_bindgen_test]
async fn a_question_is_answered_from_a_form_of_the_declared_type() {
    let page = mount(Setup::default());
    let pending = page.call("pick", "{}");
    tick().await;
    // Every word on the panel is the declaration's.
    assert_eq!(page.text(".cs-question .cs-card__title"), "Pick a colour");
    assert_eq!(
        page.text(".cs-question .cs-card__consequence"),
        "Which colour, and how many?"
    );
    assert!(page.text(".cs-question").contains("The colour you want."));
    assert!(
        page.q(".cs-card:not(.cs-question)").is_none(),
        "no approval card"
    );
    // Invalid input: said in the form, nothing answered.
    set_select(&page, "select[data-field='colour']", "blue");
    page.type_into("input[data-field='count']", "0");
    tick().await;
    assert!(page
        .text(".cs-question .cs-edit__error")
        .contains("at least one"));
    assert!(disabled(&page, ".cs-answer"));
    page.type_into("input[data-field='count']", "many");
    tick().await;
    assert!(page
        .text(".cs-question .cs-edit__error")
        .contains("not a number"));
    assert_eq!(page.terminal_records(), 0);
    page.type_into("input[data-field='count']", "3");
    tick().await;
    page.click(".cs-answer");
    let settled = pending.await;
    assert_eq!(code(&settled), "OK");
    let told = settled.to_model_json();
    assert_eq!(
        told["receipt"]["result"],
        serde_json::json!({"colour": "blue", "count": 3})
    );
    assert_eq!(told["receipt"]["done_by"], "answer");
    tick().await;
    assert!(page.q(".cs-question").is_none());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn declining_a_question_is_its_own_outcome() {
    let page = mount(Setup::default());
    let pending = page.call("pick", "{}");
    tick().await;
    page.click(".cs-decline-question");
    let settled = pending.await;
    assert_eq!(code(&settled), "QUESTION_DECLINED");
    tick().await;
    assert!(page.text(".cs-log").contains("Not answered: you declined"));
    assert_eq!(page.terminal_records(), 1);
}
