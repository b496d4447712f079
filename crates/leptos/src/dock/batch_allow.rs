//! "Allow all in this batch": offered only while every remaining item of the model's
//! turn waits on a card that may be allowed together (a plain `Ask`: never `AskAlways`,
//! a handoff or a double confirmation). It lists what it allows, and mints one ticket
//! per card, each bound to the card listed; it never reaches a later turn.

use countersign::{ApprovalRequest, CallId, Gesture};
use leptos::prelude::*;

use super::revealed::{revealed, Shape};
use crate::countersign::Countersign;
use crate::dock_state::DockState;
use crate::i18n::Strings;

/// The cards "allow all" would cover for the batch of `current`, in call order, if it
/// may be offered: at least two items remain, and each waits on a batchable card.
pub(crate) fn offer(dock: DockState, current: Option<CallId>) -> Option<Vec<ApprovalRequest>> {
    let current = current?;
    let remaining: Vec<Option<CallId>> = dock.batches.with(|batches| {
        batches
            .iter()
            .find(|b| b.position(current).is_some())
            .map(|b| b.remaining().collect())
    })?;
    if remaining.len() < 2 {
        return None;
    }
    dock.approvals.with(|cards| {
        remaining
            .iter()
            .map(|call| {
                let call = (*call)?;
                cards
                    .iter()
                    .find(|c| c.call == call)
                    .filter(|c| c.batchable())
                    .cloned()
            })
            .collect()
    })
}

/// The offer: what it covers, and the button.
pub(crate) fn view(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    cards: Vec<ApprovalRequest>,
) -> impl IntoView {
    let items = cards
        .iter()
        .map(|card| {
            let what = card
                .consequence
                .clone()
                .unwrap_or_else(|| card.action.clone());
            view! {
                <li>
                    <strong>{card.title.clone()}</strong>": "
                    {revealed(strings, &what, Shape::Text)}
                </li>
            }
        })
        .collect_view();
    let listed = StoredValue::new(cards);
    let allow_all = move |ev: leptos::ev::MouseEvent| {
        let first = listed.with_value(|cards| cards.first().map(|c| c.call));
        let person = first.is_some_and(|call| {
            cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::AllowBatch))
        });
        if !person {
            return;
        }
        // Each ticket is bound to the card as listed: a card that changed since is
        // drawn again by the gate and waits for the person instead of running.
        for card in listed.get_value() {
            cs.with_value(|cs| {
                let _ = cs.approve(&card, Gesture::AllowInBatch);
            });
        }
    };
    view! {
        <div class="cs-batch" role="group" aria-label=strings.allow_batch>
            <ul class="cs-batch__items">{items}</ul>
            <button class="cs-btn cs-allow-batch" on:click=allow_all>{strings.allow_batch}</button>
        </div>
    }
}
