//! A person who looked away: while a card or a handoff waits and the tab is hidden, the
//! document title counts what waits ("(1) Approval needed — …"), and, if the person
//! turned notifications on from the dock (asked once, on their click, never on load), a
//! system notification says so; clicking it brings the tab and the card to the front.
//! Title and notification clear when nothing waits.

use std::cell::RefCell;
use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

use crate::countersign::{Countersign, PageService};
use crate::dock_state::DockSignals;

/// What the attention service holds between executor steps.
#[derive(Default)]
struct Seen {
    /// The page's own title, while ours is shown.
    base_title: Option<String>,
    /// How many waited at the last look.
    waiting: usize,
    /// The notification on screen, if any.
    shown: Option<web_sys::Notification>,
}

/// The tab's title and notifications, following what waits.
#[derive(Default)]
pub(crate) struct Attention(RefCell<Seen>);

/// Starts following what waits, and the tab being shown or hidden.
pub(crate) fn start(cs: &Countersign) {
    let attention = Rc::new(Attention::default());
    cs.add_service(attention.clone());
    let weak = Rc::downgrade(&cs.0);
    let on_change = Closure::<dyn FnMut()>::new(move || {
        if let Some(shared) = weak.upgrade() {
            Rc::clone(&attention).after_step(&Countersign(shared));
        }
    });
    if let Some(document) = document() {
        let _ = document.add_event_listener_with_callback(
            "visibilitychange",
            on_change.as_ref().unchecked_ref(),
        );
    }
    // The listener lives as long as the page; it holds the page only weakly.
    on_change.forget();
}

fn document() -> Option<web_sys::Document> {
    web_sys::window()?.document()
}

/// Whether this browser has the Notifications API.
pub(crate) fn notifications_supported() -> bool {
    web_sys::window()
        .and_then(|w| js_sys::Reflect::has(&w, &"Notification".into()).ok())
        .unwrap_or(false)
}

/// The permission the person gave: `granted`, `denied` or `default` (not asked yet).
pub(crate) fn permission() -> web_sys::NotificationPermission {
    if notifications_supported() {
        web_sys::Notification::permission()
    } else {
        web_sys::NotificationPermission::Denied
    }
}

impl PageService for Attention {
    /// Brings the title and the notification in line with what waits now. Called after
    /// every executor step and when the tab is shown or hidden.
    fn after_step(self: Rc<Self>, cs: &Countersign) {
        let dock = cs.0.dock;
        let waiting = dock.approvals.with_untracked(Vec::len)
            + dock.handoffs.with_untracked(Vec::len)
            + dock.questions.with_untracked(Vec::len);
        let Some(document) = document() else { return };
        let hidden = document.hidden();
        let mut attention = self.0.borrow_mut();
        if waiting > 0 && hidden {
            let base = attention
                .base_title
                .get_or_insert_with(|| document.title())
                .clone();
            let strings = cs.0.locale.strings();
            let title = if base.trim().is_empty() {
                format!("({waiting}) {}", strings.approval_needed)
            } else {
                format!("({waiting}) {} — {base}", strings.approval_needed)
            };
            document.set_title(&title);
            if waiting > attention.waiting || attention.shown.is_none() {
                if let Some(old) = attention.shown.take() {
                    old.close();
                }
                attention.shown = notify(cs, waiting);
            }
        } else {
            if let Some(base) = attention.base_title.take() {
                document.set_title(&base);
            }
            if waiting == 0 {
                if let Some(old) = attention.shown.take() {
                    old.close();
                }
            }
        }
        attention.waiting = waiting;
    }
}

/// A system notification for what waits, if the person allowed them.
fn notify(cs: &Countersign, waiting: usize) -> Option<web_sys::Notification> {
    if !cs.0.dock.notify.get_untracked() || permission() != web_sys::NotificationPermission::Granted
    {
        return None;
    }
    let strings = cs.0.locale.strings();
    let options = web_sys::NotificationOptions::new();
    options.set_body(&strings.waiting_count(waiting));
    options.set_tag("countersign-waiting");
    let notification =
        web_sys::Notification::new_with_options(strings.approval_needed, &options).ok()?;
    let on_click = Closure::<dyn FnMut()>::new(move || {
        if let Some(window) = web_sys::window() {
            let _ = window.focus();
        }
        focus_waiting();
    });
    notification.set_onclick(Some(on_click.as_ref().unchecked_ref()));
    // The handler lives as long as the page; it holds only a weak reference.
    on_click.forget();
    Some(notification)
}

/// Moves focus to the card (or handoff) that waits.
pub(crate) fn focus_waiting() {
    let Some(document) = document() else { return };
    let target = document
        .query_selector(".cs-card, .cs-handoff")
        .ok()
        .flatten()
        .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
    if let Some(element) = target {
        let _ = element.focus();
        element.scroll_into_view();
    }
}

/// Turns notifications on: asks the browser's permission (this must run from the
/// person's click). The dock's setting shows what the browser answered.
pub(crate) fn turn_notifications_on(dock: DockSignals) {
    if !notifications_supported() {
        return;
    }
    let notify = dock.notify;
    let answered = dock.notify_permission;
    let Ok(promise) = web_sys::Notification::request_permission() else {
        return;
    };
    leptos::task::spawn_local(async move {
        let granted = wasm_bindgen_futures::JsFuture::from(promise)
            .await
            .ok()
            .and_then(|v| v.as_string())
            .is_some_and(|p| p == "granted");
        notify.set(granted);
        answered.set(Some(granted));
    });
}
