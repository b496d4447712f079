//! The workspace-settings tutorial in a real browser: built with trunk, served on
//! loopback, driven through ChromeDriver as a person would, asserting what is on screen.
//! Screenshots of key states go to `target/e2e-screenshots/` (printed at the start).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::indexing_slicing,
    missing_docs
)]

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use countersign_e2e::{
    build_tutorial, ensure, scripted_model, serve_dir, workspace_root, Browser, Gateway, Outcome,
    Ui, WAIT,
};

#[path = "tutorial/mcp.rs"]
mod mcp;
#[path = "tutorial/untrusted.rs"]
mod untrusted;
use untrusted::an_injected_request_is_asked_though_always_allow_was_given;
#[path = "tutorial/webmcp.rs"]
mod webmcp;
use webmcp::{
    a_browser_agent_sees_the_pages_actions_as_webmcp_tools,
    a_browser_agents_hostile_input_raises_no_card,
    a_browser_agents_rename_waits_for_the_persons_click,
};

/// Which files of a bundle [`bundle_changed`] changes, by name.
type Which = fn(&str) -> bool;
/// How it changes one: its new bytes, or `None` to leave it out.
type Change = fn(Vec<u8>) -> Option<Vec<u8>>;

type Scenario = for<'a> fn(&'a Ui<'a>) -> Pin<Box<dyn Future<Output = Outcome> + 'a>>;

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|ui| Box::pin($name(ui))) as Scenario)),*]
    };
}

/// The scenarios whose path through the gateway differs from the offline one, run in
/// both passes: a model turn over the Chat Completions wire (streamed), the batch of one
/// turn, a question's answer and an edit reported back to the model, countersigned runs
/// and a handoff's receipt, a reload that restores the conversation. The rest (layout,
/// accessibility, WebMCP agents, script clicks) never touch the gateway: offline only.
const THROUGH_THE_GATEWAY: [&str; 9] = [
    "rename_with_approval",
    "an_injected_request_is_asked_though_always_allow_was_given",
    "archive_is_asked_twice_and_a_denial_changes_nothing",
    "reset_states_what_is_lost",
    "publish_with_the_code_gives_the_receipt",
    "a_question_is_answered_without_changing_anything",
    "an_edited_card_runs_only_the_edited_call",
    "a_pending_card_survives_a_reload",
    "one_message_two_calls_is_a_batch",
];

