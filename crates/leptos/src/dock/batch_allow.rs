//! "Allow all in this batch": offered only while every remaining item of the model's
//! turn waits on a card that may be allowed together (a plain `Ask`: never `AskAlways`,
//! a handoff or a double confirmation). It lists each card it allows with its own
//! arguments, and mints one ticket per card, each bound to the cards listed; it never
//! reaches a later turn.

use countersign::{ApprovalRequest, CallId};
use leptos::prelude::*;

use super::revealed::{arguments_view, revealed, Shape};
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
    // Each item as its card shows it: title, consequence, the exact arguments and the
    // preview, every string isolated and revealed, so one gesture never covers text the
    // person did not see.
    let items = cards
        .iter()
        .map(|card| {
            let what = card
                .consequence
                .as_deref()
                .map(|text| revealed(strings, text, Shape::Text))
                .unwrap_or_else(|| revealed(strings, &card.action, Shape::Name));
            view! {
                <li>
                    <strong>{card.title.clone()}</strong>": "{what}
                    <pre class="cs-card__args">{arguments_view(strings, &card.arguments)}</pre>
                    {card.preview.clone().map(|p| super::approval_queue::preview_view(strings, p))}
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
        // One gesture over the cards as listed: each ticket binds every listed card's
        // digest, so a card that changed since is drawn again and waits for the person.
        listed.with_value(|cards| cs.with_value(|cs| cs.approve_batch(cards)));
    };
    view! {
        <div class="cs-batch" role="group" aria-label=strings.allow_batch>
            <ul class="cs-batch__items">{items}</ul>
            <button class="cs-btn cs-allow-batch" on:click=allow_all>{strings.allow_batch}</button>
        </div>
    }
}
