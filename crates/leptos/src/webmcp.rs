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
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use countersign::{Call, Caller, ToolSpec};
use js_sys::{Function, Object, Promise, Reflect, JSON};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

use crate::countersign::{Countersign, Shared};

/// How often availability is read again while tools are exported (ms).
const POLL_MS: u32 = 500;

/// The page's WebMCP export.
pub(crate) struct WebMcp {
    /// The browser's `ModelContext`.
    context: Object,
    /// `context.registerTool`.
    register: Function,
    /// What is registered now, by tool name.
    tools: RefCell<BTreeMap<String, Exported>>,
    next_call: Cell<u64>,
    poll: RefCell<Option<gloo_timers::callback::Interval>>,
    closed: Cell<bool>,
}

/// One registered tool.
struct Exported {
    /// What it was registered as (a change registers it again).
    spec: String,
    controller: web_sys::AbortController,
    /// Kept alive while the tool is registered.
    _execute: Closure<dyn FnMut(JsValue, JsValue) -> Promise>,
}

pub(crate) type WebMcpSlot = RefCell<Option<Rc<WebMcp>>>;

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
    let export = Rc::new(WebMcp {
        context,
        register,
        tools: RefCell::default(),
        next_call: Cell::new(0),
        poll: RefCell::default(),
        closed: Cell::new(false),
    });
    let weak = Rc::downgrade(&cs.0);
    *export.poll.borrow_mut() = Some(gloo_timers::callback::Interval::new(POLL_MS, move || {
        if let Some(shared) = weak.upgrade() {
            sync(&Countersign(shared));
        }
    }));
    *cs.0.webmcp.borrow_mut() = Some(export);
    sync(cs);
}

/// Brings the registered tools in step with what the projection shows a browser agent.
pub(crate) fn sync(cs: &Countersign) {
    let Some(export) = cs.0.webmcp.borrow().clone() else {
        return;
    };
    if export.closed.get() {
        return;
    }
    // From inside an action's hook the executor is busy: the next step syncs.
    let Ok(tools) = cs.0.executor.projection_for(Caller::WebMcp) else {
        return;
    };
    let wanted: BTreeMap<String, (String, ToolSpec)> = tools
        .into_iter()
        .map(|tool| (tool.name.clone(), (fingerprint(&tool), tool)))
        .collect();
    let mut registered = export.tools.borrow_mut();
    registered.retain(|name, exported| {
        let keep = wanted
            .get(name)
            .is_some_and(|(spec, _)| *spec == exported.spec);
        if !keep {
            exported.controller.abort();
        }
        keep
    });
    for (name, (spec, tool)) in wanted {
        if registered.contains_key(&name) {
            continue;
        }
        if let Some(exported) = export.register(&cs.0, tool, spec) {
            registered.insert(name, exported);
        }
    }
}

/// Unregisters every tool and stops the export (the page is going away).
pub(crate) fn close(cs: &Countersign) {
    let Some(export) = cs.0.webmcp.borrow().clone() else {
        return;
    };
    export.closed.set(true);
    *export.poll.borrow_mut() = None;
    for (_, exported) in std::mem::take(&mut *export.tools.borrow_mut()) {
        exported.controller.abort();
    }
}

/// What a tool is registered as: a change to any of it registers the tool again.
fn fingerprint(tool: &ToolSpec) -> String {
    serde_json::json!([
        tool.description,
        tool.parameters,
        tool.annotations.title,
        tool.annotations.read_only_hint
    ])
    .to_string()
}

