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

use crate::countersign::Countersign;

/// What the attention module holds between executor steps.
#[derive(Default)]
pub(crate) struct Attention {
    /// The page's own title, while ours is shown.
    base_title: Option<String>,
    /// How many waited at the last look.
    waiting: usize,
    /// The notification on screen, if any.
    shown: Option<web_sys::Notification>,
}

pub(crate) type AttentionSlot = RefCell<Attention>;

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

impl Countersign {
    /// Brings the title and the notification in line with what waits now. Called after
    /// every executor step and when the tab is shown or hidden.
    pub(crate) fn update_attention(&self) {
        let dock = self.0.dock;
        let waiting = dock.approvals.with_untracked(Vec::len)
            + dock.handoffs.with_untracked(Vec::len)
            + dock.questions.with_untracked(Vec::len);
        let Some(document) = document() else { return };
        let hidden = document.hidden();
        let mut attention = self.0.attention.borrow_mut();
        if waiting > 0 && hidden {
            let base = attention
                .base_title
                .get_or_insert_with(|| document.title())
                .clone();
            let strings = self.0.locale.strings();
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
                attention.shown = self.notify(waiting);
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

    /// A system notification for what waits, if the person allowed them.
    fn notify(&self, waiting: usize) -> Option<web_sys::Notification> {
        if !self.0.dock.notify.get_untracked()
            || permission() != web_sys::NotificationPermission::Granted
        {
            return None;
        }
        let strings = self.0.locale.strings();
        let options = web_sys::NotificationOptions::new();
        options.set_body(&strings.waiting_count(waiting));
        options.set_tag("countersign-waiting");
        let notification =
            web_sys::Notification::new_with_options(strings.approval_needed, &options).ok()?;
        let weak = Rc::downgrade(&self.0);
        let on_click = Closure::<dyn FnMut()>::new(move || {
            if let Some(window) = web_sys::window() {
                let _ = window.focus();
            }
            if let Some(shared) = weak.upgrade() {
                Countersign(shared).focus_waiting();
            }
        });
        notification.set_onclick(Some(on_click.as_ref().unchecked_ref()));
        // The handler lives as long as the page; it holds only a weak reference.
        on_click.forget();
        Some(notification)
    }

    /// Moves focus to the card (or handoff) that waits.
    pub(crate) fn focus_waiting(&self) {
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
    pub(crate) fn turn_notifications_on(&self) {
        if !notifications_supported() {
            return;
        }
        let notify = self.0.dock.notify;
        let answered = self.0.dock.notify_permission;
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

    /// Follows the tab being shown or hidden.
    pub(crate) fn watch_visibility(&self) {
        let weak = Rc::downgrade(&self.0);
        let on_change = Closure::<dyn FnMut()>::new(move || {
            if let Some(shared) = weak.upgrade() {
                Countersign(shared).update_attention();
            }
        });
        if let Some(document) = document() {
            let _ = document.add_event_listener_with_callback(
                "visibilitychange",
                on_change.as_ref().unchecked_ref(),
            );
        }
        on_change.forget();
    }
}

thread_local! {
    /// `Event.prototype`'s native `timeStamp` getter, taken once when the page starts.
    static TIME_STAMP: Option<js_sys::Function> = web_sys::window().and_then(|w| {
        let event = js_sys::Reflect::get(&w, &"Event".into()).ok()?;
        let proto = js_sys::Reflect::get(&event, &"prototype".into()).ok()?;
        let descriptor =
            js_sys::Reflect::get_own_property_descriptor(&proto.into(), &"timeStamp".into()).ok()?;
        js_sys::Reflect::get(&descriptor, &"get".into()).ok()?.dyn_into().ok()
    });
}

/// Whether `event` is a real DOM event: the native getter throws on anything else (a
/// plain object a script passed with `isTrusted: true`). Defence in depth only: a
/// script in the page can do much more (see the README's trust model).
pub(crate) fn is_real_event(event: &web_sys::Event) -> bool {
    TIME_STAMP.with(|getter| getter.as_ref().is_some_and(|g| g.call0(event).is_ok()))
}

/// Takes the native getter now, before later page scripts could replace it.
pub(crate) fn remember_event_brand() {
    TIME_STAMP.with(|_| ());
}
