//! `<AgentDock/>`: the chat, the approval queue, handoffs and session grants.

// `#[component]` expands to `pub` props structs and functions, visible or not.
#![allow(unreachable_pub)]

mod activity_list;
mod approval_queue;
mod batch_allow;
mod chat;
mod css;
mod edit_form;
mod grant_list;
mod handoff_panel;
mod question_panel;
mod revealed;

use leptos::prelude::*;

use crate::assistant::Assistant;
use crate::provider::use_countersign;
use activity_list::ActivityList;
use approval_queue::ApprovalQueue;
use chat::Chat;
use grant_list::GrantList;
use handoff_panel::HandoffPanel;
use question_panel::QuestionPanel;

pub use css::DOCK_CSS;

/// The opt-in for system notifications: asked only from the person's click.
#[component]
fn NotifySetting(cs: StoredValue<crate::Countersign, LocalStorage>) -> impl IntoView {
    let dock = cs.with_value(crate::Countersign::dock);
    let strings = cs.with_value(|cs| cs.locale().strings());
    crate::attention::notifications_supported().then(|| {
        view! {
            <p class="cs-notify">
                {move || match (dock.notify.get(), dock.notify_permission.get()) {
                    (true, _) => view! { <span role="status">{strings.notify_on}</span> }.into_any(),
                    (false, Some(false)) => view! { <span role="status">{strings.notify_denied}</span> }.into_any(),
                    _ => view! {
                        <button type="button" class="cs-btn cs-btn--link cs-notify-on" on:click=move |_| {
                            cs.with_value(|cs| crate::attention::turn_notifications_on(cs.0.dock));
                        }>{strings.notify_setting}</button>
                    }.into_any(),
                }}
            </p>
        }
    })
}

/// "Set up a passkey for approvals": shown when the gateway does passkeys and this
/// session's user has none; registering takes the person's click and the browser's
/// passkey prompt (user verification required).
#[component]
fn PasskeySetting(cs: StoredValue<crate::Countersign, LocalStorage>) -> impl IntoView {
    let strings = cs.with_value(|cs| cs.locale().strings());
    let state = RwSignal::new(crate::passkey::Setup::Unknown);
    if crate::webauthn::supported() {
        cs.with_value(|cs| crate::passkey::check(cs, state));
    }
    move || {
        use crate::passkey::Setup;
        match state.get() {
            Setup::Unknown | Setup::Off => None,
            Setup::Ready => Some(
                view! { <p class="cs-passkey" role="status">{strings.passkey_ready}</p> }
                    .into_any(),
            ),
            Setup::Working => Some(
                view! { <p class="cs-passkey" role="status">{strings.passkey_working}</p> }
                    .into_any(),
            ),
            setup => {
                let failed = match setup {
                    Setup::Failed(why) => Some(
                        view! { <span role="alert">{strings.passkey_failed}" "{why}" "</span> },
                    ),
                    _ => None,
                };
                let code = RwSignal::new(String::new());
                Some(view! {
                    <p class="cs-passkey">
                        {failed}
                        <label>
                            {strings.passkey_code}" "
                            <input class="cs-passkey-code" autocomplete="off" spellcheck="false"
                                prop:value=move || code.get()
                                on:input=move |event| code.set(event_target_value(&event)) />
                        </label>
                        " "
                        <button type="button" class="cs-btn cs-btn--link cs-passkey-setup" on:click=move |event| {
                            let typed = code.get_untracked();
                            cs.with_value(|cs| crate::passkey::register(cs, &event, typed, state));
                        }>{strings.passkey_setup}</button>
                    </p>
                }.into_any())
            }
        }
    }
}

/// The MCP pairing code, while the gateway relays MCP clients' calls to this page.
#[component]
fn McpPairing(cs: StoredValue<crate::Countersign, LocalStorage>) -> impl IntoView {
    let dock = cs.with_value(crate::Countersign::dock);
    let strings = cs.with_value(|cs| cs.locale().strings());
    move || {
        dock.pairing.get().map(|code| {
            view! {
                <p class="cs-pairing">
                    {strings.mcp_pairing}" "<code class="cs-pairing-code">{code}</code>
                </p>
            }
        })
    }
}

/// Loud notices: a mode other than default, a broken policy file.
#[component]
fn Banners(cs: StoredValue<crate::Countersign, LocalStorage>) -> impl IntoView {
    use countersign::Mode;
    let dock = cs.with_value(crate::Countersign::dock);
    let strings = cs.with_value(|cs| cs.locale().strings());
    let mode = move || {
        match dock.mode.get() {
            Mode::Default => None,
            Mode::Away => Some(("cs-banner cs-banner--away", strings.mode_away)),
            Mode::Unattended => Some(("cs-banner cs-banner--unattended", strings.mode_unattended)),
            Mode::Bypass => Some(("cs-banner cs-banner--bypass", strings.mode_bypass)),
        }
        .map(|(class, text)| view! { <p class=class role="status">{text}</p> })
    };
    let policy = move || {
        dock.policy_error.get().map(|e| {
            view! { <p class="cs-banner cs-banner--error" role="alert">{strings.policy_broken}" "{e}</p> }
        })
    };
    view! { {mode} {policy} }
}

