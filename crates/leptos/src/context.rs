//! The provider: one [`Countersign`] per page, owning the executor, the dock's state,
//! the named page targets and the read-only page state.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::rc::{Rc, Weak};

use countersign::{
    Action, ApprovalRequest, Call, CallId, Code, Config, Executor, Gesture, Grant, GrantId,
    HandoffView, Kind, MemoryAudit, Outcome, Session, Settled, Step, TicketError,
};
use futures_channel::oneshot;
use leptos::prelude::*;
use schemars::JsonSchema;
use send_wrapper::SendWrapper;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::clock::{now, random_secret};
use crate::i18n::Locale;

/// How the provider is set up.
#[derive(Clone, Debug)]
pub struct CountersignOptions {
    /// The role and scopes the assistant acts for. Default: role `user`, no scopes.
    pub session: Session,
    /// The dock's language. Default: from `?lang=` in the page URL, else English.
    pub locale: Option<Locale>,
    /// How long an approval card waits. Default five minutes.
    pub approval_timeout: Option<std::time::Duration>,
}

impl Default for CountersignOptions {
    fn default() -> Self {
        Self {
            session: Session::new("user", Vec::<String>::new()),
            locale: None,
            approval_timeout: None,
        }
    }
}

/// One entry in the dock's conversation log.
#[derive(Clone, Debug, PartialEq)]
pub enum LogEntry {
    /// What the person typed.
    User(String),
    /// What the assistant answered.
    Assistant(String),
    /// How an action call ended.
    Outcome {
        /// The action id.
        action: String,
        /// The action's title, if it is registered.
        title: String,
        /// `None` for done, else the refusal code.
        code: Option<Code>,
    },
    /// An error (model unreachable, bad reply…), shown as an error.
    Error(String),
}

/// The dock's reactive state, updated after every executor step.
#[derive(Clone, Copy, Debug)]
pub struct DockState {
    /// Pending approval cards, oldest first.
    pub approvals: RwSignal<Vec<ApprovalRequest>>,
    /// Handoffs waiting for the person.
    pub handoffs: RwSignal<Vec<HandoffView>>,
    /// Session grants in force.
    pub grants: RwSignal<Vec<Grant>>,
    /// The conversation and action log.
    pub log: RwSignal<Vec<LogEntry>>,
    /// Whether the assistant is working on a turn.
    pub working: RwSignal<bool>,
    /// Whether the offline assistant is in use.
    pub offline: RwSignal<bool>,
    /// The clock, ticking once a second while something waits (for countdowns).
    pub now_ms: RwSignal<u64>,
    /// The session's mode (the dock shows a banner outside `Default`).
    pub mode: RwSignal<countersign::Mode>,
    /// The policy file's error while it is broken (the dock shows it).
    pub policy_error: RwSignal<Option<String>>,
}

type TargetFn = Rc<dyn Fn() -> Option<web_sys::Element>>;
type StateFn = Rc<dyn Fn() -> Value>;

pub(crate) struct Shared {
    pub(crate) executor: Executor,
    /// The session's role (grants are stored per role).
    pub(crate) role: String,
    pub(crate) audit: MemoryAudit,
    pub(crate) locale: Locale,
    pub(crate) dock: DockState,
    waiters: RefCell<HashMap<CallId, oneshot::Sender<Settled>>>,
    unclaimed: RefCell<HashMap<CallId, Settled>>,
    targets: RefCell<HashMap<String, (u64, TargetFn)>>,
    pub(crate) action_targets: RefCell<HashMap<String, String>>,
    page_state: RefCell<BTreeMap<String, (u64, StateFn)>>,
    next_key: std::cell::Cell<u64>,
    timer: RefCell<Option<gloo_timers::callback::Timeout>>,
    ticker: RefCell<Option<gloo_timers::callback::Interval>>,
    builtins: RefCell<Vec<countersign::Registration>>,
    pub(crate) shipper: crate::audit_ship::ShipperSlot,
    pub(crate) grant_store: crate::grant_store::GrantStoreSlot,
}

/// The page's Countersign: cheap to clone, single-threaded (it lives in the page).
#[derive(Clone)]
pub struct Countersign(pub(crate) Rc<Shared>);

