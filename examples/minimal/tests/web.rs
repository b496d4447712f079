//! The minimal app in headless Chromium: asked through the dock's chat, approved on the
//! card, and nothing added before that.
#![cfg(target_arch = "wasm32")]
#![allow(missing_docs, clippy::unwrap_used)]

use countersign_leptos::CountersignOptions;
use countersign_testing::{mount, tick};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn the_assistant_asks_and_nothing_is_added_until_the_person_allows_it() {
    // The test clicks with element.click(), which is no person's gesture: the app's
    // Countersign is told to take it (a real page never is).
    let page = mount(CountersignOptions::default(), || {
        minimal::app(CountersignOptions {
            trust_script_clicks: true,
            ..CountersignOptions::default()
        })
    });
    tick().await;
    assert!(page.text(".cs-empty").contains("add buy milk"));
    page.say("add buy milk").await;
    assert!(page.text(".cs-card__consequence").contains("buy milk"));
    assert_eq!(
        page.all("#todos li").len(),
        0,
        "nothing before the countersignature"
    );
    page.allow_once().await;
    let items: Vec<String> = page
        .all("#todos li")
        .iter()
        .map(|li| li.text_content().unwrap_or_default())
        .collect();
    assert_eq!(items, ["buy milk"]);
    // The app provides its own Countersign (the harness's sits outside it): the dock's
    // log says how the call ended, once.
    assert_eq!(page.all(".cs-msg--outcome.cs-ok").len(), 1);
    assert!(page.q(".cs-card").is_none());
}
