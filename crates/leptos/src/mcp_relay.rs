//! The page's side of the gateway's MCP relay. When the gateway's `/v1/health` says MCP
//! is on, the page opens a WebSocket to `/v1/relay` and says hello with a random key held
//! only in memory; the gateway answers with a pairing code, which the dock shows. An MCP
//! client that sends that code gets the tools this page projects for MCP callers; its
//! calls arrive here and go through the same executor and dock as any call, named `mcp`,
//! and the answer (the same JSON the in-page model gets) goes back on the socket.
//!
//! A WebSocket rather than an event stream: it does not hold one of the six HTTP/1.1
//! connections a browser allows per host (six open tabs would stall every request), and
//! the key never appears in a URL. A dropped connection is opened again with the same key
//! (the same code); the gateway then says which relayed calls still wait, the page
//! withdraws any other it has live, and answers that could not be sent are sent. A
//! reload is a new page with a new code: a pairing never moves to another tab.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use countersign::relay::{ToGateway, ToPage};
use countersign::{wire::ToolSpec, Call, Caller};
use leptos::prelude::{GetUntracked, Set};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

use crate::countersign::{Countersign, PageService, Shared};
use crate::list_map::ListMap;

/// How often availability is read again while paired (ms).
const POLL_MS: u32 = 500;
/// The longest wait before opening a dropped connection again (ms).
const MAX_BACKOFF_MS: u32 = 30_000;
/// How long a relayed call's id is remembered: the gateway gives up on a call after 15
/// minutes, so no replay of it can come later.
const SEEN_MS: f64 = 16.0 * 60_000.0;
/// How many answers are kept to send again after a reconnect (the gateway has at most
/// 16 calls waiting per page).
const ANSWERS_KEPT: usize = 64;

/// Why an outside agent's call is refused while the page's audit is not reaching the
/// gateway (see `Shipping::backlogged`).
pub(crate) const BACKLOGGED: &str = "the page's audit trail is not reaching the gateway, so calls from agents outside the page wait until it does; nothing was done. try again later";
/// A page whose connection dropped and is not back within this long withdraws its MCP
/// calls (the gateway gives up on them after 10 s).
const ORPHAN_MS: u32 = 9_000;

/// The relay of one page load.
pub(crate) struct McpRelay {
    /// The relay's path or URL (`/v1/relay` at the page's origin by default).
    base: String,
    /// Random per page load; the gateway derives the pairing code from it.
    key: String,
    socket: RefCell<Option<web_sys::WebSocket>>,
    /// Kept alive while the socket is.
    handlers: RefCell<Vec<Handler>>,
    /// The handlers of the socket before (one may be running as it is dropped): freed
    /// at the next open.
    retired: RefCell<Vec<Handler>>,
    /// The tools last sent, as sent (a change sends them again).
    sent_tools: RefCell<Option<Vec<ToolSpec>>>,
    /// Relayed calls submitted in this load and not answered yet. These are lists, not
    /// maps: they hold a handful, and a map's code is copied into the page per type.
    live: RefCell<Vec<String>>,
    /// Answers the socket was not open to take, by call id.
    unsent: RefCell<ListMap<String, String>>,
    /// Every relayed call id of the last [`SEEN_MS`], with when it came: a replay of a
    /// call already here or answered is never a new call.
    seen: RefCell<ListMap<String, f64>>,
    /// The latest answers, to send again if the gateway still waits for one after a
    /// reconnect (the first sending was lost with the connection).
    answered: RefCell<Vec<(String, String)>>,
    /// The largest message the gateway takes (it says when the page pairs).
    max_bytes: Cell<usize>,
    /// Withdraws the live calls if the connection is not back in time.
    orphan: RefCell<Option<gloo_timers::callback::Timeout>>,
    poll: RefCell<Option<gloo_timers::callback::Interval>>,
    retry: RefCell<Option<gloo_timers::callback::Timeout>>,
    backoff_ms: Cell<u32>,
    /// The page is going (or gone to the back/forward cache): no reconnecting.
    closing: Cell<bool>,
}

/// A socket event handler.
type Handler = Closure<dyn FnMut(web_sys::Event)>;

