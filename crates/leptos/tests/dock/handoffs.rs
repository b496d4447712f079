//! A handoff: the person does the steps on the page itself, the current step is
//! highlighted, and the model gets a receipt only once the page shows it was done;
//! otherwise failed, cancelled or timed out.

use std::time::Duration;

use countersign_testing::{code, tick};
use wasm_bindgen_test::*;

use super::harness::{mount, Setup};

#[wasm_bindgen_test]
async fn a_handoff_gives_a_receipt_only_after_expect_passes_and_highlights_the_current_step() {
    let page = mount(Setup::default());
    let pending = page.call("publish", "{}");
    tick().await;
    assert!(
        page.q(".cs-card").is_none(),
        "a handoff is never also a card"
    );
    assert_eq!(page.all(".cs-steps li").len(), 2);
    assert_eq!(
        page.highlighted(),
        ["code"],
        "step 1 points at the code field"
    );
    assert!(
        page.text(".cs-countdown").contains("1:00") || page.text(".cs-countdown").contains("0:59")
    );
    page.click(".cs-handoff-next");
    tick().await;
    assert_eq!(
        page.highlighted(),
        ["publish"],
        "step 2 points at the button, not the field"
    );
    // The person does the step: the executor never filled or clicked anything.
    assert_eq!(page.text("#status"), "draft");
    page.type_into("#code", "246810");
    tick().await;
    page.click("#publish");
    tick().await;
    assert_eq!(page.text("#status"), "published");
    page.click(".cs-handoff-done");
    let settled = pending.await;
    tick().await;
    assert_eq!(code(&settled), "OK");
    assert_eq!(
        settled.outcome.to_model_json()["receipt"]["done_by"],
        "person"
    );
    assert!(page.q(".cs-handoff").is_none());
    assert!(
        page.highlighted().is_empty(),
        "nothing stays highlighted after the handoff"
    );
    assert_eq!(page.terminal_records(), 1);
}

/// One early press loses nothing: "I've done it" before the step is done says "not yet"
/// and the handoff stays; the step done a moment later completes it, and the model
/// hears one outcome.
#[wasm_bindgen_test]
async fn done_too_early_says_not_yet_and_the_handoff_stays() {
    let page = mount(Setup::default());
    let pending = page.call("publish", "{}");
    tick().await;
    page.type_into("#code", "000000"); // a wrong code: Publish does nothing
    page.click("#publish");
    tick().await;
    page.click(".cs-handoff-done");
    tick().await;
    assert_eq!(page.text("#status"), "draft");
    assert!(
        page.q(".cs-handoff").is_some(),
        "the handoff is still there"
    );
    assert!(
        page.text(".cs-handoff__not-yet").starts_with("Not yet"),
        "{}",
        page.text(".cs-handoff")
    );
    assert_eq!(page.terminal_records(), 0, "the model hears nothing yet");
    assert!(page
        .q(".cs-msg--outcome[data-code='HANDOFF_FAILED']")
        .is_none());
    page.type_into("#code", "246810");
    page.click("#publish");
    tick().await;
    page.click(".cs-handoff-done");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(page.text("#status"), "published");
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn cancel_gives_handoff_cancelled() {
    let page = mount(Setup::default());
    let pending = page.call("publish", "{}");
    tick().await;
    page.click(".cs-handoff-cancel");
    assert_eq!(code(&pending.await), "HANDOFF_CANCELLED");
    tick().await;
    assert!(page.q(".cs-handoff").is_none());
    assert!(page.highlighted().is_empty());
}

#[wasm_bindgen_test]
async fn a_handoff_times_out_at_its_own_timeout() {
    let page = mount(Setup {
        handoff_timeout: Duration::from_millis(300),
        ..Setup::default()
    });
    let pending = page.call("publish", "{}");
    tick().await;
    assert!(page.q(".cs-handoff").is_some());
    let settled = pending.await; // the dock's timer fires; nobody clicks
    tick().await;
    assert_eq!(code(&settled), "HANDOFF_TIMEOUT");
    assert!(page.q(".cs-handoff").is_none());
    assert!(page.highlighted().is_empty());
}
