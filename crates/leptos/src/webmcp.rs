//! The WebMCP export: where the browser offers WebMCP (`document.modelContext`, or the
//! older `navigator.modelContext`), every action the projection shows a browser agent is
//! registered as a tool. A tool's `execute` submits the call to the same executor as the
//! page's assistant, with the caller named `webmcp`, so the dock asks the person as for
//! any call; the agent gets the same `{ok, receipt}` / `{ok: false, error}` JSON the
//! assistant would. Where the browser has no WebMCP the export is nothing at all.
//!
//! Each tool is registered with its own `AbortSignal`: when its action unmounts or stops
//! being available, the signal is aborted and the tool is gone; when the action is back,
//! it is registered again. The set is brought in step after every executor step and,
//! because availability can depend on anything in the page, twice a second.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use countersign::{wire::ToolSpec, Call, Caller};
use js_sys::{Function, Object, Promise, Reflect, JSON};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

use crate::countersign::{Countersign, PageService, Shared};

/// How often availability is read again while tools are exported (ms).
const POLL_MS: u32 = 500;

/// The page's WebMCP export.
pub(crate) struct WebMcp {
    /// The browser's `ModelContext`.
    context: Object,
    /// `context.registerTool`.
    register: Function,
    /// What is registered now, by tool name (a list: a map's code is copied into the
    /// page per type).
    tools: RefCell<Vec<(String, Exported)>>,
    /// Random per page load: call ids never repeat across loads (a call restored after
    /// a reload keeps its id, and a new agent must not be able to withdraw it).
    load: String,
    next_call: Cell<u64>,
    poll: RefCell<Option<gloo_timers::callback::Interval>>,
    closed: Cell<bool>,
}

/// One registered tool.
struct Exported {
    /// What it was registered as (a change registers it again).
    tool: ToolSpec,
    /// Which registration this is (a refusal that comes late forgets only its own).
    serial: u64,
    controller: web_sys::AbortController,
    /// Kept alive while the tool is registered.
    _execute: Closure<dyn FnMut(JsValue, JsValue) -> Promise>,
}

/// The browser's `ModelContext` with a callable `registerTool`, if it has one:
/// `document.modelContext`, else `navigator.modelContext`.
fn model_context() -> Option<(Object, Function)> {
    let window = web_sys::window()?;
    let holders: [JsValue; 2] = [
        window.document().map(JsValue::from).unwrap_or_default(),
        window.navigator().into(),
    ];
    holders.iter().find_map(|holder| {
        let context = Reflect::get(holder, &"modelContext".into()).ok()?;
        let context: Object = context.dyn_into().ok()?;
        let register: Function = Reflect::get(&context, &"registerTool".into())
            .ok()?
            .dyn_into()
            .ok()?;
        Some((context, register))
    })
}

/// Starts the export for `cs` if the browser has WebMCP; nothing otherwise.
pub(crate) fn start(cs: &Countersign) {
    let Some((context, register)) = model_context() else {
        return;
    };
    cs.add_service(Rc::new(WebMcp {
        context,
        register,
        tools: RefCell::default(),
        load: crate::pending_store::random_id(),
        next_call: Cell::new(0),
        poll: RefCell::default(),
        closed: Cell::new(true),
    }));
    reopen(cs);
}

/// Brings the registered tools in step with what the projection shows a browser agent.
fn sync(cs: &Countersign) {
    let Some(export) = cs.service::<WebMcp>() else {
        return;
    };
    if export.closed.get() {
        return;
    }
    // From inside an action's hook the executor is busy: the next step syncs.
    let Ok(tools) = cs.0.executor.projection_for(Caller::WebMcp) else {
        return;
    };
    // One per name: action ids are unique.
    let mut wanted = tools;
    // Decided with the list borrowed, done with it released: aborting a signal and
    // registering run page script, which may call back into the page's Countersign.
    let gone: Vec<Exported> = {
        let Ok(mut registered) = export.tools.try_borrow_mut() else {
            return;
        };
        // A tool registered as it is still wanted stays; any other is unregistered.
        let (kept, stale): (Vec<_>, Vec<_>) = std::mem::take(&mut *registered)
            .into_iter()
            .partition(|(name, exported)| {
                wanted
                    .iter()
                    .any(|t| t.name == *name && *t == exported.tool)
            });
        *registered = kept;
        wanted.retain(|t| !registered.iter().any(|(name, _)| *name == t.name));
        stale.into_iter().map(|(_, exported)| exported).collect()
    };
    for exported in gone {
        exported.controller.abort();
    }
    for tool in wanted {
        let name = tool.name.clone();
        let Some(exported) = export.register(&cs.0, tool) else {
            continue;
        };
        match export.tools.try_borrow_mut() {
            // A sync that ran inside this one (page script calling back) may have
            // registered it too: the one replaced is unregistered, not leaked.
            Ok(mut registered) => match registered.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => std::mem::replace(&mut slot.1, exported).controller.abort(),
                None => registered.push((name, exported)),
            },
            Err(_) => exported.controller.abort(),
        }
    }
}

