//! The approval queue: one card at a time, "n of m" of the model's batch, Allow once /
//! Always allow / Deny / Edit, and "allow all in this batch" where every remaining item
//! may be allowed together.

use countersign::{policy::ApprovalPolicy, ApprovalRequest, CallId, Gesture, Kind};
use leptos::ev::KeyboardEvent;
use leptos::html;
use leptos::prelude::*;

use super::edit_form::Editor;
use super::revealed::{arguments_view, revealed, Shape};
use crate::countersign::Countersign;
use crate::i18n::Strings;

/// The queue of pending approvals; renders nothing while none wait.
#[component]
pub(crate) fn ApprovalQueue(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    let reason = RwSignal::new(String::new());
    let card_ref = NodeRef::<html::Div>::new();
    // Calls seen since the queue was last empty: "n of m" for calls outside a batch.
    let batch = RwSignal::new(Vec::<CallId>::new());
    // The card to show first (the one a person's edit just made), when it waits.
    let prefer = RwSignal::new(None::<CallId>);
    let editing = RwSignal::new(None::<CallId>);
    // The card on screen, by identity: the view is drawn again only when it changes
    // (not on every refresh of the queue), so an open edit form keeps what was typed.
    let shown = Memo::new(move |_| {
        dock.approvals.with(|cards| {
            let wanted = prefer.get();
            cards
                .iter()
                .find(|c| Some(c.call) == wanted)
                .or(cards.first())
                .map(|c| (c.call, c.card_sha256))
        })
    });
    let current = Memo::new(move |_| shown.get().map(|(call, _)| call));

    Effect::new(move |_| {
        let ids: Vec<CallId> = dock
            .approvals
            .with(|cards| cards.iter().map(|c| c.call).collect());
        batch.update(|seen| {
            if ids.is_empty() {
                seen.clear();
            } else {
                // Kept sorted: each new id is found by a binary search, however many
                // calls an agent cycles through while one card waits.
                for id in ids {
                    if let Err(at) = seen.binary_search(&id) {
                        seen.insert(at, id);
                    }
                }
            }
        });
    });
    // A new current card: clear the reason and move focus to the card.
    Effect::new(move |_| {
        if current.get().is_some() {
            reason.set(String::new());
            if let Some(card) = card_ref.get() {
                let _ = card.focus();
            }
        }
    });

    let place = Memo::new(move |_| {
        let call = current.get()?;
        let in_batch = dock.batches.with(|batches| {
            batches
                .iter()
                .find_map(|b| b.position(call).map(|n| (n, b.items.len())))
        });
        Some(in_batch.unwrap_or_else(|| {
            let waiting = dock.approvals.with(Vec::len);
            let total = batch.with(Vec::len).max(waiting);
            (total.saturating_sub(waiting) + 1, total)
        }))
    });

    move || {
        let (call, _) = shown.get()?;
        let card = dock
            .approvals
            .with_untracked(|cards| cards.iter().find(|c| c.call == call).cloned())?;
        let editor = Editor { editing, prefer };
        Some(view! {
            {card_view(cs, strings, card, place, reason, card_ref, dock.now_ms, editor)}
            {move || super::batch_allow::offer(dock, current.get()).map(|cards| super::batch_allow::view(cs, strings, cards))}
        })
    }
}

/// How long before its deadline a card warns that it is about to expire.
const EXPIRY_WARNING_MS: u64 = 30_000;

fn kind_class(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Read => ("cs-card cs-card--read", "cs-kind cs-kind--read"),
        Kind::Write => ("cs-card cs-card--write", "cs-kind cs-kind--write"),
        Kind::Danger => ("cs-card cs-card--danger", "cs-kind cs-kind--danger"),
    }
}

