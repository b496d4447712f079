//! The settings page: the same controls a person uses, with the assistant's actions
//! declared beside them and the elements handoffs point at.

// `#[component]` expands to `pub` items.
#![allow(unreachable_pub)]

use countersign_leptos::{use_page_state, use_target_ref};
use leptos::html;
use leptos::prelude::*;

use crate::actions;
use crate::copy::PageText;
use crate::workspace::{validate_name, Workspace};

/// The elements the assistant's handoff steps and cards point at, made with the page so
/// the Countersign layer can name them when it loads.
#[derive(Clone, Copy)]
pub(crate) struct Targets {
    name: NodeRef<html::Input>,
    archive: NodeRef<html::Button>,
    reset: NodeRef<html::Button>,
    code: NodeRef<html::Input>,
    publish: NodeRef<html::Button>,
    description: NodeRef<html::P>,
}

impl Targets {
    pub(crate) fn new() -> Self {
        Self {
            name: NodeRef::new(),
            archive: NodeRef::new(),
            reset: NodeRef::new(),
            code: NodeRef::new(),
            publish: NodeRef::new(),
            description: NodeRef::new(),
        }
    }
}

/// The page's side of Countersign, run when the layer loads: its actions, the state the
/// assistant may read, and its targets. All end when the layer unmounts.
pub(crate) fn declare(ws: Workspace, copy: &'static PageText, targets: Targets) {
    actions::declare(ws, copy);
    use_page_state("workspace_name", move || ws.name.get_untracked());
    use_page_state("description", move || ws.description.get_untracked());
    use_page_state("archived", move || ws.archived.get_untracked());
    use_page_state("published", move || ws.published.get_untracked());
    use_target_ref("workspace_name", targets.name);
    use_target_ref("archive_button", targets.archive);
    use_target_ref("reset_button", targets.reset);
    use_target_ref("verification_code", targets.code);
    use_target_ref("publish_button", targets.publish);
    use_target_ref("description", targets.description);
}

/// The workspace-settings page: interactive before the Countersign layer loads.
#[component]
pub(crate) fn Settings(
    /// The page state.
    ws: Workspace,
    /// The page's words.
    copy: &'static PageText,
    /// The elements the assistant may point at.
    targets: Targets,
) -> impl IntoView {
    let Targets {
        name: name_ref,
        archive: archive_ref,
        reset: reset_ref,
        code: code_ref,
        publish: publish_ref,
        description: description_ref,
    } = targets;
    let archived = move || ws.archived.get();
    let save = move || {
        let draft = ws.draft_name.get_untracked();
        if validate_name(&draft).is_ok() && !ws.archived.get_untracked() {
            ws.rename(draft.trim());
        }
    };
    view! {
        <main class="settings">
            <header class="page-header">
                <div>
                    <p class="eyebrow">{copy.title}</p>
                    <h1 id="current-name">{move || ws.name.get()}</h1>
                </div>
                <nav class="lang" aria-label="Language">
                    <a href="?lang=en">"English"</a>
                    <a href="?lang=zh">"中文"</a>
                </nav>
            </header>
            <p class="intro">{copy.intro}</p>

            <section class="panel" aria-labelledby="general-heading">
                <h2 id="general-heading">{copy.general}</h2>
                <label for="workspace-name">{copy.name_label}</label>
                <div class="row">
                    <input
                        id="workspace-name"
                        type="text"
                        node_ref=name_ref
                        disabled=archived
                        prop:value=move || ws.draft_name.get()
                        on:input=move |ev| ws.draft_name.set(event_target_value(&ev))
                    />
                    <button id="save-name" class="button" disabled=archived on:click=move |_| save()>
                        {copy.save}
                    </button>
                </div>
                <p class="field-label">{copy.description_label}</p>
                <p id="description" class="description" node_ref=description_ref>{move || ws.description.get()}</p>
            </section>

            <section class="panel" aria-labelledby="status-heading">
                <h2 id="status-heading">{copy.status}</h2>
                <div class="row row--spread">
                    <span id="archived-status" class=move || if archived() { "badge badge--muted" } else { "badge badge--ok" }>
                        {move || if archived() { copy.archived } else { copy.active }}
                    </span>
                    <button id="archive" class="button" node_ref=archive_ref disabled=archived on:click=move |_| ws.archived.set(true)>
                        {copy.archive}
                    </button>
                </div>
            </section>

            <section class="panel" aria-labelledby="publish-heading">
                <h2 id="publish-heading">{copy.publishing}</h2>
                <p>
                    <span id="publish-status" class=move || if ws.published.get() { "badge badge--ok" } else { "badge" }>
                        {move || if ws.published.get() { copy.published } else { copy.draft }}
                    </span>
                </p>
                <label for="verification-code">{copy.code_label}</label>
                <div class="row">
                    <input
                        id="verification-code"
                        type="text"
                        inputmode="numeric"
                        autocomplete="one-time-code"
                        node_ref=code_ref
                        prop:value=move || ws.code.get()
                        on:input=move |ev| ws.code.set(event_target_value(&ev))
                    />
                    <button
                        id="publish"
                        class="button button--primary"
                        node_ref=publish_ref
                        disabled=move || ws.published.get() || archived()
                        on:click=move |_| ws.press_publish()
                    >
                        {copy.publish}
                    </button>
                </div>
                <p class="error" role="alert" hidden=move || !ws.code_error.get()>{copy.wrong_code}</p>
                <p class="hint">{copy.code_hint}</p>
            </section>

            <section class="panel" aria-labelledby="requests-heading">
                <h2 id="requests-heading">{copy.requests}</h2>
                <p id="member-requests" class="requests">{copy.member_requests}</p>
                <p class="hint">{copy.requests_hint}</p>
            </section>

            <section class="panel panel--danger" aria-labelledby="danger-heading">
                <h2 id="danger-heading">{copy.danger_zone}</h2>
                <div class="row row--spread">
                    <p class="hint">{copy.reset_hint}</p>
                    <button id="reset" class="button button--danger" node_ref=reset_ref disabled=archived on:click=move |_| ws.reset()>
                        {copy.reset}
                    </button>
                </div>
            </section>
        </main>
    }
}