/// Unregisters every tool and stops the export (the page is going away).
fn close(cs: &Countersign) {
    let Some(export) = cs.service::<WebMcp>() else {
        return;
    };
    export.closed.set(true);
    *export.poll.borrow_mut() = None;
    let all = std::mem::take(&mut *export.tools.borrow_mut());
    for (_, exported) in all {
        exported.controller.abort();
    }
}

/// The page came back from the back/forward cache: export again.
fn reopen(cs: &Countersign) {
    let Some(export) = cs.service::<WebMcp>() else {
        return;
    };
    if !export.closed.replace(false) {
        return;
    }
    let weak = Rc::downgrade(&cs.0);
    *export.poll.borrow_mut() = Some(gloo_timers::callback::Interval::new(POLL_MS, move || {
        if let Some(shared) = weak.upgrade() {
            sync(&Countersign(shared));
        }
    }));
    sync(cs);
}

impl WebMcp {
    /// Registers `tool`; `None` if the browser refused it at once. A refusal that comes
    /// later (a name another script holds) is reported in the console and forgotten, so
    /// the next sync tries again.
    fn register(self: &Rc<Self>, shared: &Rc<Shared>, tool: ToolSpec) -> Option<Exported> {
        let controller = web_sys::AbortController::new().ok()?;
        let serial = self.next_call.get();
        self.next_call.set(serial + 1);
        let execute = execute(
            Rc::downgrade(shared),
            format!("{}-{serial}", self.load),
            tool.name.clone(),
        );
        let definition = Object::new();
        let schema =
            JSON::parse(&tool.parameters.to_string()).unwrap_or_else(|_| Object::new().into());
        let annotations = Object::new();
        let set = |target: &Object, key: &str, value: &JsValue| {
            let _ = Reflect::set(target, &key.into(), value);
        };
        let hints = &tool.annotations;
        set(&annotations, "readOnlyHint", &hints.read_only_hint.into());
        // What it returns may carry instructions that are not the person's.
        set(
            &annotations,
            "untrustedContentHint",
            &hints.untrusted_content_hint.into(),
        );
        // Confirm before running: the person is asked every time, or does the step.
        let consequential =
            hints.approval == countersign::policy::ApprovalPolicy::AskAlways || hints.handoff;
        set(&annotations, "consequentialHint", &consequential.into());
        set(&definition, "name", &tool.name.as_str().into());
        set(
            &definition,
            "title",
            &tool.annotations.title.as_str().into(),
        );
        set(
            &definition,
            "description",
            &tool.description.as_str().into(),
        );
        set(&definition, "inputSchema", &schema);
        set(&definition, "annotations", &annotations);
        set(&definition, "execute", execute.as_ref());
        let options = Object::new();
        set(&options, "signal", &controller.signal().into());
        let returned = match self.register.call2(&self.context, &definition, &options) {
            Ok(returned) => returned,
            Err(why) => {
                refused(&tool.name, &why);
                return None;
            }
        };
        if let Ok(promise) = returned.dyn_into::<Promise>() {
            let name = tool.name.clone();
            let export = Rc::downgrade(self);
            wasm_bindgen_futures::spawn_local(async move {
                if let Err(why) = wasm_bindgen_futures::JsFuture::from(promise).await {
                    refused(&name, &why);
                    let Some(export) = export.upgrade() else {
                        return;
                    };
                    let mut tools = export.tools.borrow_mut();
                    tools.retain(|(n, e)| *n != name || e.serial != serial);
                }
            });
        }
        Some(Exported {
            tool,
            serial,
            controller,
            _execute: execute,
        })
    }
}

fn refused(name: &str, why: &JsValue) {
    web_sys::console::warn_2(
        &format!("countersign: WebMCP did not register `{name}`:").into(),
        why,
    );
}

