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
use countersign_leptos::{
    provide_countersign, AgentDock, Assistant, CountersignOptions, Locale, Placement,
};
use leptos::prelude::*;

/// The tutorial app: settings on the left, the dock a sidebar on the right (a bottom
/// sheet on narrow screens).
///
/// The settings page is interactive at once; the Countersign layer (the page's actions,
/// the gate, the dock and the assistant) is its own wasm part, fetched right after (see
/// `countersign_layer`).
#[component]
pub fn App() -> impl IntoView {
    let query = web_sys::window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default();
    let locale = Locale::from_query(&query);
    let copy = copy::copy(locale);
    let page = Page {
        ws: workspace::Workspace::new(copy.default_description),
        copy,
        locale,
        targets: settings::Targets::new(),
    };
    provide_context(page);
    if let Some(document) = web_sys::window().and_then(|w| w.document()) {
        if let Some(root) = document.document_element() {
            let _ = root.set_attribute("lang", locale.tag());
        }
        document.set_title(copy.title);
    }
    view! {
        <div class="layout">
            <settings::Settings ws=page.ws copy=copy targets=page.targets />
            <Suspense fallback=|| ()>
                {Suspend::new(async move {
                    countersign_layer().await.unwrap_or_else(|_| {
                        view! { <p class="fatal" role="alert">{copy.layer_failed}</p> }
                            .into_any()
                    })
                })}
            </Suspense>
        </div>
    }
}

/// What the Countersign layer needs from the page, provided by [`App`].
#[derive(Clone, Copy)]
struct Page {
    ws: workspace::Workspace,
    copy: &'static copy::PageText,
    locale: Locale,
    targets: settings::Targets,
}

/// The Countersign layer: the gate and its options, the page's actions, state and
/// targets, the assistant and the `<AgentDock/>`. `#[wasm_split]`: it is a wasm part of
/// its own (`countersign-split`, run by trunk after each build), fetched the first time
/// this is called, so the page does not wait for it. A part that cannot be fetched is
/// an `Err` (the page goes on without its assistant), never a panic.
#[leptos::wasm_split::wasm_split(
    countersign_layer,
    wasm_split_path = ::leptos::wasm_split,
    fallible
)]
fn countersign_layer() -> Result<AnyView, leptos::wasm_split::SplitLoaderError> {
    // Nothing here is tracked: the layer is set up once, never again on a change.
    Ok(untrack(|| {
        let Some(page) = use_context::<Page>() else {
            return ().into_any();
        };
        let options = CountersignOptions {
            session: Session::new("admin", ["workspace.write", "workspace.admin"]),
            locale: Some(page.locale),
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
            Err(e) => {
                return view! { <p class="fatal" role="alert">{e.to_string()}</p> }.into_any()
            }
        };
        settings::declare(page.ws, page.copy, page.targets);
        // With the gateway at this origin: its model if it has one, and the audit trail
        // shipped there. Without it (plain `trunk serve`): the offline assistant.
        let assistant = Assistant::for_page(&cs, planner::offline(page.locale));
        view! { <AgentDock assistant=assistant hint=page.copy.dock_hint placement=Placement::Sidebar /> }
            .into_any()
    }))
}
