//! An MCP client (the official Python SDK) calls the tutorial's actions through the
//! gateway's `/mcp`, paired with the page by the code its dock shows. The person decides
//! in the dock, driven from WebDriver; the client gets the gate's JSON.

use countersign_e2e::{ensure, Gateway, McpClient, Outcome, Ui, MCP_TOKEN};
use serde_json::{json, Value};

/// The tutorial's actions, as agents outside the page see them (WebMCP and MCP).
pub(crate) const TOOLS: [&str; 7] = [
    "read_page_state",
    "read_member_requests",
    "save_workspace_name",
    "save_description",
    "archive_workspace",
    "reset_workspace",
    "publish_changes",
];

/// Long enough for a person to have read a card an agent's call just put on screen.
async fn looked() {
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
}

/// The pairing code the dock shows.
async fn pairing_code(ui: &Ui<'_>) -> Result<String, String> {
    ui.wait_for(".cs-pairing-code").await?;
    ui.open_settings().await?;
    let code = ui.text(".cs-pairing-code").await?;
    ensure(code.len() == 14, format!("pairing code: {code:?}"))?;
    Ok(code)
}

/// The tools the client lists for `code`, once there are `want` of them.
async fn tools(mcp: &mut McpClient, code: &str, want: usize) -> Result<Vec<Value>, String> {
    let deadline = std::time::Instant::now() + countersign_e2e::WAIT;
    for n in 0.. {
        let tag = format!("list-{code}-{n}-{}", mcp.seen.len());
        mcp.send(&json!({"op": "list", "code": code, "tag": tag}))
            .await?;
        let listed = mcp.wait(|e| e["tag"] == json!(tag)).await?;
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        if tools.len() == want || std::time::Instant::now() > deadline {
            return Ok(tools);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok(Vec::new())
}

async fn call(mcp: &mut McpClient, code: &str, tag: &str, name: &str, args: Value) -> Outcome {
    mcp.send(&json!({"op": "call", "code": code, "tag": tag, "name": name, "args": args}))
        .await
}

/// The call's result: `(is_error, structured)`.
async fn answer(mcp: &mut McpClient, tag: &str) -> Result<(bool, Value), String> {
    let event = mcp.outcome(tag).await?;
    let result = event
        .get("result")
        .ok_or_else(|| format!("{tag}: not a result: {event}"))?;
    Ok((
        result["is_error"] == json!(true),
        result["structured"].clone(),
    ))
}

/// The signed receipt of the call tagged `tag`, checked with the gateway's key: its
/// outcome's `(ok, code, action)`, and whether it names an approval.
async fn receipt(
    mcp: &mut McpClient,
    gateway: &Gateway,
    tag: &str,
) -> Result<(bool, String, String, bool), String> {
    let event = mcp.outcome(tag).await?;
    let meta = &event["result"]["meta"];
    let receipt = meta["countersign/receipt"]
        .as_str()
        .ok_or_else(|| format!("{tag}: no receipt in {meta}"))?;
    let claims = gateway
        .verifier()
        .check_receipt(receipt, meta["countersign/approval"].as_str())
        .map_err(|e| format!("{tag}: the receipt does not check: {e}"))?;
    let outcome = claims.outcome;
    Ok((
        outcome.ok,
        outcome.code,
        outcome.action,
        outcome.approval_sha256.is_some(),
    ))
}

fn code_of(structured: &Value) -> &str {
    structured["error"]["code"].as_str().unwrap_or("")
}

/// Audit lines at the gateway that `wanted` accepts.
async fn audited(gateway: &Gateway, wanted: impl Fn(&str) -> bool) -> Result<usize, String> {
    let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    Ok(text.lines().filter(|l| wanted(l)).count())
}

pub(crate) async fn an_mcp_client_acts_in_the_paired_page_through_the_dock(
    ui: &Ui<'_>,
    gateway: &Gateway,
) -> Outcome {
    ui.open("en").await?;
    let code = pairing_code(ui).await?;
    let mut mcp = McpClient::start(&gateway.mcp_url(), MCP_TOKEN).await?;

    // Listed with annotations from the kind.
    let listed = tools(&mut mcp, &code, TOOLS.len()).await?;
    let tool = |name: &str| listed.iter().find(|t| t["name"] == json!(name)).cloned();
    for name in TOOLS {
        ensure(
            tool(name).is_some(),
            format!("{name} not listed: {listed:?}"),
        )?;
    }
    ensure(listed.len() == TOOLS.len(), format!("listed: {listed:?}"))?;
    let hints = |name: &str| tool(name).map(|t| (t["read_only"].clone(), t["destructive"].clone()));
    ensure(
        hints("read_page_state") == Some((json!(true), json!(false)))
            && hints("save_workspace_name") == Some((json!(false), json!(false)))
            && hints("archive_workspace") == Some((json!(false), json!(true))),
        format!("annotations: {listed:?}"),
    )?;
    ensure(
        tool("save_workspace_name")
            .is_some_and(|t| t["input_schema"]["properties"]["name"].is_object()),
        "save_workspace_name's schema has no `name`",
    )?;

    // A read returns at once, with no card.
    call(&mut mcp, &code, "read", "read_page_state", json!({})).await?;
    let (error, read) = answer(&mut mcp, "read").await?;
    ensure(
        !error
            && read["ok"] == json!(true)
            && read["receipt"]["result"]["workspace_name"] == json!("Atlas"),
        format!("read: {read}"),
    )?;
    ensure(ui.count(".cs-card").await? == 0, "a read raised a card")?;

    // A rename waits for the person's click, with progress meanwhile.
    call(
        &mut mcp,
        &code,
        "save",
        "save_workspace_name",
        json!({"name": "Apollo"}),
    )
    .await?;
    ui.wait_for(".cs-card").await?;
    let who = ui.text(".cs-card .cs-caller").await?;
    ensure(who.contains("MCP"), format!("the card says: {who}"))?;
    mcp.wait(|e| e["tag"] == "save" && e.get("progress").is_some())
        .await?;
    ensure(
        !mcp.ended("save"),
        "the client had an answer before the person",
    )?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "renamed before approval",
    )?;
    ui.shot("mcp-01-card").await?;
    looked().await;
    ui.click(".cs-allow-once").await?;
    let (error, saved) = answer(&mut mcp, "save").await?;
    ensure(
        !error
            && saved["ok"] == json!(true)
            && saved["receipt"]["action"] == json!("save_workspace_name"),
        format!("approved: {saved}"),
    )?;
    ui.wait_text("#current-name", "Apollo").await?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        receipt(&mut mcp, gateway, "save").await?
            == (true, "OK".into(), "save_workspace_name".into(), false),
        "the rename's receipt",
    )?;

    // An archive the person denies.
    call(&mut mcp, &code, "archive", "archive_workspace", json!({})).await?;
    ui.wait_for(".cs-card").await?;
    looked().await;
    ui.click(".cs-deny").await?;
    let (error, denied) = answer(&mut mcp, "archive").await?;
    ensure(
        error && code_of(&denied) == "PERMISSION_DENIED",
        format!("denied: {denied}"),
    )?;
    ensure(
        ui.text("#archived-status").await? == "Active",
        "a denial archived",
    )?;
    // Silence has a signature too: the denial's receipt, naming no approval.
    ensure(
        receipt(&mut mcp, gateway, "archive").await?
            == (
                false,
                "PERMISSION_DENIED".into(),
                "archive_workspace".into(),
                false,
            ),
        "the denial's receipt",
    )?;

    // A publish is a handoff: the person does it.
    call(&mut mcp, &code, "publish", "publish_changes", json!({})).await?;
    ui.wait_for(".cs-handoff").await?;
    ensure(ui.count(".cs-card").await? == 0, "the handoff was a card")?;
    ui.type_into("#verification-code", "246810").await?;
    ui.click("#publish").await?;
    ui.wait_text("#publish-status", "Published").await?;
    ensure(
        !mcp.ended("publish"),
        "an answer before the person finished",
    )?;
    looked().await;
    ui.click(".cs-handoff-done").await?;
    let (error, published) = answer(&mut mcp, "publish").await?;
    ensure(
        !error
            && published["ok"] == json!(true)
            && published["receipt"]["action"] == json!("publish_changes"),
        format!("published: {published}"),
    )?;

    // An unknown tool, and arguments that do not fit: refused, no card.
    call(&mut mcp, &code, "unknown", "drop_database", json!({})).await?;
    let (error, unknown) = answer(&mut mcp, "unknown").await?;
    ensure(
        error && code_of(&unknown) == "UNKNOWN_ACTION",
        format!("unknown tool: {unknown}"),
    )?;
    call(
        &mut mcp,
        &code,
        "bad",
        "save_workspace_name",
        json!({"name": 5, "extra": true}),
    )
    .await?;
    let (error, bad) = answer(&mut mcp, "bad").await?;
    ensure(
        error && code_of(&bad) == "INVALID_ARGS",
        format!("bad arguments: {bad}"),
    )?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a refused call raised a card",
    )?;

    // The client cancels while the card waits: withdrawn in the page, one record.
    let withdrawn = |l: &str| l.contains("\"mcp\"") && l.contains("\"withdrawn\"");
    let before = audited(gateway, withdrawn).await?;
    call(
        &mut mcp,
        &code,
        "cancel",
        "save_workspace_name",
        json!({"name": "Zephyr"}),
    )
    .await?;
    ui.wait_for(".cs-card").await?;
    mcp.send(&json!({"op": "cancel", "tag": "cancel"})).await?;
    mcp.wait(|e| e["tag"] == "cancel" && e["cancelled"] == json!(true))
        .await?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        ui.text("#current-name").await? == "Apollo",
        "a cancelled call ran",
    )?;
    let deadline = std::time::Instant::now() + countersign_e2e::WAIT;
    while audited(gateway, withdrawn).await? == before && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    ensure(
        audited(gateway, withdrawn).await? == before + 1,
        "not exactly one record of the withdrawn call",
    )?;

    // A wrong token is refused.
    mcp.send(
        &json!({"op": "connect", "token": "wrong-token-wrong-token-wrong-token", "code": code}),
    )
    .await?;
    let refused = mcp.wait(|e| e["op"] == "connect").await?;
    ensure(
        refused["ok"] == json!(false),
        format!("wrong token: {refused}"),
    )?;

    // The page closes: the list empties (and is said to have changed); a call is refused.
    mcp.send(&json!({"op": "listen", "code": code})).await?;
    mcp.wait(|e| e["op"] == "listening").await?;
    ui.client
        .goto("about:blank")
        .await
        .map_err(|e| e.to_string())?;
    mcp.wait(|e| e["op"] == "tools_changed").await?;
    ensure(
        tools(&mut mcp, &code, 0).await?.is_empty(),
        "tools of a closed page",
    )?;
    call(&mut mcp, &code, "closed", "read_page_state", json!({})).await?;
    let (error, closed) = answer(&mut mcp, "closed").await?;
    ensure(
        error && code_of(&closed) == "PAGE_NOT_CONNECTED",
        format!("page closed: {closed}"),
    )?;
    mcp.send(&json!({"op": "quit"})).await
}

