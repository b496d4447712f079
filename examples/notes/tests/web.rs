//! The notes example in headless Chromium: classification, remembered rules, previews,
//! the downgrade to the trash, and modes with an undo that stays possible.
#![cfg(target_arch = "wasm32")]
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use countersign::{Call, Mode, Session, Settled};
use countersign_leptos::{AgentDock, CountersignOptions};
use countersign_testing::{tick, Mounted};
use leptos::prelude::*;
use notes::{declare, starting_files, Files};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[component]
fn Harness(files: Files, trash: RwSignal<Vec<(String, String)>>) -> impl IntoView {
    declare(files, trash);
    view! { <p>"notes"</p> }
}

/// A mounted notes page: the shared harness (`countersign-testing`) and its files.
struct Page {
    mounted: Mounted,
    files: Files,
}

impl std::ops::Deref for Page {
    type Target = Mounted;
    fn deref(&self) -> &Mounted {
        &self.mounted
    }
}

fn mount() -> Page {
    let files = RwSignal::new(starting_files());
    let trash = RwSignal::new(Vec::new());
    let options = CountersignOptions {
        session: Session::new("editor", Vec::<String>::new()),
        // These tests click with element.click(), which is no person's gesture.
        trust_script_clicks: true,
        ..Default::default()
    };
    let mounted = countersign_testing::mount(options, move || {
        view! { <Harness files=files trash=trash /> <AgentDock /> }
    });
    Page { mounted, files }
}

impl Page {
    fn call(
        &self,
        action: &str,
        args: serde_json::Value,
    ) -> impl std::future::Future<Output = Settled> {
        self.cs.call(Call::new("tc", action, args.to_string()))
    }

    fn file(&self, path: &str) -> Option<String> {
        self.files.with_untracked(|f| f.get(path).cloned())
    }
}

fn code(s: &Settled) -> &'static str {
    s.outcome.code_str()
}

#[wasm_bindgen_test]
async fn writes_are_classified_by_path_allow_ask_deny() {
    let page = mount();
    let draft = page
        .call(
            "write_file",
            serde_json::json!({"path": "drafts/new.md", "content": "hi"}),
        )
        .await;
    assert_eq!(code(&draft), "OK", "drafts/ runs without a card");
    assert_eq!(page.file("drafts/new.md").as_deref(), Some("hi"));

    let config = page.call(
        "write_file",
        serde_json::json!({"path": "config.json", "content": "{}"}),
    );
    tick().await;
    assert!(page.q(".cs-card").is_some(), "overwriting config.json asks");
    assert!(
        page.q(".cs-allow-session").is_none(),
        "an argument the action flagged is asked every time"
    );
    page.click(".cs-deny");
    assert_eq!(code(&config.await), "PERMISSION_DENIED");
    assert_eq!(
        page.file("config.json").as_deref(),
        Some("{ \"theme\": \"light\" }")
    );

    let secret = page
        .call(
            "write_file",
            serde_json::json!({"path": ".env", "content": "x"}),
        )
        .await;
    assert_eq!(code(&secret), "POLICY_DENIED");
    assert!(secret.outcome.to_model_json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("holds secrets"));
    assert_eq!(page.file(".env").as_deref(), Some("API_KEY=do-not-touch"));
}

#[wasm_bindgen_test]
async fn the_card_previews_the_diff_and_the_counts() {
    let page = mount();
    let pending = page.call(
        "write_file",
        serde_json::json!({"path": "notes/todo.md", "content": "- write the tutorial\n- ship it"}),
    );
    tick().await;
    assert_eq!(page.text(".cs-diff__add"), "+ - ship it\n");
    assert!(page.text(".cs-diff__same").contains("- write the tutorial"));
    page.click(".cs-deny");
    pending.await;
    tick().await;
    let trash = page.call(
        "delete_file",
        serde_json::json!({"path": "drafts/ideas.md"}),
    );
    tick().await;
    assert!(page
        .text(".cs-counts")
        .contains("files moved to the trash: 1"));
    assert!(page.text(".cs-counts").contains("lines: 3"));
    page.click(".cs-deny");
    trash.await;
}

#[wasm_bindgen_test]
async fn delete_is_downgraded_to_the_trash_and_always_allow_remembers_the_folder() {
    let page = mount();
    let first = page.call(
        "delete_file",
        serde_json::json!({"path": "drafts/ideas.md"}),
    );
    tick().await;
    assert_eq!(
        page.text(".cs-card__title"),
        "Move to trash",
        "the card is for what will run"
    );
    assert!(page
        .text(".cs-card__rule")
        .contains("files under `drafts/`"));
    page.click(".cs-allow-session");
    assert_eq!(code(&first.await), "OK");
    assert!(page.file("drafts/ideas.md").is_none());

    let second = page
        .call("delete_file", serde_json::json!({"path": "drafts/plan.md"}))
        .await;
    assert_eq!(code(&second), "OK", "same folder: no card");
    tick().await;
    assert!(page.q(".cs-card").is_none());

    let other = page.call("delete_file", serde_json::json!({"path": "notes/todo.md"}));
    tick().await;
    assert!(page.q(".cs-card").is_some(), "another folder asks");
    page.click(".cs-deny");
    assert_eq!(code(&other.await), "PERMISSION_DENIED");
    assert!(page.file("notes/todo.md").is_some());
}

#[wasm_bindgen_test]
async fn away_refuses_what_asks_but_undo_stays_possible() {
    let page = mount();
    let trashed = page.call(
        "delete_file",
        serde_json::json!({"path": "drafts/ideas.md"}),
    );
    tick().await;
    page.click(".cs-allow-once");
    assert_eq!(code(&trashed.await), "OK");
    page.cs.set_mode(Mode::Away).unwrap();
    tick().await;
    assert!(page.q(".cs-banner--away").is_some());
    let refused = page
        .call("delete_file", serde_json::json!({"path": "notes/todo.md"}))
        .await;
    assert_eq!(code(&refused), "POLICY_DENIED");
    assert!(page.file("notes/todo.md").is_some());
    let undo = page.call("undo", serde_json::json!({})).await;
    assert_eq!(code(&undo), "OK", "escape is never blocked");
    assert!(page.file("drafts/ideas.md").is_some());
    assert!(page
        .cs
        .audit()
        .records()
        .iter()
        .any(|r| &*r.action == "undo" && r.mode == Mode::Away));
}