impl WebMcp {
    /// Registers `tool`; `None` if the browser refused it (a name already taken, say),
    /// which is reported in the console and tried again only when the action changes.
    fn register(&self, shared: &Rc<Shared>, tool: ToolSpec, spec: String) -> Option<Exported> {
        let controller = web_sys::AbortController::new().ok()?;
        let execute = self.execute(Rc::downgrade(shared), tool.name.clone());
        let definition = Object::new();
        let schema =
            JSON::parse(&tool.parameters.to_string()).unwrap_or_else(|_| Object::new().into());
        let annotations = Object::new();
        let set = |target: &Object, key: &str, value: &JsValue| {
            let _ = Reflect::set(target, &key.into(), value);
        };
        set(
            &annotations,
            "readOnlyHint",
            &tool.annotations.read_only_hint.into(),
        );
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
        let refused = |why: &JsValue| {
            web_sys::console::warn_2(
                &format!("countersign: WebMCP did not register `{}`:", tool.name).into(),
                why,
            );
        };
        match self.register.call2(&self.context, &definition, &options) {
            Ok(returned) => {
                if let Ok(promise) = returned.dyn_into::<Promise>() {
                    let name = tool.name.clone();
                    wasm_bindgen_futures::spawn_local(async move {
                        if let Err(why) = wasm_bindgen_futures::JsFuture::from(promise).await {
                            web_sys::console::warn_2(
                                &format!("countersign: WebMCP did not register `{name}`:").into(),
                                &why,
                            );
                        }
                    });
                }
            }
            Err(why) => refused(&why),
        }
        Some(Exported {
            spec,
            controller,
            _execute: execute,
        })
    }

    /// The tool's `execute(input, client)`: the call goes through the gate as the
    /// `webmcp` caller; an abort of `client.signal` withdraws it.
    fn execute(
        &self,
        shared: Weak<Shared>,
        action: String,
    ) -> Closure<dyn FnMut(JsValue, JsValue) -> Promise> {
        let next_call = Rc::new(Cell::new(0u64));
        let base = self.next_call.get();
        self.next_call.set(base + 1);
        Closure::new(move |input: JsValue, client: JsValue| {
            let n = next_call.get() + 1;
            next_call.set(n);
            let tool_call_id = format!("webmcp-{base}-{n}");
            let Some(shared) = shared.upgrade() else {
                return Promise::reject(&"the page is gone".into());
            };
            let cs = Countersign(shared);
            let arguments = match arguments_text(&input) {
                Ok(text) => text,
                Err(message) => return Promise::resolve(&unreadable(&action, &message)),
            };
            withdraw_on_abort(&cs, &client, &tool_call_id);
            let call = Call::new(tool_call_id, action.clone(), arguments).by(Caller::WebMcp);
            let settled = cs.call(call);
            wasm_bindgen_futures::future_to_promise(async move {
                let settled = settled.await;
                Ok(JSON::parse(&settled.to_model_content()).unwrap_or(JsValue::NULL))
            })
        })
    }
}

/// The agent's input as the raw JSON text the executor validates. `undefined` and
/// `null` are no arguments (`{}`); anything JSON cannot carry is an error.
fn arguments_text(input: &JsValue) -> Result<String, String> {
    if input.is_undefined() || input.is_null() {
        return Ok("{}".into());
    }
    match JSON::stringify(input) {
        Ok(text) => text
            .as_string()
            .ok_or_else(|| "the input is not JSON".to_owned()),
        Err(_) => Err("the input could not be read as JSON (a cycle, or a BigInt)".into()),
    }
}

/// The result for input that never reached the gate: the same shape as a refusal.
fn unreadable(action: &str, message: &str) -> JsValue {
    let json = serde_json::json!({
        "ok": false,
        "error": {
            "code": countersign::Code::InvalidArgs,
            "reason": "invalid_arguments",
            "message": format!("`{action}` was not run: {message}"),
            "retry": countersign::RetryHint::FixCall,
        }
    });
    JSON::parse(&json.to_string()).unwrap_or(JsValue::NULL)
}

/// When the agent aborts the execution (`client.signal`), its waiting call is withdrawn.
fn withdraw_on_abort(cs: &Countersign, client: &JsValue, tool_call_id: &str) {
    let Some(signal) = Reflect::get(client, &"signal".into())
        .ok()
        .and_then(|s| s.dyn_into::<web_sys::AbortSignal>().ok())
    else {
        return;
    };
    let weak = Rc::downgrade(&cs.0);
    let id = tool_call_id.to_owned();
    let on_abort = Closure::once_into_js(move || {
        if let Some(shared) = weak.upgrade() {
            Countersign(shared).withdraw(Caller::WebMcp, &id);
        }
    });
    let options = web_sys::AddEventListenerOptions::new();
    options.set_once(true);
    let _ = signal.add_event_listener_with_callback_and_add_event_listener_options(
        "abort",
        on_abort.unchecked_ref(),
        &options,
    );
}
