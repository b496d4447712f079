//! The workspace-settings tutorial in a real browser: built with trunk, served on
//! loopback, driven through ChromeDriver as a person would, asserting what is on screen.
//! Screenshots of key states go to `target/e2e-screenshots/` (printed at the start).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::indexing_slicing,
    missing_docs
)]

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use countersign_e2e::{build_tutorial, ensure, serve_dir, workspace_root, Browser, Outcome, Ui};

type Scenario = for<'a> fn(&'a Ui<'a>) -> Pin<Box<dyn Future<Output = Outcome> + 'a>>;

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|ui| Box::pin($name(ui))) as Scenario)),*]
    };
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let shots = workspace_root().join("target").join("e2e-screenshots");
    if let Err(e) = std::fs::create_dir_all(&shots) {
        eprintln!("e2e: cannot create {}: {e}", shots.display());
        return ExitCode::FAILURE;
    }
    println!("e2e: screenshots go to {}", shots.display());
    let setup = async {
        let dist = build_tutorial()?;
        let base = serve_dir(dist).await?;
        let browser = Browser::start().await?;
        Ok::<_, String>((base, browser))
    };
    let (base, browser) = match setup.await {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("e2e: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ui = Ui {
        client: &browser.client,
        base,
        shots,
    };
    let all = scenarios![
        rename_with_approval,
        always_allow_for_save_then_revoke,
        archive_is_asked_twice_and_a_denial_changes_nothing,
        reset_states_what_is_lost,
        publish_handoff_cancelled,
        publish_with_a_wrong_code_is_a_failed_handoff,
        publish_with_the_code_gives_the_receipt,
        a_question_is_answered_without_changing_anything,
        the_same_flow_in_chinese,
        the_dock_is_readable_at_360_px,
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, scenario) in all {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let _ = ui.size(1280, 900).await;
        match scenario(&ui).await {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Err(e) => {
                failed += 1;
                let _ = ui.shot(&format!("FAILED-{name}")).await;
                println!("test {name} ... FAILED\n    {e}");
            }
        }
    }
    let _ = browser.client.close().await;
    println!("\ne2e: {passed} passed, {failed} failed");
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn rename_with_approval(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.wait_text(".cs-badge--offline", "Offline assistant")
        .await?;
    ui.say("Please rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    ensure(
        ui.text(".cs-card__title").await? == "Save workspace name",
        "the card names the action",
    )?;
    let consequence = ui.text(".cs-card__consequence").await?;
    ensure(
        consequence.contains("Atlas") && consequence.contains("Apollo"),
        format!("consequence: {consequence}"),
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "renamed before approval",
    )?;
    ensure(
        ui.has_class("#workspace-name", "cs-highlight").await?,
        "the card points at the name field",
    )?;
    ui.shot("01-rename-card").await?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.answer_contains("Done").await?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        !ui.has_class("#workspace-name", "cs-highlight").await?,
        "highlight left after the card",
    )?;
    ui.shot("02-renamed").await
}

async fn always_allow_for_save_then_revoke(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-allow-session").await?;
    ui.click(".cs-allow-session").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.wait_for(".cs-grant").await?;
    ui.shot("03-grant-listed").await?;
    ui.say("rename the workspace to Zeus").await?;
    ui.wait_text("#current-name", "Zeus").await?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a granted rename showed a card",
    )?;
    ui.answer_contains("Zeus").await?;
    ui.click(".cs-revoke").await?;
    ui.wait_gone(".cs-grant").await?;
    ui.say("rename the workspace to Hera").await?;
    ui.wait_for(".cs-card").await?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("Not done").await?;
    ensure(
        ui.text("#current-name").await? == "Zeus",
        "a denied rename changed the name",
    )
}

async fn archive_is_asked_twice_and_a_denial_changes_nothing(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("archive it").await?;
    ui.wait_for(".cs-card--danger").await?;
    ensure(
        ui.count(".cs-allow-session").await? == 0,
        "archive offered always-allow",
    )?;
    ui.type_into(".cs-reason", "we still use it").await?;
    ui.shot("04-archive-card").await?;
    ui.click(".cs-deny").await?;
    let answer = ui.answer_contains("Not done").await?;
    ensure(
        answer.contains("Archive workspace"),
        format!("answer: {answer}"),
    )?;
    ensure(
        ui.text("#archived-status").await? == "Active",
        "a denied archive archived",
    )?;
    ui.say("archive it").await?;
    ui.wait_for(".cs-card--danger").await?;
    ensure(
        ui.count(".cs-allow-session").await? == 0,
        "second archive offered always-allow",
    )?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#archived-status", "Archived").await?;
    ui.answer_contains("Done").await?;
    ui.shot("05-archived").await
}

async fn reset_states_what_is_lost(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("reset the workspace").await?;
    ui.wait_for(".cs-card--danger").await?;
    let consequence = ui.text(".cs-card__consequence").await?;
    ensure(
        consequence.contains("will be lost")
            && consequence.contains("Atlas")
            && consequence.contains("36 characters"),
        format!("consequence: {consequence}"),
    )?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("Not done").await?;
    ensure(
        ui.text("#description").await? == "Shared settings for the design team.",
        "a denied reset reset",
    )
}

