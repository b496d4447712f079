//! The approval window: the server raises reset to its window, on an origin of its own.
//! The page cannot mint a token for it nor reach into the window; the person approves in
//! the window, on the card the server drew, with a passkey enrolled for the window; the
//! page runs exactly that call, and the trail and the backend name who approved.

use countersign_e2e::{ensure, Authenticator, Browser, Gateway, Outcome, Ui};
use fantoccini::wd::WindowHandle;

/// Asks for a reset in the page (whose tab is `page`), allows it, and follows the
/// approval window that opens: its handle and address, the window in front.
async fn reset_in_a_window(
    ui: &Ui<'_>,
    page: &WindowHandle,
) -> Result<(WindowHandle, String), String> {
    ui.say("reset the workspace").await?;
    ui.wait_for(".cs-card--danger").await?;
    ui.click(".cs-allow-once").await?;
    let mut popup = None;
    for _ in 0..50 {
        let handles = ui.client.windows().await.map_err(|e| e.to_string())?;
        popup = handles.into_iter().find(|h| h != page);
        if popup.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let popup = popup.ok_or("no approval window opened")?;
    ui.client
        .switch_to_window(popup.clone())
        .await
        .map_err(|e| e.to_string())?;
    ui.wait_text("#title", "Reset workspace").await?;
    let address = ui.client.current_url().await.map_err(|e| e.to_string())?;
    Ok((popup, address.to_string()))
}

/// Closes the window in front and goes back to the page's tab, `page`.
async fn back_to(ui: &Ui<'_>, page: &WindowHandle) -> Outcome {
    let _ = ui.client.close_window().await;
    ui.client
        .switch_to_window(page.clone())
        .await
        .map_err(|e| e.to_string())
}

/// Enrolls `person` for `admin` in the window of `ui`'s tab (whose virtual authenticator
/// answers the passkey prompt), then goes back to `address`.
async fn enroll(ui: &Ui<'_>, gateway: &Gateway, person: &str, address: &str) -> Outcome {
    let window = gateway.window_origin();
    ui.client
        .goto(&format!("{window}/enroll"))
        .await
        .map_err(|e| e.to_string())?;
    ui.type_into("#enroll-role", "admin").await?;
    ui.type_into("#enroll-person", person).await?;
    ui.type_into("#enroll-code", &gateway.window_code("admin", person)?)
        .await?;
    ui.click("#enroll-form button").await?;
    ui.wait_text("#status", &format!("Enrolled: {person}"))
        .await?;
    ui.client.goto(address).await.map_err(|e| e.to_string())?;
    ui.wait_text("#title", "Reset workspace").await.map(|_| ())
}

/// The trail's `countersigned` records of reset.
async fn countersigned_resets(gateway: &Gateway) -> Result<Vec<String>, String> {
    let text = String::from_utf8(gateway.audit.export().await.map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    Ok(text
        .lines()
        .filter(|l| l.contains("\"countersigned\"") && l.contains("\"reset_workspace\""))
        .map(str::to_owned)
        .collect())
}

/// Reset through the approval window, by `alice` enrolled for `admin`.
pub(crate) async fn a_reset_is_approved_in_the_window_by_a_named_person(
    ui: &Ui<'_>,
    gateway: &Gateway,
) -> Outcome {
    let window = gateway.window_origin();
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
    let (_, address) = reset_in_a_window(ui, &page).await?;
    let outcome = async {
        ensure(
            address.starts_with(&format!("{window}/approve#")),
            format!("the window is at {address}"),
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
        let approved = async {
            enroll(ui, gateway, "alice", &address).await?;
            ensure(
                countersigned_resets(gateway).await?.is_empty(),
                "minted before the window's approval",
            )?;
            ui.click("#approve").await?;
            ui.wait_text("#status", "Approved by alice").await
        }
        .await;
        let removed = authenticator.remove().await;
        approved.and(removed).map(|_| ())
    }
    .await;
    back_to(ui, &page).await?;
    outcome?;
    // The page ran exactly that call; the backend took the window's token only.
    ui.answer_contains("Done").await?;
    ensure(
        ui.text("#description").await?.is_empty(),
        "the reset did not happen",
    )?;
    let records = countersigned_resets(gateway).await?;
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

/// Another device: the window on the laptop shows its address as a QR code; a second
/// browser at a phone's size opens it, Bob enrolls and approves there, and the laptop's
/// window follows; the page runs the reset. Then Bob signs in to the inbox on the phone:
/// the next reset appears there by itself and he approves it from there. A third reset
/// denied on the phone runs nothing.
pub(crate) async fn a_reset_is_approved_on_a_phone_and_another_denied_there(
    ui: &Ui<'_>,
    gateway: &Gateway,
) -> Outcome {
    let browser = Browser::start().await?;
    let phone = Ui {
        client: &browser.client,
        base: gateway.window_origin(),
        shots: ui.shots.clone(),
        offline: false,
        prefix: "phone-",
    };
    let outcome = async {
        phone.size(390, 844).await?;
        ui.open("en").await?;
        let page = ui.client.window().await.map_err(|e| e.to_string())?;
        let before = countersigned_resets(gateway).await?.len();
        // Approved on the phone.
        let (_, address) = reset_in_a_window(ui, &page).await?;
        ui.click("#elsewhere summary").await?;
        let qr = ui
            .eval("const qr = document.getElementById('qr'); return qr.complete && qr.naturalWidth > 0;")
            .await?;
        ensure(qr == serde_json::json!(true), "no QR code in the window")?;
        ui.shot("42-window-qr").await?;
        phone.client.goto(&address).await.map_err(|e| e.to_string())?;
        phone.wait_text("#title", "Reset workspace").await?;
        let authenticator = Authenticator::add(phone.client).await?;
        let on_phone = async {
            enroll(&phone, gateway, "bob", &address).await?;
            phone.click("#approve").await?;
            phone.wait_text("#status", "Approved by bob").await?;
            phone.shot("43-approved-on-the-phone").await
        }
        .await;
        let from_inbox = async {
            on_phone?;
            // The laptop's window follows, and the page runs the call.
            ui.wait_text("#status", "Approved by bob").await?;
            back_to(ui, &page).await?;
            ui.answer_contains("Done").await?;
            // The inbox: Bob signs in on the phone; the next reset shows up there live.
            phone
                .client
                .goto(&format!("{}/inbox", gateway.window_origin()))
                .await
                .map_err(|e| e.to_string())?;
            phone.click("#signin").await?;
            phone.wait_text("#who", "Signed in as bob").await?;
            phone.wait_text("#status", "Nothing waits").await?;
            let answers = ui.text(".cs-log").await?.matches("Done:").count();
            let (_, _) = reset_in_a_window(ui, &page).await?;
            phone.wait_text("#waiting", "Reset workspace").await?;
            phone.shot("44-inbox-on-the-phone").await?;
            phone.click("#waiting a").await?;
            phone.wait_text("#title", "Reset workspace").await?;
            phone.click("#approve").await?;
            phone.wait_text("#status", "Approved by bob").await?;
            ui.wait_text("#status", "Approved by bob").await?;
            back_to(ui, &page).await?;
            for _ in 0..50 {
                if ui.text(".cs-log").await?.matches("Done:").count() > answers {
                    return Ok(());
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err("the page did not run the reset approved from the inbox".to_owned())
        }
        .await;
        let removed = authenticator.remove().await;
        from_inbox.and(removed)?;
        let records = countersigned_resets(gateway).await?;
        ensure(
            records.len() == before + 2
                && records.iter().skip(before).all(|r| r.contains("\"approver\":\"bob\"")),
            format!("the trail's countersigned resets: {records:?}"),
        )?;
        // Denied on the phone: nothing minted, nothing run.
        let (_, address) = reset_in_a_window(ui, &page).await?;
        phone.client.goto(&address).await.map_err(|e| e.to_string())?;
        phone.wait_text("#title", "Reset workspace").await?;
        phone.click("#deny").await?;
        phone.wait_text("#status", "Denied").await?;
        ui.wait_text("#status", "Denied").await?;
        back_to(ui, &page).await?;
        ui.wait_text(".cs-log", "denied in the Countersign approval window")
            .await?;
        ensure(
            countersigned_resets(gateway).await?.len() == before + 2,
            "minted after a denial",
        )?;
        ui.shot("45-denied-on-the-phone").await
    }
    .await;
    let _ = browser.client.close().await;
    outcome
}