/// Starts the relay for `cs` against `base`: a path at the page's origin if the
/// gateway's health (its sibling `/health`) says MCP is on; a `ws:`/`wss:` URL at once.
pub(crate) fn start(cs: &Countersign, base: String) {
    let explicit = base.starts_with("ws://") || base.starts_with("wss://");
    let health = match base.strip_suffix("/relay") {
        Some(api) if !explicit => Some(format!("{api}/health")),
        _ if explicit => None,
        _ => return,
    };
    // Without randomness every page would have the same key, and the same code.
    let Some(key) = key() else {
        return;
    };
    let relay = Rc::new(McpRelay {
        base,
        key,
        socket: RefCell::default(),
        handlers: RefCell::default(),
        retired: RefCell::default(),
        sent_tools: RefCell::default(),
        live: RefCell::default(),
        unsent: RefCell::default(),
        seen: RefCell::default(),
        answered: RefCell::default(),
        max_bytes: Cell::new(1024 * 1024),
        orphan: RefCell::default(),
        poll: RefCell::default(),
        retry: RefCell::default(),
        backoff_ms: Cell::new(1_000),
        closing: Cell::new(false),
    });
    cs.add_service(Rc::clone(&relay) as Rc<dyn PageService>);
    let Some(health) = health else {
        open(cs);
        return;
    };
    let weak = Rc::downgrade(&cs.0);
    wasm_bindgen_futures::spawn_local(async move {
        let on = match crate::http::fetch("GET", &health, None, 10_000).await {
            Ok((200, body)) => serde_json::from_str::<serde_json::Value>(&body)
                .is_ok_and(|v| v.get("mcp") == Some(&serde_json::Value::Bool(true))),
            _ => false,
        };
        if let (true, Some(shared)) = (on, weak.upgrade()) {
            open(&Countersign(shared));
        }
    });
}

/// 256 random bits, as hex.
fn key() -> Option<String> {
    let bytes = crate::clock::random_secret()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `base` as a `ws:` / `wss:` URL at the page's origin.
fn socket_url(base: &str) -> Option<String> {
    if base.starts_with("ws://") || base.starts_with("wss://") {
        return Some(base.to_owned());
    }
    let location = web_sys::window()?.location();
    let scheme = if location.protocol().ok()? == "https:" {
        "wss"
    } else {
        "ws"
    };
    Some(format!("{scheme}://{}{base}", location.host().ok()?))
}

/// Runs `f` with the page's Countersign and relay, if both are still there (for socket
/// handlers and timers, which hold the page weakly).
fn with_relay(weak: &Weak<Shared>, f: impl FnOnce(&Countersign, &Rc<McpRelay>)) {
    let Some(shared) = weak.upgrade() else {
        return;
    };
    let cs = Countersign(shared);
    let relay = cs.service::<McpRelay>();
    if let Some(relay) = relay {
        f(&cs, &relay);
    }
}

/// A callback for a timer: `f` with the page's Countersign and relay.
fn later(
    shared: &Rc<Shared>,
    f: impl Fn(&Countersign, &Rc<McpRelay>) + 'static,
) -> impl FnMut() + 'static {
    let weak = Rc::downgrade(shared);
    move || with_relay(&weak, &f)
}

fn handler(
    shared: &Rc<Shared>,
    on: impl Fn(&Countersign, &Rc<McpRelay>, web_sys::Event) + 'static,
) -> Handler {
    let weak: Weak<Shared> = Rc::downgrade(shared);
    Closure::new(move |event: web_sys::Event| {
        with_relay(&weak, |cs, relay| on(cs, relay, event));
    })
}

/// Opens the socket (at start, after a drop, and back from the back/forward cache).
fn open(cs: &Countersign) {
    let Some(relay) = cs.service::<McpRelay>() else {
        return;
    };
    if relay.closing.get() || relay.socket.borrow().is_some() {
        return;
    }
    let Some(url) = socket_url(&relay.base) else {
        return;
    };
    let Ok(socket) = web_sys::WebSocket::new(&url) else {
        return;
    };
    relay.retired.borrow_mut().clear();
    let on_open = handler(&cs.0, |_, relay, _| {
        relay.send(
            &ToGateway::Hello {
                key: relay.key.clone(),
            }
            .to_json(),
        );
    });
    let on_message = handler(&cs.0, |cs, _, event| {
        let text = event
            .dyn_ref::<web_sys::MessageEvent>()
            .and_then(|e| e.data().as_string());
        if let Some(event) = text.as_deref().and_then(ToPage::parse) {
            received(cs, event);
        }
    });
    let on_close = handler(&cs.0, |cs, relay, event| {
        let code = event
            .dyn_ref::<web_sys::CloseEvent>()
            .map(web_sys::CloseEvent::code);
        dropped(cs, relay, code);
    });
    socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    *relay.socket.borrow_mut() = Some(socket);
    *relay.handlers.borrow_mut() = vec![on_open, on_message, on_close];
}

