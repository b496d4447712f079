//! A person edits a call's arguments: the edit is a new card with the diff, approves
//! nothing by itself, is checked as the action's own params, and can expire like any
//! card.

use std::time::Duration;

use countersign_testing::{code, tick};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

use super::harness::{disabled, input_value, mount, set_select, Setup};

#[wasm_bindgen_test]
async fn an_edit_makes_a_new_card_with_the_diff_and_only_its_approval_runs() {
    let page = mount(Setup::default());
    let pending = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    let original = page.q(".cs-card").unwrap().get_attribute("data-call");
    page.click(".cs-edit-open");
    tick().await;
    assert_eq!(input_value(&page, "input[data-field='name']"), "Apollo");
    assert!(
        page.q(".cs-allow-once").unwrap().offset_parent().is_none(),
        "no Allow on screen while editing"
    );
    page.type_into("input[data-field='name']", "Artemis");
    tick().await;
    assert!(!disabled(&page, ".cs-edit-submit"));
    page.click(".cs-edit-submit");
    tick().await;
    // A new card for the edited call, with what changed; nothing ran.
    assert!(page.runs().is_empty(), "an edit approves nothing");
    assert_ne!(
        page.q(".cs-card").unwrap().get_attribute("data-call"),
        original
    );
    let diff = page.text(".cs-card__edited");
    assert!(
        diff.contains("\"Apollo\"") && diff.contains("\"Artemis\""),
        "{diff}"
    );
    assert!(page.text(".cs-card__consequence").contains("Artemis"));
    assert!(page.q(".cs-edit").is_none(), "the form closed");
    page.click(".cs-allow-once");
    let settled = pending.await;
    tick().await;
    assert_eq!(code(&settled), "OK");
    assert_eq!(page.runs(), ["save:Artemis"]);
    let told = settled.to_model_json();
    assert_eq!(told["edited_by_person"]["changes"][0]["you_sent"], "Apollo");
    assert_eq!(
        told["edited_by_person"]["changes"][0]["person_set"],
        "Artemis"
    );
    // The original ended as superseded, the edit as settled: one terminal record each.
    let events: Vec<_> = page
        .cs
        .audit()
        .records()
        .iter()
        .filter(|r| r.is_terminal())
        .map(|r| r.event)
        .collect();
    assert_eq!(
        events,
        [
            countersign::audit::AuditEvent::Superseded,
            countersign::audit::AuditEvent::Settled
        ]
    );
}

#[wasm_bindgen_test]
async fn an_edit_that_fails_validation_shows_why_and_changes_nothing() {
    let page = mount(Setup::default());
    let pending = page.call("rename", r#"{"name":"Apollo"}"#);
    tick().await;
    let card = page.q(".cs-card").unwrap().get_attribute("data-call");
    let records = page.cs.audit().len();
    page.click(".cs-edit-open");
    tick().await;
    page.type_into("input[data-field='name']", "   ");
    tick().await;
    assert!(page
        .text(".cs-edit__error")
        .contains("the name cannot be empty"));
    assert!(disabled(&page, ".cs-edit-submit"));
    page.click(".cs-edit-submit");
    tick().await;
    assert_eq!(
        page.q(".cs-card").unwrap().get_attribute("data-call"),
        card,
        "the same card waits"
    );
    assert_eq!(page.cs.audit().len(), records, "nothing recorded");
    // Back to the model's own value: "nothing was changed", still nothing recorded.
    page.type_into("input[data-field='name']", "Apollo");
    tick().await;
    page.click(".cs-edit-submit");
    tick().await;
    assert!(page.text(".cs-edit__error").contains("Nothing was changed"));
    assert_eq!(page.cs.audit().len(), records);
    page.click(".cs-edit-cancel");
    tick().await;
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(page.runs(), ["rename:Apollo"]);
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn a_card_that_expires_during_an_edit_runs_nothing() {
    let page = mount(Setup {
        approval_timeout: Some(Duration::from_millis(1_200)),
        ..Setup::default()
    });
    let pending = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    page.click(".cs-edit-open");
    tick().await;
    page.type_into("input[data-field='name']", "Artemis");
    let settled = pending.await; // the person is still typing
    tick().await;
    assert_eq!(code(&settled), "APPROVAL_TIMEOUT");
    assert!(page.q(".cs-edit").is_none() && page.q(".cs-card").is_none());
    assert!(page.runs().is_empty());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn the_edit_form_expresses_numbers_booleans_enums_and_optional_fields() {
    let page = mount(Setup::default());
    let pending = page.call(
        "shaped",
        r#"{"name":"a","count":2,"public":false,"colour":"red","note":"n"}"#,
    );
    tick().await;
    page.click(".cs-edit-open");
    tick().await;
    assert_eq!(input_value(&page, "input[data-field='count']"), "2");
    assert!(
        page.q("select[data-field='colour']").is_some(),
        "an enum is a choice"
    );
    // A number field that is not a number: said, and nothing can be submitted.
    page.type_into("input[data-field='count']", "two");
    tick().await;
    assert!(page
        .text(".cs-edit__error")
        .contains("count is not a number"));
    assert!(disabled(&page, ".cs-edit-submit"));
    page.type_into("input[data-field='count']", "7");
    let public: web_sys::HtmlInputElement = page
        .q("input[data-field='public']")
        .unwrap()
        .unchecked_into();
    public.click();
    set_select(&page, "select[data-field='colour']", "blue");
    // An optional field left empty is omitted.
    page.type_into("input[data-field='note']", "");
    tick().await;
    page.click(".cs-edit-submit");
    tick().await;
    let fields: Vec<String> = page
        .all(".cs-edit__diff li .cs-label")
        .iter()
        .filter_map(|e| e.text_content())
        .collect();
    assert_eq!(fields, ["colour", "count", "note", "public"]);
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(
        page.runs(),
        [r#"shaped:{"name":"a","count":7,"public":true,"colour":"blue"}"#]
    );
}

#[wasm_bindgen_test]
async fn arguments_the_form_cannot_express_are_edited_as_json_checked_as_typed() {
    let page = mount(Setup::default());
    let pending = page.call("tagged", r#"{"tags":["a"]}"#);
    tick().await;
    page.click(".cs-edit-open");
    tick().await;
    let json = |text: &str| {
        let area: web_sys::HtmlTextAreaElement = page.q(".cs-edit__json").unwrap().unchecked_into();
        area.set_value(text);
        area.dispatch_event(&web_sys::Event::new("input").unwrap())
            .unwrap();
    };
    for bad in [r#"{"tags":"a"}"#, "{", r#"{"tags":[],"approved":true}"#] {
        json(bad);
        tick().await;
        assert!(!page.text(".cs-edit__error").is_empty(), "{bad}");
        assert!(disabled(&page, ".cs-edit-submit"), "{bad}");
    }
    json(r#"{"tags":["a","b"]}"#);
    tick().await;
    assert!(page.text(".cs-edit__error").is_empty());
    page.click(".cs-edit-submit");
    tick().await;
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(page.runs(), [r#"tagged:{"tags":["a","b"]}"#]);
}
