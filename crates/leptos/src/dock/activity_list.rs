//! "Done without asking": the calls the gate let through without a card, each with a
//! chip naming why (the decision's reason), and a revoke for the grant that allowed it.

use countersign::{Mode, Reason};
use leptos::prelude::*;

use super::revealed::{revealed, Shape};
use crate::countersign::Countersign;
use crate::i18n::Strings;

/// The chip's words and class for an automatic decision.
fn chip(strings: &'static Strings, reason: &Reason) -> (&'static str, &'static str) {
    match reason {
        Reason::Grant { .. } => (strings.why_grant, "cs-chip cs-chip--grant"),
        Reason::ModeAllowed {
            mode: Mode::Unattended,
        } => (strings.why_unattended, "cs-chip cs-chip--mode"),
        Reason::ModeAllowed { .. } => (strings.why_bypass, "cs-chip cs-chip--mode"),
        _ => (strings.why_no_approval, "cs-chip"),
    }
}

/// The activity list; renders nothing until something ran without a card.
#[component]
pub(crate) fn ActivityList(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    move || {
        let items = dock.activity.get();
        let grants = dock.grants.get();
        (!items.is_empty()).then(|| {
            let rows = items
                .into_iter()
                .rev()
                .map(|item| {
                    let (words, class) = chip(strings, &item.reason);
                    // A revoke only while the grant that allowed it still stands.
                    let revoke = item
                        .grant
                        .filter(|g| grants.iter().any(|live| live.id == *g))
                        .map(|grant| {
                            view! {
                                <button class="cs-btn cs-btn--link cs-activity-revoke" on:click=move |_| {
                                    cs.with_value(|cs| {
                                        cs.revoke(grant);
                                    });
                                }>{strings.revoke_grant}</button>
                            }
                        });
                    view! {
                        <li class="cs-activity" data-action=item.action.clone() data-call=item.call.to_string()>
                            <span>{revealed(strings, &item.title, Shape::Text)}</span>
                            <span class=class>{words}</span>
                            {strings.caller_tag(item.caller).map(|who| view! { <span class="cs-chip cs-activity-caller">{who}</span> })}
                            {revoke}
                        </li>
                    }
                })
                .collect_view();
            view! {
                <details class="cs-activities">
                    <summary class="cs-section-title">{strings.activity}</summary>
                    <ul>{rows}</ul>
                </details>
            }
        })
    }
}
