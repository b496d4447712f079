//! The approval queue: one card at a time, "n of m", Allow once / Always allow / Deny.

use std::collections::BTreeSet;

use countersign::{ApprovalPolicy, ApprovalRequest, CallId, Gesture, Kind};
use leptos::ev::KeyboardEvent;
use leptos::html;
use leptos::prelude::*;

use super::revealed::{revealed, Shape};
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
    // Every call seen since the queue was last empty: "n of m" counts the batch.
    let batch = RwSignal::new(BTreeSet::<CallId>::new());
    let current = Memo::new(move |_| dock.approvals.with(|cards| cards.first().map(|c| c.call)));

    Effect::new(move |_| {
        let ids: Vec<CallId> = dock
            .approvals
            .with(|cards| cards.iter().map(|c| c.call).collect());
        batch.update(|seen| {
            if ids.is_empty() {
                seen.clear();
            } else {
                seen.extend(ids);
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

    move || {
        let cards = dock.approvals.get();
        let card = cards.first().cloned()?;
        let total = batch.with(BTreeSet::len).max(cards.len());
        let position = total.saturating_sub(cards.len()) + 1;
        Some(card_view(
            cs,
            strings,
            card,
            (position, total),
            reason,
            card_ref,
            dock.now_ms,
        ))
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

fn card_view(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    card: ApprovalRequest,
    (position, total): (usize, usize),
    reason: RwSignal<String>,
    card_ref: NodeRef<html::Div>,
    now_ms: ReadSignal<u64>,
) -> impl IntoView {
    let deadline = card.deadline.as_millis();
    let left = move || deadline.saturating_sub(now_ms.get());
    let (card_class, kind_badge) = kind_class(card.kind);
    let arguments = arguments_view(strings, &card.arguments);
    let offers_grant = card.offers_session_grant;
    let grant_rule = card.grant_rule.as_ref().map(|r| {
        r.description
            .clone()
            .unwrap_or_else(|| strings.every_call_of(&card.title))
    });
    // A card drawn again because the page changed under the person says what changed.
    let changed = (!card.changed.is_empty()).then(|| {
        let what: Vec<&str> = card
            .changed
            .iter()
            .map(|c| strings.card_change(*c))
            .collect();
        view! {
            <p class="cs-card__changed" role="alert">
                <strong>{strings.changed_since}</strong>" "{what.join(", ")}
            </p>
        }
    });
    let consequence = card
        .consequence
        .clone()
        .map(|text| revealed(strings, &text, Shape::Text))
        .unwrap_or_else(|| revealed(strings, &card.action, Shape::Name));
    let second = (card.round > 1).then(|| card.question.clone().unwrap_or_default());
    let preview = card.preview.clone().map(|p| preview_view(strings, p));
    let every_time = card.policy == ApprovalPolicy::AskAlways;
    let target = cs.with_value(|cs| cs.action_target(&card.action));
    let call = card.call;
    let stored = StoredValue::new(card.clone());
    let approve = move |gesture: Gesture| {
        // A second click finds the ticket spent: refused, nothing runs twice.
        let card = stored.get_value();
        cs.with_value(|cs| {
            let _ = cs.approve(&card, gesture);
        });
    };
    let deny = move || {
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
                <p class="cs-card__count">{strings.n_of_m(position, total)}</p>
                <div class="cs-card__head">
                    <h3 id="cs-card-title" class="cs-card__title">{card.title.clone()}</h3>
                    <span class=kind_badge>{strings.kind(card.kind)}</span>
                </div>
                {changed}
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
                <div>
                    <span class="cs-label">{strings.arguments}</span>
                    <pre class="cs-card__args">{arguments}</pre>
                </div>
                <label class="cs-card__reason">
                    {strings.deny_reason}
                    <input
                        type="text"
                        class="cs-reason"
                        prop:value=move || reason.get()
                        on:input=move |ev| reason.set(event_target_value(&ev))
                    />
                </label>
                {grant_rule.map(|rule| view! {
                    <p class="cs-card__rule"><span class="cs-label">{strings.grant_covers}</span>{revealed(strings, &rule, Shape::Text)}</p>
                })}
                <div class="cs-buttons">
                    <button class="cs-btn cs-btn--primary cs-allow-once" on:click=move |_| approve(Gesture::AllowOnce)>
                        {strings.allow_once}
                    </button>
                    {offers_grant.then(|| view! {
                        <button class="cs-btn cs-allow-session" on:click=move |_| approve(Gesture::AllowForSession)>
                            {strings.allow_session}
                        </button>
                    })}
                    <button class="cs-btn cs-btn--deny cs-deny" on:click=move |_| deny()>{strings.deny}</button>
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

/// The dry run's preview: a diff with removed and added lines marked, and counts.
fn preview_view(strings: &'static Strings, preview: countersign::Preview) -> impl IntoView {
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
        .map(|(label, n)| view! { <li>{label}": "<strong>{n}</strong></li> })
        .collect_view();
    view! {
        <div class="cs-card__preview">
            <span class="cs-label">{strings.preview}</span>
            <pre class="cs-diff">{lines}</pre>
            <ul class="cs-counts">{counts}</ul>
        </div>
    }
}

/// The arguments as indented JSON, each string value (and key) isolated and revealed on
/// its own, so right-to-left text in one value cannot reorder the numbers or keys
/// around it.
fn arguments_view(strings: &'static Strings, value: &serde_json::Value) -> AnyView {
    fn push(
        strings: &'static Strings,
        value: &serde_json::Value,
        indent: usize,
        out: &mut Vec<AnyView>,
    ) {
        use serde_json::Value;
        let pad = |n: usize| "  ".repeat(n);
        match value {
            Value::String(text) => {
                out.push("\"".into_any());
                out.push(revealed(strings, text, Shape::Text));
                out.push("\"".into_any());
            }
            Value::Array(items) if !items.is_empty() => {
                out.push("[\n".into_any());
                for (i, item) in items.iter().enumerate() {
                    out.push(pad(indent + 1).into_any());
                    push(strings, item, indent + 1, out);
                    out.push(if i + 1 < items.len() { ",\n" } else { "\n" }.into_any());
                }
                out.push(format!("{}]", pad(indent)).into_any());
            }
            Value::Object(map) if !map.is_empty() => {
                out.push("{\n".into_any());
                for (i, (key, item)) in map.iter().enumerate() {
                    out.push(format!("{}\"", pad(indent + 1)).into_any());
                    out.push(revealed(strings, key, Shape::Text));
                    out.push("\": ".into_any());
                    push(strings, item, indent + 1, out);
                    out.push(if i + 1 < map.len() { ",\n" } else { "\n" }.into_any());
                }
                out.push(format!("{}}}", pad(indent)).into_any());
            }
            other => out.push(other.to_string().into_any()),
        }
    }
    let mut out = Vec::new();
    push(strings, value, 0, &mut out);
    out.collect_view().into_any()
}