#[tokio::main]
async fn main() -> ExitCode {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let shots = workspace_root().join("target").join("e2e-screenshots");
    if let Err(e) = std::fs::create_dir_all(&shots) {
        eprintln!("e2e: cannot create {}: {e}", shots.display());
        return ExitCode::FAILURE;
    }
    println!("e2e: screenshots go to {}", shots.display());
    let audit_dir = match tempfile_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    let setup = async {
        let dist = build_tutorial()?;
        let plain = serve_dir(dist.clone()).await?;
        // The bundle changed on the way, each file as a network failure or an attacker
        // would: (scenario, which files, how changed, what the page must do).
        let lazy: Which = |file| file.contains(".split_") && file.ends_with(".wasm");
        let works = (|ui| Box::pin(the_page_works_without_its_countersign_layer(ui))) as Scenario;
        let not_started = (|ui| Box::pin(the_page_does_not_start(ui))) as Scenario;
        let cases: [(&str, Which, Change, Scenario); 5] = [
            (
                "offline/the_page_works_without_its_countersign_layer",
                lazy,
                |_| None,
                works,
            ),
            (
                "offline/a_changed_countersign_layer_is_refused_and_the_page_works",
                lazy,
                valid_but_changed,
                works,
            ),
            // The files before the page is interactive.
            (
                "offline/a_changed_main_wasm_is_refused",
                |file| file.ends_with("_bg.wasm"),
                valid_but_changed,
                not_started,
            ),
            (
                "offline/a_changed_main_script_is_refused",
                |file| file.ends_with(".js") && !file.ends_with(".split.js"),
                valid_but_changed,
                not_started,
            ),
            (
                "offline/a_changed_split_loader_is_refused",
                |file| file.ends_with(".split.js"),
                valid_but_changed,
                not_started,
            ),
        ];
        let mut changed = Vec::new();
        for (name, which, change, scenario) in cases {
            let dir = bundle_changed(&dist, &audit_dir, name, which, change)?;
            changed.push((name, serve_dir(dir).await?, scenario));
        }
        let model = scripted_model().await?;
        let gateway = Gateway::start(dist, model, audit_dir.join("audit.jsonl")).await?;
        let browser = Browser::start().await?;
        Ok::<_, String>((plain, changed, gateway, browser))
    };
    let (plain, changed, mut gateway, browser) = match setup.await {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("e2e: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let all = scenarios![
        rename_with_approval,
        always_allow_for_save_then_revoke,
        an_injected_request_is_asked_though_always_allow_was_given,
        archive_is_asked_twice_and_a_denial_changes_nothing,
        reset_states_what_is_lost,
        publish_handoff_cancelled,
        publish_with_a_wrong_code_says_not_yet_and_the_right_one_publishes,
        publish_with_the_code_gives_the_receipt,
        a_question_is_answered_without_changing_anything,
        the_same_flow_in_chinese,
        the_dock_is_readable_at_360_px,
        the_dock_passes_axe_in_english_and_chinese,
        the_whole_approval_flow_works_from_the_keyboard,
        the_dock_is_light_by_default,
        an_edited_card_runs_only_the_edited_call,
        a_pending_card_survives_a_reload,
        one_message_two_calls_is_a_batch,
        the_edit_form_and_the_batch_fit_at_360_px,
        a_script_clicking_allow_approves_nothing,
        a_browser_agent_sees_the_pages_actions_as_webmcp_tools,
        a_browser_agents_rename_waits_for_the_persons_click,
        a_browser_agents_hostile_input_raises_no_card,
    ];
    let (mut passed, mut failed) = (0, 0);
    let mut report = |name: String, outcome: Outcome| match outcome {
        Ok(()) => {
            passed += 1;
            println!("test {name} ... ok");
        }
        Err(e) => {
            failed += 1;
            println!("test {name} ... FAILED\n    {e}");
        }
    };
    // Pass 1: the page as `trunk serve` would give it, offline assistant.
    // Pass 2: the same scenarios through the gateway, a scripted model behind it speaking
    // the Chat Completions wire format, so the page's OpenAiCompatible client is used.
    let passes = [
        (
            Ui {
                client: &browser.client,
                base: plain,
                shots: shots.clone(),
                offline: true,
                prefix: "",
            },
            "offline",
        ),
        (
            Ui {
                client: &browser.client,
                base: gateway.base(),
                shots: shots.clone(),
                offline: false,
                prefix: "gateway-",
            },
            "gateway",
        ),
    ];
    for (ui, pass) in &passes {
        for (name, scenario) in all {
            if *pass == "gateway" && !THROUGH_THE_GATEWAY.contains(&name) {
                continue;
            }
            let name = format!("{pass}/{name}");
            if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            let _ = ui.size(1280, 900).await;
            let outcome = scenario(ui).await;
            if outcome.is_err() {
                let _ = ui.shot(&format!("FAILED-{}", name.replace('/', "-"))).await;
            }
            report(name, outcome);
        }
    }
    let ui = &passes[1].0;
    for (name, outcome) in [
        (
            "gateway/the_audit_trail_reaches_the_gateway_once",
            audit_reaches_the_gateway(ui, &gateway).await,
        ),
        (
            "gateway/audit_records_wait_while_the_gateway_is_away",
            gateway_away_then_back(ui, &mut gateway).await,
        ),
        (
            "gateway/only_a_persons_click_mints_the_countersignature_the_backend_checks",
            countersigned_archive(ui, &gateway).await,
        ),
        (
            "gateway/an_mcp_client_acts_in_the_paired_page_through_the_dock",
            mcp::an_mcp_client_acts_in_the_paired_page_through_the_dock(ui, &gateway).await,
        ),
        (
            "gateway/two_mcp_clients_with_two_pages_never_cross",
            mcp::two_mcp_clients_with_two_pages_never_cross(ui, &gateway).await,
        ),
        (
            "gateway/a_gateway_restart_withdraws_the_mcp_call_it_forgot",
            mcp::a_gateway_restart_withdraws_the_call_it_forgot(ui, &mut gateway).await,
        ),
        (
            "gateway/an_archived_workspace_takes_its_webmcp_tools_away",
            webmcp::an_archived_workspace_takes_its_tools_away(ui).await,
        ),
        ("gateway/a_reset_needs_the_persons_verified_passkey", {
            let local = Ui {
                client: ui.client,
                base: gateway.localhost(),
                shots: ui.shots.clone(),
                offline: false,
                prefix: "gateway-",
            };
            passkey_reset(&local, &gateway).await
        }),
        (
            "gateway/the_page_streamed_every_answer_through_the_gateway",
            {
                let (streamed, whole) = countersign_e2e::streamed_answers();
                ensure(
                    streamed > 0 && whole == 0,
                    format!("{streamed} answers streamed, {whole} in one piece"),
                )
            },
        ),
    ] {
        if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
            report(name.to_owned(), outcome);
        }
    }
    // The page when its files are lost or changed on the way.
    for (name, base, scenario) in changed {
        if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
            let ui = Ui {
                client: &browser.client,
                base,
                shots: shots.clone(),
                offline: true,
                prefix: "",
            };
            report(name.to_owned(), scenario(&ui).await);
        }
    }
    // The dark theme, in a browser that prefers it.
    let name = "offline/the_dock_follows_a_dark_preference";
    if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
        let outcome = match Browser::start_with(&["--force-dark-mode"]).await {
            Ok(dark) => {
                let ui = Ui {
                    client: &dark.client,
                    base: passes[0].0.base.clone(),
                    shots: shots.clone(),
                    offline: true,
                    prefix: "dark-",
                };
                let outcome = the_dock_follows_a_dark_preference(&ui).await;
                let _ = dark.client.close().await;
                outcome
            }
            Err(e) => Err(e),
        };
        report(name.to_owned(), outcome);
    }
    let _ = browser.client.close().await;
    let _ = std::fs::remove_dir_all(&audit_dir);
    println!("\ne2e: {passed} passed, {failed} failed");
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("countersign-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A copy of the bundle in `dist`, in `tmp/{name}`, with each file `which` picks
/// replaced by what `change` makes of it (`None`: left out), as a network failure or an
/// attacker on the way would. An error if `which` picks no file (for the lazy part: the
/// Countersign layer is then not split off, and the page waits for all of it).
fn bundle_changed(
    dist: &std::path::Path,
    tmp: &std::path::Path,
    name: &str,
    which: Which,
    change: Change,
) -> Result<std::path::PathBuf, String> {
    let to = tmp.join(format!("dist-{}", name.replace('/', "-")));
    std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
    let mut changed = 0;
    for entry in std::fs::read_dir(dist).map_err(|e| format!("{}: {e}", dist.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if !entry.path().is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|e| format!("{file}: {e}"))?;
        let bytes = if which(&file) {
            changed += 1;
            change(bytes)
        } else {
            Some(bytes)
        };
        if let Some(bytes) = bytes {
            std::fs::write(to.join(&file), bytes).map_err(|e| format!("{file}: {e}"))?;
        }
    }
    ensure(
        changed > 0,
        format!(
            "{name}: the release bundle has no such file (is the Countersign layer split off?)"
        ),
    )?;
    Ok(to)
}

/// A file changed so that it still works as before, so only its integrity can tell: a
/// custom section appended to wasm, a comment to JS.
fn valid_but_changed(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    if bytes.starts_with(b"\0asm") {
        bytes.extend_from_slice(&[0, 10, 1, b'x']);
        bytes.extend_from_slice(b"tampered");
    } else {
        bytes.extend_from_slice(b"\n// tampered\n");
    }
    Some(bytes)
}

/// A page whose main wasm, main script or split loader changed on the way does not
/// start: nothing of it runs, so neither the page nor its gate can be someone else's.
async fn the_page_does_not_start(ui: &Ui<'_>) -> Outcome {
    ui.client
        .goto(&format!("{}/?lang=en", ui.base))
        .await
        .map_err(|e| format!("could not open the page: {e}"))?;
    // Long enough for the page to start (it does in under a second here).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    ensure(
        ui.count("#current-name").await? == 0 && ui.count(".cs-dock").await? == 0,
        "the page started",
    )
}

