//! A reload, a second tab or the back-forward cache: what was waiting comes back drawn
//! again by the gate, never runs by itself, and the model is told what really happened.

use std::time::Duration;

use countersign_testing::{code, tick};
use gloo_timers::future::TimeoutFuture;
use wasm_bindgen_test::*;

use super::harness::{
    idle, kept, local_storage, mount, reload, restored, run_js, session_storage, Setup,
};

#[wasm_bindgen_test]
async fn a_pending_approval_and_its_conversation_survive_a_reload_and_run_only_when_allowed() {
    let page = mount(kept("reload-ok"));
    page.type_into(".cs-input", "rename to Apollo");
    page.click(".cs-send");
    tick().await;
    reload(page);
    let page = mount(kept("reload-ok"));
    restored().await;
    // The card is back, drawn again by the gate (a new call, a new nonce); nothing ran.
    assert!(
        page.runs().is_empty(),
        "nothing runs by itself after a reload"
    );
    assert!(page.text(".cs-card__consequence").contains("Apollo"));
    assert!(
        page.q(".cs-card__restored").is_some(),
        "the card says it was brought back"
    );
    assert!(
        page.text(".cs-log").contains("rename to Apollo"),
        "the chat came back"
    );
    let first = page.cs.audit().records()[0].clone();
    assert_eq!(first.event, countersign::audit::AuditEvent::Restored);
    assert!(
        !page.q(".cs-working").unwrap().hidden(),
        "the turn is still open"
    );
    page.click(".cs-allow-once");
    tick().await;
    tick().await;
    assert_eq!(page.runs(), ["save:Apollo"]);
    let answer = page.last_answer();
    assert!(answer.contains("Done"), "{answer}");
    assert_eq!(page.terminal_records(), 1);
    // Settled: a second reload brings nothing back.
    reload(page);
    let page = mount(kept("reload-ok"));
    restored().await;
    assert!(page.q(".cs-card").is_none());
    assert!(page.runs().is_empty());
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn a_card_that_expired_across_the_reload_is_settled_and_the_model_is_told() {
    let setup = Setup {
        approval_timeout: Some(Duration::from_millis(400)),
        ..kept("reload-late")
    };
    let page = mount(setup.clone());
    page.type_into(".cs-input", "rename to Apollo");
    page.click(".cs-send");
    tick().await;
    assert!(page.q(".cs-card").is_some());
    reload(page);
    TimeoutFuture::new(500).await;
    let page = mount(setup);
    restored().await;
    assert!(
        page.q(".cs-card").is_none(),
        "an expired card does not come back"
    );
    assert!(page.runs().is_empty());
    let records = page.cs.audit().records();
    assert_eq!(records.len(), 1, "one terminal record: {records:?}");
    assert_eq!(records[0].outcome.as_deref(), Some("APPROVAL_EXPIRED"));
    let answer = page.last_answer();
    assert!(
        answer.contains("Not done"),
        "the model heard of it: {answer}"
    );
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn a_second_tab_never_re_arms_a_call_the_first_still_holds() {
    let first = mount(kept("two-tabs"));
    let pending = first.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    let stored = session_storage()
        .get_item("two-tabs:admin:pending")
        .unwrap()
        .unwrap();
    // A duplicated tab starts with a copy of the first tab's sessionStorage.
    let second = mount(kept("two-tabs"));
    session_storage()
        .set_item("two-tabs:admin:pending", &stored)
        .unwrap();
    drop(second);
    let second = mount(kept("two-tabs"));
    restored().await;
    assert!(second.q(".cs-card").is_none(), "the copy is not re-armed");
    let records = second.cs.audit().records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome.as_deref(), Some("APPROVAL_EXPIRED"));
    assert!(matches!(
        records[0].reason,
        countersign::Reason::NotRestored {
            why: countersign::reason::RestoreMiss::ElsewhereOrDone,
            ..
        }
    ));
    // The first tab still holds it, and only its approval runs it, once.
    first.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    assert_eq!(first.runs(), ["save:Apollo"]);
    assert!(second.runs().is_empty());
    session_storage().clear().unwrap();
    local_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn garbage_in_session_storage_restores_nothing_and_breaks_nothing() {
    let future = js_sys::Date::now() + 60_000.0;
    let forged = format!(
        r#"[{{"id":"x","tool_call_id":"t","action":"save","arguments":"{{\"name\":\"evil\"}}","declaration":"forged","handoff":false,"deadline_at_ms":{future}}}]"#
    );
    let cases = [
        "not json".to_owned(),
        "{}".to_owned(),
        r#"[1, null, {"id": 5}]"#.to_owned(),
        "[".repeat(100_000),
        forged,
    ];
    for garbage in cases {
        session_storage()
            .set_item("junk:admin:pending", &garbage)
            .unwrap();
        session_storage()
            .set_item("junk:admin:history", &garbage)
            .unwrap();
        let page = mount(kept("junk"));
        restored().await;
        assert!(page.q(".cs-card").is_none(), "{garbage:.40}");
        assert!(page.runs().is_empty());
        assert!(page
            .cs
            .audit()
            .records()
            .iter()
            .all(|r| r.outcome.as_deref() != Some("OK")));
        // The page still works.
        let pending = page.call("save", r#"{"name":"fine"}"#);
        tick().await;
        page.click(".cs-allow-once");
        assert_eq!(code(&pending.await), "OK");
        assert_eq!(page.runs(), ["save:fine"]);
        drop(page);
        session_storage().clear().unwrap();
    }
}

#[wasm_bindgen_test]
async fn a_waiting_handoff_survives_a_reload_with_its_deadline() {
    let page = mount(kept("reload-handoff"));
    drop(page.call("publish", "{}"));
    tick().await;
    assert!(page.q(".cs-handoff").is_some());
    reload(page);
    let page = mount(kept("reload-handoff"));
    restored().await;
    assert!(page.q(".cs-handoff").is_some(), "the handoff is back");
    page.click(".cs-handoff-cancel");
    tick().await;
    let records = page.cs.audit().records();
    let terminal: Vec<_> = records.iter().filter(|r| r.is_terminal()).collect();
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].outcome.as_deref(), Some("HANDOFF_CANCELLED"));
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn a_reload_mid_batch_tells_the_model_what_really_happened_to_the_items_that_ended() {
    let page = mount(kept("reload-mid-batch"));
    page.type_into(".cs-input", "rename to Apollo and archive");
    page.click(".cs-send");
    tick().await;
    assert_eq!(page.text(".cs-card__count"), "1 of 2");
    page.click(".cs-allow-once"); // the rename runs before the reload
    tick().await;
    assert_eq!(page.runs(), ["save:Apollo"]);
    reload(page);
    let page = mount(kept("reload-mid-batch"));
    restored().await;
    assert!(
        page.text(".cs-card__title").contains("archive"),
        "the archive card is back"
    );
    page.click(".cs-deny");
    idle(&page).await;
    let answer = page.last_answer();
    assert!(
        answer.contains("Done"),
        "the rename's receipt reached the model: {answer}"
    );
    assert!(answer.contains("Not done"), "{answer}");
    assert!(page.runs().is_empty(), "nothing ran again after the reload");
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn back_from_the_back_forward_cache_nothing_stale_comes_back() {
    let page = mount(kept("bfcache"));
    let pending = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    run_js("window.dispatchEvent(new Event('pagehide'));");
    assert_eq!(
        code(&pending.await),
        "UNAVAILABLE",
        "settled on the way out"
    );
    run_js("window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true }));");
    tick().await;
    reload(page);
    let page = mount(kept("bfcache"));
    restored().await;
    assert!(
        page.q(".cs-card").is_none(),
        "a card the model was told about came back"
    );
    assert!(page.runs().is_empty());
    session_storage().clear().unwrap();
}