/// The socket closed: no code on screen, and unless the page is going, open it again
/// after a growing pause. The gateway stopping (1012) forgets every relayed call, so they
/// are withdrawn at once; after any other drop, if the connection is not back before the
/// gateway gives up on them. Nothing its client was told failed stays up to approve.
fn dropped(cs: &Countersign, relay: &Rc<McpRelay>, code: Option<u16>) {
    relay.forget_socket();
    cs.0.dock.pairing.set(None);
    if relay.closing.get() {
        return;
    }
    if code == Some(1012) {
        withdraw_live(cs, relay);
    } else if relay.orphan.borrow().is_none() {
        let orphaned = later(&cs.0, |cs, relay| {
            relay.orphan.borrow_mut().take();
            withdraw_live(cs, relay);
        });
        *relay.orphan.borrow_mut() = Some(gloo_timers::callback::Timeout::new(ORPHAN_MS, orphaned));
    }
    let wait = relay.backoff_ms.get();
    relay.backoff_ms.set((wait * 2).min(MAX_BACKOFF_MS));
    let reopen = later(&cs.0, |cs, _| open(cs));
    *relay.retry.borrow_mut() = Some(gloo_timers::callback::Timeout::new(wait, reopen));
}

/// The page is going: close the socket, which tells the gateway at once, so an MCP
/// client's next call gets "no page" rather than waiting on a page that is gone.
fn close(cs: &Countersign) {
    let Some(relay) = cs.service::<McpRelay>() else {
        return;
    };
    relay.closing.set(true);
    *relay.retry.borrow_mut() = None;
    relay.orphan.borrow_mut().take();
    if let Some(socket) = relay.socket.borrow().as_ref() {
        let _ = socket.close_with_code(1000);
    }
    relay.forget_socket();
    cs.0.dock.pairing.set(None);
}

/// Back from the back/forward cache: open the relay again.
fn reopen(cs: &Countersign) {
    let Some(relay) = cs.service::<McpRelay>() else {
        return;
    };
    if relay.closing.replace(false) {
        relay.backoff_ms.set(1_000);
        open(cs);
    }
}

/// Withdraws every relayed call still live here (waiting cards and questions).
fn withdraw_live(cs: &Countersign, relay: &McpRelay) {
    let live = relay.live.borrow().clone();
    for id in live {
        cs.withdraw(Caller::Mcp, &id);
    }
}

fn received(cs: &Countersign, event: ToPage) {
    let Some(relay) = cs.service::<McpRelay>() else {
        return;
    };
    match event {
        ToPage::Paired {
            code,
            waiting,
            max_bytes,
        } => {
            relay.backoff_ms.set(1_000);
            relay.max_bytes.set(max_bytes);
            relay.orphan.borrow_mut().take();
            // What the gateway no longer waits for (cancelled, or given up while the
            // connection was down) is withdrawn here too.
            let forgotten: Vec<String> = relay
                .live
                .borrow()
                .iter()
                .filter(|id| !waiting.contains(id))
                .cloned()
                .collect();
            for id in forgotten {
                cs.withdraw(Caller::Mcp, &id);
            }
            // What it still waits for and was answered here: the answer again (its
            // first sending may have been lost with the connection).
            let unsent = std::mem::take(&mut *relay.unsent.borrow_mut());
            // Each id once, even if the gateway named it twice.
            let first = |(i, id): &(usize, &String)| !waiting.iter().take(*i).any(|w| w == *id);
            for (_, id) in waiting
                .iter()
                .enumerate()
                .filter(first)
                .filter(|(_, id)| !relay.live.borrow().contains(*id))
            {
                let kept = unsent.get(id.as_str()).cloned();
                let kept = kept.or_else(|| {
                    let answered = relay.answered.borrow();
                    answered
                        .iter()
                        .find(|(a, _)| a == id)
                        .map(|(_, c)| c.clone())
                });
                if let Some(content) = kept {
                    relay.answer(id, content);
                } else if relay.seen.borrow().contains_key(id.as_str()) {
                    relay.answer(id, LOST.to_owned());
                }
            }
            cs.0.dock.pairing.set(Some(code));
            *relay.sent_tools.borrow_mut() = None;
            let poll = later(&cs.0, |cs, _| sync(cs));
            *relay.poll.borrow_mut() = Some(gloo_timers::callback::Interval::new(POLL_MS, poll));
            sync(cs);
        }
        ToPage::Call {
            id,
            name,
            arguments,
        } => {
            // Sent again after a reconnect: it is already here, or already answered.
            let wall = js_sys::Date::now();
            let mut seen = relay.seen.borrow_mut();
            seen.retain(|_, at| wall - *at < SEEN_MS);
            // A replay counts as seen again now.
            if seen.insert(id.clone(), wall).is_some() {
                return;
            }
            drop(seen);
            if cs.audit_backlogged() {
                let refusal = countersign::outcome::Refusal::of(
                    countersign::Reason::Unavailable,
                    &name,
                    Some(BACKLOGGED),
                );
                relay.settled(
                    &id,
                    countersign::Outcome::Refused(refusal).to_model_content(),
                );
                return;
            }
            let mut live = relay.live.borrow_mut();
            if !live.contains(&id) {
                live.push(id.clone());
            }
            drop(live);
            let call = Call::new(id.clone(), name, arguments).by(Caller::Mcp);
            let settled = cs.call(call);
            let weak = Rc::downgrade(&relay);
            wasm_bindgen_futures::spawn_local(async move {
                let content = settled.await.to_model_content();
                if let Some(relay) = weak.upgrade() {
                    relay.live.borrow_mut().retain(|l| *l != id);
                    relay.settled(&id, content);
                }
            });
        }
        ToPage::Cancel { id } => cs.withdraw(Caller::Mcp, &id),
        ToPage::Error { message } => {
            web_sys::console::warn_1(&format!("countersign: the MCP relay: {message}").into());
        }
    }
}

