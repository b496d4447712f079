//! A browser agent calls the tutorial's actions through Chromium's own WebMCP
//! (`document.modelContext`, on with `--enable-features=WebMCP`), driven from WebDriver
//! as an agent in the browser would: `getTools()` to list, `executeTool()` to call. The
//! person decides on the dock's card; the agent gets the gate's JSON.

use std::time::Instant;

use countersign_e2e::{ensure, Outcome, Ui, WAIT};
use serde_json::{json, Value};

/// The tools the page registered: `[{name, description, inputSchema, annotations}]`.
async fn tools(ui: &Ui<'_>) -> Result<Vec<Value>, String> {
    let listed = ui
        .eval(
            "return document.modelContext.getTools().then(tools => tools.map(t => ({
                name: t.name, description: t.description, inputSchema: t.inputSchema,
                annotations: t.annotations })));",
        )
        .await?;
    Ok(listed.as_array().cloned().unwrap_or_default())
}

async fn tool_names(ui: &Ui<'_>) -> Result<Vec<String>, String> {
    Ok(tools(ui)
        .await?
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect())
}

/// Starts `executeTool(name, input)` and returns at once; [`result`] waits for it.
async fn execute(ui: &Ui<'_>, key: &str, name: &str, input: &Value) -> Outcome {
    let script = format!(
        "const key = {key}, name = {name}, input = {input};
         window.__agent = window.__agent || {{}};
         return document.modelContext.getTools().then(tools => {{
           const tool = tools.find(t => t.name === name);
           if (!tool) return 'no tool ' + name;
           window.__agent[key] = {{ done: false }};
           document.modelContext.executeTool(tool, input).then(
             r => {{ window.__agent[key] = {{ done: true, result: r }}; }},
             e => {{ window.__agent[key] = {{ done: true, error: String(e) }}; }});
           return 'started';
         }});",
        key = json!(key),
        name = json!(name),
        input = input,
    );
    let started = ui.eval(&script).await?;
    ensure(
        started == json!("started"),
        format!("executeTool: {started}"),
    )
}

