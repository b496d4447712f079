//! The provider: one [`Countersign`] per page, made near the root and given to every
//! component below through context.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use countersign::{Action, Config, Executor, Kind, MemoryAudit, Session};
use leptos::prelude::*;
use schemars::JsonSchema;
use send_wrapper::SendWrapper;
use serde::Deserialize;
use serde_json::Value;

use crate::audit_ship::Shipping;
use crate::clock::{now, random_secret};
use crate::countersign::{Countersign, Shared};
use crate::dock_state::{DockSignals, LogEntry};
use crate::i18n::Locale;
use crate::page_registry::PageRegistry;

/// How the provider is set up.
#[derive(Clone, Debug)]
pub struct CountersignOptions {
    /// The role and scopes the assistant acts for. Defaults to role `user`, no scopes.
    pub session: Session,
    /// The dock's language. Defaults to `?lang=` in the page URL, else English.
    pub locale: Option<Locale>,
    /// How long an approval card waits. Defaults to five minutes.
    pub approval_timeout: Option<std::time::Duration>,
    /// Keep pending approvals and handoffs, and the assistant's conversation, across
    /// reloads of this tab, in `sessionStorage` under this key (and the session's role).
    /// After a reload a pending call comes back only if the same declaration registered
    /// again, is available and has time left, on a new card; nothing runs by itself.
    /// Off by default.
    pub keep_pending: Option<String>,
    /// Take clicks that scripts make (`element.click()`, dispatched events) as a
    /// person's. **For browser tests only**, which cannot make trusted events: in a page,
    /// leave it `false` (the default), so that only a person's real gesture allows,
    /// denies, edits, answers or finishes anything, and a script's attempt (an
    /// automation agent clicking Allow) is refused and recorded.
    pub trust_script_clicks: bool,
    /// Where the page asks for countersignatures for actions declared with
    /// [`countersign::Action::run_countersigned`]: the gateway's `/v1/countersign` at
    /// the page's origin by default. `None`: no countersigner; such actions are still
    /// asked, and settle as `NOT_COUNTERSIGNED` once approved (the dock says why).
    pub countersign_endpoint: Option<String>,
    /// Register the page's actions as WebMCP tools when the browser offers WebMCP
    /// (`document.modelContext`), so a browser agent can call them, through the same
    /// gate and the same dock (its cards say a browser agent asked). On by default;
    /// where the browser has no WebMCP it does nothing. To keep one action from browser
    /// agents, declare it with [`countersign::Action::only_for`].
    pub webmcp: bool,
    /// Whether an action declared with `run_countersigned` needs the person's passkey
    /// when an agent outside the page (WebMCP, MCP) asked for it, whatever it declares.
    /// An agent that drives the browser makes trusted clicks; it cannot make the
    /// person's passkey assertion. Off by default (see
    /// [`countersign::Config::agents_need_passkey`]).
    pub agents_need_passkey: bool,
    /// Where the page opens its relay for MCP clients: the gateway's `/v1/relay` at the
    /// page's origin by default, opened when its `/v1/health` says MCP is on (a `ws:` or
    /// `wss:` URL is opened as it is). The gateway (started with `--mcp-token-file`) gives the
    /// page a pairing code, shown in the dock; an MCP client that sends it calls this
    /// page's actions, through the same gate and dock (its cards say an MCP client
    /// asked). `None`, or a gateway without MCP: no relay. To keep one action from MCP
    /// clients, declare it with [`countersign::Action::only_for`].
    pub mcp_relay: Option<String>,
    /// The most audit records the page holds before a gateway has acknowledged them
    /// ([`countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY`] when `None`). Acknowledged records
    /// are let go at once; while the gateway is away, records past this many push out
    /// the oldest, counted in [`crate::ShippingStatus::dropped`] and visible in the
    /// gateway's trail as a jump in `seq` and named by a `trail_gap` record. Bounds the
    /// page's memory over a long session. At least 64.
    pub audit_capacity: Option<usize>,
}

impl Default for CountersignOptions {
    fn default() -> Self {
        Self {
            session: Session::new("user", Vec::<String>::new()),
            locale: None,
            approval_timeout: None,
            keep_pending: None,
            trust_script_clicks: false,
            countersign_endpoint: Some("/v1/countersign".into()),
            webmcp: true,
            agents_need_passkey: false,
            mcp_relay: Some("/v1/relay".into()),
            audit_capacity: None,
        }
    }
}

