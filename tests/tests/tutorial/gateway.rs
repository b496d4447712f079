//! The gateway's own promises, seen from the page: the audit trail arrives once and
//! waits while the gateway is away, and only a person's click or passkey mints the
//! countersignature the backend checks.

use countersign_e2e::{ensure, Gateway, Outcome, Ui, WAIT};

/// Every record the page made is in the gateway's file exactly once, chained.
pub(crate) async fn audit_reaches_the_gateway(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
    ui.open("en").await?;
    ui.say("rename the workspace to Apollo").await?;
    ui.wait_for(".cs-card").await?;
    ui.click(".cs-allow-once").await?;
    ui.answer_contains("Done").await?;
    let page_count = ui
        .eval("return document.querySelectorAll('.cs-msg--outcome').length")
        .await?;
    ensure(
        page_count.as_u64() == Some(1),
        "one outcome in the page log",
    )?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let renames = text
            .lines()
            .filter(|l| l.contains("\"save_workspace_name\"") && l.contains("\"settled\""))
            .count();
        if renames >= 1 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the rename's terminal record never reached the gateway".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let verified = countersign_gateway::verify_bytes(
        &gateway.audit.export().await.map_err(|e| e.to_string())?,
        Some(&countersign_e2e::audit_key()),
    )
    .map_err(|e| format!("the chain is broken: {e}"))?;
    ensure(verified.0.lines > 0, "no records")?;
    let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    ensure(
        !text.contains("Apollo"),
        "plaintext arguments reached the audit file",
    )?;
    ensure(
        !text.contains(countersign_e2e::E2E_KEY),
        "the provider key is in the audit file",
    )
}

/// The archive's backend takes only a countersignature minted after a person's click: a
/// script's click mints nothing; the person's mints exactly one, recorded in the trail,
/// which the backend accepts.
pub(crate) async fn countersigned_archive(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
    let minted = || async {
        let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(
            text.lines()
                .filter(|l| l.contains("\"countersigned\"") && l.contains("\"archive_workspace\""))
                .count(),
        )
    };
    let before = minted().await?;
    ui.open("en").await?;
    ui.say("archive it").await?;
    ui.wait_for(".cs-card--danger").await?;
    ui.eval("document.querySelector('.cs-allow-once').click();")
        .await?;
    ui.wait_text(".cs-log", "A script, not you").await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ensure(
        minted().await? == before,
        "a script's click minted a countersignature",
    )?;
    ensure(
        ui.text("#archived-status").await? == "Active",
        "a script's click archived",
    )?;
    ui.click(".cs-allow-once").await?;
    ui.wait_text("#archived-status", "Archived").await?;
    ui.answer_contains("Done").await?;
    ensure(
        minted().await? == before + 1,
        "not exactly one countersignature minted",
    )?;
    ui.shot("27-countersigned-archive").await
}

/// Reset needs the person's passkey. Without one the approved reset is not done and the
/// dock offers to set one up; with user verification off nothing runs; a script that
/// mints a click token itself is refused by the backend; with the person's verified
/// passkey the backend accepts, once.
pub(crate) async fn passkey_reset(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
    let minted = || async {
        let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(
            text.lines()
                .filter(|l| l.contains("\"countersigned\"") && l.contains("\"reset_workspace\""))
                .count(),
        )
    };
    let original = "Shared settings for the design team.";
    ui.open("en").await?;
    // Virtual authenticators belong to a tab: add it to the one just opened.
    let authenticator = countersign_e2e::Authenticator::add(ui.client).await?;
    let outcome = async {
        ui.wait_for(".cs-passkey-setup").await?;
        // Setup waits behind the header's control: the chat comes first.
        ensure(!ui.displayed(".cs-passkey-code").await?, "setup shown before the chat")?;
        // No passkey yet: approved, but not done; the dock says how to set one up.
        ui.say("reset the workspace").await?;
        ui.wait_for(".cs-card--danger").await?;
        ui.click(".cs-allow-once").await?;
        let answer = ui.answer_contains("passkey").await?;
        ensure(answer.contains("Not done"), format!("answer: {answer}"))?;
        ensure(ui.text("#description").await? == original, "reset without a passkey")?;
        // Without the enrollment code (printed by the gateway, outside the page) nothing
        // is registered; with it, the person sets one up (the browser's prompt answered by
        // the authenticator), in the dock's settings, where the answer points.
        ensure(answer.contains("settings"), format!("answer: {answer}"))?;
        ui.open_settings().await?;
        ui.type_into(".cs-passkey-code", "WRONG-CODE1").await?;
        ui.click(".cs-passkey-setup").await?;
        ui.wait_text(".cs-passkey", "enrollment code").await?;
        let code = gateway.enrollment_code("admin")?;
        ui.type_into(".cs-passkey-code", &code).await?;
        ui.click(".cs-passkey-setup").await?;
        ui.wait_text(".cs-passkey", "Passkey set up").await?;
        ui.shot("28-passkey-set-up").await?;
        // User verification fails: nothing runs.
        authenticator.set_user_verified(false).await?;
        let before = minted().await?;
        ui.say("reset the workspace").await?;
        ui.wait_for(".cs-card--danger").await?;
        ui.click(".cs-allow-once").await?;
        ui.wait_text(".cs-log", "no countersignature could be minted").await?;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        ensure(minted().await? == before, "minted without user verification")?;
        ensure(ui.text("#description").await? == original, "reset without user verification")?;
        // A script mints a click token for reset itself: the backend wants a passkey.
        let forged = ui
            .client
            .execute_async(
                "const finish = arguments[arguments.length - 1]; (async () => { const digest = '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a';
                 const mint = await fetch('/v1/countersign', { method: 'POST', headers: { 'content-type': 'application/json' },
                   body: JSON.stringify({ call: 99, tool_call_id: 'x', action: 'reset_workspace', kind: 'danger', args_sha256: digest,
                     card_sha256: digest, approved_by: 'once', grant: null, session: 's', role: 'admin' }) });
                 const token = (await mint.json()).countersignature;
                 const done = await fetch('/v1/demo/reset_workspace', { method: 'POST',
                   headers: { 'content-type': 'application/json', 'countersignature': token }, body: '{}' });
                 return [mint.status, done.status, (await done.json()).error.code]; })().then(finish, e => finish(String(e)));",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        ensure(
            forged == serde_json::json!([200, 403, "no_presence"]),
            format!("a script's own click token: {forged}"),
        )?;
        // The person's verified passkey: the backend accepts, once.
        authenticator.set_user_verified(true).await?;
        let before = minted().await?;
        ui.say("reset the workspace").await?;
        ui.wait_for(".cs-card--danger").await?;
        ui.click(".cs-allow-once").await?;
        ui.answer_contains("Done").await?;
        ensure(ui.text("#description").await?.is_empty(), "the reset did not happen")?;
        ensure(minted().await? == before + 1, "not exactly one passkey countersignature")?;
        ui.shot("29-passkey-reset").await
    }
    .await;
    let removed = authenticator.remove().await;
    outcome.and(removed)
}

