//! The page's side of the gateway's MCP relay. The page opens an event stream to the
//! gateway (`GET /v1/relay?key=…`, an `EventSource`) with a random key held only in
//! memory; the gateway answers with a pairing code, which the dock shows. An MCP client
//! that sends that code gets the tools this page projects for MCP callers; its calls
//! arrive here and go through the same executor and dock as any call, named `mcp`, and
//! the answer (the same JSON the in-page model gets) is posted back.
//!
//! A reload is a new page with a new code: a pairing never moves to another tab. Where
//! no gateway relays (`trunk serve`, MCP off) the stream fails once and the relay stops.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use countersign::{Call, Caller};
use leptos::prelude::{GetUntracked, Set};
use serde::Deserialize;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

use crate::countersign::Countersign;

/// How often availability is read again while paired (ms).
const POLL_MS: u32 = 500;

/// The relay of one page load.
pub(crate) struct McpRelay {
    /// `/v1/relay` at the page's origin (or where the options say).
    base: String,
    /// Random per page load; the gateway derives the pairing code from it.
    key: String,
    source: RefCell<Option<web_sys::EventSource>>,
    /// The tools last posted, as posted (a change posts them again).
    posted: RefCell<Option<String>>,
    /// A post of the tools is on its way.
    posting: Cell<bool>,
    poll: RefCell<Option<gloo_timers::callback::Interval>>,
    /// Kept alive while the stream is open.
    #[allow(clippy::type_complexity)]
    handlers: RefCell<
        Option<(
            Closure<dyn FnMut(web_sys::MessageEvent)>,
            Closure<dyn FnMut()>,
        )>,
    >,
}

pub(crate) type McpRelaySlot = RefCell<Option<Rc<McpRelay>>>;

/// A message from the gateway.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    Paired {
        code: String,
    },
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    Cancel {
        id: String,
    },
}

/// Starts the relay for `cs`, against `base`.
pub(crate) fn start(cs: &Countersign, base: String) {
    let relay = Rc::new(McpRelay {
        base,
        key: key(),
        source: RefCell::default(),
        posted: RefCell::default(),
        posting: Cell::new(false),
        poll: RefCell::default(),
        handlers: RefCell::default(),
    });
    *cs.0.mcp_relay.borrow_mut() = Some(relay);
    reopen(cs);
}

/// 256 random bits, as hex.
fn key() -> String {
    let bytes = crate::clock::random_secret().unwrap_or_default();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Opens the stream (at start, and back from the back/forward cache).
pub(crate) fn reopen(cs: &Countersign) {
    let Some(relay) = cs.0.mcp_relay.borrow().clone() else {
        return;
    };
    if relay.source.borrow().is_some() {
        return;
    }
    let url = format!("{}?key={}", relay.base, relay.key);
    let Ok(source) = web_sys::EventSource::new(&url) else {
        return;
    };
    let weak = Rc::downgrade(&cs.0);
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let Some(text) = event.data().as_string() else {
                return;
            };
            if let Ok(event) = serde_json::from_str::<Event>(&text) {
                received(&Countersign(shared), event);
            }
        });
    let weak = Rc::downgrade(&cs.0);
    let on_error = Closure::<dyn FnMut()>::new(move || {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let cs = Countersign(shared);
        let Some(relay) = cs.0.mcp_relay.borrow().clone() else {
            return;
        };
        // The browser reconnects by itself (same key, same code) unless the gateway
        // refused: then there is nothing to pair with.
        let closed = relay
            .source
            .borrow()
            .as_ref()
            .is_some_and(|s| s.ready_state() == web_sys::EventSource::CLOSED);
        cs.0.dock.pairing.set(None);
        *relay.posted.borrow_mut() = None;
        if closed {
            stop(&relay);
        }
    });
    source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    *relay.source.borrow_mut() = Some(source);
    *relay.handlers.borrow_mut() = Some((on_message, on_error));
}

fn stop(relay: &McpRelay) {
    if let Some(source) = relay.source.borrow_mut().take() {
        source.set_onmessage(None);
        source.set_onerror(None);
        source.close();
    }
    *relay.poll.borrow_mut() = None;
    *relay.posted.borrow_mut() = None;
}

/// The page is going: close the stream and tell the gateway at once, so an MCP client's
/// next call gets "no page" rather than waiting on a page that is gone.
pub(crate) fn close(cs: &Countersign) {
    let Some(relay) = cs.0.mcp_relay.borrow().clone() else {
        return;
    };
    if relay.source.borrow().is_none() {
        return;
    }
    stop(&relay);
    cs.0.dock.pairing.set(None);
    let body = serde_json::json!({ "key": relay.key }).to_string();
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&body));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/json");
    if let (Some(window), Ok(blob)) = (
        web_sys::window(),
        web_sys::Blob::new_with_str_sequence_and_options(&parts, &options),
    ) {
        let _ = window
            .navigator()
            .send_beacon_with_opt_blob(&format!("{}/bye", relay.base), Some(&blob));
    }
}

fn received(cs: &Countersign, event: Event) {
    let Some(relay) = cs.0.mcp_relay.borrow().clone() else {
        return;
    };
    match event {
        Event::Paired { code } => {
            cs.0.dock.pairing.set(Some(code));
            *relay.posted.borrow_mut() = None;
            let weak = Rc::downgrade(&cs.0);
            *relay.poll.borrow_mut() =
                Some(gloo_timers::callback::Interval::new(POLL_MS, move || {
                    if let Some(shared) = weak.upgrade() {
                        sync(&Countersign(shared));
                    }
                }));
            sync(cs);
        }
        Event::Call {
            id,
            name,
            arguments,
        } => {
            let call = Call::new(id.clone(), name, arguments).by(Caller::Mcp);
            let settled = cs.call(call);
            let url = format!("{}/result", relay.base);
            let key = relay.key.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let content = settled.await.to_model_content();
                let body = serde_json::json!({ "key": key, "id": id, "content": content });
                let _ = crate::http::fetch("POST", &url, Some(&body.to_string()), 15_000).await;
            });
        }
        Event::Cancel { id } => cs.withdraw(Caller::Mcp, &id),
    }
}

/// Posts the tools the projection shows MCP callers, when they changed.
pub(crate) fn sync(cs: &Countersign) {
    let Some(relay) = cs.0.mcp_relay.borrow().clone() else {
        return;
    };
    if cs.0.dock.pairing.get_untracked().is_none() || relay.posting.get() {
        return;
    }
    // From inside an action's hook the executor is busy: the next step syncs.
    let Ok(tools) = cs.0.executor.projection_for(Caller::Mcp) else {
        return;
    };
    let Ok(text) = serde_json::to_string(&tools) else {
        return;
    };
    if relay.posted.borrow().as_deref() == Some(text.as_str()) {
        return;
    }
    relay.posting.set(true);
    let body = format!(
        r#"{{"key":{},"tools":{text}}}"#,
        serde_json::json!(relay.key)
    );
    let url = format!("{}/tools", relay.base);
    let weak: Weak<McpRelay> = Rc::downgrade(&relay);
    wasm_bindgen_futures::spawn_local(async move {
        let answer = crate::http::fetch("POST", &url, Some(&body), 15_000).await;
        if let Some(relay) = weak.upgrade() {
            relay.posting.set(false);
            if matches!(answer, Ok((204, _))) {
                *relay.posted.borrow_mut() = Some(text);
            }
        }
    });
}

impl std::fmt::Debug for McpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRelay")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}
