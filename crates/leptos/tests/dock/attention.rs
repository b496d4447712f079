//! A person who looked away: the tab title and opt-in notifications.

use countersign_testing::tick;
use leptos::prelude::document;
use wasm_bindgen_test::*;

use super::harness::{focused, mount, run_js, Setup};

/// The tab goes to the background (`hidden`) or comes back, as the browser says it.
fn set_hidden(hidden: bool) {
    if hidden {
        run_js(
            "Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });",
        );
    } else {
        run_js("delete document.hidden;");
    }
    run_js("document.dispatchEvent(new Event('visibilitychange'));");
}

fn title() -> String {
    document().title()
}

/// A stand-in for the browser's Notification API (headless Chromium shows none): it
/// answers the permission request with `answer` and records every notification.
fn fake_notifications(answer: &str) {
    run_js(&format!(
        "window.__shown = []; window.__asked = 0; window.__perm = 'default';
         window.Notification = class {{
           constructor(title, options) {{ this.title = title; this.body = options.body; this.closed = false; window.__shown.push(this); }}
           close() {{ this.closed = true; }}
           static get permission() {{ return window.__perm; }}
           static requestPermission() {{ window.__asked += 1; window.__perm = '{answer}'; return Promise.resolve('{answer}'); }}
         }};"
    ));
}

fn shown_notifications() -> Vec<(String, String, bool)> {
    let list = run_js("return window.__shown;");
    js_sys::Array::from(&list)
        .iter()
        .map(|n| {
            let get = |k: &str| js_sys::Reflect::get(&n, &k.into()).unwrap();
            (
                get("title").as_string().unwrap_or_default(),
                get("body").as_string().unwrap_or_default(),
                get("closed").as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[wasm_bindgen_test]
async fn a_hidden_tab_s_title_counts_what_waits_and_clears_when_nothing_does() {
    fake_notifications("denied");
    let page = mount(Setup::default());
    document().set_title("Settings");
    let base = title();
    let first = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    assert_eq!(title(), base, "a visible tab keeps its title");
    set_hidden(true);
    assert_eq!(title(), format!("(1) Approval needed — {base}"));
    let second = page.call("archive", r#"{"name":"b"}"#);
    tick().await;
    assert_eq!(title(), format!("(2) Approval needed — {base}"));
    set_hidden(false);
    assert_eq!(title(), base);
    set_hidden(true);
    page.click(".cs-deny");
    tick().await;
    page.click(".cs-deny");
    first.await;
    second.await;
    tick().await;
    assert_eq!(
        title(),
        base,
        "nothing waits: the title is the page's again"
    );
    assert_eq!(
        run_js("return window.__asked;").as_f64(),
        Some(0.0),
        "never asked on load"
    );
    assert!(
        shown_notifications().is_empty(),
        "no notification without the person's yes"
    );
    set_hidden(false);
}

#[wasm_bindgen_test]
async fn notifications_refused_by_the_browser_are_said_and_nothing_is_shown() {
    fake_notifications("denied");
    let page = mount(Setup::default());
    page.click(".cs-notify-on");
    tick().await;
    assert!(page.text(".cs-notify").contains("blocked"));
    set_hidden(true);
    let pending = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    assert!(shown_notifications().is_empty());
    assert!(title().starts_with("(1) "), "the title still says so");
    set_hidden(false);
    page.click(".cs-deny");
    pending.await;
}

#[wasm_bindgen_test]
async fn a_notification_is_shown_when_allowed_and_its_click_focuses_the_card() {
    fake_notifications("granted");
    let page = mount(Setup::default());
    page.click(".cs-notify-on");
    tick().await;
    assert_eq!(run_js("return window.__asked;").as_f64(), Some(1.0));
    assert!(page.text(".cs-notify").contains("Notifications on"));
    set_hidden(true);
    let pending = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    let shown = shown_notifications();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].0, "Approval needed");
    assert!(shown[0].1.contains("1 waiting"));
    set_hidden(false);
    document().body().unwrap().focus().unwrap();
    run_js("window.__shown[0].onclick();");
    let active = focused();
    assert!(
        active.class_list().contains("cs-card"),
        "the click focuses the card"
    );
    page.click(".cs-deny");
    pending.await;
    tick().await;
    assert!(shown_notifications()[0].2, "closed when nothing waits");
    assert!(page.runs().is_empty());
}