/// The settings page needs nothing from the Countersign layer to work: with the layer's
/// wasm part not fetched, or refused for its integrity, no dock and no gate run; the
/// page renames by its own Save button and says in place of the dock that the assistant
/// could not be loaded (the failed load is not a panic that would stop the page's wasm).
async fn the_page_works_without_its_countersign_layer(ui: &Ui<'_>) -> Outcome {
    ui.client
        .goto(&format!("{}/?lang=en", ui.base))
        .await
        .map_err(|e| format!("could not open the page: {e}"))?;
    ui.wait_for("#current-name").await?;
    ui.wait_text(".fatal[role='alert']", "could not be loaded")
        .await?;
    ensure(ui.count(".cs-dock").await? == 0, "no dock without its part")?;
    ui.type_into("#workspace-name", " Two").await?;
    ui.click("#save-name").await?;
    ui.wait_text("#current-name", "Atlas Two").await?;
    ui.shot("the-page-without-its-layer").await
}

/// Every record the page made is in the gateway's file exactly once, chained.
async fn audit_reaches_the_gateway(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
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
async fn countersigned_archive(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
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
async fn passkey_reset(ui: &Ui<'_>, gateway: &Gateway) -> Outcome {
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
        // No passkey yet: approved, but not done; the dock says how to set one up.
        ui.say("reset the workspace").await?;
        ui.wait_for(".cs-card--danger").await?;
        ui.click(".cs-allow-once").await?;
        let answer = ui.answer_contains("passkey").await?;
        ensure(answer.contains("Not done"), format!("answer: {answer}"))?;
        ensure(ui.text("#description").await? == original, "reset without a passkey")?;
        // Without the enrollment code (printed by the gateway, outside the page) nothing
        // is registered; with it, the person sets one up (the browser's prompt answered by
        // the authenticator).
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
                   body: JSON.stringify({ call: 99, tool_call_id: 'x', action: 'reset_workspace', args_sha256: digest,
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
async fn gateway_away_then_back(ui: &Ui<'_>, gateway: &mut Gateway) -> Outcome {
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

async fn rename_with_approval(ui: &Ui<'_>) -> Outcome {
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

async fn always_allow_for_save_then_revoke(ui: &Ui<'_>) -> Outcome {
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

async fn archive_is_asked_twice_and_a_denial_changes_nothing(ui: &Ui<'_>) -> Outcome {
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

async fn reset_states_what_is_lost(ui: &Ui<'_>) -> Outcome {
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

async fn publish_handoff_cancelled(ui: &Ui<'_>) -> Outcome {
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
async fn publish_with_a_wrong_code_says_not_yet_and_the_right_one_publishes(
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

async fn publish_with_the_code_gives_the_receipt(ui: &Ui<'_>) -> Outcome {
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

async fn a_question_is_answered_without_changing_anything(ui: &Ui<'_>) -> Outcome {
    ui.open("en").await?;
    ui.say("What is the workspace called?").await?;
    let answer = ui.answer_contains("called").await?;
    ensure(answer.contains("Atlas"), format!("answer: {answer}"))?;
    ensure(
        ui.count(".cs-card").await? == 0,
        "a read asked for approval",
    )
}

async fn the_same_flow_in_chinese(ui: &Ui<'_>) -> Outcome {
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

async fn the_dock_is_readable_at_360_px(ui: &Ui<'_>) -> Outcome {
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

/// axe-core on the dock with a card, a handoff, the grants list and the chat open, in
/// English and Chinese: no serious or critical violations.
async fn the_dock_passes_axe_in_english_and_chinese(ui: &Ui<'_>) -> Outcome {
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
async fn the_whole_approval_flow_works_from_the_keyboard(ui: &Ui<'_>) -> Outcome {
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
async fn the_dock_is_light_by_default(ui: &Ui<'_>) -> Outcome {
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
async fn the_dock_follows_a_dark_preference(ui: &Ui<'_>) -> Outcome {
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

/// Edit before approving: the edited arguments are a new call with its own card, and
/// only that one runs; the model is told what the person changed.
async fn an_edited_card_runs_only_the_edited_call(ui: &Ui<'_>) -> Outcome {
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
async fn a_pending_card_survives_a_reload(ui: &Ui<'_>) -> Outcome {
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
async fn one_message_two_calls_is_a_batch(ui: &Ui<'_>) -> Outcome {
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

async fn the_edit_form_and_the_batch_fit_at_360_px(ui: &Ui<'_>) -> Outcome {
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

/// A browser agent (or any script in the page) clicking the dock's own Allow approves
/// nothing: only a person's trusted gesture does. The person's real click then works.
async fn a_script_clicking_allow_approves_nothing(ui: &Ui<'_>) -> Outcome {
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
