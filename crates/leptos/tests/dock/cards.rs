//! The approval card: what it shows (title, consequence, arguments, a dry-run preview,
//! hidden characters made visible, what changed since it was drawn), that only Allow
//! runs a call and only once, and that a card never outlives its action, its deadline
//! or the page.

use std::time::Duration;

use countersign_testing::{code, tick};
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{focused, mount, pagehide, press, Setup};

#[wasm_bindgen_test]
async fn none_runs_without_a_card() {
    let page = mount(Setup::default());
    let settled = page.call("note", r#"{"name":"a"}"#).await;
    tick().await;
    assert_eq!(code(&settled), "OK");
    assert_eq!(page.runs(), ["note:a"]);
    assert!(page.q(".cs-card").is_none());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn ask_shows_a_card_and_allow_runs_once() {
    let page = mount(Setup::default());
    let pending = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    assert!(page.runs().is_empty(), "ran before approval");
    assert_eq!(page.text(".cs-card__title"), "Title save");
    assert!(page
        .text(".cs-card__consequence")
        .contains("set the name to `Apollo`"));
    assert!(page.text(".cs-card__args").contains("\"Apollo\""));
    assert!(
        page.q(".cs-allow-session").is_some(),
        "Ask offers always-allow"
    );
    // Focus moved to the card.
    let active = focused();
    assert!(
        active.class_list().contains("cs-card"),
        "focus is on {}",
        active.class_name()
    );
    page.click(".cs-allow-once");
    let settled = pending.await;
    tick().await;
    assert_eq!(code(&settled), "OK");
    assert_eq!(page.runs(), ["save:Apollo"]);
    assert!(page.q(".cs-card").is_none(), "the card is gone");
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn ask_always_asks_every_time_and_offers_no_remember_option() {
    let page = mount(Setup::default());
    for round in 0..2 {
        let pending = page.call("archive", r#"{"name":"w"}"#);
        tick().await;
        assert!(page.q(".cs-card").is_some(), "round {round}: not asked");
        assert!(
            page.q(".cs-allow-session").is_none(),
            "round {round}: offered a remember option"
        );
        assert!(page.q(".cs-card--danger").is_some());
        page.click(".cs-allow-once");
        assert_eq!(code(&pending.await), "OK");
        tick().await;
    }
    assert_eq!(page.runs().len(), 2);
    assert!(page.q(".cs-grants").is_none());
}

#[wasm_bindgen_test]
async fn deny_never_runs_and_the_model_gets_permission_denied_with_the_reason() {
    let page = mount(Setup::default());
    let pending = page.call("archive", r#"{"name":"w"}"#);
    tick().await;
    page.type_into(".cs-reason", "we still use it");
    tick().await;
    page.click(".cs-deny");
    let settled = pending.await;
    let json = settled.outcome.to_model_json();
    assert_eq!(json["error"]["code"], "PERMISSION_DENIED");
    assert!(json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("we still use it"));
    tick().await;
    assert!(page.runs().is_empty());
    assert!(page.q(".cs-card").is_none());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn esc_on_a_card_approves_nothing() {
    let page = mount(Setup::default());
    let _pending = page.call("archive", r#"{"name":"w"}"#);
    tick().await;
    press(&page.q(".cs-card").unwrap(), "Escape");
    tick().await;
    assert!(page.runs().is_empty());
    assert!(page.q(".cs-card").is_some(), "the card still waits");
}

#[wasm_bindgen_test]
async fn double_click_on_allow_runs_once() {
    let page = mount(Setup::default());
    let pending = page.call("archive", r#"{"name":"w"}"#);
    tick().await;
    let allow = page.q(".cs-allow-once").unwrap();
    allow.click();
    allow.click();
    assert_eq!(code(&pending.await), "OK");
    tick().await;
    assert_eq!(page.runs(), ["archive:w"]);
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn three_queued_calls_are_decided_independently() {
    let page = mount(Setup::default());
    let a = page.call("archive", r#"{"name":"one"}"#);
    let b = page.call("archive", r#"{"name":"two"}"#);
    let c = page.call("save", r#"{"name":"three"}"#);
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "1 of 3");
    assert!(page.text(".cs-card__consequence").contains("one"));
    page.click(".cs-allow-once");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "2 of 3");
    assert!(page.text(".cs-card__consequence").contains("two"));
    page.click(".cs-deny");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "3 of 3");
    page.click(".cs-allow-once");
    let (a, b, c) = (a.await, b.await, c.await);
    assert_eq!(
        (code(&a), code(&b), code(&c)),
        ("OK", "PERMISSION_DENIED", "OK")
    );
    tick().await;
    assert_eq!(page.runs(), ["archive:one", "save:three"]);
    assert_eq!(page.terminal_records(), 3);
}

#[wasm_bindgen_test]
async fn unmounting_during_a_pending_approval_settles_unavailable_and_removes_the_card() {
    let page = mount(Setup::default());
    let pending = page.call("temp", r#"{"name":"x"}"#);
    tick().await;
    assert_eq!(page.text(".cs-card__title"), "Title temp");
    page.signals.temp_mounted.set(false);
    let settled = pending.await;
    tick().await;
    assert_eq!(code(&settled), "UNAVAILABLE");
    assert!(page.q(".cs-card").is_none(), "the card is gone");
    assert!(page.runs().is_empty());
    assert_eq!(page.terminal_records(), 1);
    assert!(!page.cs.executor().action_ids().contains(&"temp".to_owned()));
}

#[wasm_bindgen_test]
async fn a_waiting_card_counts_down_and_warns_before_it_expires_on_its_own() {
    // The default five minutes: a countdown, no warning.
    let page = mount(Setup::default());
    let pending = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    assert_eq!(page.text(".cs-card .cs-countdown"), "Time left 5:00");
    assert!(page.q(".cs-card__expiring").is_none());
    page.click(".cs-deny");
    pending.await;
    drop(page);
    // A page whose cards wait 1.5 s: warned at once, then expired by the timer.
    let page = mount(Setup {
        approval_timeout: Some(Duration::from_millis(1_500)),
        ..Setup::default()
    });
    let pending = page.call("save", r#"{"name":"b"}"#);
    tick().await;
    assert_eq!(page.text(".cs-card .cs-countdown"), "Time left 0:02");
    let warning = page.q(".cs-card__expiring").expect("the expiry warning");
    assert_eq!(warning.get_attribute("role").as_deref(), Some("alert"));
    let settled = pending.await; // nobody clicks
    tick().await;
    assert_eq!(code(&settled), "APPROVAL_TIMEOUT");
    assert!(page.q(".cs-card").is_none());
    assert!(page.text(".cs-log").contains("nobody approved in time"));
    assert!(page.runs().is_empty(), "an expired card runs nothing");
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn leaving_the_page_settles_every_pending_call_once() {
    let page = mount(Setup::default());
    let card = page.call("archive", r#"{"name":"w"}"#);
    let handoff = page.call("publish", "{}");
    tick().await;
    pagehide();
    let (card, handoff) = (card.await, handoff.await);
    tick().await;
    assert_eq!(
        (code(&card), code(&handoff)),
        ("UNAVAILABLE", "UNAVAILABLE")
    );
    assert!(page.runs().is_empty());
    assert_eq!(page.terminal_records(), 2);
    assert!(page.q(".cs-card").is_none() && page.q(".cs-handoff").is_none());
    assert!(page.highlighted().is_empty());
}

#[wasm_bindgen_test]
async fn the_card_shows_the_dry_run_preview() {
    let page = mount(Setup::default());
    let pending = page.call("rewrite", r#"{"name":"Apollo"}"#);
    tick().await;
    assert_eq!(page.text(".cs-diff__del"), "- title: Atlas\n");
    assert_eq!(page.text(".cs-diff__add"), "+ title: Apollo\n");
    assert!(page
        .text(".cs-counts")
        .contains("files touched in Apollo: 1"));
    assert!(page.runs().is_empty(), "the preview ran the action");
    page.click(".cs-deny");
    assert_eq!(code(&pending.await), "PERMISSION_DENIED");
    // A count's label may carry argument text: its hidden characters are shown.
    let pending = page.call("rewrite", r#"{"name":"Ops\u202eATAD"}"#);
    tick().await;
    let counts = page.text(".cs-counts");
    assert!(
        counts.contains("\\u{202e}") && !counts.contains('\u{202e}'),
        "{counts}"
    );
    // The action's number is outside the label's isolate: the label cannot move it.
    assert_eq!(page.text(".cs-counts li > strong"), "1");
    assert!(!page.text(".cs-counts bdi").contains(": 1"));
    page.click(".cs-deny");
    assert_eq!(code(&pending.await), "PERMISSION_DENIED");
}

#[wasm_bindgen_test]
async fn a_double_confirmed_action_asks_a_second_different_question() {
    let page = mount(Setup::default());
    let pending = page.call("delete", r#"{"name":"repo"}"#);
    tick().await;
    assert!(page.q(".cs-card__second").is_none());
    page.click(".cs-allow-once");
    tick().await;
    assert!(page.runs().is_empty(), "ran after one yes");
    assert!(page
        .text(".cs-card__second")
        .contains("Really delete `repo`?"));
    assert!(page.q(".cs-allow-session").is_none());
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    tick().await;
    assert_eq!(page.runs(), ["delete:repo"]);
}

#[wasm_bindgen_test]
async fn a_card_that_went_stale_is_shown_again_with_what_changed() {
    let page = mount(Setup::default());
    let pending = page.call("purge", r#"{"name":"t"}"#);
    tick().await;
    assert!(page.text(".cs-card__consequence").contains("delete 1 rows"));
    assert!(page.q(".cs-card__changed").is_none());
    // The page changes under the card before the person clicks.
    page.signals.rows.set(101);
    page.click(".cs-allow-once");
    tick().await;
    assert!(page.runs().is_empty(), "the stale card ran");
    assert!(page
        .text(".cs-card__consequence")
        .contains("delete 101 rows"));
    assert!(
        page.text(".cs-card__changed")
            .contains("This changed since you looked: what will happen"),
        "{}",
        page.text(".cs-card__changed")
    );
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(page.runs(), ["purge:t"]);
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn hidden_characters_on_a_card_are_shown_and_isolated() {
    let page = mount(Setup::default());
    for (name, escape) in [
        ("Atlas\u{200b}", "\\u{200b}"),
        ("Ops\u{202e}ATAD-evil", "\\u{202e}"),
        ("\u{430}pollo", "\\u{430}"),
        ("Atlas\u{a0}", "\\u{a0}"),
    ] {
        let args = serde_json::json!({ "name": name }).to_string();
        let pending = page.call("save", &args);
        tick().await;
        let marks: Vec<String> = page
            .all(".cs-card .cs-escape")
            .iter()
            .map(|m| m.text_content().unwrap_or_default())
            .collect();
        assert!(marks.iter().any(|m| m == escape), "{name:?}: {marks:?}");
        // Consequence and arguments both show it, inside an isolate.
        assert!(page.text(".cs-card__consequence bdi").contains(escape));
        assert!(page.text(".cs-card__args").contains(escape));
        // Each string value is isolated on its own.
        assert!(page
            .all(".cs-card__args bdi")
            .iter()
            .any(|b| b.text_content().unwrap_or_default().contains(escape)));
        assert!(page.q(".cs-card__consequence .cs-hidden-note").is_some());
        assert!(
            !page.text(".cs-card").contains('\u{202e}')
                && !page.text(".cs-card").contains('\u{200b}'),
            "a raw hidden character reached the card"
        );
        page.click(".cs-deny");
        pending.await;
        tick().await;
    }
    // Plain text is left alone and carries no note.
    let pending = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    assert!(page.q(".cs-card .cs-escape").is_none());
    assert!(page.q(".cs-card .cs-hidden-note").is_none());
    page.click(".cs-deny");
    pending.await;
    // An invented tool name that looks like a real one is escaped in the log.
    page.call("s\u{430}ve", "{}").await;
    tick().await;
    let last = page.all(".cs-msg--outcome").pop().unwrap();
    assert!(
        last.text_content()
            .unwrap_or_default()
            .contains("s\\u{430}ve"),
        "{:?}",
        last.text_content()
    );
    assert!(page.runs().is_empty());
}

/// A card for an action that takes no params shows no empty `Arguments {}` and no Edit;
/// a Danger card's Allow looks dangerous.
#[wasm_bindgen_test]
async fn a_card_without_params_has_no_arguments_or_edit_and_danger_looks_it() {
    use countersign::{action::NoParams, Action, Confirm, Kind};
    #[component]
    fn Page() -> impl IntoView {
        countersign_leptos::use_action(
            Action::<NoParams>::new("empty_trash", "Empty the trash.")
                .kind(Kind::Danger)
                .confirm(Confirm::Always)
                .run(|_| async { Ok::<_, String>(()) }),
        );
    }
    let options = countersign_leptos::CountersignOptions {
        trust_script_clicks: true,
        ..Default::default()
    };
    let page = countersign_testing::mount(options, || {
        view! { <Page /> <countersign_leptos::AgentDock /> }
    });
    let pending = page.call("empty_trash", "{}");
    countersign_testing::tick().await;
    assert!(page.q(".cs-card").is_some());
    assert!(page.q(".cs-card__args").is_none(), "no `Arguments {{}}`");
    assert!(page.q(".cs-edit-open").is_none(), "nothing to edit");
    let allow = page.q(".cs-allow-once").unwrap();
    assert!(allow.class_name().contains("cs-btn--danger"));
    page.click(".cs-deny");
    assert_eq!(
        countersign_testing::code(&pending.await),
        "PERMISSION_DENIED"
    );
}