impl std::fmt::Debug for Countersign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Countersign")
            .field("executor", &self.0.executor)
            .field("locale", &self.0.locale)
            .finish_non_exhaustive()
    }
}

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
pub fn provide_countersign(options: CountersignOptions) -> Result<Countersign, ProvideError> {
    let secret = random_secret().ok_or(ProvideError::NoRandomness)?;
    let locale = options.locale.unwrap_or_else(|| {
        let query = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .unwrap_or_default();
        Locale::from_query(&query)
    });
    let session_id = {
        let mut id = String::from("page-");
        for byte in secret.iter().take(6) {
            id.push_str(&format!("{byte:02x}"));
        }
        id
    };
    let role = options.session.role.clone();
    let mut config = Config::new(session_id, options.session, secret);
    if let Some(timeout) = options.approval_timeout {
        config.approval_timeout = timeout;
    }
    let audit = MemoryAudit::new();
    let executor = Executor::new(config, audit.clone());
    let dock = DockState {
        approvals: RwSignal::new(Vec::new()),
        handoffs: RwSignal::new(Vec::new()),
        grants: RwSignal::new(Vec::new()),
        log: RwSignal::new(Vec::new()),
        working: RwSignal::new(false),
        offline: RwSignal::new(false),
        now_ms: RwSignal::new(now().as_millis()),
        mode: RwSignal::new(countersign::Mode::Default),
        policy_error: RwSignal::new(None),
    };
    let cs = Countersign(Rc::new(Shared {
        executor,
        role,
        audit,
        locale,
        dock,
        waiters: RefCell::default(),
        unclaimed: RefCell::default(),
        targets: RefCell::default(),
        action_targets: RefCell::default(),
        page_state: RefCell::default(),
        next_key: std::cell::Cell::new(1),
        timer: RefCell::default(),
        ticker: RefCell::default(),
        builtins: RefCell::default(),
        shipper: RefCell::default(),
        grant_store: RefCell::default(),
    }));
    cs.register_page_state_action();
    cs.settle_on_pagehide();
    provide_context(CountersignContext(SendWrapper::new(cs.clone())));
    let on_leave = SendWrapper::new(cs.clone());
    on_cleanup(move || on_leave.take().shutdown());
    Ok(cs)
}

/// The page's Countersign, if a provider is above this component.
pub fn use_countersign() -> Option<Countersign> {
    use_context::<CountersignContext>().map(|c| (*c.0).clone())
}

impl Countersign {
    /// The executor (registry, pipeline, tickets, grants).
    pub fn executor(&self) -> &Executor {
        &self.0.executor
    }

    /// The audit trail so far.
    pub fn audit(&self) -> &MemoryAudit {
        &self.0.audit
    }

    /// The dock's language.
    pub fn locale(&self) -> Locale {
        self.0.locale
    }

    /// The dock's reactive state.
    pub fn dock(&self) -> DockState {
        self.0.dock
    }