#[allow(clippy::too_many_arguments)]
fn card_view(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    card: ApprovalRequest,
    place: Memo<Option<(usize, usize)>>,
    reason: RwSignal<String>,
    card_ref: NodeRef<html::Div>,
    now_ms: ReadSignal<u64>,
    editor: Editor,
) -> impl IntoView {
    cs.with_value(|cs| cs.shown(card.call, card.caller));
    let deadline = card.deadline.as_millis();
    let left = move || deadline.saturating_sub(now_ms.get());
    let (card_class, kind_badge) = kind_class(card.kind);
    let arguments = arguments_view(strings, &card.arguments);
    // An action that takes no params has no arguments to read and nothing to edit.
    let takes_params = cs
        .with_value(|cs| cs.executor().params_schema(&card.action))
        .is_none_or(|schema| {
            schema
                .get("properties")
                .and_then(|p| p.as_object())
                .is_none_or(|p| !p.is_empty())
        });
    // A Danger card's "Allow" looks like what it does.
    let allow_class = if card.kind == Kind::Danger {
        "cs-btn cs-btn--primary cs-btn--danger cs-allow-once"
    } else {
        "cs-btn cs-btn--primary cs-allow-once"
    };
    let offers_grant = card.offers_session_grant;
    let grant_rule = card
        .grant_rule
        .as_ref()
        .map(|r| strings.grant_covers(r.description.as_deref(), &card.title, card.caller));
    // A card raised by untrusted content says so, and one drawn again because the page
    // changed under the person says what changed: one line, in one shape.
    let what_changed = (!card.changed.is_empty()).then(|| {
        let what: Vec<&str> = card
            .changed
            .iter()
            .map(|c| strings.card_change(*c))
            .collect();
        what.join(", ")
    });
    let note = match (&card.untrusted, what_changed) {
        (Some(source), changed) => Some((
            "cs-card__untrusted",
            strings.untrusted_card.0,
            format!(
                "“{source}”{}{}",
                strings.untrusted_card.1,
                changed
                    .map(|what| format!(" {} {what}", strings.changed_since))
                    .unwrap_or_default()
            ),
        )),
        (None, Some(what)) => Some(("cs-card__changed", strings.changed_since, what)),
        (None, None) => None,
    };
    let changed = note.map(|(class, strong, text)| {
        view! {
            <p class=class role="alert">
                <strong>{strong}</strong>" "{text}
            </p>
        }
    });
    let consequence = card
        .consequence
        .clone()
        .map(|text| revealed(strings, &text, Shape::Text))
        .unwrap_or_else(|| revealed(strings, &card.action, Shape::Name));
    let second = (card.round > 1).then(|| card.question.clone().unwrap_or_default());
    let edited = card.edited.clone().map(|diff| edited_view(strings, diff));
    let is_editing = move || editor.editing.get() == Some(card.call);
    let form_card = StoredValue::new(card.clone());
    let form = move || {
        // Built untracked: what the form reads while it is built must not rebuild it
        // (and lose what the person typed) on the next keystroke.
        is_editing().then(|| {
            untrack(|| {
                form_card.with_value(|c| super::edit_form::edit_form(cs, strings, c, editor))
            })
        })
    };
    let preview = card.preview.clone().map(|p| preview_view(strings, p));
    // "Dangerous" is not why a card raised by untrusted content asks: its own line says.
    let every_time = card.policy == ApprovalPolicy::AskAlways && card.untrusted.is_none();
    let target = cs.with_value(|cs| cs.action_target(&card.action));
    let call = card.call;
    let stored = StoredValue::new(card.clone());
    let approve = move |ev: leptos::ev::MouseEvent, gesture: Gesture| {
        let control = match gesture {
            Gesture::AllowOnce => countersign::reason::Control::AllowOnce,
            Gesture::AllowForSession => countersign::reason::Control::AlwaysAllow,
            Gesture::AllowInBatch => countersign::reason::Control::AllowBatch,
        };
        if !cs.with_value(|cs| cs.by_person(&ev, call, control)) {
            return;
        }
        // A second click finds the ticket spent: refused, nothing runs twice.
        let card = stored.get_value();
        cs.with_value(|cs| {
            let _ = cs.approve(&card, gesture);
        });
    };
    let deny = move |ev: leptos::ev::MouseEvent| {
        if !cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::Deny)) {
            return;
        }
        let why = reason.get_untracked();
        cs.with_value(|cs| {
            // A card already settled (a timeout raced the click) has nothing to deny.
            let _ = cs.deny(call, Some(why.as_str()).filter(|r| !r.trim().is_empty()));
        });
    };
    let on_key = move |ev: KeyboardEvent| {
        // Esc never approves: it only leaves the card waiting.
        if ev.key() == "Escape" {
            ev.prevent_default();
            ev.stop_propagation();
        }
    };
    view! {
        <section class="cs-queue" aria-label=strings.approvals>
            <h3 class="cs-section-title">{strings.approvals}</h3>
            <div
                class=card_class
                role="alertdialog"
                aria-labelledby="cs-card-title"
                aria-describedby="cs-card-consequence"
                tabindex="-1"
                data-call=call.get().to_string()
                node_ref=card_ref
                on:keydown=on_key
            >
                <p class="cs-card__count">{move || place.get().map(|(n, m)| strings.n_of_m(n, m))}</p>
                <div class="cs-card__head">
                    <h3 id="cs-card-title" class="cs-card__title">{card.title.clone()}</h3>
                    <span class=kind_badge>{strings.kind(card.kind)}</span>
                </div>
                {strings.asked_by(card.caller).map(|who| view! { <p class="cs-caller" role="note">{who}</p> })}
                {changed}
                {card.restored.then(|| view! { <p class="cs-card__restored" role="status">{strings.restored_card}</p> })}
                {edited}
                <p id="cs-card-consequence" class="cs-card__consequence">
                    <span class="cs-label">{strings.consequence}</span>
                    {consequence}
                </p>
                {second.map(|question| view! {
                    <p class="cs-card__second" role="alert">
                        <strong>{strings.second_confirmation}</strong>" "{question}
                    </p>
                })}
                {every_time.then(|| view! { <p class="cs-card__hint">{strings.asked_every_time}</p> })}
                {preview}
                <p class="cs-countdown" role="timer">
                    {strings.time_left}" "{move || strings.countdown(left())}
                </p>
                // Inserted, not toggled: a new alert is what screen readers announce.
                {move || (left() <= EXPIRY_WARNING_MS).then(|| view! {
                    <p class="cs-card__expiring" role="alert">{strings.expires_soon}</p>
                })}
                {takes_params.then(|| view! {
                    <div>
                        <span class="cs-label">{strings.arguments}</span>
                        <pre class="cs-card__args">{arguments}</pre>
                    </div>
                })}
                <label class="cs-card__reason">
                    {strings.deny_reason}
                    <input
                        type="text"
                        class="cs-reason"
                        prop:value=move || reason.get()
                        on:input=move |ev| {
                            // The reason goes to the model as the person's words: a script's is undone.
                            if ev.is_trusted() || cs.with_value(Countersign::trusts_script_clicks) {
                                reason.set(event_target_value(&ev));
                            } else if let Some(target) = ev.target() {
                                let _ = js_sys::Reflect::set(&target, &"value".into(), &reason.get_untracked().into());
                            }
                        }
                    />
                </label>
                {grant_rule.map(|rule| view! {
                    <p class="cs-card__rule"><span class="cs-label">{strings.grant_covers}</span>{revealed(strings, &rule, Shape::Text)}</p>
                })}
                {form}
                <div class="cs-buttons" hidden=is_editing>
                    <button class=allow_class on:click=move |ev| approve(ev, Gesture::AllowOnce)>
                        {strings.allow_once}
                    </button>
                    {offers_grant.then(|| view! {
                        <button class="cs-btn cs-allow-session" on:click=move |ev| approve(ev, Gesture::AllowForSession)>
                            {strings.allow_session}
                        </button>
                    })}
                    <button class="cs-btn cs-btn--deny cs-deny" on:click=deny>{strings.deny}</button>
                    {takes_params.then(|| view! {
                        <button class="cs-btn cs-edit-open" on:click=move |ev| {
                            if cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::Edit)) {
                                editor.editing.set(Some(call));
                            }
                        }>{strings.edit}</button>
                    })}
                    {target.map(|name| view! {
                        <button class="cs-btn cs-btn--link cs-show" on:click=move |_| {
                            cs.with_value(|cs| crate::highlight::point_at(cs, &name));
                        }>{strings.show_in_page}</button>
                    })}
                </div>
            </div>
        </section>
    }
}

