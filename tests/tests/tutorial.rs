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
    Ui,
};

#[path = "tutorial/approvals.rs"]
mod approvals;
use approvals::{
    a_pending_card_survives_a_reload, a_script_clicking_allow_approves_nothing,
    always_allow_for_save_then_revoke, an_edited_card_runs_only_the_edited_call,
    archive_is_asked_twice_and_a_denial_changes_nothing, one_message_two_calls_is_a_batch,
    rename_with_approval, reset_states_what_is_lost,
};
#[path = "tutorial/bundle.rs"]
mod bundle;
use bundle::{
    bundle_changed, the_page_does_not_start, the_page_works_without_its_countersign_layer,
    valid_but_changed,
};
#[path = "tutorial/gateway.rs"]
mod gateway;
use gateway::{
    audit_reaches_the_gateway, countersigned_archive, gateway_away_then_back, passkey_reset,
    the_trail_answers_an_auditor_and_gates_a_policy_change,
};
#[path = "tutorial/handoffs.rs"]
mod handoffs;
use handoffs::{
    a_question_is_answered_without_changing_anything, publish_handoff_cancelled,
    publish_with_a_wrong_code_says_not_yet_and_the_right_one_publishes,
    publish_with_the_code_gives_the_receipt,
};
#[path = "tutorial/layout.rs"]
mod layout;
use layout::{
    a_phone_shows_the_handoff_s_field_and_its_done_together, the_dock_follows_a_dark_preference,
    the_dock_is_light_by_default, the_dock_is_readable_at_360_px,
    the_dock_passes_axe_in_english_and_chinese, the_edit_form_and_the_batch_fit_at_360_px,
    the_same_flow_in_chinese, the_whole_approval_flow_works_from_the_keyboard,
};
#[path = "tutorial/mcp.rs"]
mod mcp;
#[path = "tutorial/untrusted.rs"]
mod untrusted;
use untrusted::an_injected_request_is_asked_though_always_allow_was_given;
#[path = "tutorial/webmcp.rs"]
mod webmcp;
#[path = "tutorial/window.rs"]
mod window;
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
        // A second gateway whose server raises reset to its approval window.
        let windowed = Gateway::start_with_window(
            dist.clone(),
            model.clone(),
            audit_dir.join("window-audit.jsonl"),
        )
        .await?;
        let gateway = Gateway::start(dist, model, audit_dir.join("audit.jsonl")).await?;
        let browser = Browser::start().await?;
        Ok::<_, String>((plain, changed, gateway, windowed, browser))
    };
    let (plain, changed, mut gateway, windowed, browser) = match setup.await {
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
        a_phone_shows_the_handoff_s_field_and_its_done_together,
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
    // The page of the gateway with an approval window, at `localhost` (for passkeys).
    let on_window = Ui {
        client: ui.client,
        base: windowed.localhost(),
        shots: ui.shots.clone(),
        offline: false,
        prefix: "gateway-",
    };
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
            "gateway/a_reset_is_approved_in_the_window_by_a_named_person",
            window::a_reset_is_approved_in_the_window_by_a_named_person(&on_window, &windowed)
                .await,
        ),
        (
            "gateway/a_reset_is_approved_on_a_phone_and_another_denied_there",
            window::a_reset_is_approved_on_a_phone_and_another_denied_there(&on_window, &windowed)
                .await,
        ),
        (
            "gateway/the_trail_answers_an_auditor_and_gates_a_policy_change",
            the_trail_answers_an_auditor_and_gates_a_policy_change(&gateway).await,
        ),
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
