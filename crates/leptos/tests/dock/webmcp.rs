//! The WebMCP export against a spec-shaped stand-in for `document.modelContext` (this
//! suite's Chromium runs without the WebMCP flag; the tutorial's end-to-end suite tests
//! Chromium's own). The stand-in does what the spec says a browser does: tools keyed by
//! name, a duplicate name refused, a tool gone when its registration's signal aborts,
//! `execute(input, {signal})`, and the result handed back as JSON text.

use std::sync::Arc;
use std::time::Duration;

use countersign::{Confirm, Kind};
use countersign_leptos::{use_action, AgentDock, CountersignOptions};
use countersign_testing::{code, tick};
use gloo_timers::future::TimeoutFuture;
use js_sys::{Array, Function, Object, Promise, Reflect, JSON};
use leptos::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

use super::harness::*;

const STAND_IN: &str = r#"
  const tools = new Map();
  const context = new EventTarget();
  context.registerTool = (tool, options = {}) => {
    if (tools.has(tool.name)) {
      return Promise.reject(new DOMException('Duplicate tool name', 'InvalidStateError'));
    }
    const signal = options.signal;
    if (signal && signal.aborted) return Promise.resolve();
    tools.set(tool.name, tool);
    if (signal) signal.addEventListener('abort', () => {
      if (tools.get(tool.name) === tool) tools.delete(tool.name);
    }, { once: true });
    return Promise.resolve();
  };
  context.getTools = () => Promise.resolve([...tools.values()]);
  context.executeTool = async (tool, input, options = {}) => {
    const registered = tools.get(tool.name);
    if (registered !== tool) throw new DOMException('no such tool', 'NotFoundError');
    const controller = new AbortController();
    if (options.signal && options.signal.aborted) controller.abort();
    if (options.signal) options.signal.addEventListener('abort', () => controller.abort());
    return JSON.stringify(await registered.execute(input, { signal: controller.signal }));
  };
  return context;
"#;

/// The value of `source`, a JS function body.
fn js(source: &str) -> JsValue {
    Function::new_no_args(source).call0(&JsValue::NULL).unwrap()
}

/// `object[key]` as text, if it is text.
fn text(object: &JsValue, key: &str) -> Option<String> {
    Reflect::get(object, &key.into()).unwrap().as_string()
}

/// An options object `{signal}` for `abort`.
fn signal_of(abort: &web_sys::AbortController) -> Object {
    let options = Object::new();
    Reflect::set(&options, &"signal".into(), &abort.signal()).unwrap();
    options
}

/// The stand-in, installed on `holder` (`document`, or the older `navigator`) for the
/// life of the guard.
struct StandIn {
    holder: JsValue,
    context: Object,
}

impl StandIn {
    fn on(holder: JsValue) -> Self {
        let context: Object = js(STAND_IN).unchecked_into();
        let descriptor = Object::new();
        Reflect::set(&descriptor, &"value".into(), &context).unwrap();
        Reflect::set(&descriptor, &"configurable".into(), &true.into()).unwrap();
        let target: &Object = holder.unchecked_ref();
        Object::define_property(target, &JsValue::from("modelContext"), &descriptor);
        Self { holder, context }
    }

    fn on_document() -> Self {
        Self::on(web_sys::window().unwrap().document().unwrap().into())
    }

    fn call(&self, method: &str, args: &[JsValue]) -> Promise {
        let f: Function = Reflect::get(&self.context, &method.into())
            .unwrap()
            .unchecked_into();
        f.apply(&self.context, &args.iter().collect::<Array>())
            .unwrap()
            .unchecked_into()
    }

    async fn tools(&self) -> Vec<Object> {
        let listed = JsFuture::from(self.call("getTools", &[])).await.unwrap();
        Array::from(&listed)
            .iter()
            .map(|t| t.unchecked_into())
            .collect()
    }

