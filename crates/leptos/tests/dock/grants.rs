//! Always allow: the grant a card offers, what it covers, remembered across page loads
//! per role until revoked or expired, and the calls it let through listed with why.

use std::time::Duration;

use countersign_testing::{code, tick};
use wasm_bindgen_test::*;

use super::harness::{local_storage, mount, Setup};

/// The grants saved under `key`, unexpired.
fn read_stored(key: &str) -> Vec<countersign_leptos::StoredGrant> {
    let storage = local_storage();
    let text = storage.get_item(key).unwrap().unwrap_or_default();
    let now = js_sys::Date::now();
    serde_json::from_str::<Vec<countersign_leptos::StoredGrant>>(&text)
        .unwrap_or_default()
        .into_iter()
        .filter(|g| g.expires_at_ms > now)
        .collect()
}

#[wasm_bindgen_test]
async fn always_allow_skips_the_next_card_and_is_revocable() {
    let page = mount(Setup::default());
    let first = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    assert!(
        page.text(".cs-card__rule")
            .contains("every call of Title save"),
        "the card says what the grant covers"
    );
    page.click(".cs-allow-session");
    assert_eq!(code(&first.await), "OK");
    tick().await;
    assert_eq!(page.all(".cs-grant").len(), 1);
    assert!(page.text(".cs-grants").contains("Title save"));
    assert!(page.text(".cs-grant__rule").contains("every call"));

    let second = page.call("save", r#"{"name":"b"}"#).await;
    tick().await;
    assert_eq!(code(&second), "OK");
    assert!(page.q(".cs-card").is_none(), "granted call showed a card");

    page.click(".cs-revoke");
    tick().await;
    assert!(page.q(".cs-grants").is_none());
    let third = page.call("save", r#"{"name":"c"}"#);
    tick().await;
    assert!(page.q(".cs-card").is_some(), "asked again after revoking");
    page.click(".cs-deny");
    assert_eq!(code(&third.await), "PERMISSION_DENIED");
    assert_eq!(page.runs(), ["save:a", "save:b"]);
}

#[wasm_bindgen_test]
async fn always_allow_is_remembered_across_page_loads_until_revoked_or_expired() {
    let key = "cs-test-grants";
    // Grants are stored per role: this page's session is `admin`.
    let stored_key = "cs-test-grants:admin";
    let storage = local_storage();
    storage.remove_item(stored_key).unwrap();
    let hour = Duration::from_secs(3600);
    {
        let page = mount(Setup::default());
        page.cs.persist_grants(key, hour);
        let first = page.call("save", r#"{"name":"a"}"#);
        tick().await;
        page.click(".cs-allow-session");
        assert_eq!(code(&first.await), "OK");
        tick().await;
        let stored = read_stored(stored_key);
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].basis.action, "save");
        assert_eq!(stored[0].basis.role, "admin");
        assert_eq!(stored[0].basis.arguments, serde_json::json!({"name": "a"}));
    }
    {
        // A new page load: the grant comes back when its action registers.
        let page = mount(Setup::default());
        page.cs.persist_grants(key, hour);
        tick().await;
        assert_eq!(page.cs.executor().grants().len(), 1, "restored");
        assert_eq!(code(&page.call("save", r#"{"name":"b"}"#).await), "OK");
        tick().await;
        assert!(
            page.q(".cs-card").is_none(),
            "a restored grant skipped the card"
        );
        page.click(".cs-revoke");
        tick().await;
        assert!(read_stored(stored_key).is_empty(), "revoking forgets it");
    }
    // Expired entries, entries for actions that can never be granted, entries for
    // another declaration, and anything carrying its own matcher are not restored.
    let now = js_sys::Date::now();
    let registration = {
        let page = mount(Setup::default());
        page.cs.executor().registration("save").unwrap()
    };
    let basis = |action: &str, registration: &str| serde_json::json!({ "action": action, "registration": registration, "role": "admin", "arguments": { "name": "a" } });
    let planted = serde_json::json!([
        { "basis": basis("save", &registration), "expires_at_ms": now - 1.0 },
        { "basis": basis("archive", &registration), "expires_at_ms": now + 1e7 },
        { "basis": basis("save", &"0".repeat(64)), "expires_at_ms": now + 1e7 },
        { "action": "save", "rule": { "description": "under drafts/", "matcher": { "match": "any" } }, "expires_at_ms": now + 1e7 }
    ]);
    storage.set_item(stored_key, &planted.to_string()).unwrap();
    let page = mount(Setup::default());
    page.cs.persist_grants(key, hour);
    tick().await;
    assert!(page.cs.executor().grants().is_empty());
    let pending = page.call("archive", r#"{"name":"w"}"#);
    tick().await;
    assert!(
        page.q(".cs-card").is_some(),
        "a planted grant for an ask-always action was honoured"
    );
    page.click(".cs-deny");
    pending.await;
    storage.remove_item(stored_key).unwrap();
    // One role's grants never reach another role on the same browser.
    storage
        .set_item(
            "cs-test-grants:viewer",
            &serde_json::json!([{ "basis": { "action": "save", "registration": registration, "role": "viewer", "arguments": { "name": "a" } }, "expires_at_ms": now + 1e7 }]).to_string(),
        )
        .unwrap();
    let page = mount(Setup::default());
    page.cs.persist_grants(key, hour);
    tick().await;
    assert!(page.cs.executor().grants().is_empty());
    storage.remove_item("cs-test-grants:viewer").unwrap();
}

#[wasm_bindgen_test]
async fn garbage_in_storage_restores_nothing_and_breaks_nothing() {
    let key = "cs-test-garbage";
    let stored_key = "cs-test-garbage:admin";
    let storage = local_storage();
    for planted in [
        "not json",
        "{\"action\":\"save\"}",
        "[{\"action\":\"save\"}]",
        &"[".repeat(10_000),
        "null",
    ] {
        storage.set_item(stored_key, planted).unwrap();
        let page = mount(Setup::default());
        page.cs.persist_grants(key, Duration::from_secs(60));
        tick().await;
        assert!(page.cs.executor().grants().is_empty(), "{planted:.20}");
        let pending = page.call("save", r#"{"name":"a"}"#);
        tick().await;
        assert!(page.q(".cs-card").is_some(), "still asked");
        page.click(".cs-deny");
        pending.await;
    }
    storage.remove_item(stored_key).unwrap();
}

#[wasm_bindgen_test]
async fn calls_done_without_asking_are_listed_with_why_and_their_grant_can_be_revoked() {
    let page = mount(Setup::default());
    assert!(page.q(".cs-activities").is_none(), "nothing yet");
    assert_eq!(code(&page.call("note", r#"{"name":"a"}"#).await), "OK");
    // Approved by the person on a card: not an automatic decision.
    let first = page.call("save", r#"{"name":"b"}"#);
    tick().await;
    page.click(".cs-allow-session");
    assert_eq!(code(&first.await), "OK");
    // Covered by the grant just made.
    assert_eq!(code(&page.call("save", r#"{"name":"c"}"#).await), "OK");
    tick().await;
    let items = page.all(".cs-activity");
    assert_eq!(items.len(), 2, "{:?}", page.text(".cs-activities"));
    assert!(page
        .text(".cs-activity[data-action='note'] .cs-chip")
        .contains("needs no approval"));
    assert!(page
        .text(".cs-activity[data-action='save'] .cs-chip--grant")
        .contains("always allowed"));
    assert!(page
        .q(".cs-activity[data-action='note'] .cs-activity-revoke")
        .is_none());
    page.click(".cs-activity[data-action='save'] .cs-activity-revoke");
    tick().await;
    assert!(
        page.cs.executor().grants().is_empty(),
        "the grant is revoked"
    );
    assert!(
        page.q(".cs-activity-revoke").is_none(),
        "no revoke for a grant gone"
    );
    let asked = page.call("save", r#"{"name":"d"}"#);
    tick().await;
    assert!(page.q(".cs-card").is_some(), "asked again");
    page.click(".cs-deny");
    asked.await;
    // Unattended stands in for the person on `Ask`: listed as such.
    page.cs.set_mode(countersign::Mode::Unattended).unwrap();
    assert_eq!(code(&page.call("save", r#"{"name":"e"}"#).await), "OK");
    tick().await;
    assert!(page
        .text(".cs-activity .cs-chip--mode")
        .contains("unattended"));
    assert_eq!(page.runs(), ["note:a", "save:b", "save:c", "save:e"]);
}
