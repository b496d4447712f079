//! What may run before any card is drawn: an action's availability, the session's mode
//! (away, bypass) and the policy file, failing closed when it is broken.

use countersign_testing::{code, tick};
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{mount, Page, Setup};

#[wasm_bindgen_test]
async fn availability_follows_a_signal() {
    let page = mount(Setup::default());
    let listed = |page: &Page| {
        page.cs
            .executor()
            .projection()
            .iter()
            .any(|t| t.name == "toggled")
    };
    assert!(listed(&page));
    page.signals.enabled.set(false);
    assert!(!listed(&page), "a disabled action left the projection");
    assert_eq!(
        code(&page.call("toggled", r#"{"name":"x"}"#).await),
        "UNAVAILABLE"
    );
    page.signals.enabled.set(true);
    assert_eq!(code(&page.call("toggled", r#"{"name":"y"}"#).await), "OK");
    assert_eq!(page.runs(), ["toggled:y"]);
}

#[wasm_bindgen_test]
async fn away_mode_is_announced_and_refuses_what_would_ask() {
    let page = mount(Setup::default());
    page.cs.set_mode(countersign::Mode::Away).unwrap();
    tick().await;
    assert!(page.text(".cs-banner--away").contains("Away"));
    let settled = page.call("archive", r#"{"name":"w"}"#).await;
    assert_eq!(code(&settled), "POLICY_DENIED");
    assert!(page.q(".cs-card").is_none());
    assert_eq!(
        code(&page.call("note", r#"{"name":"n"}"#).await),
        "OK",
        "what needs no approval still runs"
    );
    page.cs.set_mode(countersign::Mode::Bypass).unwrap();
    tick().await;
    assert!(page.text(".cs-banner--bypass").contains("BYPASS"));
    page.cs.set_mode(countersign::Mode::Default).unwrap();
    tick().await;
    assert!(page.q(".cs-banner").is_none());
    assert_eq!(page.runs(), ["note:n"]);
}

#[wasm_bindgen_test]
async fn a_broken_policy_file_is_shown_and_nothing_runs() {
    let page = mount(Setup::default());
    let error = page
        .cs
        .load_policy("{\n  \"roles\": {\n    \"admin\": { \"scope\": [] }\n  }\n}")
        .unwrap_err();
    assert_eq!(error.line, 3);
    tick().await;
    assert!(
        page.text(".cs-banner--error").contains("line 3"),
        "{}",
        page.text(".cs-banner--error")
    );
    assert_eq!(
        code(&page.call("note", r#"{"name":"n"}"#).await),
        "POLICY_DENIED"
    );
    assert!(page.runs().is_empty());
    // A policy that cannot even be fetched fails closed too.
    let fetched = page.cs.load_policy_from("/no-such-policy.json").await;
    assert!(fetched.is_err());
    assert_eq!(
        code(&page.call("note", r#"{"name":"n"}"#).await),
        "POLICY_DENIED"
    );
    page.cs.load_policy(r#"{"roles":{"admin":{}}}"#).unwrap();
    tick().await;
    assert!(page.q(".cs-banner--error").is_none());
    assert_eq!(code(&page.call("note", r#"{"name":"n"}"#).await), "OK");
}
