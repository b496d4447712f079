//! Words a stranger wrote reach the assistant (the members' requests, one with an
//! injected instruction): the gullible assistant obeys, and the gate asks the person
//! though "always allow" covers the change.

use countersign_e2e::{ensure, Outcome, Ui};

/// A member's request tells the assistant to rename the workspace; the (gullible)
/// assistant obeys, and the gate asks though "always allow" covers renames.
pub(crate) async fn an_injected_request_is_asked_though_always_allow_was_given(
    ui: &Ui<'_>,
) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-allow-session").await?;
    ui.click(".cs-allow-session").await?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.wait_for(".cs-grant").await?;
    ui.say("read the member requests").await?;
    ui.wait_for(".cs-card__untrusted").await?;
    let notice = ui.text(".cs-card__untrusted").await?;
    ensure(
        notice.contains("Read member requests") && notice.contains("not yours"),
        format!("the card says why it asks: {notice}"),
    )?;
    ensure(
        ui.text(".cs-card__consequence").await?.contains("Pwned"),
        "the card shows the injected rename",
    )?;
    ensure(
        ui.count(".cs-allow-session").await? == 0,
        "a card raised by untrusted content offered \"always allow\"",
    )?;
    ensure(
        ui.count(".cs-card__hint").await? == 0,
        "a raised rename was called dangerous",
    )?;
    ensure(
        ui.text("#current-name").await? == "Apollo",
        "the injected rename ran before the person decided",
    )?;
    ui.shot("03b-injection-asked").await?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("Not done").await?;
    ensure(
        ui.text("#current-name").await? == "Apollo",
        "a denied injected rename changed the name",
    )?;
    // The person's own next request is covered by their grant again.
    ui.say("rename the workspace to Zeus").await?;
    ui.wait_text("#current-name", "Zeus").await?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "the person's own rename showed a card",
    )
}