/// Where the dock sits. Each placement but `Inline` is a bottom sheet on narrow screens
/// (840 px or less): the current card, or the handoff's "I've done it", in the sheet, and
/// the page above it, where a highlighted target is scrolled to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Where `<AgentDock/>` is written, in the page's own layout (the default).
    #[default]
    Inline,
    /// Fixed to the right edge at full height; leave room for it (`--cs-width`, 420 px).
    Sidebar,
    /// Over the bottom-right corner; the person can fold it to its header, and it shows
    /// again by itself while something waits for them.
    Popup,
}

/// The dock's colours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Theme {
    /// Light or dark as the system prefers (the default).
    #[default]
    System,
    /// Light whatever the system prefers: for a light page.
    Light,
    /// Dark whatever the system prefers: for a dark page.
    Dark,
}

/// The assistant's side panel: the queue of approvals (one card at a time, with the
/// consequence computed by the page), the current handoff with its steps highlighted on
/// the page, the session grants, and the chat.
///
/// Needs [`crate::provide_countersign`] above it.
#[component]
pub fn AgentDock(
    /// The assistant behind the chat. Default: none, and the chat input is disabled
    /// (approvals and handoffs still work: calls can come from elsewhere).
    #[prop(optional)]
    assistant: Option<Assistant>,
    /// The dock's heading. Default: "Assistant" in the dock's language.
    #[prop(optional, into)]
    title: Option<String>,
    /// The empty chat's hint: what a person could ask on *this* page. Default: a
    /// sentence about approvals that fits any app, in the dock's language.
    #[prop(optional, into)]
    hint: Option<String>,
    /// The chat input's placeholder. Default: "Ask the assistant…" in the dock's language.
    #[prop(optional, into)]
    placeholder: Option<String>,
    /// Where the dock sits. Default: [`Placement::Inline`].
    #[prop(optional)]
    placement: Placement,
    /// The dock's colours. Default: [`Theme::System`].
    #[prop(optional)]
    theme: Theme,
) -> impl IntoView {
    let Some(cs) = use_countersign() else {
        leptos::logging::error!("countersign: <AgentDock/> needs provide_countersign above it");
        return view! { <aside class="cs-dock" role="alert">"countersign: no provider"</aside> }
            .into_any();
    };
    let locale = cs.locale();
    let strings = locale.strings();
    let dock = cs.dock();
    cs.set_offline(assistant.as_ref().is_some_and(Assistant::is_offline));
    let cs = StoredValue::new_local(cs);
    let assistant = StoredValue::new_local(assistant);
    crate::highlight::track(cs);
    let title = title.unwrap_or_else(|| strings.title.to_owned());
    let hint = hint.unwrap_or_else(|| strings.empty_chat.to_owned());
    let placeholder = placeholder.unwrap_or_else(|| strings.input_placeholder.to_owned());
    let label = title.clone();
    let class = match placement {
        Placement::Inline => "cs-dock",
        Placement::Sidebar => "cs-dock cs-dock--sidebar",
        Placement::Popup => "cs-dock cs-dock--popup",
    };
    let class = match theme {
        Theme::System => class.to_owned(),
        Theme::Light => format!("{class} cs-dock--light"),
        Theme::Dark => format!("{class} cs-dock--dark"),
    };
    view! {
        <aside class=class lang=locale.tag() aria-label=label>
            <style>{DOCK_CSS}</style>
            <header class="cs-dock__header">
                <h2>{title}</h2>
                <span class="cs-badge cs-badge--offline" title=strings.offline_explained hidden=move || !dock.offline.get()>
                    {strings.offline_badge}
                </span>
                // A popup's fold (its stylesheet hides the rest while it is checked and
                // nothing waits for the person; hidden in other placements).
                <label class="cs-fold"><input type="checkbox" />{strings.fold}</label>
                // Setup waits behind one small control, so the cards and the chat come
                // first: notifications, a passkey (only when the gateway asks passkeys)
                // and the MCP pairing code (only while MCP is on).
                <details class="cs-settings">
                    <summary class="cs-settings__toggle" title=strings.settings aria-label=strings.settings>"\u{2699}"</summary>
                    <div class="cs-settings__body">
                        <NotifySetting cs=cs />
                        <PasskeySetting cs=cs />
                        <McpPairing cs=cs />
                    </div>
                </details>
            </header>
            <Banners cs=cs />
            <ApprovalQueue cs=cs />
            <HandoffPanel cs=cs />
            <QuestionPanel cs=cs />
            <GrantList cs=cs />
            <ActivityList cs=cs />
            <Chat cs=cs assistant=assistant hint=hint placeholder=placeholder />
        </aside>
    }
    .into_any()
}
