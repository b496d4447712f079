//! The dock on screen: no sideways scrolling at any width, a chat log that follows the
//! newest message unless the person scrolled up, and keeps only its latest entries.

use countersign::{action::NoParams, Action, Confirm, Expect, Handoff, Kind};
use countersign_leptos::{use_action, AgentDock, CountersignOptions, Placement, Theme, DOCK_CSS};
use countersign_testing::{code, tick};
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{mount, run_js, Setup};

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

#[component]
fn Ping() -> impl IntoView {
    use_action(
        Action::<NoParams>::new("ping", "Pings.")
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .run(|_| async { Ok::<_, String>(()) }),
    );
    view! { <p>"page"</p> }
}

/// Whether everything in the dock but its header (and banners) is hidden.
fn only_the_header_shows() -> bool {
    run_js(
        "return [...document.querySelector('.cs-dock').children]
           .filter(e => e.tagName != 'HEADER' && e.tagName != 'STYLE' && !e.classList.contains('cs-banner'))
           .every(e => getComputedStyle(e).display == 'none');",
    )
    .as_bool()
        == Some(true)
}

/// A popup floats over the page, folds to its header at the person's click, shows
/// again by itself while a card waits and folds again once nothing does.
#[wasm_bindgen_test]
async fn a_popup_folds_and_opens_by_itself_while_a_card_waits() {
    let options = CountersignOptions {
        trust_script_clicks: true,
        ..CountersignOptions::default()
    };
    let page = countersign_testing::mount(options, || {
        view! { <Ping /> <AgentDock placement=Placement::Popup /> }
    });
    tick().await;
    let position = run_js("return getComputedStyle(document.querySelector('.cs-dock')).position;");
    assert_eq!(position.as_string().as_deref(), Some("fixed"));
    assert!(!only_the_header_shows());
    page.click(".cs-fold input");
    tick().await;
    assert!(only_the_header_shows());
    let pending = page.call("ping", "{}");
    tick().await;
    assert!(
        !only_the_header_shows(),
        "a waiting card stayed folded away"
    );
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    tick().await;
    assert!(only_the_header_shows(), "it did not fold again");
    // A mode that runs calls without asking is never folded away.
    page.cs.set_mode(countersign::Mode::Bypass).unwrap();
    tick().await;
    let banner =
        run_js("return getComputedStyle(document.querySelector('.cs-banner--bypass')).display;");
    assert_ne!(
        banner.as_string().as_deref(),
        Some("none"),
        "the bypass banner was folded away"
    );
}

/// The stylesheet the dock ships, made smaller at compile time, parses to exactly the
/// rules `dock.css` says (custom properties and values with `var()` keep their text as written:
/// the spaces after commas in them, which say nothing, are left out of the comparison).
#[wasm_bindgen_test]
fn the_shipped_stylesheet_has_the_rules_dock_css_has() {
    let source = include_str!("../../src/dock/dock.css");
    let rules = |css: &str| {
        run_js(&format!(
            "const s = new CSSStyleSheet(); s.replaceSync({}); return [...s.cssRules].map(r => r.cssText.replace(/([\\w-]+:)([^;{{}}]*)/g, (m, k, v) => k.startsWith('--') || v.includes('var(') ? k + v.replace(/,\\s+/g, ',') : m)).join('\\n');",
            serde_json::to_string(css).unwrap()
        ))
        .as_string()
        .unwrap()
    };
    let shipped = rules(DOCK_CSS);
    assert!(shipped.contains(".cs-fold :checked"), "{shipped}");
    let written = rules(source);
    let at = shipped
        .bytes()
        .zip(written.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(shipped.len().min(written.len()));
    assert!(
        shipped == written,
        "they differ at {at}: {:?} against {:?}",
        shipped.get(at.saturating_sub(80)..at + 40),
        written.get(at.saturating_sub(80)..at + 40)
    );
    assert!(
        DOCK_CSS.len() * 10 < source.len() * 9,
        "{} of {}",
        DOCK_CSS.len(),
        source.len()
    );
}

/// `theme` sets the dock's colours whatever the system prefers (this browser prefers
/// light).
#[wasm_bindgen_test]
async fn a_dark_theme_is_dark_in_a_browser_that_prefers_light() {
    let background =
        || run_js("return getComputedStyle(document.querySelector('.cs-dock')).backgroundColor;");
    let page = countersign_testing::mount(CountersignOptions::default(), || {
        view! { <AgentDock theme=Theme::Dark /> }
    });
    tick().await;
    assert_eq!(background().as_string().as_deref(), Some("rgb(15, 23, 42)"));
    drop(page);
    let page = countersign_testing::mount(CountersignOptions::default(), || {
        view! { <AgentDock /> }
    });
    tick().await;
    assert_eq!(
        background().as_string().as_deref(),
        Some("rgb(255, 255, 255)")
    );
    drop(page);
}
