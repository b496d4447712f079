//! Pointing at page elements: the current handoff step's target (or the current
//! card's bound element) gets an outline and is scrolled into view.

use leptos::prelude::*;
use web_sys::{ScrollBehavior, ScrollIntoViewOptions, ScrollLogicalPosition};

use crate::countersign::Countersign;

/// The class a highlighted element carries.
pub const HIGHLIGHT_CLASS: &str = "cs-highlight";

fn light(element: &web_sys::Element) {
    let _ = element.class_list().add_1(HIGHLIGHT_CLASS);
    let options = ScrollIntoViewOptions::new();
    options.set_behavior(ScrollBehavior::Smooth);
    options.set_block(ScrollLogicalPosition::Center);
    element.scroll_into_view_with_scroll_into_view_options(&options);
}

fn unlight(element: &web_sys::Element) {
    let _ = element.class_list().remove_1(HIGHLIGHT_CLASS);
}

/// Scrolls to and outlines target `name` (the card's "Show in page").
pub(crate) fn point_at(cs: &Countersign, name: &str) {
    if let Some(element) = cs.target(name) {
        light(&element);
    }
}

/// Keeps at most one element highlighted: the current handoff step's target, else the
/// target bound to the current approval card's action. Removes it when neither applies.
pub(crate) fn track(cs: StoredValue<Countersign, LocalStorage>) {
    let dock = cs.with_value(Countersign::dock);
    let lit: StoredValue<Option<web_sys::Element>, LocalStorage> = StoredValue::new_local(None);
    Effect::new(move |_| {
        let step_target = dock.handoffs.with(|handoffs| {
            handoffs.first().and_then(|view| {
                view.current_step
                    .and_then(|i| view.steps.get(i))
                    .and_then(|step| step.target.clone())
            })
        });
        let card_action = dock
            .approvals
            .with(|cards| cards.first().map(|c| c.action.clone()));
        let wanted_name = step_target.or_else(|| {
            card_action.and_then(|action| cs.with_value(|cs| cs.action_target(&action)))
        });
        let wanted = wanted_name.and_then(|name| cs.with_value(|cs| cs.target(&name)));
        lit.update_value(|previous| {
            if *previous != wanted {
                if let Some(old) = previous.take() {
                    unlight(&old);
                }
                if let Some(new) = &wanted {
                    light(new);
                }
                *previous = wanted;
            }
        });
    });
    on_cleanup(move || {
        lit.update_value(|previous| {
            if let Some(old) = previous.take() {
                unlight(&old);
            }
        });
    });
}
