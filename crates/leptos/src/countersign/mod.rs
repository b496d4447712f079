//! [`Countersign`]: the page's handle on the gate. What a person's gestures and the
//! assistant's calls go through; the driver keeps the dock in step after each of them.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use countersign::{
    question::AnswerError, ticket::EditError, ticket::GrantId, ticket::TicketError,
    ApprovalRequest, Call, CallId, Executor, Gesture, MemoryAudit, Outcome, Settled,
};
use futures_channel::oneshot;
use leptos::prelude::*;
use serde_json::{Map, Value};

mod driver;
mod services;

use crate::clock::now;
use crate::dock_state::{DockSignals, DockState, LogEntry};
use crate::i18n::Locale;
use crate::list_map::ListMap;
use crate::page_registry::PageRegistry;

/// Everything one page's Countersign holds.
pub(crate) struct Shared {
    pub(crate) executor: Executor,
    /// The session's role (grants are stored per role).
    pub(crate) role: String,
    pub(crate) audit: MemoryAudit,
    pub(crate) locale: Locale,
    pub(crate) dock: DockSignals,
    pub(crate) page: PageRegistry,
    pub(crate) waiters: RefCell<ListMap<CallId, oneshot::Sender<Settled>>>,
    pub(crate) unclaimed: RefCell<ListMap<CallId, Settled>>,
    pub(crate) timer: RefCell<Option<gloo_timers::callback::Timeout>>,
    pub(crate) ticker: RefCell<Option<gloo_timers::callback::Interval>>,
    pub(crate) builtins: RefCell<Vec<countersign::executor::Registration>>,
    /// How many audit records the activity list has looked at.
    pub(crate) activity_seen: std::cell::Cell<usize>,
    /// Whether script clicks count as a person's (browser tests only).
    pub(crate) trust_script_clicks: bool,
    /// Where countersignatures are minted (`/v1/countersign`), if anywhere.
    pub(crate) countersign_endpoint: Option<String>,
    /// The model turns whose calls have not all settled.
    pub(crate) batches: RefCell<Vec<crate::batch::Batch>>,
    pub(crate) next_batch: std::cell::Cell<u64>,
    /// What follows the gate: audit shipping, the tab's attention, the stores of
    /// pending calls and of grants, the WebMCP export, the MCP relay.
    pub(crate) services: RefCell<Vec<Rc<dyn PageService>>>,
    /// Until when (host ms) yes-gestures are held back: an agent just withdrew the card
    /// on screen, so the one now under the person's pointer is not the one they read.
    pub(crate) hold_until_ms: std::cell::Cell<u64>,
    /// When each outside agent's waiting call came on screen (host ms).
    pub(crate) shown: RefCell<ListMap<CallId, u64>>,
}

/// A part of the page that follows the gate (audit shipping, the tab's attention, the
/// stores of pending calls and of grants, the WebMCP export, the MCP relay): after every
/// step it brings what it shows, keeps or sends up to date. A new service is one module
/// and one [`Countersign::add_service`] call.
pub(crate) trait PageService: std::any::Any {
    /// After every step of the gate.
    fn after_step(self: Rc<Self>, cs: &Countersign);
    /// A call settled (before whoever waits for it hears).
    fn call_settled(self: Rc<Self>, _cs: &Countersign, _settled: &Settled) {}
    /// The gate is shutting down (the provider unmounts, or the page goes away), before
    /// the calls still live are settled.
    fn close(self: Rc<Self>, _cs: &Countersign) {}
    /// The browser is taking the page away (`pagehide`), before anything settles.
    fn leaving(self: Rc<Self>, _cs: &Countersign) {}
    /// The page is gone: every call settled and its record written.
    fn left(self: Rc<Self>, _cs: &Countersign) {}
    /// The page came back from the back/forward cache.
    fn reopen(self: Rc<Self>, _cs: &Countersign) {}
}

/// How many entries the dock's log keeps (the oldest go first).
pub(crate) const MAX_LOG: usize = 300;

/// How long a yes is held back after an agent's card came on screen, or after an
/// agent withdrew the card that was.
const HOLD_MS: u64 = 700;

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

impl Countersign {
    /// Adds a service that follows the gate from the next step on.
    pub(crate) fn add_service(&self, service: Rc<dyn PageService>) {
        self.0.services.borrow_mut().push(service);
    }

    /// The services, in the order they were added.
    pub(crate) fn services(&self) -> Vec<Rc<dyn PageService>> {
        self.0.services.borrow().clone()
    }

