//! The dock in Chinese: its own words all translated, the page's own left as written.

use countersign_leptos::Locale;
use countersign_testing::tick;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

use super::harness::{mount, Setup};

#[wasm_bindgen_test]
async fn chinese_copy_renders_when_the_locale_is_zh() {
    let page = mount(Setup {
        locale: Locale::Zh,
        ..Setup::default()
    });
    let pending = page.call("save", r#"{"name":"阿波罗"}"#);
    tick().await;
    assert_eq!(page.text(".cs-allow-once"), "允许一次");
    assert_eq!(page.text(".cs-allow-session"), "本次会话始终允许");
    assert_eq!(page.text(".cs-deny"), "拒绝");
    assert_eq!(page.text(".cs-card__count"), "第 1 项，共 1 项");
    assert_eq!(page.text(".cs-kind"), "写入");
    assert_eq!(
        page.q(".cs-dock").unwrap().get_attribute("lang").as_deref(),
        Some("zh-CN")
    );
    page.click(".cs-deny");
    pending.await;
    tick().await;
    assert!(page.text(".cs-log").contains("未执行"));
}

/// Latin words in a row (three or more) in `text`.
fn latin_runs(text: &str) -> Vec<String> {
    let mut runs = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace()) {
        let bare = word.trim_matches(|c: char| c.is_ascii_punctuation() || !c.is_ascii());
        let latin = !bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphabetic());
        if latin {
            run.push(bare);
        } else {
            if run.len() >= 3 {
                runs.push(run.join(" "));
            }
            run.clear();
        }
    }
    if run.len() >= 3 {
        runs.push(run.join(" "));
    }
    runs
}

#[wasm_bindgen_test]
async fn every_word_the_zh_dock_says_itself_is_chinese() {
    let page = mount(Setup {
        locale: Locale::Zh,
        ..Setup::default()
    });
    // A card with its grant offer, a grant in the list, and a handoff: most of the dock.
    let first = page.call("save", r#"{"name":"a"}"#);
    tick().await;
    page.click(".cs-allow-session");
    first.await;
    let pending = page.call("archive", r#"{"name":"b"}"#);
    let handoff = page.call("publish", "{}");
    tick().await;
    let dock = page.q(".cs-dock").unwrap();
    let copy: web_sys::Element = dock.clone_node_with_deep(true).unwrap().dyn_into().unwrap();
    // What is not the dock's own: the model's text, and the page's declarations (titles,
    // handoff reasons, steps and expectations, written by this test page in English).
    let theirs = ".cs-model, style, .cs-card__title, .cs-grant strong, .cs-handoff__title, .cs-handoff__reason, .cs-step, .cs-handoff__expect, .cs-msg--outcome strong";
    let list = copy.query_selector_all(theirs).unwrap();
    for i in 0..list.length() {
        if let Some(node) = list.get(i) {
            if let Some(parent) = node.parent_node() {
                parent.remove_child(&node).unwrap();
            }
        }
    }
    let text = copy.text_content().unwrap_or_default();
    assert_eq!(latin_runs(&text), Vec::<String>::new(), "{text}");
    assert!(
        text.contains("的每次调用"),
        "the default grant rule is worded in Chinese: {text}"
    );
    page.click(".cs-deny");
    pending.await;
    page.click(".cs-handoff-cancel");
    handoff.await;
}