/// An edited call's diff: each changed field, original → edited.
fn edited_view(strings: &'static Strings, diff: countersign::edit::EditDiff) -> impl IntoView {
    let shown = |v: &Option<serde_json::Value>| match v {
        None => "—".to_owned(),
        Some(serde_json::Value::String(s)) => format!("\"{s}\""),
        Some(other) => other.to_string(),
    };
    let rows = diff
        .changes
        .iter()
        .map(|c| {
            let before = shown(&c.before);
            let after = shown(&c.after);
            view! {
                <li>
                    <span class="cs-label">{revealed(strings, &c.field, Shape::Text)}</span>
                    <del class="cs-diff__del">{revealed(strings, &before, Shape::Text)}</del>
                    " → "
                    <ins class="cs-diff__add">{revealed(strings, &after, Shape::Text)}</ins>
                </li>
            }
        })
        .collect_view();
    view! {
        <div class="cs-card__edited" role="status">
            <strong>{strings.edited_by_you}</strong>
            <ul class="cs-edit__diff">{rows}</ul>
        </div>
    }
}

/// The dry run's preview: a diff with removed and added lines marked, and counts.
pub(crate) fn preview_view(
    strings: &'static Strings,
    preview: countersign::text::Preview,
) -> impl IntoView {
    let lines = preview
        .diff
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let class = if line.starts_with('+') {
                "cs-diff__add"
            } else if line.starts_with('-') {
                "cs-diff__del"
            } else {
                "cs-diff__same"
            };
            view! { <span class=class>{revealed(strings, line, Shape::Text)}"\n"</span> }
        })
        .collect_view();
    let counts = preview
        .counts
        .into_iter()
        // A label may carry argument text: revealed like every other string on the card.
        // The number stays outside the label's isolate: right-to-left text cannot move it.
        .map(|(label, n)| {
            view! { <li>{revealed(strings, &label, Shape::Text)}": "<strong>{n}</strong></li> }
        })
        .collect_view();
    view! {
        <div class="cs-card__preview">
            <span class="cs-label">{strings.preview}</span>
            <pre class="cs-diff">{lines}</pre>
            <ul class="cs-counts">{counts}</ul>
        </div>
    }
}