    /// The service of type `T`, if the page has one.
    pub(crate) fn service<T: PageService>(&self) -> Option<Rc<T>> {
        self.services().into_iter().find_map(|service| {
            let any: Rc<dyn std::any::Any> = service;
            any.downcast::<T>().ok()
        })
    }

    /// The executor (registry, pipeline, tickets, grants).
    pub fn executor(&self) -> &Executor {
        &self.0.executor
    }

    /// The page's audit trail: the records it still holds. Once shipping is on
    /// ([`Countersign::ship_audit`]) each record is let go as soon as the gateway
    /// acknowledges it, and at most [`crate::CountersignOptions::audit_capacity`] are
    /// held while it is away; positions ([`MemoryAudit::len`]) count every record ever
    /// written, held or not.
    pub fn audit(&self) -> &MemoryAudit {
        &self.0.audit
    }

    /// The dock's language.
    pub fn locale(&self) -> Locale {
        self.0.locale
    }

    /// The dock's reactive state (read-only).
    pub fn dock(&self) -> DockState {
        self.0.dock.read_only()
    }

    /// Sends one model call through the gate and resolves when it settles (after the
    /// person decides, the run finishes, the handoff ends, or a timeout).
    pub fn call(&self, call: Call) -> impl Future<Output = Settled> + 'static {
        let action = call.action.clone();
        let caller = call.caller;
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
                    tool_call_id: "".into(),
                    caller,
                    outcome: Outcome::Refused(countersign::outcome::Refusal::of(
                        countersign::Reason::HookReentered {
                            hook: countersign::reason::Hook::Run,
                        },
                        &action,
                        None,
                    )),
                    action: action.into(),
                    edited: None,
                    untrusted: None,
                },
            }
        }
    }

    /// Sends one model turn's tool calls through the gate as a batch and resolves with
    /// every result, in call order, once all have settled. Each item is decided on its
    /// own; an item that depends on an earlier one (the same action, or an action bound
    /// to the same page target) is submitted only after that one settled.
    pub fn call_batch(&self, calls: Vec<Call>) -> impl Future<Output = Vec<Settled>> + 'static {
        let (tx, rx) = oneshot::channel();
        let id = self.0.next_batch.get() + 1;
        self.0.next_batch.set(id);
        let page = &self.0.page;
        let touches = |call: &Call| {
            let mut keys = vec![format!("action:{}", call.action)];
            keys.extend(
                page.action_target(&call.action)
                    .map(|t| format!("target:{t}")),
            );
            keys
        };
        let count = calls.len();
        let batch = crate::batch::Batch::new(id, calls, touches, tx);
        self.0.batches.borrow_mut().push(batch);
        self.pump();
        async move {
            match rx.await {
                Ok(results) => results,
                // The page went away first: every item is reported as not done.
                Err(_) => (0..count).map(|_| lost(CallId::default())).collect(),
            }
        }
    }

    /// A call past the cap of `cap` per turn: refused unread by the gate, so the trail
    /// names it too (one terminal record, `too_many_calls`).
    pub(crate) fn refuse_over_cap(
        &self,
        call: Call,
        cap: usize,
    ) -> impl Future<Output = Settled> + 'static {
        let refused = self.0.executor.refuse_over_cap(call, cap, now());
        self.pump();
        let rx = refused.ok().map(|id| self.wait(id));
        async move {
            match rx {
                Some(rx) => rx.await.unwrap_or_else(|_| lost(CallId::default())),
                None => lost(CallId::default()),
            }
        }
    }

    /// The person edited a waiting call's arguments (raw JSON from the edit form). The
    /// edit approves nothing: arguments that do not validate change nothing and come
    /// back as [`EditError::Invalid`] for the form; otherwise the call carries on as a
    /// new, linked call with its own card (its id is returned), and whoever waited for
    /// the original gets the new call's result.
    pub fn edit(&self, call: CallId, arguments: &str) -> Result<CallId, EditError> {
        let result = self.0.executor.edit(call, arguments, now()).map(|step| {
            let to = step_call(&step);
            self.moved(call, to);
            self.handle(step);
            to
        });
        self.pump();
        result
    }

    /// The caller withdrew its call `tool_call_id` (an agent cancelled it, or went
    /// away): whatever of it waits for the person settles as `CANCELLED`, its card
    /// leaves the dock, and `run` is never reached. A run under way finishes.
    ///
    /// If the withdrawn card was on screen, the dock then holds yes-gestures back for a
    /// moment: the card that moves under the person's pointer is not the one they read
    /// (an agent could withdraw a harmless card just as the person goes to allow it, to
    /// put a harmful one in its place).
    pub fn withdraw(&self, caller: countersign::Caller, tool_call_id: &str) {
        let at = now();
        let withdrawn = self.0.executor.withdraw(caller, tool_call_id, at);
        // Held back only when what left was on screen: a card behind it moves up.
        let seen = {
            let shown = self.0.shown.borrow();
            withdrawn.iter().any(|s| shown.contains_key(&s.call))
        };
        if seen {
            self.0
                .hold_until_ms
                .set(at.as_millis().saturating_add(HOLD_MS));
            self.push_log(LogEntry::Notice(
                self.0.locale.strings().withdrawn_hold.to_owned(),
            ));
        }
        self.pump();
    }

    /// Whether script clicks are taken as a person's (browser tests only).
    pub(crate) fn trusts_script_clicks(&self) -> bool {
        self.0.trust_script_clicks
    }

    /// Whether `event` is a person's gesture on `control` of `call`. A script's event
    /// (`isTrusted` false) is refused: nothing happens, the attempt is recorded, and the
    /// dock says so.
    ///
    /// A gesture that says yes (allow, done, answer) is also held back while what is under
    /// the pointer may not be what the person read: just after an agent withdrew a card,
    /// and for a moment after an agent's card, handoff or question came on screen (a
    /// click meant for the card before it, or a double click's second click, lands on
    /// it). Deny, Cancel and Decline are never held back.
    pub(crate) fn by_person(
        &self,
        event: &web_sys::Event,
        call: CallId,
        control: countersign::reason::Control,
    ) -> bool {
        use countersign::reason::Control as C;
        // A real event, not an object a script made up with `isTrusted: true`: the
        // native `timeStamp` getter refuses anything that is not an Event.
        let real = wasm_bindgen::JsCast::is_instance_of::<web_sys::Event>(event)
            && crate::event_brand::is_real_event(event);
        if !((real && event.is_trusted()) || self.0.trust_script_clicks) {
            let _ = self.0.executor.refuse_synthetic(call, control, now());
            self.push_log(LogEntry::Notice(
                self.0.locale.strings().script_click_refused.to_owned(),
            ));
            self.pump();
            return false;
        }
        let yes = matches!(
            control,
            C::AllowOnce | C::AlwaysAllow | C::AllowBatch | C::Done | C::Answer
        );
        if !yes {
            return true;
        }
        let at = now().as_millis();
        let double = wasm_bindgen::JsCast::dyn_ref::<web_sys::MouseEvent>(event)
            .is_some_and(|m| m.detail() > 1);
        let fresh = self
            .0
            .shown
            .borrow()
            .get(&call)
            .is_some_and(|since| at < since.saturating_add(HOLD_MS));
        if at < self.0.hold_until_ms.get() || fresh || double {
            self.push_log(LogEntry::Notice(
                self.0.locale.strings().withdrawn_hold.to_owned(),
            ));
            return false;
        }
        true
    }

    /// An outside agent's card, handoff or question is on screen from now: yes-gestures
    /// on it wait a moment (see [`Countersign::by_person`]). Its first showing counts.
    pub(crate) fn shown(&self, call: CallId, caller: countersign::Caller) {
        if caller.is_assistant() {
            return;
        }
        let mut shown = self.0.shown.borrow_mut();
        shown.get_or_insert_with(call, || now().as_millis());
    }

    /// The person pressed Allow (once or for the session) on `card`. If the page changed
    /// under the card, nothing runs and the card is shown again with what changed.
    pub fn approve(&self, card: &ApprovalRequest, gesture: Gesture) -> Result<(), TicketError> {
        let result = self
            .0
            .executor
            .approve(card.countersign(gesture), now())
            .map(|step| self.handle(step));
        self.pump();
        result
    }

    /// The person pressed "allow all in this batch" over `cards`, each listed with its own
    /// arguments. Each is approved once; a card that changed since is drawn again.
    pub fn approve_batch(&self, cards: &[ApprovalRequest]) {
        for ticket in ApprovalRequest::countersign_batch(cards) {
            if let Ok(step) = self.0.executor.approve(ticket, now()) {
                self.handle(step);
            }
        }
        self.pump();
    }

    /// The person pressed Deny on a card, with an optional reason for the model.
    pub fn deny(&self, call: CallId, reason: Option<&str>) -> Result<(), TicketError> {
        let result = self.0.executor.deny(call, reason, now()).map(|_| ());
        self.pump();
        result
    }

    /// The person answers the assistant's question (raw JSON from the form). An answer
    /// not of the declared type changes nothing ([`AnswerError::Invalid`], for the form).
    pub fn answer(&self, call: CallId, answer: &str) -> Result<(), AnswerError> {
        let result = self.0.executor.answer(call, answer, now()).map(|_| ());
        self.pump();
        result
    }

    /// The person declines the assistant's question: `QUESTION_DECLINED`.
    pub fn decline_question(&self, call: CallId) -> Result<(), TicketError> {
        let result = self.0.executor.decline_question(call, now()).map(|_| ());
        self.pump();
        result
    }

    /// The person says the handoff is done; `expect` is checked against the page now.
    pub fn handoff_done(&self, call: CallId) -> Result<(), TicketError> {
        let result = self.0.executor.handoff_done(call, now()).map(|_| ());
        self.pump();
        result
    }

    /// The person cancels the handoff.
    pub fn handoff_cancel(&self, call: CallId) -> Result<(), TicketError> {
        let result = self.0.executor.handoff_cancel(call, now()).map(|_| ());
        self.pump();
        result
    }

    /// Moves a handoff's highlight to step `index`.
    pub fn show_step(&self, call: CallId, index: usize) -> Result<(), TicketError> {
        let result = self.0.executor.show_step(call, index);
        self.pump();
        result
    }

    /// Switches the session's mode (and the dock's banner). Refused from inside an
    /// action's hook ([`countersign::Blocked`]): a hook never switches the mode its own
    /// call is decided in.
    pub fn set_mode(&self, mode: countersign::Mode) -> Result<(), countersign::Blocked> {
        self.0.executor.set_mode(mode)?;
        self.0.dock.mode.set(mode);
        self.pump();
        Ok(())
    }

    /// Loads the deployment's policy file (JSON). A malformed file is refused with its
    /// line; the executor then refuses every call but reversals until a valid one is
    /// loaded, and the dock says why.
    pub fn load_policy(&self, text: &str) -> Result<(), countersign::policy::PolicyError> {
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
    pub async fn load_policy_from(
        &self,
        url: &str,
    ) -> Result<(), countersign::policy::PolicyError> {
        let unavailable = |why: String| countersign::policy::PolicyError {
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

    /// Revokes a session grant; `false` if there was none.
    pub fn revoke(&self, grant: GrantId) -> bool {
        let revoked = self.0.executor.revoke(grant).unwrap_or(false);
        self.pump();
        revoked
    }

    /// The element registered under target `name`, if it is mounted.
    pub fn target(&self, name: &str) -> Option<web_sys::Element> {
        self.0.page.target(name)
    }

    /// The page target bound to an action, if any.
    pub fn action_target(&self, action: &str) -> Option<String> {
        self.0.page.action_target(action)
    }

    /// The read-only page state, as the model may see it.
    pub fn page_state(&self) -> Map<String, Value> {
        self.0.page.state()
    }

    /// The title of a registered action (its id if it is not registered).
    pub fn title_of(&self, action: &str) -> String {
        self.0
            .executor
            .title_of(action)
            .unwrap_or_else(|| action.to_owned())
    }

    /// What of the model's answer has streamed in so far (`None` when none streams).
    pub(crate) fn set_streaming(&self, streaming: Option<crate::conversation::Streaming>) {
        self.0.dock.streaming.set(streaming);
    }

    /// Adds to the dock's log, which keeps the latest [`MAX_LOG`] entries: a long session
    /// (or a flood of notices) does not grow the page without end.
    pub(crate) fn push_log(&self, entry: LogEntry) {
        self.0.dock.log.update(|log| {
            log.push(entry);
            let excess = log.len().saturating_sub(MAX_LOG);
            log.drain(..excess);
        });
    }

    pub(crate) fn set_working(&self, working: bool) {
        self.0.dock.working.set(working);
    }

    /// Whether the offline assistant is the one answering (the dock's badge).
    pub(crate) fn set_offline(&self, offline: bool) {
        self.0.dock.offline.set(offline);
    }
}

/// The call a step is about.
pub(crate) fn step_call(step: &countersign::Step) -> CallId {
    match step {
        countersign::Step::Settled(s) => s.call,
        countersign::Step::Approval(card) => card.call,
        countersign::Step::Handoff(view) => view.call,
        countersign::Step::Question(view) => view.call,
        countersign::Step::Perform(job) => job.call(),
    }
}

/// What a waiter gets when the page went away before its call settled.
pub(crate) fn lost(call: CallId) -> Settled {
    Settled {
        call,
        tool_call_id: "".into(),
        caller: countersign::Caller::Assistant,
        action: "".into(),
        outcome: countersign::Outcome::Refused(countersign::outcome::Refusal::of(
            countersign::Reason::PageClosed,
            "",
            None,
        )),
        edited: None,
        untrusted: None,
    }
}