pub(crate) async fn two_mcp_clients_with_two_pages_never_cross(
    ui: &Ui<'_>,
    gateway: &Gateway,
) -> Outcome {
    let fail = |e: fantoccini::error::CmdError| e.to_string();
    ui.open("en").await?;
    let first = ui.client.window().await.map_err(fail)?;
    let code_a = pairing_code(ui).await?;
    let second = ui.client.new_window(true).await.map_err(fail)?.handle;
    ui.client
        .switch_to_window(second.clone())
        .await
        .map_err(fail)?;
    ui.navigate("en").await?;
    let code_b = pairing_code(ui).await?;
    ensure(code_a != code_b, "two pages, one code")?;
    // A speaks 2026-07-28 (stateless); B connects as clients before it do (a session).
    let mut a = McpClient::start(&gateway.mcp_url(), MCP_TOKEN).await?;
    let mut b = McpClient::start_legacy(&gateway.mcp_url(), MCP_TOKEN).await?;
    ensure(
        tools(&mut a, &code_a, TOOLS.len()).await?.len() == TOOLS.len(),
        "A's tools",
    )?;
    ensure(
        tools(&mut b, &code_b, TOOLS.len()).await?.len() == TOOLS.len(),
        "B's tools",
    )?;
    let protocol = |c: &McpClient| {
        c.seen
            .iter()
            .find(|e| e["op"] == "connected")
            .map(|e| e["protocol"].clone())
    };
    ensure(
        protocol(&a) == Some(json!("2026-07-28")) && protocol(&b) == Some(json!("2025-11-25")),
        format!("protocols: A {:?}, B {:?}", protocol(&a), protocol(&b)),
    )?;

    // A's rename raises a card in A's page only.
    call(
        &mut a,
        &code_a,
        "save",
        "save_workspace_name",
        json!({"name": "Apollo"}),
    )
    .await?;
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    ensure(
        ui.count(".cs-card").await? == 0,
        "A's call raised a card in B's page",
    )?;
    ui.client
        .switch_to_window(first.clone())
        .await
        .map_err(fail)?;
    ui.wait_for(".cs-card").await?;
    looked().await;
    ui.click(".cs-allow-once").await?;
    let (error, _) = answer(&mut a, "save").await?;
    ensure(!error, "A's rename")?;

    // Each client reads its own page.
    call(&mut a, &code_a, "read", "read_page_state", json!({})).await?;
    call(&mut b, &code_b, "read", "read_page_state", json!({})).await?;
    let (_, read_a) = answer(&mut a, "read").await?;
    let (_, read_b) = answer(&mut b, "read").await?;
    ensure(
        read_a["receipt"]["result"]["workspace_name"] == json!("Apollo")
            && read_b["receipt"]["result"]["workspace_name"] == json!("Atlas"),
        format!("A read {read_a}, B read {read_b}"),
    )?;

    // B's page closes: B hears of it on its session, its list empties; A's stays.
    ui.client.switch_to_window(second).await.map_err(fail)?;
    ui.client.close_window().await.map_err(fail)?;
    ui.client.switch_to_window(first).await.map_err(fail)?;
    b.wait(|e| e["op"] == "tools_changed" && e["mode"] == "legacy")
        .await?;
    ensure(
        tools(&mut b, &code_b, 0).await?.is_empty(),
        "B's page is closed",
    )?;
    ensure(
        tools(&mut a, &code_a, TOOLS.len()).await?.len() == TOOLS.len(),
        "A lost its tools",
    )?;
    a.send(&json!({"op": "quit"})).await?;
    b.send(&json!({"op": "quit"})).await
}