    async fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tools()
            .await
            .iter()
            .map(|t| text(t, "name").unwrap())
            .collect();
        names.sort();
        names
    }

    /// The registered tool named `name`, if any.
    async fn tool(&self, name: &str) -> Option<Object> {
        self.tools()
            .await
            .into_iter()
            .find(|t| text(t, "name").as_deref() == Some(name))
    }

    /// Starts `executeTool(name, input)`; `abort` aborts its execution signal.
    async fn execute(&self, name: &str, input: JsValue) -> (Promise, web_sys::AbortController) {
        let abort = web_sys::AbortController::new().unwrap();
        (self.execute_with(name, input, &abort).await, abort)
    }

    /// Starts `executeTool(name, input)` with `abort`'s signal.
    async fn execute_with(
        &self,
        name: &str,
        input: JsValue,
        abort: &web_sys::AbortController,
    ) -> Promise {
        let tool = self
            .tool(name)
            .await
            .unwrap_or_else(|| panic!("no tool {name}"));
        self.call(
            "executeTool",
            &[tool.into(), input, signal_of(abort).into()],
        )
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let target: &Object = self.holder.unchecked_ref();
        let _ = Reflect::delete_property(target, &JsValue::from("modelContext"));
    }
}

/// Long enough for a person to have read a card an agent's call just put on screen.
async fn looked() {
    TimeoutFuture::new(750).await;
}

fn input(json: &str) -> JsValue {
    JSON::parse(json).unwrap()
}