/// The JSON the tool's execution resolved with.
async fn result(ui: &Ui<'_>, key: &str) -> Result<Value, String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let state = ui
            .eval(&format!(
                "return (window.__agent || {{}})[{}] || null;",
                json!(key)
            ))
            .await?;
        if state["done"] == json!(true) {
            if let Some(error) = state["error"].as_str() {
                return Err(format!("executeTool rejected: {error}"));
            }
            // Chromium hands back what `execute` resolved with, as JSON text.
            let text = state["result"].as_str().unwrap_or_default();
            return serde_json::from_str(text).map_err(|e| format!("{e}: {text}"));
        }
        if Instant::now() > deadline {
            return Err(format!("{key}: no result within {WAIT:?}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Whether the agent's execution `key` has resolved yet.
async fn settled(ui: &Ui<'_>, key: &str) -> Result<bool, String> {
    let state = ui
        .eval(&format!(
            "return (window.__agent || {{}})[{}] || null;",
            json!(key)
        ))
        .await?;
    Ok(state["done"] == json!(true))
}

/// Long enough for a person to have read a card an agent's call just put on screen.
async fn looked() {
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
}

fn error_code(result: &Value) -> &str {
    result["error"]["code"].as_str().unwrap_or("")
}

pub(crate) async fn a_browser_agent_sees_the_pages_actions_as_webmcp_tools(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    let listed = tools(ui).await?;
    let named = |name: &str| listed.iter().find(|t| t["name"] == json!(name)).cloned();
    for name in super::mcp::TOOLS {
        ensure(
            named(name).is_some(),
            format!("{name} is not a tool: {listed:?}"),
        )?;
    }
    ensure(
        listed.len() == super::mcp::TOOLS.len(),
        format!("{} tools: {listed:?}", listed.len()),
    )?;
    let save = named("save_workspace_name").unwrap_or_default();
    ensure(
        save["inputSchema"]["type"] == json!("object")
            && save["inputSchema"]["properties"]["name"]["type"] == json!("string")
            && save["inputSchema"]["required"] == json!(["name"]),
        format!("save's schema: {}", save["inputSchema"]),
    )?;
    ensure(
        save["annotations"]["readOnlyHint"] == json!(false),
        format!("save's hints: {}", save["annotations"]),
    )?;
    // What strangers wrote is marked; what is asked every time is consequential.
    let hint =
        |name: &str, hint: &str| named(name).unwrap_or_default()["annotations"][hint].clone();
    ensure(
        hint("read_member_requests", "untrustedContentHint") == json!(true)
            && hint("read_page_state", "untrustedContentHint") == json!(false)
            && hint("archive_workspace", "consequentialHint") == json!(true)
            && hint("save_workspace_name", "consequentialHint") == json!(false),
        format!("hints: {listed:?}"),
    )?;
    ensure(
        save["description"]
            .as_str()
            .is_some_and(|d| d.contains("The person is asked to approve it")),
        format!("save's description: {}", save["description"]),
    )?;
    let read = named("read_page_state").unwrap_or_default();
    ensure(
        read["annotations"]["readOnlyHint"] == json!(true),
        format!("read's hints: {}", read["annotations"]),
    )?;
    // A read runs at once, with the same receipt the page's own assistant would get.
    execute(ui, "read", "read_page_state", &json!({})).await?;
    let answer = result(ui, "read").await?;
    ensure(
        answer["ok"] == json!(true)
            && answer["receipt"]["result"]["workspace_name"] == json!("Atlas"),
        format!("read: {answer}"),
    )?;
    ensure(ui.count(".cs-card").await? == 0, "a read raised a card")
}

pub(crate) async fn a_browser_agents_rename_waits_for_the_persons_click(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    execute(
        ui,
        "save",
        "save_workspace_name",
        &json!({"name": "Apollo"}),
    )
    .await?;
    ui.wait_for(".cs-card").await?;
    let who = ui.text(".cs-card .cs-caller").await?;
    ensure(
        who.contains("browser agent (WebMCP)"),
        format!("the card says: {who}"),
    )?;
    ensure(
        ui.text(".cs-card__consequence").await?.contains("Apollo"),
        "the card shows the agent's arguments",
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "renamed before approval",
    )?;
    ensure(
        !settled(ui, "save").await?,
        "the agent had an answer before the person",
    )?;
    ui.shot("webmcp-01-card").await?;
    // An agent's card takes a yes only once it has been on screen for a moment.
    ui.click(".cs-allow-once").await?;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    ensure(
        !settled(ui, "save").await?,
        "allowed the moment the agent's card appeared",
    )?;
    looked().await;
    ui.click(".cs-allow-once").await?;
    let answer = result(ui, "save").await?;
    ensure(
        answer["ok"] == json!(true)
            && answer["receipt"]["action"] == json!("save_workspace_name")
            && answer["receipt"]["done_by"] == json!("assistant"),
        format!("approved: {answer}"),
    )?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.wait_gone(".cs-card").await?;
    // Denied: the agent is told, and nothing changes.
    execute(ui, "again", "save_workspace_name", &json!({"name": "Zeus"})).await?;
    ui.wait_for(".cs-card").await?;
    ui.click(".cs-deny").await?;
    let answer = result(ui, "again").await?;
    ensure(
        answer["ok"] == json!(false) && error_code(&answer) == "PERMISSION_DENIED",
        format!("denied: {answer}"),
    )?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        ui.text("#current-name").await? == "Apollo",
        "a denied rename changed the name",
    )
}

pub(crate) async fn a_browser_agents_hostile_input_raises_no_card(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    let long = "x".repeat(70_000);
    for (key, input, code) in [
        ("number", json!({"name": 5}), "INVALID_ARGS"),
        (
            "approved",
            json!({"name": "Evil", "approved": true}),
            "INVALID_ARGS",
        ),
        (
            "ticket",
            json!({"name": "Evil", "ticket": {"gesture": "allow_once"}}),
            "INVALID_ARGS",
        ),
        ("missing", json!({}), "INVALID_ARGS"),
        ("huge", json!({ "name": long }), "INVALID_ARGS"),
    ] {
        execute(ui, key, "save_workspace_name", &input).await?;
        let answer = result(ui, key).await?;
        ensure(
            answer["ok"] == json!(false) && error_code(&answer) == code,
            format!(
                "{key}: {}",
                answer.to_string().chars().take(300).collect::<String>()
            ),
        )?;
    }
    // Input JSON cannot carry never reaches the gate, and the agent is told why.
    let cyclic = ui
        .eval(
            "return document.modelContext.getTools().then(tools => {
               const tool = tools.find(t => t.name === 'save_workspace_name');
               const input = { name: 'loop' }; input.self = input;
               return document.modelContext.executeTool(tool, input)
                 .then(r => 'resolved ' + r, e => 'rejected ' + e);
             });",
        )
        .await?;
    ensure(
        cyclic
            .as_str()
            .is_some_and(|s| s.contains("INVALID_ARGS") || s.starts_with("rejected")),
        format!("a cyclic input: {cyclic}"),
    )?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "hostile input raised a card",
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "hostile input changed the name",
    )
}

/// Gateway pass: the person archives the workspace on a browser agent's request (the
/// countersigned path), and the tools that are unavailable on an archived workspace
/// leave the agent's list; a fresh page has them again.
pub(crate) async fn an_archived_workspace_takes_its_tools_away(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    execute(ui, "archive", "archive_workspace", &json!({})).await?;
    ui.wait_for(".cs-card").await?;
    ensure(
        ui.text(".cs-card .cs-caller").await?.contains("WebMCP"),
        "the archive card names the browser agent",
    )?;
    looked().await;
    ui.click(".cs-allow-once").await?;
    // Archive asks twice.
    let answer = loop {
        if settled(ui, "archive").await? {
            break result(ui, "archive").await?;
        }
        if ui.count(".cs-allow-once").await? > 0 {
            looked().await;
            ui.click(".cs-allow-once").await?;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    ensure(answer["ok"] == json!(true), format!("archive: {answer}"))?;
    let deadline = Instant::now() + WAIT;
    loop {
        let names = tool_names(ui).await?;
        if !names.iter().any(|n| n == "save_workspace_name") {
            ensure(
                names.iter().any(|n| n == "read_page_state"),
                format!("the read went too: {names:?}"),
            )?;
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("still listed after archiving: {names:?}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    ui.open("en").await?;
    let names = tool_names(ui).await?;
    ensure(
        names.iter().any(|n| n == "save_workspace_name") && names.len() == super::mcp::TOOLS.len(),
        format!("a fresh page lists: {names:?}"),
    )
}