/// The gateway restarts while a card waits: the page reconnects with the same code, the
/// gateway no longer waits for the call, so the page withdraws it; the client hears the
/// page went away, and the same code works with the new process.
pub(crate) async fn a_gateway_restart_withdraws_the_call_it_forgot(
    ui: &Ui<'_>,
    gateway: &mut Gateway,
) -> Outcome {
    ui.open("en").await?;
    let code = pairing_code(ui).await?;
    let mut mcp = McpClient::start(&gateway.mcp_url(), MCP_TOKEN).await?;
    ensure(
        tools(&mut mcp, &code, TOOLS.len()).await?.len() == TOOLS.len(),
        "tools",
    )?;
    call(
        &mut mcp,
        &code,
        "lost",
        "save_workspace_name",
        json!({"name": "Lost"}),
    )
    .await?;
    ui.wait_for(".cs-card").await?;
    gateway.stop().await;
    gateway.restart().await?;
    ui.wait_gone(".cs-card").await?;
    ensure(
        ui.text("#current-name").await? == "Atlas",
        "a forgotten call ran",
    )?;
    ensure(
        pairing_code(ui).await? == code,
        "the code changed across the restart",
    )?;
    let (error, lost) = answer(&mut mcp, "lost").await?;
    ensure(
        error && code_of(&lost) == "PAGE_GONE",
        format!("lost call: {lost}"),
    )?;
    ensure(
        tools(&mut mcp, &code, TOOLS.len()).await?.len() == TOOLS.len(),
        "the same code after the restart",
    )?;
    mcp.send(&json!({"op": "quit"})).await
}