/// What the agent got back, as JSON.
async fn answer(promise: Promise) -> serde_json::Value {
    let text = JsFuture::from(promise).await.unwrap().as_string().unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Waits until `names` of the stand-in equal `want` (the export polls availability).
async fn names_become(stand_in: &StandIn, want: &[&str]) {
    for _ in 0..40 {
        if stand_in.names().await == want {
            return;
        }
        gloo_timers::future::TimeoutFuture::new(50).await;
    }
    assert_eq!(stand_in.names().await, want);
}

const ALL: [&str; 13] = [
    "archive",
    "delete",
    "note",
    "pick",
    "publish",
    "purge",
    "read_page_state",
    "rename",
    "rewrite",
    "save",
    "shaped",
    "tagged",
    "temp",
];

#[wasm_bindgen_test]
async fn without_webmcp_the_export_is_nothing() {
    let document = web_sys::window().unwrap().document().unwrap();
    assert!(!Reflect::has(&document, &"modelContext".into()).unwrap());
    let page = mount(Setup::default());
    tick().await;
    // The page works as ever: a call through the gate, a card for a write.
    let settled = page.call("note", r#"{"name":"a"}"#).await;
    assert_eq!(code(&settled), "OK");
    let pending = page.call("save", r#"{"name":"b"}"#);
    tick().await;
    assert!(page.q(".cs-card").is_some());
    assert!(
        page.q(".cs-caller").is_none(),
        "the assistant's card names no agent"
    );
    page.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
}

#[wasm_bindgen_test]
async fn the_actions_are_tools_that_follow_the_page() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let mut all = ALL.to_vec();
    all.push("toggled");
    all.sort_unstable();
    assert_eq!(stand_in.names().await, all);
    let save = stand_in.tool("save").await.unwrap();
    let schema = JSON::stringify(&Reflect::get(&save, &"inputSchema".into()).unwrap())
        .unwrap()
        .as_string()
        .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(schema["properties"]["name"]["type"], "string", "{schema}");
    let mut hints = Vec::new();
    for name in ["read_page_state", "save", "archive"] {
        let tool = stand_in.tool(name).await.unwrap();
        let annotations = Reflect::get(&tool, &"annotations".into()).unwrap();
        hints.push(
            Reflect::get(&annotations, &"readOnlyHint".into())
                .unwrap()
                .as_bool(),
        );
    }
    assert_eq!(hints, [Some(true), Some(false), Some(false)]);
    // Unmounting an action takes its tool away; an unavailable one goes and comes back.
    page.signals.temp_mounted.set(false);
    tick().await;
    all.retain(|n| *n != "temp");
    assert_eq!(stand_in.names().await, all);
    page.signals.enabled.set(false);
    let without: Vec<&str> = all.iter().copied().filter(|n| *n != "toggled").collect();
    names_become(&stand_in, &without).await;
    page.signals.enabled.set(true);
    names_become(&stand_in, &all).await;
    // The page going away takes every tool with it.
    drop(page);
    tick().await;
    assert!(stand_in.names().await.is_empty());
}

#[wasm_bindgen_test]
async fn an_agents_call_is_decided_by_the_person_on_the_card() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let (pending, _) = stand_in
        .execute("save", input(r#"{"name":"Apollo"}"#))
        .await;
    tick().await;
    assert!(page.runs().is_empty(), "ran before approval");
    assert!(page.text(".cs-card .cs-caller").contains("WebMCP"));
    // A click the moment an agent's card appears decides nothing (it may have been
    // meant for what was there before); a moment later it does.
    page.click(".cs-allow-once");
    tick().await;
    assert!(page.runs().is_empty(), "allowed the moment it appeared");
    looked().await;
    page.click(".cs-allow-once");
    let got = answer(pending).await;
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["receipt"]["action"], "save");
    assert_eq!(page.runs(), ["save:Apollo"]);
    // A write the page's assistant may do unasked is asked when an agent wants it.
    let (pending, _) = stand_in.execute("note", input(r#"{"name":"n"}"#)).await;
    tick().await;
    assert!(page.q(".cs-card").is_some(), "an agent's write ran unasked");
    page.click(".cs-deny");
    let got = answer(pending).await;
    assert_eq!(got["error"]["code"], "PERMISSION_DENIED", "{got}");
    // A read runs at once.
    let (pending, _) = stand_in.execute("read_page_state", input("{}")).await;
    let got = answer(pending).await;
    assert_eq!(got["ok"], true, "{got}");
    tick().await;
    // The list of what ran unasked says a browser agent asked for it.
    assert!(
        page.text(".cs-activity[data-action=read_page_state] .cs-activity-caller")
            .contains("browser agent"),
        "{}",
        page.text(".cs-activity")
    );
    assert_eq!(page.runs(), ["save:Apollo"]);
    assert_eq!(page.terminal_records(), 3);
    // "Always allow" on an agent's card trusts that agent only, and says so.
    let (pending, _) = stand_in.execute("save", input(r#"{"name":"Zeus"}"#)).await;
    looked().await;
    page.click(".cs-allow-session");
    assert_eq!(answer(pending).await["ok"], true);
    tick().await;
    assert!(
        page.text(".cs-grant__rule").contains("browser agent only"),
        "{}",
        page.text(".cs-grant__rule")
    );
    let (pending, _) = stand_in.execute("save", input(r#"{"name":"Hera"}"#)).await;
    assert_eq!(
        answer(pending).await["ok"],
        true,
        "the agent's grant did not cover it"
    );
    let own = page.call("save", r#"{"name":"Own"}"#);
    tick().await;
    assert!(
        page.q(".cs-card").is_some(),
        "the agent's grant covered the assistant"
    );
    page.click(".cs-deny");
    assert_eq!(code(&own.await), "PERMISSION_DENIED");
    assert_eq!(page.runs(), ["save:Apollo", "save:Zeus", "save:Hera"]);
    // The records name who asked.
    let records = page.cs.audit().records();
    let by = |caller| {
        records
            .iter()
            .filter(|r| r.is_terminal() && r.caller == caller)
            .count()
    };
    assert_eq!(by(countersign::Caller::WebMcp), 5);
    assert_eq!(by(countersign::Caller::Assistant), 1);
}

#[wasm_bindgen_test]
async fn an_agent_that_aborts_withdraws_its_waiting_call() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let (pending, abort) = stand_in.execute("save", input(r#"{"name":"Gone"}"#)).await;
    tick().await;
    assert!(page.q(".cs-card").is_some());
    abort.abort();
    let got = answer(pending).await;
    tick().await;
    assert_eq!(got["error"]["code"], "CANCELLED", "{got}");
    assert!(page.q(".cs-card").is_none(), "the withdrawn card stayed");
    assert!(page.runs().is_empty());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn an_agents_call_nobody_answers_times_out() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup {
        approval_timeout: Some(Duration::from_millis(300)),
        ..Setup::default()
    });
    tick().await;
    let (pending, _) = stand_in.execute("save", input(r#"{"name":"Late"}"#)).await;
    let got = answer(pending).await;
    tick().await;
    assert_eq!(got["error"]["code"], "APPROVAL_TIMEOUT", "{got}");
    assert!(page.q(".cs-card").is_none());
    assert!(page.runs().is_empty());
    assert_eq!(page.terminal_records(), 1);
}

#[wasm_bindgen_test]
async fn hostile_input_from_an_agent_raises_no_card() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    for json in [
        r#"{"name":5}"#,
        r#"{"name":"x","approved":true}"#,
        r#"{"name":"x","ticket":{"gesture":"allow_once"}}"#,
        r#"[1,2]"#,
        r#""text""#,
        "{}",
    ] {
        let (pending, _) = stand_in.execute("save", input(json)).await;
        let got = answer(pending).await;
        assert_eq!(got["error"]["code"], "INVALID_ARGS", "{json}: {got}");
    }
    // What JSON cannot carry never reaches the gate, nor does text over the limit
    // (refused before it is copied into the page's memory).
    for source in [
        "const o = {name: 'loop'}; o.self = o; return o;",
        "return {name: 'x'.repeat(5000000)};",
        "return {name: 10n};",
    ] {
        let (pending, _) = stand_in.execute("save", js(source)).await;
        let got = answer(pending).await;
        assert_eq!(got["error"]["code"], "INVALID_ARGS", "{source}: {got}");
        if source.contains("repeat") {
            assert!(
                got["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("over the limit"),
                "{got}"
            );
        }
    }
    tick().await;
    assert!(page.q(".cs-card").is_none(), "hostile input raised a card");
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn the_export_can_be_turned_off_for_the_page_or_kept_from_one_action() {
    let stand_in = StandIn::on(web_sys::window().unwrap().navigator().into());
    // The older `navigator.modelContext` is found too.
    let runs: Runs = Arc::default();
    let kept = Arc::clone(&runs);
    let mounted = countersign_testing::mount(
        CountersignOptions {
            trust_script_clicks: true,
            countersign_endpoint: None,
            ..CountersignOptions::default()
        },
        move || {
            use_action(logging("open", Kind::Write, Confirm::Ask, &kept));
            use_action(
                logging("private", Kind::Write, Confirm::Ask, &kept)
                    .only_for([countersign::Caller::Assistant]),
            );
            view! { <p>"page"</p> <AgentDock /> }
        },
    );
    tick().await;
    assert_eq!(stand_in.names().await, ["open", "read_page_state"]);
    // The page's assistant still has it.
    let pending = mounted.call("private", r#"{"name":"p"}"#);
    tick().await;
    mounted.click(".cs-allow-once");
    assert_eq!(code(&pending.await), "OK");
    drop(mounted);
    tick().await;
    let off = countersign_testing::mount(
        CountersignOptions {
            countersign_endpoint: None,
            webmcp: false,
            ..CountersignOptions::default()
        },
        move || {
            use_action(logging("open", Kind::Write, Confirm::Ask, &runs));
            view! { <p>"page"</p> }
        },
    );
    tick().await;
    assert!(
        stand_in.names().await.is_empty(),
        "exported while turned off"
    );
    drop(off);
}

#[wasm_bindgen_test]
async fn an_agents_call_brought_back_after_a_reload_is_still_the_agents() {
    let stand_in = StandIn::on_document();
    let key = "webmcp-reload";
    let page = mount(kept(key));
    tick().await;
    let (_pending, _) = stand_in.execute("save", input(r#"{"name":"Kept"}"#)).await;
    tick().await;
    assert!(page.q(".cs-card .cs-caller").is_some());
    reload(page);
    let page = mount(kept(key));
    restored().await;
    tick().await;
    let cards = page.cs.executor().approvals();
    assert_eq!(cards.len(), 1, "the agent's card came back");
    assert_eq!(cards[0].caller, countersign::Caller::WebMcp);
    assert!(page.text(".cs-card .cs-caller").contains("WebMCP"));
    page.click(".cs-deny");
    tick().await;
    let records = page.cs.audit().records();
    assert!(!records.is_empty());
    assert!(
        records
            .iter()
            .all(|r| r.caller == countersign::Caller::WebMcp),
        "{records:?}"
    );
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn a_withdrawn_card_holds_decisions_back_for_a_moment() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let (first, abort) = stand_in.execute("save", input(r#"{"name":"Draft"}"#)).await;
    let (second, _) = stand_in
        .execute("rename", input(r#"{"name":"Evil"}"#))
        .await;
    tick().await;
    assert_eq!(page.text(".cs-card__title"), "Title save");
    // The agent withdraws the card the person is about to allow: the click that was
    // meant for it lands on the next card, and decides nothing.
    abort.abort();
    assert_eq!(answer(first).await["error"]["code"], "CANCELLED");
    tick().await;
    assert_eq!(page.text(".cs-card__title"), "Title rename");
    page.click(".cs-allow-once");
    tick().await;
    assert!(
        page.runs().is_empty(),
        "a click right after the swap approved"
    );
    assert!(page.text(".cs-log").contains("withdrew a request just now"));
    TimeoutFuture::new(800).await;
    page.click(".cs-allow-once");
    assert_eq!(answer(second).await["ok"], true);
    assert_eq!(page.runs(), ["rename:Evil"]);
}

#[wasm_bindgen_test]
async fn an_agent_that_aborted_before_calling_raises_no_card() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    // Abort first, then execute with the aborted signal.
    let abort = web_sys::AbortController::new().unwrap();
    abort.abort();
    let pending = stand_in
        .execute_with("save", input(r#"{"name":"Never"}"#), &abort)
        .await;
    let got = answer(pending).await;
    tick().await;
    assert_eq!(got["error"]["code"], "CANCELLED", "{got}");
    assert!(page.q(".cs-card").is_none());
    assert_eq!(page.terminal_records(), 0, "it never reached the gate");
}

#[wasm_bindgen_test]
async fn an_agent_may_keep_only_three_calls_waiting() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let mut waiting = Vec::new();
    for n in 0..3 {
        waiting.push(
            stand_in
                .execute("save", input(&format!(r#"{{"name":"n{n}"}}"#)))
                .await,
        );
    }
    let (fourth, _) = stand_in.execute("save", input(r#"{"name":"n3"}"#)).await;
    let got = answer(fourth).await;
    assert_eq!(got["error"]["code"], "UNAVAILABLE", "{got}");
    tick().await;
    assert_eq!(
        page.all(".cs-card")
            .len()
            .max(page.cs.executor().approvals().len()),
        3
    );
    // The page's own assistant still gets its card.
    let own = page.call("save", r#"{"name":"own"}"#);
    tick().await;
    assert_eq!(page.cs.executor().approvals().len(), 4);
    for (_, abort) in &waiting {
        abort.abort();
    }
    TimeoutFuture::new(800).await;
    page.click(".cs-deny");
    assert_eq!(code(&own.await), "PERMISSION_DENIED");
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn an_agents_question_says_who_asks() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let (pending, _) = stand_in.execute("pick", input("{}")).await;
    tick().await;
    let heading = page.text(".cs-question .cs-card__count");
    assert!(!heading.contains("The assistant"), "{heading}");
    assert!(page.text(".cs-question .cs-caller").contains("WebMCP"));
    page.click(".cs-decline-question");
    let got = answer(pending).await;
    assert_eq!(got["error"]["code"], "QUESTION_DECLINED", "{got}");
}

#[wasm_bindgen_test]
async fn a_name_another_script_holds_is_registered_once_it_is_free() {
    let stand_in = StandIn::on_document();
    // Another script holds `save` first.
    let other = web_sys::AbortController::new().unwrap();
    let theirs = Object::new();
    Reflect::set(&theirs, &"name".into(), &"save".into()).unwrap();
    Reflect::set(&theirs, &"description".into(), &"not the page's".into()).unwrap();
    let noop = Function::new_no_args("return 'theirs';");
    Reflect::set(&theirs, &"execute".into(), &noop).unwrap();
    let _ = stand_in.call("registerTool", &[theirs.into(), signal_of(&other).into()]);
    let page = mount(Setup::default());
    tick().await;
    let description = |tool: Option<Object>| tool.and_then(|t| text(&t, "description"));
    assert_eq!(
        description(stand_in.tool("save").await).as_deref(),
        Some("not the page's")
    );
    other.abort();
    for _ in 0..30 {
        if description(stand_in.tool("save").await).is_some_and(|d| d.contains("Test action save"))
        {
            break;
        }
        TimeoutFuture::new(50).await;
    }
    assert!(
        description(stand_in.tool("save").await).is_some_and(|d| d.contains("Test action save"))
    );
    drop(page);
}

#[wasm_bindgen_test]
async fn a_double_click_allows_nothing_and_deny_is_never_held_back() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    let (pending, abort) = stand_in.execute("save", input(r#"{"name":"Twice"}"#)).await;
    looked().await;
    // The second click of a double click (detail 2) decides nothing.
    let twice = web_sys::MouseEventInit::new();
    twice.set_detail(2);
    twice.set_bubbles(true);
    let event = web_sys::MouseEvent::new_with_mouse_event_init_dict("click", &twice).unwrap();
    page.q(".cs-allow-once")
        .unwrap()
        .dispatch_event(&event)
        .unwrap();
    tick().await;
    assert!(
        page.runs().is_empty(),
        "a double click's second click allowed"
    );
    // Deny works at once, even right after an agent's card appeared.
    abort.abort();
    assert_eq!(answer(pending).await["error"]["code"], "CANCELLED");
    let (pending, _) = stand_in.execute("save", input(r#"{"name":"No"}"#)).await;
    tick().await;
    page.click(".cs-deny");
    assert_eq!(answer(pending).await["error"]["code"], "PERMISSION_DENIED");
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn withdrawing_a_card_nobody_saw_holds_nothing_back() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup::default());
    tick().await;
    // The assistant's card is on screen; the agent's waits behind it, unseen.
    let own = page.call("save", r#"{"name":"Mine"}"#);
    tick().await;
    let (hidden, abort) = stand_in
        .execute("rename", input(r#"{"name":"Hidden"}"#))
        .await;
    tick().await;
    abort.abort();
    assert_eq!(answer(hidden).await["error"]["code"], "CANCELLED");
    page.click(".cs-allow-once");
    assert_eq!(code(&own.await), "OK");
    assert_eq!(page.runs(), ["save:Mine"]);
}

#[wasm_bindgen_test]
async fn a_scripts_pagehide_settles_nothing() {
    let stand_in = StandIn::on_document();
    let page = mount(Setup {
        trust_script_clicks: false,
        ..Setup::default()
    });
    tick().await;
    let (_pending, _) = stand_in.execute("save", input(r#"{"name":"Stay"}"#)).await;
    tick().await;
    let hide = web_sys::Event::new("pagehide").unwrap();
    web_sys::window().unwrap().dispatch_event(&hide).unwrap();
    tick().await;
    assert_eq!(
        page.cs.executor().approvals().len(),
        1,
        "a script's pagehide settled the card"
    );
    assert_eq!(
        stand_in.names().await.len(),
        ALL.len() + 1,
        "a script's pagehide closed the export"
    );
}

#[wasm_bindgen_test]
async fn an_mcp_clients_grant_lasts_one_page_load() {
    let stored_key = "cs-test-mcp-grants:admin";
    let storage = web_sys::window().unwrap().local_storage().unwrap().unwrap();
    storage.remove_item(stored_key).unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let page = mount(Setup::default());
    page.cs.persist_grants("cs-test-mcp-grants", hour);
    let mcp = |id: &str, name: &str| {
        page.cs.call(
            countersign::Call::new(id, "save", format!(r#"{{"name":"{name}"}}"#))
                .by(countersign::Caller::Mcp),
        )
    };
    let first = mcp("mcp-1", "A");
    tick().await;
    looked().await;
    page.click(".cs-allow-session");
    assert_eq!(code(&first.await), "OK");
    // The grant holds in this page load...
    assert_eq!(code(&mcp("mcp-2", "B").await), "OK");
    assert_eq!(page.cs.executor().grants().len(), 1);
    tick().await;
    // ...but is not saved: a client that pairs with the next load starts with none.
    let stored = storage.get_item(stored_key).unwrap().unwrap_or_default();
    assert!(!stored.contains("\"save\""), "saved: {stored}");
    assert_eq!(page.runs(), ["save:A", "save:B"]);
}

#[wasm_bindgen_test]
async fn an_mcp_clients_call_does_not_come_back_after_a_reload() {
    let key = "mcp-reload";
    let page = mount(kept(key));
    tick().await;
    let _pending = page.cs.call(
        countersign::Call::new("mcp-kept", "save", r#"{"name":"Kept"}"#)
            .by(countersign::Caller::Mcp),
    );
    tick().await;
    assert!(page.q(".cs-card").is_some());
    reload(page);
    let page = mount(kept(key));
    restored().await;
    tick().await;
    // Its pairing ended with the page (the client was told): nobody waits for it.
    assert!(
        page.cs.executor().approvals().is_empty(),
        "an MCP call came back"
    );
    assert!(page.q(".cs-card").is_none());
    let records = page.cs.audit().records();
    assert!(
        records.iter().any(|r| r.reason
            == countersign::Reason::NotRestored {
                handoff: false,
                why: countersign::reason::RestoreMiss::CallerGone
            }),
        "{records:?}"
    );
    assert!(page.runs().is_empty());
    session_storage().clear().unwrap();
}

#[wasm_bindgen_test]
async fn agents_wait_while_the_pages_audit_is_not_reaching_the_gateway() {
    let stand_in = StandIn::on_document();
    super::long_session::gateway_stand_in();
    super::long_session::set_mode("away");
    let runs: Runs = Arc::default();
    let kept = Arc::clone(&runs);
    let mounted = countersign_testing::mount(
        CountersignOptions {
            trust_script_clicks: true,
            countersign_endpoint: None,
            mcp_relay: None,
            audit_capacity: Some(64),
            ..CountersignOptions::default()
        },
        move || {
            use_action(logging("open", Kind::Read, Confirm::Unset, &kept));
            view! { <p>"page"</p> <AgentDock /> }
        },
    );
    tick().await;
    mounted.cs.ship_audit("/long-audit");
    // While few records wait, an agent's calls go through (two records each).
    let mut through = 0;
    loop {
        let (pending, _abort) = stand_in.execute("open", input(r#"{"name":"a"}"#)).await;
        let got = answer(pending).await;
        if got["ok"] != true {
            // Half the trail waits for the gateway: refused before the gate, with why.
            assert_eq!(got["error"]["code"], "UNAVAILABLE", "{got}");
            assert!(
                got.to_string().contains("not reaching the gateway"),
                "{got}"
            );
            break;
        }
        through += 1;
        assert!(through <= 32, "never held back");
    }
    assert_eq!(through, 16, "32 records wait: half of 64");
    assert_eq!(runs.lock().unwrap().len(), 16, "the refused call never ran");
    // Nothing of the refused call is in the trail: it was never the gate's.
    assert_eq!(mounted.cs.audit().len(), 32);
    // The page's own assistant is not held back (a person is there to see it).
    assert_eq!(code(&mounted.call("open", r#"{"name":"p"}"#).await), "OK");
    // The gateway back: once the records are acknowledged, agents are heard again.
    super::long_session::set_mode("up");
    super::long_session::caught_up(&mounted).await;
    let (pending, _abort) = stand_in.execute("open", input(r#"{"name":"b"}"#)).await;
    assert_eq!(answer(pending).await["ok"], true);
}