    /// Sends one model call through the gate and resolves when it settles (after the
    /// person decides, the run finishes, the handoff ends, or a timeout).
    pub fn call(&self, call: Call) -> impl Future<Output = Settled> + 'static {
        let action = call.action.clone();
        let submitted = self.0.executor.submit(call, now());
        let (id, rx) = match submitted {
            Ok(step) => {
                let id = step_call(&step);
                self.handle(step);
                (Some(id), Some(self.wait(id)))
            }
            // Called from inside an action's hook: the executor refused to re-enter.
            Err(_) => (None, None),
        };
        self.pump();
        async move {
            match (id, rx) {
                (Some(id), Some(rx)) => rx.await.unwrap_or_else(|_| lost(id)),
                _ => Settled {
                    call: CallId::default(),
                    tool_call_id: String::new(),
                    outcome: Outcome::Refused(countersign::Refusal::of(
                        countersign::Reason::HookReentered {
                            hook: countersign::Hook::Run,
                        },
                        &action,
                    )),
                    action,
                },
            }
        }
    }

    /// The person pressed Allow (once or for the session) on `card`.
    pub fn approve(&self, card: &ApprovalRequest, gesture: Gesture) -> Result<(), TicketError> {
        let result = self
            .0
            .executor
            .approve(card.countersign(gesture), now())
            .map(|step| self.handle(step));
        self.pump();
        result
    }

    /// The person pressed Deny on a card, with an optional reason for the model.
    pub fn deny(&self, call: CallId, reason: Option<&str>) {
        let _ = self.0.executor.deny(call, reason, now());
        self.pump();
    }

    /// The person says the handoff is done; `expect` is checked against the page now.
    pub fn handoff_done(&self, call: CallId) {
        let _ = self.0.executor.handoff_done(call, now());
        self.pump();
    }

    /// The person cancels the handoff.
    pub fn handoff_cancel(&self, call: CallId) {
        let _ = self.0.executor.handoff_cancel(call, now());
        self.pump();
    }

    /// Moves a handoff's highlight to step `index`.
    pub fn show_step(&self, call: CallId, index: usize) {
        let _ = self.0.executor.show_step(call, index);
        self.pump();
    }

    /// Switches the session's mode (and the dock's banner). Refused from inside an
    /// action's hook ([`countersign::Reentered`]): a hook never switches the mode its own
    /// call is decided in.
    pub fn set_mode(&self, mode: countersign::Mode) -> Result<(), countersign::Reentered> {
        self.0.executor.set_mode(mode)?;
        self.0.dock.mode.set(mode);
        self.pump();
        Ok(())
    }

    /// Loads the deployment's policy file (JSON). A malformed file is refused with its
    /// line; the executor then refuses every call until a valid one is loaded, and the
    /// dock says why.
    pub fn load_policy(&self, text: &str) -> Result<(), countersign::PolicyError> {
        let result = self.0.executor.load_policy(text);
        self.0
            .dock
            .policy_error
            .set(result.as_ref().err().map(ToString::to_string));
        self.pump();
        result
    }

    /// Fetches the policy file from `url` (same origin) and loads it. A file that cannot
    /// be fetched counts as broken: fail closed.
    pub async fn load_policy_from(&self, url: &str) -> Result<(), countersign::PolicyError> {
        let unavailable = |why: String| countersign::PolicyError {
            line: 0,
            column: 0,
            message: why,
        };
        let error = match crate::http::fetch("GET", url, None, 10_000).await {
            Ok((status, body)) if (200..300).contains(&status) => return self.load_policy(&body),
            Ok((status, _)) => {
                unavailable(format!("the file could not be fetched (HTTP {status})"))
            }
            Err(e) => unavailable(format!("the file could not be fetched ({e})")),
        };
        let _ = self.0.executor.fail_policy(error.clone());
        self.0.dock.policy_error.set(Some(error.to_string()));
        self.pump();
        Err(error)
    }

    /// Revokes a session grant.
    pub fn revoke(&self, grant: GrantId) {
        let _ = self.0.executor.revoke(grant);
        self.pump();
    }

    /// Registers an action for the page's whole life (not tied to a component).
    pub fn register_static<P>(&self, action: Action<P>) -> Result<(), countersign::RegisterError>
    where
        P: serde::de::DeserializeOwned + JsonSchema + Clone + 'static,
    {
        let reg = self.0.executor.register(action)?;
        self.0.builtins.borrow_mut().push(reg);
        self.pump();
        Ok(())
    }

    /// The element registered under target `name`, if it is mounted.
    pub fn target(&self, name: &str) -> Option<web_sys::Element> {
        let f = self.0.targets.borrow().get(name).map(|(_, f)| Rc::clone(f));
        f.and_then(|f| f())
    }

    /// The page target bound to an action, if any.
    pub fn action_target(&self, action: &str) -> Option<String> {
        self.0.action_targets.borrow().get(action).cloned()
    }

    /// The read-only page state, as the model may see it.
    pub fn page_state(&self) -> Map<String, Value> {
        let entries: Vec<(String, StateFn)> = self
            .0
            .page_state
            .borrow()
            .iter()
            .map(|(k, (_, f))| (k.clone(), Rc::clone(f)))
            .collect();
        entries.into_iter().map(|(k, f)| (k, f())).collect()
    }

    /// The title of a registered action (its id if it is not registered).
    pub fn title_of(&self, action: &str) -> String {
        self.0
            .executor
            .title_of(action)
            .unwrap_or_else(|| action.to_owned())
    }

    pub(crate) fn add_target(&self, name: &str, f: TargetFn) -> u64 {
        let key = self.next_key();
        self.0
            .targets
            .borrow_mut()
            .insert(name.to_owned(), (key, f));
        key
    }

    pub(crate) fn remove_target(&self, name: &str, key: u64) {
        let mut targets = self.0.targets.borrow_mut();
        if targets.get(name).is_some_and(|(k, _)| *k == key) {
            targets.remove(name);
        }
    }

    pub(crate) fn add_page_state(&self, name: &str, f: StateFn) -> u64 {
        let key = self.next_key();
        self.0
            .page_state
            .borrow_mut()
            .insert(name.to_owned(), (key, f));
        key
    }

    pub(crate) fn remove_page_state(&self, name: &str, key: u64) {
        let mut state = self.0.page_state.borrow_mut();
        if state.get(name).is_some_and(|(k, _)| *k == key) {
            state.remove(name);
        }
    }

    fn next_key(&self) -> u64 {
        let key = self.0.next_key.get();
        self.0.next_key.set(key + 1);
        key
    }

    pub(crate) fn push_log(&self, entry: LogEntry) {
        self.0.dock.log.update(|log| log.push(entry));
    }

    /// Navigating away or closing the tab settles every live call (one terminal record
    /// each) and hands the unshipped audit records to `sendBeacon`.
    fn settle_on_pagehide(&self) {
        use wasm_bindgen::closure::Closure;
        use wasm_bindgen::JsCast;
        let weak = Rc::downgrade(&self.0);
        let on_hide = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
            if let Some(shared) = weak.upgrade() {
                Countersign(Rc::clone(&shared)).shutdown();
                crate::audit_ship::flush_with_beacon(&shared);
            }
        });
        if let Some(window) = web_sys::window() {
            let _ = window
                .add_event_listener_with_callback("pagehide", on_hide.as_ref().unchecked_ref());
        }
        // The listener lives as long as the page; it holds only a weak reference.
        on_hide.forget();
    }

    fn register_page_state_action(&self) {
        let weak: Weak<Shared> = Rc::downgrade(&self.0);
        let action = Action::<StateQuery>::new(
            READ_PAGE_STATE,
            "Read the page's current state (read-only), e.g. the workspace name.",
        )
        .title("Read page state")
        .kind(Kind::Read)
        .run(move |q: StateQuery| {
            let state = weak
                .upgrade()
                .map(|s| Countersign(s).page_state())
                .unwrap_or_default();
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
        if let Ok(reg) = self.0.executor.register(action) {
            self.0.builtins.borrow_mut().push(reg);
        }
    }

    fn handle(&self, step: Step) {
        if let Step::Perform(job) = step {
            let weak = Rc::downgrade(&self.0);
            leptos::task::spawn_local(async move {
                let completion = job.run().await;
                if let Some(shared) = weak.upgrade() {
                    let cs = Countersign(shared);
                    let _ = cs.0.executor.complete(completion, now());
                    cs.pump();
                }
            });
        }
    }

    fn wait(&self, call: CallId) -> oneshot::Receiver<Settled> {
        let (tx, rx) = oneshot::channel();
        match self.0.unclaimed.borrow_mut().remove(&call) {
            Some(settled) => {
                let _ = tx.send(settled);
            }
            None => {
                self.0.waiters.borrow_mut().insert(call, tx);
            }
        }
        rx
    }

    /// Delivers settlements, refreshes the dock's signals and re-arms the timer.
    /// Called after every executor step.
    pub fn pump(&self) {
        crate::grant_store::sync(&self.0);
        let settled = self.0.executor.drain_settled();
        for s in settled {
            let title = self.title_of(&s.action);
            self.push_log(LogEntry::Outcome {
                action: s.action.clone(),
                title,
                code: s.outcome.code(),
            });
            let waiter = self.0.waiters.borrow_mut().remove(&s.call);
            match waiter {
                Some(tx) => {
                    let _ = tx.send(s);
                }
                None => {
                    self.0.unclaimed.borrow_mut().insert(s.call, s);
                }
            }
        }
        let exec = &self.0.executor;
        let dock = self.0.dock;
        dock.approvals.set(exec.approvals());
        dock.handoffs.set(exec.handoffs());
        dock.grants.set(exec.grants());
        dock.now_ms.set(now().as_millis());
        self.rearm();
        crate::audit_ship::ship(&self.0);
    }

    fn rearm(&self) {
        let deadline = self.0.executor.poll_timeout();
        let timer = deadline.map(|deadline| {
            let wait = deadline
                .as_millis()
                .saturating_sub(now().as_millis())
                .saturating_add(1);
            let weak = Rc::downgrade(&self.0);
            gloo_timers::callback::Timeout::new(
                u32::try_from(wait).unwrap_or(u32::MAX),
                move || {
                    if let Some(shared) = weak.upgrade() {
                        let cs = Countersign(shared);
                        cs.0.executor.handle_timeout(now());
                        cs.pump();
                    }
                },
            )
        });
        // Replacing the old Timeout cancels it.
        *self.0.timer.borrow_mut() = timer;
        let waiting = deadline.is_some();
        let mut ticker = self.0.ticker.borrow_mut();
        if waiting && ticker.is_none() {
            let now_ms = self.0.dock.now_ms;
            *ticker = Some(gloo_timers::callback::Interval::new(1_000, move || {
                now_ms.set(now().as_millis());
            }));
        } else if !waiting {
            *ticker = None;
        }
    }

    /// Settles every live call (the page is going away) and stops the timers.
    pub fn shutdown(&self) {
        self.0.executor.shutdown(now());
        self.pump();
        *self.0.timer.borrow_mut() = None;
        *self.0.ticker.borrow_mut() = None;
    }
}

fn step_call(step: &Step) -> CallId {
    match step {
        Step::Settled(s) => s.call,
        Step::Approval(card) => card.call,
        Step::Handoff(view) => view.call,
        Step::Perform(job) => job.call(),
    }
}

fn lost(call: CallId) -> Settled {
    Settled {
        call,
        tool_call_id: String::new(),
        action: String::new(),
        outcome: Outcome::Refused(countersign::Refusal::of(
            countersign::Reason::PageClosed,
            "",
        )),
    }
}