/// Sends the tools the projection shows MCP callers, when they changed.
fn sync(cs: &Countersign) {
    let Some(relay) = cs.service::<McpRelay>() else {
        return;
    };
    if cs.0.dock.pairing.get_untracked().is_none() {
        return;
    }
    // From inside an action's hook the executor is busy: the next step syncs.
    let Ok(tools) = cs.0.executor.projection_for(Caller::Mcp) else {
        return;
    };
    // Compared as specs: serialised only when they changed, not at every executor step.
    if relay.sent_tools.borrow().as_ref() == Some(&tools) {
        return;
    }
    let Ok(list) = serde_json::to_string(&tools) else {
        return;
    };
    let message = ToGateway::Tools { tools: list }.to_json();
    // Over the gateway's limit the message would end the connection (and again after
    // every reconnect): MCP clients keep the tools they had, and the console says why.
    if message.len() > relay.max_bytes.get() {
        web_sys::console::warn_1(
            &"countersign: the page's tools are too large for the MCP relay; MCP clients keep the list they had".into(),
        );
        *relay.sent_tools.borrow_mut() = Some(tools);
        return;
    }
    if relay.send(&message) {
        *relay.sent_tools.borrow_mut() = Some(tools);
    }
}

/// The answer for a call answered here whose answer was lost on the way.
const LOST: &str = r#"{"ok":false,"error":{"code":"RESULT_LOST","reason":"result_lost","message":"the page answered this call, but the answer was lost with the connection; what happened is in the page's audit trail","retry":false}}"#;

/// The answer in place of one too large to relay.
const TOO_LARGE: &str = r#"{"ok":false,"error":{"code":"RESULT_TOO_LARGE","reason":"result_too_large","message":"the call went through the page, but its result is too large to relay; what happened is in the page's audit trail","retry":false}}"#;

impl McpRelay {
    /// Sends `text` if the socket is open.
    fn send(&self, text: &str) -> bool {
        self.socket.borrow().as_ref().is_some_and(|s| {
            s.ready_state() == web_sys::WebSocket::OPEN && s.send_with_str(text).is_ok()
        })
    }

    /// `content`, or in its place a refusal that says so when it is too large to relay
    /// (a message over the gateway's limit would end the connection).
    fn fitting(&self, content: String) -> String {
        // The content goes inside a JSON string: escaping can double it.
        if content.len() * 2 + 200 <= self.max_bytes.get() {
            return content;
        }
        TOO_LARGE.to_owned()
    }

    /// Sends call `id`'s answer, or keeps it for when the socket is back.
    /// A call ended: its answer is kept for a replay after a reconnect, and sent.
    fn settled(&self, id: &str, content: String) {
        let content = self.fitting(content);
        let mut answered = self.answered.borrow_mut();
        if answered.len() == ANSWERS_KEPT {
            answered.remove(0);
        }
        answered.push((id.to_owned(), content.clone()));
        drop(answered);
        self.answer(id, content);
    }

    fn answer(&self, id: &str, content: String) {
        let message = ToGateway::Result {
            id: id.to_owned(),
            content: content.clone(),
        }
        .to_json();
        if !self.send(&message) {
            self.unsent.borrow_mut().insert(id.to_owned(), content);
        }
    }

    fn forget_socket(&self) {
        if let Some(socket) = self.socket.borrow_mut().take() {
            socket.set_onopen(None);
            socket.set_onmessage(None);
            socket.set_onclose(None);
        }
        let old = std::mem::take(&mut *self.handlers.borrow_mut());
        self.retired.borrow_mut().extend(old);
        *self.poll.borrow_mut() = None;
        *self.sent_tools.borrow_mut() = None;
    }
}

impl std::fmt::Debug for McpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRelay")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl PageService for McpRelay {
    fn after_step(self: Rc<Self>, cs: &Countersign) {
        sync(cs);
    }

    fn close(self: Rc<Self>, cs: &Countersign) {
        close(cs);
    }

    fn reopen(self: Rc<Self>, cs: &Countersign) {
        reopen(cs);
    }
}