/// The least [`CountersignOptions::audit_capacity`] taken: the dock reads each settled
/// batch of records back from the trail (its activity list), so it must hold at least
/// what one pump writes.
const MIN_AUDIT_CAPACITY: usize = 64;

/// The context value: a newtype so nothing else in context collides with it.
#[derive(Clone)]
pub struct CountersignContext(SendWrapper<Countersign>);

impl std::fmt::Debug for CountersignContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountersignContext(..)")
    }
}

/// Why the provider could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvideError {
    /// The page has no Web Crypto to draw card nonces from.
    #[error("the page has no crypto.getRandomValues for approval nonces")]
    NoRandomness,
}

/// The id of the built-in read-only action that returns the page state.
pub const READ_PAGE_STATE: &str = "read_page_state";

#[derive(Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StateQuery {
    /// One key to read; omit to read all.
    #[serde(default)]
    key: Option<String>,
}

/// Creates the page's Countersign and provides it to every component below.
///
/// Call once, near the root, before components that use [`crate::use_action`].
///
/// ```no_run
/// use countersign::Session;
/// use countersign_leptos::{provide_countersign, AgentDock, CountersignOptions};
/// use leptos::prelude::*;
///
/// #[component]
/// fn App() -> impl IntoView {
///     let options = CountersignOptions {
///         session: Session::new("editor", ["todos.write"]),
///         ..CountersignOptions::default()
///     };
///     match provide_countersign(options) {
///         Ok(_) => view! { <AgentDock/> }.into_any(),
///         Err(e) => view! { <p role="alert">{e.to_string()}</p> }.into_any(),
///     }
/// }
/// ```
pub fn provide_countersign(options: CountersignOptions) -> Result<Countersign, ProvideError> {
    let secret = random_secret().ok_or(ProvideError::NoRandomness)?;
    let locale = options.locale.unwrap_or_else(|| {
        let query = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .unwrap_or_default();
        Locale::from_query(&query)
    });
    // 128 random bits of its own, not a part of the secret: record ids are
    // `{session}-{seq}` on a trail many pages share, so sessions must not collide, and
    // the id is written everywhere the secret must never be.
    let session_id = {
        let mut id = String::from("page-");
        let fresh = random_secret().ok_or(ProvideError::NoRandomness)?;
        for byte in fresh.iter().take(16) {
            id.push_str(&format!("{byte:02x}"));
        }
        id
    };
    let role = options.session.role.clone();
    let role_key = role.clone();
    let mut config = Config::new(session_id, options.session, secret);
    if let Some(timeout) = options.approval_timeout {
        config.approval_timeout = timeout;
    }
    config.agents_need_passkey = options.agents_need_passkey;
    let audit = options.audit_capacity.map_or_else(MemoryAudit::new, |n| {
        MemoryAudit::with_capacity(n.max(MIN_AUDIT_CAPACITY))
    });
    let executor = Executor::new(config, audit.clone());
    if let Some(endpoint) = options.countersign_endpoint.clone() {
        let signer = crate::countersigner::GatewayCountersigner::new(endpoint);
        // A new executor is never inside a hook.
        let _ = executor.set_countersigner(Rc::new(signer));
    }
    let cs = Countersign(Rc::new(Shared {
        executor,
        role,
        audit: audit.clone(),
        locale,
        dock: DockSignals::new(now().as_millis()),
        page: PageRegistry::new(),
        waiters: RefCell::default(),
        unclaimed: RefCell::default(),
        timer: RefCell::default(),
        ticker: RefCell::default(),
        builtins: RefCell::default(),
        activity_seen: std::cell::Cell::new(0),
        batches: RefCell::default(),
        next_batch: std::cell::Cell::new(0),
        services: RefCell::default(),
        hold_until_ms: std::cell::Cell::new(0),
        shown: RefCell::default(),
        trust_script_clicks: options.trust_script_clicks,
        countersign_endpoint: options.countersign_endpoint,
    }));
    // Records the bounded trail had to let go before the gateway took them are named in
    // a record of their own, which is shipped like any other.
    let shipping = Shipping::new(audit);
    let weak = Rc::downgrade(&cs.0);
    shipping.on_gap(move |gap| {
        let shared = weak.upgrade()?;
        shared
            .executor
            .record_trail_gap(gap.first_seq, gap.last_seq, gap.unconfirmed, now())
            .ok()
    });
    // A trail the gateway refuses is not kept: the dock says so, with the gateway's why.
    let weak = Rc::downgrade(&cs.0);
    shipping.on_refused(move |why| {
        if let Some(shared) = weak.upgrade() {
            let cs = Countersign(shared);
            let strings = cs.0.locale.strings();
            // The gateway's words are shown as an error's: escaped, on one line.
            cs.push_log(match why {
                Some(why) => LogEntry::Error(format!("{}{why}", strings.trail_refused)),
                None => LogEntry::Notice(strings.trail_taken.to_owned()),
            });
        }
    });
    cs.add_service(Rc::new(shipping));
    crate::attention::start(&cs);
    crate::event_brand::remember_event_brand();
    if let Some(key) = options.keep_pending {
        crate::restore::keep_pending(&cs, format!("{key}:{role_key}"));
    }
    register_page_state_action(&cs);
    if options.webmcp {
        crate::webmcp::start(&cs);
    }
    if let Some(base) = options.mcp_relay {
        crate::mcp_relay::start(&cs, base);
    }
    settle_on_pagehide(&cs);
    provide_context(CountersignContext(SendWrapper::new(cs.clone())));
    let on_leave = SendWrapper::new(cs.clone());
    on_cleanup(move || on_leave.take().shutdown());
    Ok(cs)
}

