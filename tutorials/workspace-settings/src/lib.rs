//! The workspace-settings tutorial: five actions (save name, save description, archive,
//! reset, publish with a handoff), read-only page state, and the in-page assistant in the
//! `<AgentDock/>`. Cards can be edited before approving, survive a reload, and calls made
//! in one message form a batch.
//!
//! Run it with `cargo xtask serve`; read `tutorials/workspace-settings/README.md`.

mod actions;
mod copy;
mod planner;

pub use planner::offline as offline_assistant;
mod settings;
mod workspace;

use countersign::Session;
use countersign_leptos::{provide_countersign, AgentDock, Assistant, CountersignOptions, Locale};
use leptos::prelude::*;

/// The tutorial app: settings on the left, the dock on the right (below on narrow screens).
///
/// The assistant is the model behind the gateway at this origin when it has one
/// (`GET /v1/health`), and the built-in offline assistant otherwise. With a gateway the
/// audit trail is shipped to it.
#[component]
pub fn App() -> impl IntoView {
    let query = web_sys::window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default();
    let locale = Locale::from_query(&query);
    let options = CountersignOptions {
        session: Session::new("admin", ["workspace.write", "workspace.admin"]),
        locale: Some(locale),
        approval_timeout: None,
        // A pending card (and the chat) survives a reload of this tab; it comes back
        // only as it was, and is asked again.
        keep_pending: Some("workspace-settings".into()),
        // Only a person's own click decides (never a script's, never an agent's).
        trust_script_clicks: false,
        // Archive and reset run only with a countersignature the gateway mints after
        // the person approves; their backend checks it.
        countersign_endpoint: Some("/v1/countersign".into()),
        // A browser agent (WebMCP) can call the same actions, through the same dock.
        webmcp: true,
        // Off here so the walkthrough works with clicks alone; turn it on where agents
        // that drive the browser could approve their own archive.
        agents_need_passkey: false,
        // An MCP client (a desktop assistant, an IDE agent) can call them too, through
        // the gateway, once paired with the code the dock shows.
        mcp_relay: Some("/v1/relay".into()),
        // The default: at most 4,096 audit records wait for the gateway in the page.
        audit_capacity: None,
    };
    let cs = match provide_countersign(options) {
        Ok(cs) => cs,
        Err(e) => return view! { <p class="fatal" role="alert">{e.to_string()}</p> }.into_any(),
    };
    let copy = copy::copy(locale);
    let ws = workspace::Workspace::new(copy.default_description);
    // With the gateway at this origin: its model if it has one, and the audit trail
    // shipped there. Without it (plain `trunk serve`): the offline assistant.
    let assistant = Assistant::for_page(&cs, planner::offline(locale));
    if let Some(document) = web_sys::window().and_then(|w| w.document()) {
        if let Some(root) = document.document_element() {
            let _ = root.set_attribute("lang", locale.tag());
        }
        document.set_title(copy.title);
    }
    view! {
        <div class="layout">
            <settings::Settings ws=ws copy=copy />
            <AgentDock assistant=assistant hint=copy.dock_hint />
        </div>
    }
    .into_any()
}
