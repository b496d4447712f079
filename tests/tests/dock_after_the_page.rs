//! An app whose `Trunk.toml` has the one `countersign-split` hook line (the
//! `examples/lazy-dock` app, built with trunk for release) gets its dock lazily: the page
//! is interactive while its Countersign part is still on the way, and the dock works
//! once it has arrived. Driven in headless Chromium through ChromeDriver.
#![allow(clippy::print_stdout, missing_docs)]

use countersign_e2e::{build_lazy_dock, ensure, serve_dir_holding, Browser, Ui, WAIT};

/// The lazy part's file: `countersign-split` names it `{app}.split_{name}.wasm`.
fn is_lazy_part(path: &str) -> bool {
    path.contains(".split_") && path.ends_with(".wasm")
}

/// The texts of the page's list, in order.
async fn todos(ui: &Ui<'_>) -> Result<Vec<String>, String> {
    let list = ui
        .eval("return [...document.querySelectorAll('#todos li')].map(li => li.textContent)")
        .await?;
    Ok(list
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

#[tokio::test]
async fn the_page_works_before_its_dock_arrives_and_then_the_dock_does() -> Result<(), String> {
    let dist = build_lazy_dock()?;
    let (base, held) = serve_dir_holding(dist, is_lazy_part).await?;
    let browser = Browser::start().await?;
    let ui = browser.ui(base, "lazy-dock-")?;
    let outcome = async {
        ui.client
            .goto(&format!("{}/", ui.base))
            .await
            .map_err(|e| format!("could not open the page: {e}"))?;
        // The page asks for its Countersign part once it runs; the server holds it back.
        let deadline = tokio::time::Instant::now() + WAIT;
        while held.requested() == 0 {
            ensure(
                tokio::time::Instant::now() < deadline,
                "the page never asked for its lazy part",
            )?;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // Meanwhile the page is interactive: its own form adds to its list (a form the
        // main part did not handle would reload the page, and the list would be empty).
        ui.type_into("#new-todo", "water the plants").await?;
        ui.click("#add").await?;
        ui.wait_text("#todos", "water the plants").await?;
        ensure(ui.count(".cs-dock").await? == 0, "a dock without its part")?;
        ui.shot("the-page-before-its-dock").await?;
        // The part arrives: the dock appears and the assistant's call is countersigned.
        held.release();
        ui.wait_for(".cs-dock").await?;
        ui.say("add buy milk").await?;
        ui.wait_text(".cs-card__consequence", "buy milk").await?;
        ensure(
            todos(&ui).await? == ["water the plants"],
            "added before the countersignature",
        )?;
        ui.click(".cs-allow-once").await?;
        ui.wait_text("#todos", "buy milk").await?;
        ensure(
            todos(&ui).await? == ["water the plants", "buy milk"],
            format!("the list is {:?}", todos(&ui).await?),
        )?;
        ensure(
            ui.count("[role='alert']").await? == 0,
            "the page says the assistant could not be loaded",
        )?;
        ensure(
            held.requested() == 1,
            format!("the lazy part was fetched {} times", held.requested()),
        )?;
        ui.shot("the-dock-after-the-page").await
    }
    .await;
    let _ = browser.client.close().await;
    outcome
}
