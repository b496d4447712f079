//! The page's four actions, declared from the settings component.

use countersign::{action::NoParams, Action, Confirm, Expect, Handoff, Kind};
use countersign_leptos::{use_action_with_options, UseActionOptions};
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::copy::PageText;
use crate::workspace::{validate_description, validate_name, Workspace};

/// Params of `save_workspace_name`.
#[derive(Clone, Deserialize, JsonSchema)]
struct Rename {
    /// The new workspace name: 1 to 64 characters, no control characters.
    name: String,
}

/// Params of `save_description`.
#[derive(Clone, Deserialize, JsonSchema)]
struct Describe {
    /// The new one-line description: at most 200 characters.
    description: String,
}

/// Registers the page's actions for as long as the settings component is mounted.
pub(crate) fn declare(ws: Workspace, copy: &'static PageText) {
    // Member requests: a read of what strangers wrote. After it, and until the person
    // writes again, every change is asked one level higher and no grant covers it.
    use_action_with_options(
        Action::<NoParams>::new("read_member_requests", copy.requests_desc)
            .title(copy.requests_title)
            .returns_untrusted()
            .run(move |_| async move { Ok::<_, String>(copy.member_requests) }),
        UseActionOptions::default(),
    );
    // Save name: Write + confirm Ask → asked the first time; "always allow this session" is offered.
    use_action_with_options(
        Action::<Rename>::new("save_workspace_name", copy.save_desc)
            .title(copy.save_title)
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .scope("workspace.write")
            .available(move || !ws.archived.get_untracked())
            .validate(|p| validate_name(&p.name))
            .consequence(move |p| copy.rename_consequence(&ws.name.get_untracked(), p.name.trim()))
            .run(move |p: Rename| async move {
                ws.rename(p.name.trim());
                Ok::<_, String>(json!({ "name": ws.name.get_untracked() }))
            })
            .verify(move |p, _| {
                if ws.name.get_untracked() == p.name.trim() {
                    Ok(())
                } else {
                    Err("the page still shows the old name".into())
                }
            }),
        UseActionOptions::default().target("workspace_name"),
    );

    // Description: Write + confirm Ask, like the name. Asked for in the same message as a
    // rename, the two calls form one batch ("1 of 2", "Allow all in this batch").
    use_action_with_options(
        Action::<Describe>::new("save_description", copy.describe_desc)
            .title(copy.describe_title)
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .scope("workspace.write")
            .available(move || !ws.archived.get_untracked())
            .validate(|p| validate_description(p.description.trim()))
            .consequence(move |p| {
                copy.describe_consequence(&ws.description.get_untracked(), p.description.trim())
            })
            .run(move |p: Describe| async move {
                ws.description.set(p.description.trim().to_owned());
                Ok::<_, String>(json!({ "description": ws.description.get_untracked() }))
            })
            .verify(move |p, _| {
                if ws.description.get_untracked() == p.description.trim() {
                    Ok(())
                } else {
                    Err("the page still shows the old description".into())
                }
            }),
        UseActionOptions::default().target("description"),
    );

    // Archive: Danger declared with confirm Ask as well; still asked every time (AskAlways).
    use_action_with_options(
        workspace_settings_actions::archive(copy.archive_desc, copy.archive_title)
            .available(move || !ws.archived.get_untracked())
            .consequence(move |_| copy.archive_consequence(&ws.name.get_untracked()))
            // The backend archives only with a countersignature for exactly this call.
            .run_countersigned(move |_, token| async move {
                let done = backend("archive_workspace", &token).await?;
                ws.archived.set(true);
                Ok::<_, String>(json!({ "archived": true, "countersignature": done }))
            })
            .verify(move |_, _| {
                if ws.archived.get_untracked() {
                    Ok(())
                } else {
                    Err("the page does not show the workspace as archived".into())
                }
            }),
        UseActionOptions::default().target("archive_button"),
    );

    // Reset: Danger → asked every time; the consequence states what is lost.
    use_action_with_options(
        workspace_settings_actions::reset(copy.reset_desc, copy.reset_title)
            .available(move || !ws.archived.get_untracked())
            .consequence(move |_| {
                copy.reset_consequence(
                    &ws.name.get_untracked(),
                    ws.description.with_untracked(|d| d.chars().count()),
                )
            })
            // Reset loses data: the backend also wants the person's passkey (and a server
            // with an approval window raises it there).
            .run_countersigned(move |_, token| async move {
                let done = backend("reset_workspace", &token).await?;
                ws.reset();
                Ok::<_, String>(
                    json!({ "name": ws.name.get_untracked(), "countersignature": done }),
                )
            }),
        UseActionOptions::default().target("reset_button"),
    );

    // Publish: Danger with a handoff. The assistant cannot do it: the person types the
    // code and presses Publish; only the page turning "published" completes it.
    use_action_with_options(
        Action::<NoParams>::new("publish_changes", copy.publish_desc)
            .title(copy.publish_title)
            .kind(Kind::Danger)
            .scope("workspace.admin")
            .available(move || !ws.archived.get_untracked() && !ws.published.get_untracked())
            .handoff(
                Handoff::new(
                    copy.publish_reason,
                    Expect::new(copy.publish_expect, move || ws.published.get_untracked()),
                )
                .step(copy.publish_step_one, Some("verification_code"))
                .step(copy.publish_step_two, Some("publish_button")),
            ),
        UseActionOptions::default().target("publish_button"),
    );
}

/// Sends the call (its approved arguments and token) to the tutorial's backend (the
/// gateway's `--demo-backend`), which checks the token against the action and those
/// arguments, and refuses a replay. Returns the token's id and how it was approved, as the
/// backend saw them.
async fn backend(
    action: &str,
    token: &countersign::countersignature::Countersignature,
) -> Result<Value, String> {
    let url = format!("/v1/demo/{action}");
    let (status, body) = countersign_leptos::post_countersigned(&url, token).await?;
    let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if status == 200 {
        Ok(answer
            .get("countersignature")
            .cloned()
            .unwrap_or(Value::Null))
    } else {
        let code = answer
            .pointer("/error/code")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        Err(format!("the backend refused it (HTTP {status}, {code})"))
    }
}
