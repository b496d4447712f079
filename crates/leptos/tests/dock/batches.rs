//! The calls of one model turn, asked together: counted, decided one by one or allowed
//! all at once when every remaining item may share it, dependent items in call order.

use countersign_testing::{code, tick};
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{mount, Setup};

#[wasm_bindgen_test]
async fn a_batch_counts_its_items_and_offers_allow_all_only_when_every_remaining_item_may_share_it()
{
    let page = mount(Setup::default());
    // An AskAlways item in the batch: no "allow all"; each item decided on its own.
    let results = page.batch(&[
        ("save", r#"{"name":"a"}"#),
        ("archive", r#"{"name":"b"}"#),
        ("rewrite", r#"{"name":"c"}"#),
    ]);
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "1 of 3");
    assert!(
        page.q(".cs-allow-batch").is_none(),
        "offered with an AskAlways item left"
    );
    page.click(".cs-allow-once");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "2 of 3");
    page.click(".cs-deny");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "3 of 3");
    assert!(
        page.q(".cs-allow-batch").is_none(),
        "one item left is allowed on its own"
    );
    page.click(".cs-allow-once");
    let results = results.await;
    let codes: Vec<_> = results.iter().map(code).collect();
    assert_eq!(codes, ["OK", "PERMISSION_DENIED", "OK"]);
    let ids: Vec<_> = results.iter().map(|s| &*s.tool_call_id).collect();
    assert_eq!(ids, ["tc0", "tc1", "tc2"], "results in call order");
    // Two plain Ask items: "allow all" lists both, and allows exactly those.
    let results = page.batch(&[("save", r#"{"name":"x"}"#), ("rewrite", r#"{"name":"y"}"#)]);
    tick().await;
    let offer = page.text(".cs-batch");
    assert!(offer.contains("`x`") && offer.contains("`y`"), "{offer}");
    // The one gesture covers what each card previews, so the list shows it too.
    assert_eq!(page.text(".cs-batch .cs-diff__add"), "+ title: y\n");
    assert!(page
        .text(".cs-batch .cs-counts")
        .contains("files touched in y: 1"));
    page.click(".cs-allow-batch");
    let codes: Vec<_> = results.await.iter().map(code).collect();
    assert_eq!(codes, ["OK", "OK"]);
    let in_batch = page
        .cs
        .audit()
        .records()
        .iter()
        .filter(|r| r.reason == countersign::Reason::AllowedInBatch)
        .count();
    assert_eq!(in_batch, 2);
    // It never reaches a later turn.
    let later = page.call("save", r#"{"name":"z"}"#);
    tick().await;
    assert!(page.q(".cs-card").is_some(), "a later call asks again");
    assert_eq!(page.runs(), ["save:a", "rewrite:c", "save:x", "rewrite:y"]);
    page.click(".cs-deny");
    assert_eq!(code(&later.await), "PERMISSION_DENIED");
}

#[wasm_bindgen_test]
async fn dependent_items_run_in_call_order_and_a_denial_cancels_no_other() {
    let page = mount(Setup::default());
    let results = page.batch(&[
        ("save", r#"{"name":"1"}"#),
        ("rewrite", r#"{"name":"r"}"#),
        ("save", r#"{"name":"2"}"#),
    ]);
    tick().await;
    // The second `save` waits for the first: not even drawn yet.
    assert_eq!(page.cs.dock().approvals.get_untracked().len(), 2);
    assert_eq!(page.text(".cs-card__count"), "1 of 3");
    page.click(".cs-deny");
    tick().await;
    // The denial cancelled nothing else: the dependent item is drawn now.
    assert_eq!(page.cs.dock().approvals.get_untracked().len(), 2);
    page.click(".cs-allow-once");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "3 of 3");
    // Edited, it keeps its place in the batch.
    page.click(".cs-edit-open");
    tick().await;
    page.type_into("input[data-field='name']", "two");
    tick().await;
    page.click(".cs-edit-submit");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "3 of 3");
    page.click(".cs-allow-once");
    let results = results.await;
    let codes: Vec<_> = results.iter().map(code).collect();
    assert_eq!(codes, ["PERMISSION_DENIED", "OK", "OK"]);
    assert!(results[2].edited.is_some());
    assert_eq!(page.runs(), ["rewrite:r", "save:two"]);
}

/// One "allow all" covers only what the person could read: each listed item shows its
/// own arguments (isolated and revealed, as on a card), even for an action with no
/// consequence, so a second call with other arguments cannot ride on the first.
#[wasm_bindgen_test]
async fn allow_all_lists_each_item_with_its_own_arguments() {
    let page = mount(Setup::default());
    let results = page.batch(&[
        ("tagged", r#"{"tags":["weekly notes"]}"#),
        (
            "shaped",
            r#"{"name":"all private notes of every user\u202e","count":1,"public":true,"colour":"red"}"#,
        ),
    ]);
    tick().await;
    let items = page.all(".cs-batch__items li");
    assert_eq!(items.len(), 2);
    let first = items[0].text_content().unwrap_or_default();
    let second = items[1].text_content().unwrap_or_default();
    assert!(first.contains("\"weekly notes\""), "{first}");
    assert!(!first.contains("private"), "{first}");
    assert!(
        second.contains("all private notes of every user\\u{202e}"),
        "the second item's arguments, revealed: {second}"
    );
    assert_eq!(page.all(".cs-batch .cs-card__args").len(), 2);
    page.click(".cs-allow-batch");
    let codes: Vec<_> = results.await.iter().map(code).collect();
    assert_eq!(codes, ["OK", "OK"]);
    assert_eq!(
        page.runs(),
        [
            r#"tagged:{"tags":["weekly notes"]}"#,
            "shaped:{\"name\":\"all private notes of every user\u{202e}\",\"count\":1,\"public\":true,\"colour\":\"red\"}"
        ]
    );
}