/// A tool's `execute(input, client)`: the call goes through the gate as the `webmcp`
/// caller, with an id no other call of any page load has; an abort of `client.signal`
/// withdraws it.
fn execute(
    shared: Weak<Shared>,
    prefix: String,
    action: String,
) -> Closure<dyn FnMut(JsValue, JsValue) -> Promise> {
    let mut count = 0u64;
    Closure::new(move |input: JsValue, client: JsValue| {
        count += 1;
        let tool_call_id = format!("webmcp-{prefix}-{count}");
        let Some(shared) = shared.upgrade() else {
            return Promise::reject(&"the page is gone".into());
        };
        let cs = Countersign(shared);
        let signal = Reflect::get(&client, &"signal".into())
            .ok()
            .and_then(|s| s.dyn_into::<web_sys::AbortSignal>().ok());
        if signal.as_ref().is_some_and(web_sys::AbortSignal::aborted) {
            let reason = countersign::Reason::Withdrawn {
                caller: Caller::WebMcp,
            };
            return Promise::resolve(&refused_early(countersign::outcome::Refusal::of(
                reason, &action, None,
            )));
        }
        if cs.audit_backlogged() {
            return Promise::resolve(&refused_early(countersign::outcome::Refusal::of(
                countersign::Reason::Unavailable,
                &action,
                Some(crate::mcp_relay::BACKLOGGED),
            )));
        }
        let limit = cs.0.executor.max_argument_bytes();
        let arguments = match arguments_text(&input, limit) {
            Ok(text) => text,
            Err(message) => {
                let reason = countersign::Reason::InvalidArguments;
                return Promise::resolve(&refused_early(countersign::outcome::Refusal::of(
                    reason,
                    &action,
                    Some(&message),
                )));
            }
        };
        let listener = signal.map(|signal| withdraw_on_abort(&cs, signal, &tool_call_id));
        let call = Call::new(tool_call_id.clone(), action.clone(), arguments).by(Caller::WebMcp);
        let settled = cs.call(call);
        // Aborted while its input was read (a `toJSON` can run any script): withdrawn
        // now that it is there to withdraw.
        if listener
            .as_ref()
            .is_some_and(|(signal, _)| signal.aborted())
        {
            cs.withdraw(Caller::WebMcp, &tool_call_id);
        }
        wasm_bindgen_futures::future_to_promise(async move {
            let settled = settled.await;
            // The call has ended: its abort listener goes with it.
            if let Some((signal, on_abort)) = listener {
                let _ = signal.remove_event_listener_with_callback(
                    "abort",
                    on_abort.as_ref().unchecked_ref(),
                );
            }
            Ok(JSON::parse(&settled.to_model_content()).unwrap_or(JsValue::NULL))
        })
    })
}

/// The agent's input as the raw JSON text the executor validates. `undefined` and
/// `null` are no arguments (`{}`); anything JSON cannot carry is an error, and so is
/// text over `limit` UTF-16 units, refused before it is copied into the page's memory.
fn arguments_text(input: &JsValue, limit: usize) -> Result<String, String> {
    if input.is_undefined() || input.is_null() {
        return Ok("{}".into());
    }
    let text = JSON::stringify(input)
        .map_err(|_| "the input could not be read as JSON (a cycle, or a BigInt)".to_owned())?;
    // A function, a symbol or a `toJSON` that returns nothing stringifies to `undefined`.
    if !text.is_string() {
        return Err("the input is not a JSON value".into());
    }
    let length = usize::try_from(text.length()).unwrap_or(usize::MAX);
    if length > limit {
        return Err(format!(
            "the arguments are {length} characters, over the limit of {limit} bytes"
        ));
    }
    text.as_string()
        .ok_or_else(|| "the input is not JSON".to_owned())
}

/// The result for a call that never reached the gate: the same JSON as a refusal from it.
fn refused_early(refusal: countersign::outcome::Refusal) -> JsValue {
    let content = countersign::Outcome::Refused(refusal).to_model_content();
    JSON::parse(&content).unwrap_or(JsValue::NULL)
}

/// When the agent aborts the execution (`client.signal`), its waiting call is withdrawn.
/// Returns the signal and the listener, to be removed once the call has ended.
fn withdraw_on_abort(
    cs: &Countersign,
    signal: web_sys::AbortSignal,
    tool_call_id: &str,
) -> (web_sys::AbortSignal, Closure<dyn FnMut()>) {
    let weak = Rc::downgrade(&cs.0);
    let id = tool_call_id.to_owned();
    let on_abort = Closure::<dyn FnMut()>::new(move || {
        if let Some(shared) = weak.upgrade() {
            Countersign(shared).withdraw(Caller::WebMcp, &id);
        }
    });
    let options = web_sys::AddEventListenerOptions::new();
    options.set_once(true);
    let _ = signal.add_event_listener_with_callback_and_add_event_listener_options(
        "abort",
        on_abort.as_ref().unchecked_ref(),
        &options,
    );
    (signal, on_abort)
}

impl PageService for WebMcp {
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
