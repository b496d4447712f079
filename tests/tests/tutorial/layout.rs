//! How the dock reads: in Chinese, at 360 px, under axe, from the keyboard, light and
//! dark.

use countersign_e2e::{ensure, Outcome, Ui};

pub(crate) async fn the_same_flow_in_chinese(ui: &Ui<'_>) -> Outcome {
    ui.open("zh").await?;
    ui.wait_text(".cs-dock h2", "助手").await?;
    ui.check_badge("离线助手").await?;
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

pub(crate) async fn the_dock_is_readable_at_360_px(ui: &Ui<'_>) -> Outcome {
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

/// On a phone the dock is a bottom sheet: the handoff's highlighted field above it and
/// its "I've done it" in it are on screen together, and the field can be typed into.
pub(crate) async fn a_phone_shows_the_handoff_s_field_and_its_done_together(
    ui: &Ui<'_>,
) -> Outcome {
    ui.size(390, 844).await?;
    ui.open("en").await?;
    ui.say("publish").await?;
    ui.wait_for("#verification-code.cs-highlight").await?;
    // The highlight scrolls smoothly: let it settle.
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let places = ui
        .eval(
            "const h = window.innerHeight, w = document.documentElement.clientWidth;
             const box = s => document.querySelector(s).getBoundingClientRect();
             const dock = box('.cs-dock'), field = box('#verification-code'), done = box('.cs-handoff-done');
             const seen = r => r.top >= 0 && r.bottom <= h && r.left >= 0 && r.right <= w + 0.5;
             return { sheet: dock.bottom >= h - 1 && dock.top >= h * 0.4 && dock.left <= 0.5,
                      field: seen(field) && field.bottom <= dock.top, done: seen(done) && done.top >= dock.top };",
        )
        .await?;
    ensure(
        places == serde_json::json!({"sheet": true, "field": true, "done": true}),
        format!("at 390 px: {places}"),
    )?;
    ui.shot("29-phone-handoff").await?;
    ui.type_into("#verification-code", "246810").await?;
    ui.click("#publish").await?;
    ui.wait_text("#publish-status", "Published").await?;
    ui.click(".cs-handoff-done").await?;
    ui.answer_contains("Done").await?;
    Ok(())
}

/// axe-core on the dock with a card, a handoff, the grants list, the settings and the
/// chat open, in English and Chinese: no serious or critical violations.
pub(crate) async fn the_dock_passes_axe_in_english_and_chinese(ui: &Ui<'_>) -> Outcome {
    for (lang, rename, both) in [
        (
            "en",
            "rename the workspace to Apollo",
            "archive and publish",
        ),
        ("zh", "把工作区重命名为 Apollo", "归档然后发布"),
    ] {
        ui.open(lang).await?;
        ui.say(rename).await?;
        ui.wait_for(".cs-card").await?;
        ui.click(".cs-allow-session").await?;
        ui.wait_for(".cs-grant").await?;
        ui.say(both).await?;
        ui.wait_for(".cs-card").await?;
        ui.wait_for(".cs-handoff").await?;
        // The settings open too, so their controls are checked with the rest.
        ui.open_settings().await?;
        let violations = ui.axe(".cs-dock").await?;
        ensure(
            violations.is_empty(),
            format!("axe ({lang}): {}", violations.join("; ")),
        )?;
        ui.shot(&format!("axe-{lang}")).await?;
        ui.click(".cs-deny").await?;
        ui.click(".cs-handoff-cancel").await?;
        ui.wait_gone(".cs-handoff").await?;
    }
    Ok(())
}

/// Tab to the card, approve; deny with a reason typed in; cancel a handoff: keyboard only.
pub(crate) async fn the_whole_approval_flow_works_from_the_keyboard(ui: &Ui<'_>) -> Outcome {
    const TAB: &str = "\u{E004}";
    const ENTER: &str = "\u{E007}";
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    // The card takes the focus when it appears; Tab walks to its buttons.
    let mut found = false;
    for _ in 0..12 {
        if ui.focused_class().await?.contains("cs-allow-once") {
            found = true;
            break;
        }
        ui.keys(TAB).await?;
    }
    ensure(found, "Tab never reached \"Allow once\"")?;
    ui.keys(ENTER).await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.say("archive").await?;
    ui.wait_for(".cs-card").await?;
    let mut typed = false;
    for _ in 0..12 {
        if ui.focused_class().await?.contains("cs-reason") {
            ui.keys("not today").await?;
            typed = true;
            break;
        }
        ui.keys(TAB).await?;
    }
    ensure(typed, "Tab never reached the reason field")?;
    let mut denied = false;
    for _ in 0..12 {
        ui.keys(TAB).await?;
        if ui.focused_class().await?.contains("cs-deny") {
            ui.keys(ENTER).await?;
            denied = true;
            break;
        }
    }
    ensure(denied, "Tab never reached \"Deny\"")?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        ui.text("#archived-status").await? == "Active",
        "a denial changed nothing",
    )?;
    // The handoff, cancelled from the keyboard too.
    ui.say("publish").await?;
    ui.wait_for(".cs-handoff").await?;
    ui.eval("document.querySelector('.cs-input').focus(); return null")
        .await?;
    let mut cancelled = false;
    for _ in 0..20 {
        ui.keys("\u{E008}\u{E004}").await?; // Shift+Tab: back up from the chat into the dock
        if ui.focused_class().await?.contains("cs-handoff-cancel") {
            ui.keys(ENTER).await?;
            cancelled = true;
            break;
        }
    }
    ensure(cancelled, "Shift+Tab never reached the handoff's Cancel")?;
    ui.wait_gone(".cs-handoff").await?;
    // And the handoff done: Shift+Tab back into the page to the code, type it, Tab to
    // Publish and press it, then Tab on into the dock to "I've done it".
    ui.say("publish").await?;
    ui.wait_for(".cs-handoff").await?;
    let mut at_code = false;
    for _ in 0..40 {
        ui.keys("\u{E008}\u{E004}").await?;
        if ui.focused_attr("id").await? == "verification-code" {
            at_code = true;
            break;
        }
    }
    ensure(
        at_code,
        "Shift+Tab never reached the verification code field",
    )?;
    ui.keys("246810").await?;
    ui.keys(TAB).await?;
    ensure(
        ui.focused_attr("id").await? == "publish",
        format!(
            "Tab from the code went to `{}`",
            ui.focused_attr("id").await?
        ),
    )?;
    ui.keys(ENTER).await?;
    let mut done = false;
    for _ in 0..40 {
        ui.keys(TAB).await?;
        if ui.focused_class().await?.contains("cs-handoff-done") {
            ui.keys(ENTER).await?;
            done = true;
            break;
        }
    }
    ensure(done, "Tab never reached \"I've done it\"")?;
    ui.wait_gone(".cs-handoff").await?;
    ui.wait_text("#publish-status", "Published").await?;
    ui.answer_contains("Done").await?;
    Ok(())
}

/// The dock's background, as the browser computed it.
async fn dock_background(ui: &Ui<'_>) -> Result<String, String> {
    let value = ui
        .eval("return getComputedStyle(document.querySelector('.cs-dock')).backgroundColor")
        .await?;
    Ok(value.as_str().unwrap_or_default().to_owned())
}

/// Light by default (a screenshot for the record).
pub(crate) async fn the_dock_is_light_by_default(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("archive").await?;
    ui.wait_for(".cs-card").await?;
    let background = dock_background(ui).await?;
    ensure(
        background == "rgb(255, 255, 255)",
        format!("light background: {background}"),
    )?;
    ui.shot("theme-light").await?;
    ui.click(".cs-deny").await?;
    ui.wait_gone(".cs-card").await
}

/// In a browser that prefers dark, the dock's custom properties switch (a screenshot for
/// the record).
pub(crate) async fn the_dock_follows_a_dark_preference(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("archive").await?;
    ui.wait_for(".cs-card").await?;
    let background = dock_background(ui).await?;
    ensure(
        background == "rgb(15, 23, 42)",
        format!("dark background: {background}"),
    )?;
    ui.shot("theme-dark").await?;
    ui.click(".cs-deny").await?;
    ui.wait_gone(".cs-card").await
}

pub(crate) async fn the_edit_form_and_the_batch_fit_at_360_px(ui: &Ui<'_>) -> Outcome {
    ui.size(360, 800).await?;
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo and set the description to Rockets")
        .await?;
    ui.wait_for(".cs-allow-batch").await?;
    ui.click(".cs-edit-open").await?;
    ui.wait_for(".cs-edit").await?;
    ensure(
        !ui.displayed(".cs-allow-once").await?,
        "Allow is on screen while the person edits",
    )?;
    let fits = ui
        .eval("const w = document.documentElement.clientWidth; return [...document.querySelectorAll('.cs-card, .cs-edit, .cs-edit input, .cs-batch, .cs-card .cs-btn')].every(e => { const r = e.getBoundingClientRect(); return r.left >= 0 && r.right <= w + 0.5; });")
        .await?;
    ensure(
        fits == serde_json::Value::Bool(true),
        "the edit form or the batch overflows at 360 px",
    )?;
    ui.eval("document.querySelector('.cs-edit').scrollIntoView()")
        .await?;
    ui.shot("25-narrow-edit").await
}
