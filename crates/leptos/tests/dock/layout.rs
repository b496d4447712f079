//! The dock on screen: no sideways scrolling at any width, a chat log that follows the
//! newest message unless the person scrolled up, and keeps only its latest entries.

use countersign::{action::NoParams, Action, Expect, Handoff, Kind};
use countersign_leptos::{use_action, AgentDock, CountersignOptions};
use countersign_testing::{code, tick};
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{mount, Setup};

#[component]
fn LongStep() -> impl IntoView {
    use_action(
        Action::<NoParams>::new("long_step", "A handoff with long words.")
            .kind(Kind::Danger)
            .handoff(
                Handoff::new(
                    "Averyveryveryveryveryveryveryveryveryveryverylongwordwithoutanyspaces appears in this reason.",
                    Expect::new("never", || false),
                )
                .step(
                    "Open Settings › Integrations › https://example.com/a/very/long/path/with/segments/that/never/breaks/naturally/at/all and press Confirm",
                    Some("nowhere"),
                ),
            ),
    );
    view! { <p>"page"</p> }
}

#[wasm_bindgen_test]
async fn the_dock_never_scrolls_sideways_from_320_to_1920_px() {
    let options = CountersignOptions {
        trust_script_clicks: true,
        ..CountersignOptions::default()
    };
    let page = countersign_testing::mount(options, || view! { <LongStep /> <AgentDock /> });
    let pending = page.call("long_step", "{}");
    tick().await;
    assert!(page.q(".cs-handoff").is_some());
    for width in [320, 360, 414, 768, 1024, 1280, 1920] {
        page.root
            .style()
            .set_property("width", &format!("{width}px"))
            .unwrap();
        tick().await;
        let dock = page.q(".cs-dock").unwrap();
        assert!(
            dock.scroll_width() <= dock.client_width(),
            "at {width} px the dock scrolls sideways: {} > {}",
            dock.scroll_width(),
            dock.client_width()
        );
    }
    page.click(".cs-handoff-cancel");
    pending.await;
}

#[wasm_bindgen_test]
async fn the_chat_follows_the_newest_message_unless_the_person_scrolled_up() {
    let page = mount(Setup::default());
    for i in 0..30 {
        page.call("note", &format!(r#"{{"name":"n{i}"}}"#)).await;
    }
    tick().await;
    let log = page.q(".cs-log").unwrap();
    assert!(
        log.scroll_height() > log.client_height(),
        "the log overflows"
    );
    let at_bottom = |log: &web_sys::HtmlElement| {
        log.scroll_top() + log.client_height() >= log.scroll_height() - 24
    };
    assert!(at_bottom(&log), "the newest message is in view");
    // The person scrolls up to read: new messages do not pull them down.
    log.set_scroll_top(0);
    log.dispatch_event(&web_sys::Event::new("scroll").unwrap())
        .unwrap();
    tick().await;
    page.call("note", r#"{"name":"later"}"#).await;
    tick().await;
    assert_eq!(log.scroll_top(), 0, "reading stays where it was");
}

#[wasm_bindgen_test]
async fn the_log_keeps_only_its_latest_entries() {
    let page = mount(Setup::default());
    for n in 0..320 {
        let settled = page.call("note", &format!(r#"{{"name":"n{n}"}}"#)).await;
        assert_eq!(code(&settled), "OK");
    }
    tick().await;
    let log = page.cs.dock().log.get_untracked();
    assert_eq!(log.len(), 300, "the log grew past its window");
    assert_eq!(page.runs().len(), 320);
}
