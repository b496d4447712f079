#![doc = include_str!("../README.md")]

mod person;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use countersign::{Call, Settled};
use countersign_leptos::{provide_countersign, Countersign, CountersignOptions};
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{HtmlElement, HtmlInputElement};

type Handle = leptos::mount::UnmountHandle<leptos::tachys::view::any_view::AnyViewState>;

/// A mounted page: its root element and its Countersign. Dropping it unmounts the view
/// and removes the element.
pub struct Mounted {
    /// The element the view is mounted into.
    pub root: HtmlElement,
    /// The page's Countersign.
    pub cs: Countersign,
    _handle: Handle,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted")
            .field("cs", &self.cs)
            .finish_non_exhaustive()
    }
}

/// Mounts `view` under a fresh Countersign provider made from `options`, in a new
/// element appended to the document's body.
///
/// # Panics
/// Outside a browser, or if the page has no Web Crypto: these are tests.
#[allow(clippy::expect_used)]
pub fn mount<V: IntoView + 'static>(
    options: CountersignOptions,
    view: impl FnOnce() -> V + 'static,
) -> Mounted {
    let document = web_sys::window()
        .and_then(|w| w.document())
        .expect("a browser document");
    let root: HtmlElement = document
        .create_element("div")
        .expect("an element")
        .unchecked_into();
    document
        .body()
        .expect("a body")
        .append_child(&root)
        .expect("appended");
    let slot: Rc<RefCell<Option<Countersign>>> = Rc::default();
    let inner = Rc::clone(&slot);
    let handle = leptos::mount::mount_to(root.clone(), move || {
        let cs = provide_countersign(options).expect("a provider");
        *inner.borrow_mut() = Some(cs);
        view().into_any()
    });
    let cs = slot.borrow().clone().expect("the provider ran");
    Mounted {
        root,
        cs,
        _handle: handle,
    }
}

#[allow(clippy::expect_used, clippy::panic)]
impl Mounted {
    /// The first element matching `selector`, if any.
    pub fn q(&self, selector: &str) -> Option<HtmlElement> {
        self.root
            .query_selector(selector)
            .expect("a valid selector")
            .map(|e| e.unchecked_into())
    }

    /// Every element matching `selector`.
    pub fn all(&self, selector: &str) -> Vec<HtmlElement> {
        let list = self
            .root
            .query_selector_all(selector)
            .expect("a valid selector");
        (0..list.length())
            .filter_map(|i| list.get(i))
            .map(|n| n.unchecked_into())
            .collect()
    }

    /// Clicks the first element matching `selector` (a trusted-looking DOM click).
    ///
    /// # Panics
    /// If nothing matches.
    pub fn click(&self, selector: &str) {
        self.q(selector)
            .unwrap_or_else(|| panic!("no `{selector}` to click"))
            .click();
    }

    /// The text of the first element matching `selector` (empty if none).
    pub fn text(&self, selector: &str) -> String {
        self.q(selector)
            .and_then(|e| e.text_content())
            .unwrap_or_default()
    }

    /// Types `text` into the input matching `selector` and fires `input`.
    pub fn type_into(&self, selector: &str, text: &str) {
        let input: HtmlInputElement = self
            .q(selector)
            .unwrap_or_else(|| panic!("no `{selector}` to type into"))
            .unchecked_into();
        input.set_value(text);
        let event = web_sys::Event::new("input").expect("an event");
        input.dispatch_event(&event).expect("dispatched");
    }

    /// Sends one model call through the gate, as the assistant would.
    pub fn call(&self, action: &str, args: &str) -> impl Future<Output = Settled> {
        self.cs.call(Call::new("tc", action, args))
    }

    /// Sends one model turn's calls through the gate as a batch, as the assistant
    /// would; resolves with every result in call order.
    pub fn batch(&self, calls: &[(&str, &str)]) -> impl Future<Output = Vec<Settled>> {
        let calls = calls
            .iter()
            .enumerate()
            .map(|(i, (action, args))| Call::new(format!("tc{i}"), *action, *args))
            .collect();
        self.cs.call_batch(calls)
    }

    /// How many terminal audit records the page holds (all of them, unless audit
    /// shipping is on: acknowledged records are let go).
    pub fn terminal_records(&self) -> usize {
        self.cs
            .audit()
            .records()
            .iter()
            .filter(|r| r.is_terminal())
            .count()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.root.remove();
    }
}

/// Waits long enough for Leptos to render and effects to run.
pub async fn tick() {
    TimeoutFuture::new(40).await;
}

/// The code a call settled with: `OK` or the refusal code.
pub fn code(settled: &Settled) -> &'static str {
    settled.outcome.code_str()
}
