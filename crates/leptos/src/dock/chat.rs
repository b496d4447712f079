//! The chat: the conversation and action log, the input, a visible working state.

use leptos::prelude::*;

use super::revealed::{revealed, Shape};
use crate::assistant::Assistant;
use crate::countersign::Countersign;
use crate::dock_state::LogEntry;
use crate::i18n::Strings;

/// The log and the input. Without an assistant the input is disabled.
#[component]
pub(crate) fn Chat(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
    /// The assistant answering messages, if any.
    assistant: StoredValue<Option<Assistant>, LocalStorage>,
    /// The empty chat's hint.
    hint: String,
    /// The input's placeholder.
    placeholder: String,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    let draft = RwSignal::new(String::new());
    let enabled = assistant.with_value(Option::is_some);
    let send = move || {
        let text = draft.get_untracked();
        if text.trim().is_empty() || dock.working.get_untracked() {
            return;
        }
        let (Some(assistant), Some(cs)) = (assistant.get_value(), cs.try_get_value()) else {
            return;
        };
        draft.set(String::new());
        leptos::task::spawn_local(async move {
            // The outcome (answer or error) is already in the log.
            let _ = assistant.send(&cs, &text).await;
        });
    };
    let can_go_online = assistant.with_value(|a| a.as_ref().is_some_and(Assistant::can_go_online));
    let try_online = move || {
        let (Some(assistant), Some(cs)) = (assistant.get_value(), cs.try_get_value()) else {
            return;
        };
        leptos::task::spawn_local(async move {
            assistant.try_model_again(&cs).await;
        });
    };
    // The log follows the newest message unless the person scrolled up to read.
    let log_ref = NodeRef::<leptos::html::Ol>::new();
    let follow = RwSignal::new(true);
    let on_scroll = move |_| {
        if let Some(el) = log_ref.get_untracked() {
            let bottom = el.scroll_top() + el.client_height();
            follow.set(bottom >= el.scroll_height() - 24);
        }
    };
    Effect::new(move |_| {
        let _ = dock.log.with(Vec::len);
        if follow.get_untracked() {
            if let Some(el) = log_ref.get_untracked() {
                request_animation_frame(move || el.set_scroll_top(el.scroll_height()));
            }
        }
    });
    let log = move || {
        let entries = dock.log.get();
        if entries.is_empty() {
            return view! { <p class="cs-empty">{hint.clone()}</p> }.into_any();
        }
        entries
            .into_iter()
            .map(|entry| entry_view(strings, entry))
            .collect_view()
            .into_any()
    };
    // The answer as it streams in: its text, and each tool call being prepared as a card
    // with no buttons (nothing can be approved before the stream has finished).
    let streaming = move || {
        dock.streaming.get().map(|so_far| {
            let text = (!so_far.text.is_empty()).then(|| {
                view! { <li class="cs-msg cs-msg--assistant cs-msg--streaming">{revealed(strings, &so_far.text, Shape::Text)}</li> }
            });
            let preparing = so_far
                .preparing
                .into_iter()
                .map(|call| {
                    let title = cs.with_value(|cs| cs.executor().title_of(&call.name));
                    let name = match title {
                        Some(title) => revealed(strings, &title, Shape::Text),
                        None => revealed(strings, &call.name, Shape::Name),
                    };
                    view! {
                        <li class="cs-msg cs-preparing" aria-busy="true">
                            <strong>{name}</strong>" — "{strings.preparing}" "
                            <span class="cs-preparing__bytes">{call.bytes}" B"</span>
                        </li>
                    }
                })
                .collect_view();
            view! { {text}{preparing} }
        })
    };
    view! {
        <section class="cs-chat">
            // Scrollable, so reachable from the keyboard too (axe: scrollable-region-focusable).
            {move || (dock.offline.get() && can_go_online).then(|| view! {
                <p class="cs-offline-note">
                    {strings.offline_now}" "
                    <button type="button" class="cs-btn cs-btn--link cs-go-online" on:click=move |_| try_online()>
                        {strings.try_model_again}
                    </button>
                </p>
            })}
            <ol class="cs-log" aria-live="polite" aria-label=strings.conversation tabindex="0" node_ref=log_ref on:scroll=on_scroll>{log}{streaming}</ol>
            <p class="cs-working" hidden=move || !dock.working.get()>{strings.working}</p>
            <form class="cs-form" on:submit=move |ev| { ev.prevent_default(); send(); }>
                <input
                    type="text"
                    class="cs-input"
                    aria-label=placeholder.clone()
                    placeholder=placeholder
                    disabled=!enabled
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                />
                <button type="submit" class="cs-btn cs-btn--primary cs-send" disabled=move || !enabled || dock.working.get()>
                    {strings.send}
                </button>
            </form>
        </section>
    }
}

fn entry_view(strings: &'static Strings, entry: LogEntry) -> AnyView {
    match entry {
        LogEntry::User(text) => {
            view! { <li class="cs-msg cs-msg--user">{revealed(strings, &text, Shape::Text)}</li> }
                .into_any()
        }
        // The model's prose: isolated and revealed like everything else it writes.
        LogEntry::Assistant(text) => view! {
            <li class="cs-msg cs-msg--assistant">{revealed(strings, &text, Shape::Text)}</li>
        }
        .into_any(),
        LogEntry::Outcome {
            action,
            title,
            code,
        } => {
            let class = if code.is_none() {
                "cs-msg cs-msg--outcome cs-ok"
            } else {
                "cs-msg cs-msg--outcome cs-refused"
            };
            let code_text = code.map_or("OK", |c| c.as_str());
            // An unregistered name is the model's: shown escaped, so a look-alike of a
            // real action (Cyrillic `а`) or a blank name cannot pass for one.
            let shape = if title == action {
                Shape::Name
            } else {
                Shape::Text
            };
            let name = revealed(strings, &title, shape);
            view! {
                <li class=class data-action=action data-code=code_text>
                    <strong>{name}</strong>" — "{strings.outcome(code)}
                </li>
            }
            .into_any()
        }
        LogEntry::Notice(text) => view! {
            <li class="cs-msg cs-msg--notice" role="status">{text}</li>
        }
        .into_any(),
        LogEntry::Error(text) => view! {
            <li class="cs-msg cs-msg--error" role="alert">{strings.error_prefix}": "{revealed(strings, &text, Shape::Text)}</li>
        }
        .into_any(),
    }
}