/// The page's Countersign, if a provider is above this component.
pub fn use_countersign() -> Option<Countersign> {
    use_context::<CountersignContext>().map(|c| (*c.0).clone())
}

/// Navigating away or closing the tab settles every live call (one terminal record
/// each) and hands the unshipped audit records to `sendBeacon`.
fn settle_on_pagehide(cs: &Countersign) {
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;
    let weak = Rc::downgrade(&cs.0);
    let on_hide = Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
        if let Some(shared) = weak.upgrade() {
            // Only the browser says the page is going (a script's `pagehide` would
            // settle every waiting call); browser tests simulate a reload with one.
            if !event.is_trusted() && !shared.trust_script_clicks {
                return;
            }
            let cs = Countersign(shared);
            let services = cs.services();
            for service in &services {
                Rc::clone(service).leaving(&cs);
            }
            cs.shutdown();
            for service in services {
                service.left(&cs);
            }
        }
    });
    // Back from the back/forward cache: everything was settled on the way out.
    let weak = Rc::downgrade(&cs.0);
    let on_show = Closure::<dyn FnMut(web_sys::PageTransitionEvent)>::new(
        move |event: web_sys::PageTransitionEvent| {
            if !event.persisted() {
                return;
            }
            if let Some(shared) = weak.upgrade() {
                if !event.is_trusted() && !shared.trust_script_clicks {
                    return;
                }
                let cs = Countersign(shared);
                for service in cs.services() {
                    service.reopen(&cs);
                }
                cs.pump();
            }
        },
    );
    if let Some(window) = web_sys::window() {
        let _ =
            window.add_event_listener_with_callback("pagehide", on_hide.as_ref().unchecked_ref());
        let _ =
            window.add_event_listener_with_callback("pageshow", on_show.as_ref().unchecked_ref());
    }
    // The listeners live as long as the page; they hold only weak references.
    on_hide.forget();
    on_show.forget();
}

/// The built-in read-only action that returns what the page shares with
/// [`crate::use_page_state`].
fn register_page_state_action(cs: &Countersign) {
    let weak: Weak<Shared> = Rc::downgrade(&cs.0);
    let action = Action::<StateQuery>::new(
        READ_PAGE_STATE,
        "Read what this page shares about its current state (read-only): all of it, or one key.",
    )
    .title("Read page state")
    .kind(Kind::Read)
    .run(move |q: StateQuery| {
        let state = weak.upgrade().map(|s| s.page.state()).unwrap_or_default();
        async move {
            match q.key {
                None => Ok(Value::Object(state)),
                Some(key) => state
                    .get(&key)
                    .cloned()
                    .map(|v| serde_json::json!({ key.clone(): v }))
                    .ok_or_else(|| format!("no page state named `{key}`")),
            }
        }
    });
    if let Ok(reg) = cs.0.executor.register(action) {
        cs.0.builtins.borrow_mut().push(reg);
    }
}
