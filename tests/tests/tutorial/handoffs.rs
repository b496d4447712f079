//! The publish handoff (cancelled, a wrong code, the right one and its receipt) and a
//! question answered without a change.

use countersign_e2e::{ensure, Outcome, Ui};

pub(crate) async fn publish_handoff_cancelled(ui: &Ui<'_>) -> Outcome {
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

/// "I've done it" pressed too early says "not yet" and keeps the handoff: the person
/// enters the right code and it completes, one outcome for the model.
pub(crate) async fn publish_with_a_wrong_code_says_not_yet_and_the_right_one_publishes(
    ui: &Ui<'_>,
) -> Outcome {
    ui.open("en").await?;
    ui.say("publish").await?;
    ui.wait_for(".cs-handoff").await?;
    ui.type_into("#verification-code", "111111").await?;
    ui.click("#publish").await?;
    ui.wait_text(".error", "not right").await?;
    ui.click(".cs-handoff-done").await?;
    ui.wait_text(".cs-handoff__not-yet", "Not yet").await?;
    ensure(
        ui.text("#publish-status").await? == "Draft",
        "a wrong code published",
    )?;
    ensure(
        ui.count(".cs-msg--outcome[data-action='publish_changes']")
            .await?
            == 0,
        "an outcome while the handoff still waits",
    )?;
    ui.shot("07-publish-not-yet").await?;
    ui.clear("#verification-code").await?;
    ui.type_into("#verification-code", "246810").await?;
    ui.click("#publish").await?;
    ui.wait_text("#publish-status", "Published").await?;
    ui.click(".cs-handoff-done").await?;
    ui.wait_for(".cs-msg--outcome[data-code='OK'][data-action='publish_changes']")
        .await?;
    ensure(
        ui.count(".cs-msg--outcome[data-action='publish_changes']")
            .await?
            == 1,
        "one outcome",
    )
}

pub(crate) async fn publish_with_the_code_gives_the_receipt(ui: &Ui<'_>) -> Outcome {
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

pub(crate) async fn a_question_is_answered_without_changing_anything(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("What is the workspace called?").await?;
    let answer = ui.answer_contains("called").await?;
    ensure(answer.contains("Atlas"), format!("answer: {answer}"))?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a read asked for approval",
    )
}
