//! The approval window: the server raises reset to its window, on an origin of its own.
//! The page cannot mint a token for it nor reach into the window; the person approves in
//! the window, on the card the server drew, with a passkey enrolled for the window; the
//! page runs exactly that call, and the trail and the backend name who approved.

use countersign_e2e::{ensure, Authenticator, Gateway, Outcome, Ui};

/// Reset through the approval window, by `alice` enrolled for `admin`.
pub(crate) async fn a_reset_is_approved_in_the_window_by_a_named_person(
    ui: &Ui<'_>,
    gateway: &Gateway,
) -> Outcome {
    let window = gateway.window_origin();
    let countersigned = || async {
        let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(
            text.lines()
                .filter(|l| l.contains("\"countersigned\"") && l.contains("\"reset_workspace\""))
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
    };
    ui.open("en").await?;
    // A page script mints a token for reset itself: refused, whatever presence it claims.
    let minted = ui
        .client
        .execute_async(
            "const finish = arguments[arguments.length - 1]; (async () => { const digest = '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a';
             const out = [];
             for (const presence of ['click', 'passkey', 'window']) {
               const mint = await fetch('/v1/countersign', { method: 'POST', headers: { 'content-type': 'application/json' },
                 body: JSON.stringify({ call: 99, tool_call_id: 'x', action: 'reset_workspace', kind: 'danger', args_sha256: digest,
                   card_sha256: digest, approved_by: 'once', grant: null, session: 's', role: 'admin', presence }) });
               out.push(mint.status, (await mint.json()).error.code);
             }
             return out; })().then(finish, e => finish(String(e)));",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
    ensure(
        minted
            == serde_json::json!([
                403,
                "window_required",
                403,
                "window_required",
                403,
                "window_required"
            ]),
        format!("a page script's own token for reset: {minted}"),
    )?;
    // Nor can it reach the window's API: another origin, refused there and unreadable here.
    let reached = ui
        .client
        .execute_async(
            &format!(
                "const finish = arguments[arguments.length - 1];
                 fetch('{window}/api/enroll', {{ method: 'POST', headers: {{ 'content-type': 'application/json' }},
                   body: JSON.stringify({{ role: 'admin', person: 'mallory', code: 'XXXXX-XXXXX' }}) }})
                   .then(r => finish('read ' + r.status), e => finish(e.name));"
            ),
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
    ensure(
        reached == serde_json::json!("TypeError"),
        format!("a page script reached the window: {reached}"),
    )?;
    // Nor run a passkey ceremony for the window: its relying party is the window's host,
    // which the page's origin cannot claim (the browser refuses before any prompt).
    let ceremony = ui
        .client
        .execute_async(
            "const finish = arguments[arguments.length - 1];
             navigator.credentials.get({ publicKey: { challenge: new Uint8Array(32), rpId: 'approve.localhost',
               userVerification: 'required', timeout: 5000 } }).then(() => finish('asserted'), e => finish(e.name));",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
    ensure(
        ceremony == serde_json::json!("SecurityError"),
        format!("a page script's ceremony for the window: {ceremony}"),
    )?;
    let page = ui.client.window().await.map_err(|e| e.to_string())?;
    ui.say("reset the workspace").await?;
    ui.wait_for(".cs-card--danger").await?;
    ui.click(".cs-allow-once").await?;
    // The window opens beside the page, on its own origin.
    let mut popup = None;
    for _ in 0..50 {
        let handles = ui.client.windows().await.map_err(|e| e.to_string())?;
        popup = handles.into_iter().find(|h| *h != page);
        if popup.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let popup = popup.ok_or("no approval window opened")?;
    ui.client
        .switch_to_window(popup)
        .await
        .map_err(|e| e.to_string())?;
    let outcome = async {
        ui.wait_text("#title", "Reset workspace").await?;
        let approval = ui.client.current_url().await.map_err(|e| e.to_string())?;
        ensure(
            approval.as_str().starts_with(&format!("{window}/approve#")),
            format!("the window is at {approval}"),
        )?;
        // The card is the server's: its words, not the page's.
        let consequence = ui.text("#consequence").await?;
        ensure(
            consequence.contains("go back to their defaults"),
            format!("the window's card says: {consequence}"),
        )?;
        ui.shot("40-approval-window").await?;
        // Alice enrolls in the window with the code printed outside the page; the
        // browser's passkey prompt is answered by the tab's virtual authenticator.
        let authenticator = Authenticator::add(ui.client).await?;
        let enrolled = async {
            ui.client
                .goto(&format!("{window}/enroll"))
                .await
                .map_err(|e| e.to_string())?;
            ui.type_into("#enroll-role", "admin").await?;
            ui.type_into("#enroll-person", "alice").await?;
            ui.type_into("#enroll-code", &gateway.window_code("admin", "alice")?)
                .await?;
            ui.click("#enroll-form button").await?;
            ui.wait_text("#status", "Enrolled: alice").await?;
            ui.client
                .goto(approval.as_str())
                .await
                .map_err(|e| e.to_string())?;
            ui.wait_text("#title", "Reset workspace").await?;
            ensure(
                countersigned().await?.is_empty(),
                "minted before the window's approval",
            )?;
            ui.click("#approve").await?;
            ui.wait_text("#status", "Approved by alice").await
        }
        .await;
        let removed = authenticator.remove().await;
        enrolled.and(removed).map(|_| ())
    }
    .await;
    let _ = ui.client.close_window().await;
    ui.client
        .switch_to_window(page)
        .await
        .map_err(|e| e.to_string())?;
    outcome?;
    // The page ran exactly that call; the backend took the window's token only.
    ui.answer_contains("Done").await?;
    ensure(
        ui.text("#description").await?.is_empty(),
        "the reset did not happen",
    )?;
    let records = countersigned().await?;
    ensure(
        records.len() == 1 && records[0].contains("\"approver\":\"alice\""),
        format!("the trail's countersigned resets: {records:?}"),
    )?;
    ui.shot("41-window-reset-done").await?;
    // Who may approve is listed, and a person revoked approves nothing more.
    let window = gateway.window().ok_or("no window")?;
    let listed: Vec<String> = window.approvers().into_iter().map(|(who, _)| who).collect();
    ensure(listed == ["admin/alice"], format!("approvers: {listed:?}"))?;
    ensure(
        window.revoke("admin", "alice").map_err(|e| e.to_string())?,
        "not revoked",
    )?;
    ensure(window.approvers().is_empty(), "alice is still listed")
}