async fn publish_handoff_cancelled(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("publish").await?;
    ui.wait_for(".cs-handoff").await?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a handoff was also a card",
    )?;
    ensure(
        ui.has_class("#verification-code", "cs-highlight").await?,
        "step 1 highlights the code field",
    )?;
    ensure(
        ui.value("#verification-code").await?.is_empty(),
        "the assistant filled the code",
    )?;
    ui.shot("06-publish-handoff").await?;
    ui.click(".cs-handoff-next").await?;
    ui.wait_for("#publish.cs-highlight").await?;
    ensure(
        !ui.has_class("#verification-code", "cs-highlight").await?,
        "step 1 stayed highlighted",
    )?;
    ui.click(".cs-handoff-cancel").await?;
    ui.answer_contains("cancelled").await?;
    ui.wait_gone(".cs-handoff").await?;
    ensure(
        ui.count(".cs-highlight").await? == 0,
        "a highlight outlived the handoff",
    )?;
    ensure(
        ui.text("#publish-status").await? == "Draft",
        "cancel published",
    )
}

async fn publish_with_a_wrong_code_is_a_failed_handoff(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("publish").await?;
    ui.wait_for(".cs-handoff").await?;
    ui.type_into("#verification-code", "111111").await?;
    ui.click("#publish").await?;
    ui.wait_text(".error", "not right").await?;
    ui.click(".cs-handoff-done").await?;
    ui.answer_contains("did not happen").await?;
    ui.wait_for(".cs-msg--outcome[data-code='HANDOFF_FAILED']")
        .await?;
    ensure(
        ui.text("#publish-status").await? == "Draft",
        "a wrong code published",
    )?;
    ui.shot("07-publish-failed").await
}

async fn publish_with_the_code_gives_the_receipt(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("publish the changes").await?;
    ui.wait_for(".cs-handoff").await?;
    ui.type_into("#verification-code", "246810").await?;
    ensure(
        ui.count(".cs-msg--outcome[data-code='OK']").await? == 0,
        "a receipt before the person acted",
    )?;
    ui.click("#publish").await?;
    ui.wait_text("#publish-status", "Published").await?;
    ui.click(".cs-handoff-done").await?;
    ui.answer_contains("Done").await?;
    ui.wait_for(".cs-msg--outcome[data-code='OK'][data-action='publish_changes']")
        .await?;
    ui.shot("08-published").await
}

async fn a_question_is_answered_without_changing_anything(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("What is the workspace called?").await?;
    let answer = ui.answer_contains("called").await?;
    ensure(answer.contains("Atlas"), format!("answer: {answer}"))?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a read asked for approval",
    )
}

async fn the_same_flow_in_chinese(ui: &Ui<'_>) -> Outcome {
    ui.open("zh").await?;
    ui.wait_text(".cs-dock h2", "助手").await?;
    ui.wait_text(".cs-badge--offline", "离线助手").await?;
    ui.say("把工作区重命名为 阿波罗").await?;
    ui.wait_for(".cs-card").await?;
    ensure(
        ui.text(".cs-allow-once").await? == "允许一次",
        "Chinese allow button",
    )?;
    ensure(
        ui.text(".cs-card__title").await? == "保存工作区名称",
        "Chinese card title",
    )?;
    ui.shot("09-zh-card").await?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#current-name", "阿波罗").await?;
    ui.answer_contains("已完成").await?;
    ui.say("归档").await?;
    ui.wait_for(".cs-card--danger").await?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("未执行").await?;
    ensure(
        ui.text("#archived-status").await? == "活跃",
        "a denied archive archived",
    )?;
    ui.say("发布").await?;
    ui.wait_text(".cs-handoff", "轮到你了").await?;
    ui.type_into("#verification-code", "246810").await?;
    ui.click("#publish").await?;
    ui.wait_text("#publish-status", "已发布").await?;
    ui.click(".cs-handoff-done").await?;
    ui.answer_contains("已完成").await?;
    ui.shot("10-zh-published").await
}

async fn the_dock_is_readable_at_360_px(ui: &Ui<'_>) -> Outcome {
    ui.size(360, 800).await?;
    ui.open("en").await?;
    ui.say("archive it").await?;
    ui.wait_for(".cs-card").await?;
    let overflow = ui
        .eval("const c = document.querySelector('.cs-card').getBoundingClientRect(); return [c.left, c.right, document.documentElement.clientWidth];")
        .await?;
    let nums: Vec<f64> = overflow
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    ensure(
        nums.len() == 3 && nums[0] >= 0.0 && nums[1] <= nums[2] + 0.5,
        format!("the card overflows at 360 px: {nums:?}"),
    )?;
    let buttons_fit = ui
        .eval("return [...document.querySelectorAll('.cs-card .cs-btn')].every(b => b.getBoundingClientRect().right <= document.documentElement.clientWidth);")
        .await?;
    ensure(
        buttons_fit == serde_json::Value::Bool(true),
        "a card button is off screen at 360 px",
    )?;
    ui.eval("document.querySelector('.cs-card').scrollIntoView()")
        .await?;
    ui.shot("11-narrow-card").await
}
