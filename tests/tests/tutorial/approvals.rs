//! Cards: asked once or every time, always-allow and its revocation, edits, batches,
//! reloads, and a script's click that approves nothing.

use countersign_e2e::{ensure, Outcome, Ui};

pub(crate) async fn rename_with_approval(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.check_badge("Offline assistant").await?;
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

pub(crate) async fn always_allow_for_save_then_revoke(ui: &Ui<'_>) -> Outcome {
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

pub(crate) async fn archive_is_asked_twice_and_a_denial_changes_nothing(ui: &Ui<'_>) -> Outcome {
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
    // Offline the planner knows the title; a model over the wire knows only the id.
    ensure(
        answer.contains("Archive workspace") || answer.contains("archive_workspace"),
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
    if ui.offline {
        // Served without a gateway: nothing can mint the countersignature the archive's
        // backend needs, so it does not run, and the page says why.
        let answer = ui.answer_contains("countersignature").await?;
        ensure(answer.contains("Not done"), format!("answer: {answer}"))?;
        ui.wait_text(".cs-log", "no countersignature could be minted")
            .await?;
        ensure(
            ui.text("#archived-status").await? == "Active",
            "archived without a countersignature",
        )?;
        return ui.shot("05-archive-not-countersigned").await;
    }
    ui.wait_text("#archived-status", "Archived").await?;
    ui.answer_contains("Done").await?;
    ui.shot("05-archived").await
}

pub(crate) async fn reset_states_what_is_lost(ui: &Ui<'_>) -> Outcome {
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

/// Edit before approving: the edited arguments are a new call with its own card, and
/// only that one runs; the model is told what the person changed.
pub(crate) async fn an_edited_card_runs_only_the_edited_call(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    ui.click(".cs-edit-open").await?;
    ui.wait_for("input[data-field='name']").await?;
    ensure(
        ui.value("input[data-field='name']").await? == "Apollo",
        "the form starts from the model's arguments",
    )?;
    ui.type_into("input[data-field='name']", " Ltd").await?;
    ui.shot("20-edit-form").await?;
    ui.click(".cs-edit-submit").await?;
    ui.wait_for(".cs-card__edited").await?;
    let diff = ui.text(".cs-card__edited").await?;
    ensure(
        diff.contains("Apollo") && diff.contains("Apollo Ltd"),
        format!("the card shows original → edited: {diff}"),
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "an edit approved something",
    )?;
    ui.shot("21-edited-card").await?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#current-name", "Apollo Ltd").await?;
    ui.answer_contains("Apollo Ltd").await?;
    Ok(())
}

/// A card waiting when the page reloads comes back (asked again, nothing run), and the
/// conversation with it.
pub(crate) async fn a_pending_card_survives_a_reload(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    ui.shot("22-before-reload").await?;
    ui.reload().await?;
    ui.wait_for(".cs-card").await?;
    let consequence = ui.text(".cs-card__consequence").await?;
    ensure(
        consequence.contains("Apollo"),
        format!("the card came back: {consequence}"),
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "something ran by itself after the reload",
    )?;
    ensure(
        ui.text(".cs-log")
            .await?
            .contains("rename the workspace to Apollo"),
        "the chat came back",
    )?;
    ui.shot("23-after-reload").await?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.answer_contains("Done").await?;
    // Settled: another reload brings nothing back.
    ui.reload().await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ensure(ui.count(".cs-card").await? == 0, "a settled card came back")
}

/// Two calls in one message form a batch: "1 of 2", and "allow all in this batch"
/// (both are plain `Ask`) allows exactly the two listed.
pub(crate) async fn one_message_two_calls_is_a_batch(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo and set the description to Rockets")
        .await?;
    ui.wait_for(".cs-allow-batch").await?;
    ensure(
        ui.text(".cs-card__count").await? == "1 of 2",
        "the card counts the batch",
    )?;
    let listed = ui.text(".cs-batch").await?;
    ensure(
        listed.contains("Apollo") && listed.contains("Rockets"),
        format!("allow-all lists what it allows: {listed}"),
    )?;
    ui.shot("24-batch").await?;
    ui.click(".cs-allow-batch").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.wait_text("#description", "Rockets").await?;
    ui.answer_contains("Done").await?;
    // Archive is AskAlways: in a batch with it, "allow all" is not offered.
    ui.say("rename it to Zeus and archive it").await?;
    ui.wait_for(".cs-card").await?;
    ensure(
        ui.count(".cs-allow-batch").await? == 0,
        "allow-all offered next to an AskAlways item",
    )?;
    ui.click(".cs-deny").await?;
    ui.wait_text(".cs-card__count", "2 of 2").await?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("Not done").await?;
    Ok(())
}

/// A browser agent (or any script in the page) clicking the dock's own Allow approves
/// nothing: only a person's trusted gesture does. The person's real click then works.
pub(crate) async fn a_script_clicking_allow_approves_nothing(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    // A script that hooks listeners before the card is drawn, and calls the dock's own
    // click handler with a made-up event claiming `isTrusted: true`.
    ui.eval("const add = EventTarget.prototype.addEventListener; EventTarget.prototype.addEventListener = function (t, f, o) { if (t === 'click' && this.matches && this.matches('.cs-allow-once')) setTimeout(() => f.call(this, { isTrusted: true, type: 'click' }), 50); return add.call(this, t, f, o); };")
        .await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "a forged isTrusted event approved the rename",
    )?;
    ui.eval("document.querySelector('.cs-allow-once').click(); document.querySelector('.cs-allow-once').dispatchEvent(new MouseEvent('click', { bubbles: true }));")
        .await?;
    ui.wait_text(".cs-log", "A script, not you").await?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "a script's click approved the rename",
    )?;
    ensure(ui.count(".cs-card").await? == 1, "the card is gone")?;
    ui.shot("26-script-click-refused").await?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    Ok(())
}