/// The gateway goes away mid-session: the page keeps working (offline fallback), holds
/// its records, retries with backoff, and delivers them once when the gateway is back.
pub(crate) async fn gateway_away_then_back(ui: &Ui<'_>, gateway: &mut Gateway) -> Outcome {
    ui.open("en").await?;
    ui.check_badge("Offline assistant").await?;
    ui.wait_for(".cs-dock").await?;
    let before = gateway.audit.count().await.map_err(|e| e.to_string())?;
    gateway.stop().await;
    ui.say("archive it").await?;
    ui.wait_for(".cs-card").await?;
    ui.click(".cs-deny").await?;
    ui.answer_contains("Not done").await?;
    ensure(
        gateway.audit.count().await.map_err(|e| e.to_string())? == before,
        "records arrived while the gateway was down",
    )?;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await; // let a retry fail
    gateway.restart().await?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(40);
    while gateway.audit.count().await.map_err(|e| e.to_string())? == before {
        if tokio::time::Instant::now() > deadline {
            return Err("the held records never arrived after the gateway came back".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let bytes = gateway.audit.export().await.map_err(|e| e.to_string())?;
    let (verified, ids) =
        countersign_gateway::verify_bytes(&bytes, Some(&countersign_e2e::audit_key()))
            .map_err(|e| format!("the chain is broken: {e}"))?;
    ensure(
        ids.len() as u64 == verified.lines,
        "a record was stored twice",
    )?;
    let text = String::from_utf8(bytes).map_err(|e| e.to_string())?;
    ensure(
        text.lines()
            .any(|l| l.contains("PERMISSION_DENIED") && l.contains("archive_workspace")),
        "the denied archive's record is missing",
    )
}

/// The trail this run recorded at the gateway answers an auditor: `evidence` lists the
/// calls a person decided, and `replay` fails a policy change that would have run the
/// renames without asking, naming them.
pub(crate) async fn the_trail_answers_an_auditor_and_gates_a_policy_change(
    gateway: &Gateway,
) -> Outcome {
    use countersign_gateway::{evidence, replay};
    let bytes = gateway.audit.export().await.map_err(|e| e.to_string())?;
    let rows = evidence::rows(&bytes, &evidence::Filter::default()).map_err(|e| e.to_string())?;
    let renamed = rows.iter().any(|r| {
        r.action == "save_workspace_name" && r.decided_by == "person" && r.outcome == "OK"
    });
    ensure(
        renamed,
        format!("no rename a person approved in {} rows", rows.len()),
    )?;
    let archived = rows.iter().any(|r| {
        r.action == "archive_workspace" && r.outcome == "OK" && !r.countersignature.is_empty()
    });
    ensure(archived, "no countersigned archive in the table")?;
    let lowering = countersign::policy::PolicyFile::from_json(
        r#"{"roles": {"admin": {"scopes": ["workspace.write", "workspace.admin"],
             "overrides": {"save_workspace_name": {"confirm": "off"}}}}}"#,
    )
    .map_err(|e| e.to_string())?;
    let report = replay::replay(
        &bytes,
        &lowering,
        &countersign::policy::PolicyFile::default(),
    )
    .map_err(|e| e.to_string())?;
    ensure(
        report.lowers()
            && report
                .to_text()
                .contains("of save_workspace_name by admin: ask -> run without asking"),
        format!("replay: {}", report.to_text()),
    )
}
