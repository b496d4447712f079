//! The quick start in `crates/leptos/README.md` works as written: an app made from the
//! README's own text in a scratch folder, built for release (wasm-opt and all), asks in
//! the chat and adds to its list only after the person's click. Headless Chromium.
#![allow(clippy::print_stdout, missing_docs)]

use countersign_e2e::{build_quick_start, ensure, serve_dir, Browser};

#[tokio::test]
async fn the_readme_s_quick_start_builds_for_release_and_asks_before_it_adds() -> Result<(), String>
{
    let dist = build_quick_start()?;
    let base = serve_dir(dist).await?;
    let browser = Browser::start().await?;
    let ui = browser.ui(base, "quick-start-")?;
    let outcome = async {
        ui.client
            .goto(&format!("{}/", ui.base))
            .await
            .map_err(|e| format!("could not open the page: {e}"))?;
        ui.wait_for(".cs-dock").await?;
        ui.say("add buy milk").await?;
        ui.wait_text(".cs-card__consequence", "buy milk").await?;
        ensure(
            ui.count("body > ul li").await? == 0,
            "added before the person's click",
        )?;
        ui.click(".cs-allow-once").await?;
        ui.wait_text("body > ul", "buy milk").await?;
        ensure(
            ui.count("[role='alert']").await? == 0,
            "the page shows an error",
        )?;
        ui.shot("added").await
    }
    .await;
    let _ = browser.client.close().await;
    outcome
}
