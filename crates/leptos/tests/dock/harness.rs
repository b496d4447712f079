//! What the dock's tests share: the test page (`Settings`, an action for each way a call
//! is decided), mounting it as a [`Setup`] says, and the helpers that drive the browser,
//! stand in for the model's gateway and wait. `countersign-testing` underneath mounts,
//! finds, clicks and types.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::{action::NoParams, Action, Confirm, Expect, Handoff, Kind, Session};
use countersign_leptos::{
    use_action, use_action_with_options, use_page_state, use_target, AgentDock, Assistant,
    CountersignOptions, Locale, Rule, Scripted, UseActionOptions, HIGHLIGHT_CLASS,
};
use countersign_testing::{tick, Mounted};
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use wasm_bindgen::JsCast;

use super::long_session;

// ---------------------------------------------------------------------------------
// The test page: its params, its actions, and what the tests change under them.
// ---------------------------------------------------------------------------------

#[derive(Clone, Deserialize, JsonSchema)]
pub(crate) struct Named {
    /// A name.
    name: String,
}

pub(crate) type Runs = Arc<Mutex<Vec<String>>>;

#[derive(Clone, Copy, Deserialize, JsonSchema, serde::Serialize, PartialEq, Debug)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Colour {
    Red,
    Blue,
}

/// Params with every kind of field the edit form expresses.
#[derive(Clone, Deserialize, JsonSchema, serde::Serialize)]
pub(crate) struct Shaped {
    /// A name.
    name: String,
    /// How many.
    count: u32,
    /// Whether it is public.
    public: bool,
    /// Its colour.
    colour: Colour,
    /// An optional note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// An optional switch: left out means "keep", never "off".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    flag: Option<bool>,
}

/// A question's answer.
#[derive(Clone, Deserialize, JsonSchema, serde::Serialize)]
pub(crate) struct Picked {
    /// The colour you want.
    colour: Colour,
    /// How many (at least one).
    count: u32,
}

/// Params the form cannot express (a list): edited as JSON.
#[derive(Clone, Deserialize, JsonSchema, serde::Serialize)]
pub(crate) struct Tagged {
    /// Tags.
    tags: Vec<String>,
}

pub(crate) fn recording<P>(id: &str, runs: &Runs) -> Action<P>
where
    P: serde::de::DeserializeOwned + JsonSchema + serde::Serialize + Clone + 'static,
{
    let runs = Arc::clone(runs);
    let tag = id.to_owned();
    Action::<P>::new(id, format!("Test action {id}."))
        .title(format!("Title {id}"))
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(move |p: P| {
            let runs = Arc::clone(&runs);
            let tag = tag.clone();
            async move {
                let args = serde_json::to_string(&p).unwrap();
                runs.lock().unwrap().push(format!("{tag}:{args}"));
                Ok::<_, String>(serde_json::json!({}))
            }
        })
}

pub(crate) fn logging(id: &str, kind: Kind, confirm: Confirm, runs: &Runs) -> Action<Named> {
    let runs = Arc::clone(runs);
    let tag = id.to_owned();
    Action::<Named>::new(id, format!("Test action {id}."))
        .title(format!("Title {id}"))
        .kind(kind)
        .confirm(confirm)
        .consequence(|p| format!("set the name to `{}`", p.name))
        .run(move |p: Named| {
            let runs = Arc::clone(&runs);
            let tag = tag.clone();
            async move {
                runs.lock().unwrap().push(format!("{tag}:{}", p.name));
                Ok::<_, String>(serde_json::json!({ "name": p.name }))
            }
        })
}

#[derive(Clone, Copy)]
pub(crate) struct PageSignals {
    pub(crate) rows: RwSignal<u32>,
    pub(crate) code: RwSignal<String>,
    pub(crate) published: RwSignal<bool>,
    pub(crate) temp_mounted: RwSignal<bool>,
    pub(crate) enabled: RwSignal<bool>,
}

impl PageSignals {
    pub(crate) fn new() -> Self {
        Self {
            rows: RwSignal::new(1),
            code: RwSignal::new(String::new()),
            published: RwSignal::new(false),
            temp_mounted: RwSignal::new(true),
            enabled: RwSignal::new(true),
        }
    }
}

#[component]
fn Temp(runs: Runs) -> impl IntoView {
    use_action(logging("temp", Kind::Danger, Confirm::Unset, &runs));
    view! { <p>"temporary"</p> }
}

#[component]
fn Settings(runs: Runs, signals: PageSignals, timeout: Duration) -> impl IntoView {
    use_action(logging("note", Kind::Write, Confirm::Unset, &runs));
    use_action(logging("save", Kind::Write, Confirm::Ask, &runs));
    use_action(recording::<Shaped>("shaped", &runs));
    use_action(
        Action::<NoParams>::new("pick", "Ask the person which colour and how many.")
            .title("Pick a colour")
            .question(countersign::Question::checked::<Picked>(
                "Which colour, and how many?",
                |p| {
                    if p.count == 0 {
                        Err("pick at least one".into())
                    } else {
                        Ok(())
                    }
                },
            )),
    );
    use_action(recording::<Tagged>("tagged", &runs));
    use_action(
        logging("rename", Kind::Write, Confirm::Ask, &runs).validate(|p| {
            if p.name.trim().is_empty() {
                Err("the name cannot be empty".into())
            } else {
                Ok(())
            }
        }),
    );
    use_action(logging("archive", Kind::Danger, Confirm::Ask, &runs));
    use_action(
        logging("rewrite", Kind::Write, Confirm::Ask, &runs).preview(|p| {
            countersign::text::Preview::of_text("title: Atlas", &format!("title: {}", p.name))
                .count(format!("files touched in {}", p.name), 1)
        }),
    );
    use_action(
        logging("delete", Kind::Danger, Confirm::Unset, &runs)
            .confirm_twice(|p| format!("Really delete `{}`?", p.name)),
    );
    let rows = signals.rows;
    use_action(
        logging("purge", Kind::Danger, Confirm::Unset, &runs)
            .consequence(move |_| format!("delete {} rows", rows.get_untracked())),
    );
    let enabled = signals.enabled;
    use_action(
        logging("toggled", Kind::Write, Confirm::Unset, &runs)
            .available(move || enabled.get_untracked()),
    );
    let published = signals.published;
    use_action_with_options(
        Action::<NoParams>::new("publish", "Publish.")
            .title("Publish changes")
            .kind(Kind::Danger)
            .handoff(
                Handoff::new(
                    "Only you can enter the code.",
                    Expect::new("the page shows published", move || {
                        published.get_untracked()
                    }),
                )
                .step("Type the verification code", Some("verification_code"))
                .step("Press Publish", Some("publish_button"))
                .timeout(timeout),
            ),
        UseActionOptions::default().target("publish_button"),
    );
    use_page_state("published", move || published.get_untracked());
    let code_ref = use_target::<leptos::html::Input>("verification_code");
    let button_ref = use_target::<leptos::html::Button>("publish_button");
    let code = signals.code;
    let temp = signals.temp_mounted;
    view! {
        <input id="code" node_ref=code_ref prop:value=move || code.get() on:input=move |ev| code.set(event_target_value(&ev)) />
        <button id="publish" node_ref=button_ref on:click=move |_| {
            if code.get_untracked() == "246810" { published.set(true); }
        }>"Publish"</button>
        <p id="status">{move || if published.get() { "published" } else { "draft" }}</p>
        <Show when=move || temp.get()><Temp runs=runs.clone() /></Show>
    }
}

// ---------------------------------------------------------------------------------
// Mounting it.
// ---------------------------------------------------------------------------------

/// A mounted test page: the shared harness (`countersign-testing`) plus this suite's
/// run log and page signals.
pub(crate) struct Page {
    pub(crate) mounted: Mounted,
    pub(crate) runs: Runs,
    pub(crate) signals: PageSignals,
}

impl std::ops::Deref for Page {
    type Target = Mounted;
    fn deref(&self) -> &Mounted {
        &self.mounted
    }
}

impl Page {
    pub(crate) fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }

    pub(crate) fn highlighted(&self) -> Vec<String> {
        self.all(&format!(".{HIGHLIGHT_CLASS}"))
            .iter()
            .map(|e| e.id())
            .collect()
    }

    /// The text of the assistant's last message.
    pub(crate) fn last_answer(&self) -> String {
        self.all(".cs-msg--assistant")
            .last()
            .unwrap()
            .text_content()
            .unwrap()
    }
}

#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) locale: Locale,
    pub(crate) handoff_timeout: Duration,
    pub(crate) assistant: bool,
    pub(crate) approval_timeout: Option<Duration>,
    pub(crate) keep_pending: Option<String>,
    /// Script clicks count as a person's (these tests click with `element.click()`).
    pub(crate) trust_script_clicks: bool,
    /// The MCP relay's URL (a stand-in WebSocket answers it), if any.
    pub(crate) mcp_relay: Option<String>,
    /// The most audit records the page holds unshipped (the default if `None`).
    pub(crate) audit_capacity: Option<usize>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            locale: Locale::En,
            handoff_timeout: Duration::from_secs(60),
            assistant: false,
            approval_timeout: None,
            keep_pending: None,
            trust_script_clicks: true,
            mcp_relay: None,
            audit_capacity: None,
        }
    }
}

impl Setup {
    /// As deployed: a script's clicks and typing are no person's.
    pub(crate) fn untrusted_clicks() -> Self {
        Self {
            trust_script_clicks: false,
            ..Self::default()
        }
    }
}

/// A page with the offline assistant whose waiting calls and conversation are kept
/// under `key` for the next page load.
pub(crate) fn kept(key: &str) -> Setup {
    Setup {
        assistant: true,
        keep_pending: Some(key.to_owned()),
        ..Setup::default()
    }
}

/// The options a [`Setup`] stands for.
fn options(setup: &Setup) -> CountersignOptions {
    CountersignOptions {
        session: Session::new("admin", Vec::<String>::new()),
        locale: Some(setup.locale),
        approval_timeout: setup.approval_timeout,
        keep_pending: setup.keep_pending.clone(),
        trust_script_clicks: setup.trust_script_clicks,
        countersign_endpoint: None,
        webmcp: true,
        agents_need_passkey: false,
        mcp_relay: setup.mcp_relay.clone(),
        audit_capacity: setup.audit_capacity,
    }
}

/// The test page as `setup` says, its dock with the offline assistant if it asks for one.
pub(crate) fn mount(setup: Setup) -> Page {
    let options = options(&setup);
    let resume = setup.keep_pending.is_some();
    mount_settings(options, setup.handoff_timeout, move || {
        let assistant = setup.assistant.then(|| {
            Assistant::new(
                Scripted::new(
                    setup.locale,
                    vec![
                        Rule::new("save", serde_json::json!({"name": "{name}"}))
                            .phrase("rename to {name}")
                            .phrase("重命名为{name}"),
                        Rule::new("archive", serde_json::json!({"name": "w"}))
                            .phrase("archive")
                            .phrase("归档"),
                    ],
                )
                .expect("phrases the offline assistant can match"),
            )
        });
        if let (Some(a), true) = (&assistant, resume) {
            a.resume(&countersign_leptos::use_countersign().unwrap());
        }
        assistant
    })
}

/// A page whose assistant is the real `OpenAiCompatible` client (falling back to the
/// scripted one only when the gateway is unreachable), speaking to the fake fetch;
/// `for_page` makes it as [`Assistant::for_page`] does (with the way back online).
pub(crate) fn mount_online(cap: Option<usize>) -> Page {
    mount_with_model(cap, false)
}

/// The settings page and the dock, its assistant on `client` (offline when it fails).
pub(crate) fn mount_with_client(client: countersign_leptos::OpenAiCompatible) -> Page {
    let options = options(&Setup::default());
    mount_settings(options, Duration::from_secs(60), move || {
        let offline =
            Scripted::new(Locale::En, Vec::new()).expect("phrases the offline assistant can match");
        Some(Assistant::new(countersign_leptos::Fallback::new(
            client, offline, false,
        )))
    })
}

pub(crate) fn mount_with_model(cap: Option<usize>, for_page: bool) -> Page {
    let options = options(&Setup::default());
    mount_settings(options, Duration::from_secs(60), move || {
        let mut client = countersign_leptos::OpenAiCompatible::default();
        if let Some(cap) = cap {
            client = client.max_request_bytes(cap);
        }
        let offline =
            Scripted::new(Locale::En, Vec::new()).expect("phrases the offline assistant can match");
        let assistant = if for_page {
            Assistant::for_page(&countersign_leptos::use_countersign().unwrap(), offline)
        } else {
            Assistant::new(countersign_leptos::Fallback::new(client, offline, false))
        };
        Some(assistant)
    })
}

/// `Settings` and the dock, whose assistant (if any) `assistant` makes under the page's
/// provider before the page is drawn.
fn mount_settings(
    options: CountersignOptions,
    timeout: Duration,
    assistant: impl FnOnce() -> Option<Assistant> + 'static,
) -> Page {
    let runs: Runs = Arc::default();
    let signals = PageSignals::new();
    let page_runs = Arc::clone(&runs);
    let mounted = countersign_testing::mount(options, move || {
        let assistant = assistant();
        view! {
            <main><Settings runs=page_runs.clone() signals=signals timeout=timeout /></main>
            {match assistant {
                Some(a) => view! { <AgentDock assistant=a /> }.into_any(),
                None => view! { <AgentDock /> }.into_any(),
            }}
        }
    });
    Page {
        mounted,
        runs,
        signals,
    }
}

/// A page whose audit goes to the stand-in, holding at most `capacity` records.
pub(crate) fn small_trail_page(capacity: usize) -> countersign_testing::Mounted {
    long_session::gateway_stand_in();
    let options = long_session::quiet_options(Some(capacity));
    countersign_testing::mount(options, || view! { <AgentDock /> })
}

// ---------------------------------------------------------------------------------
// Driving the page and the browser.
// ---------------------------------------------------------------------------------

pub(crate) fn input_value(page: &Page, selector: &str) -> String {
    page.q(selector)
        .map(|e| e.unchecked_into::<web_sys::HtmlInputElement>().value())
        .unwrap_or_default()
}

pub(crate) fn disabled(page: &Page, selector: &str) -> bool {
    page.q(selector)
        .is_some_and(|e| e.has_attribute("disabled"))
}

pub(crate) fn set_select(page: &Page, selector: &str, value: &str) {
    let select: web_sys::HtmlSelectElement = page.q(selector).unwrap().unchecked_into();
    select.set_value(value);
    select
        .dispatch_event(&web_sys::Event::new("change").unwrap())
        .unwrap();
}

/// A `keydown` of `key` dispatched on `element` (bubbling, as a browser's would).
pub(crate) fn press(element: &web_sys::Element, key: &str) {
    let init = web_sys::KeyboardEventInit::new();
    init.set_key(key);
    init.set_bubbles(true);
    let event =
        web_sys::KeyboardEvent::new_with_keyboard_event_init_dict("keydown", &init).unwrap();
    element.dispatch_event(&event).unwrap();
}

/// The person sends `text` in the chat.
pub(crate) async fn say(page: &Page, text: &str) {
    page.type_into(".cs-input", text);
    tick().await;
    page.click(".cs-send");
    tick().await;
}

/// `n` calls of an action the page does not have: each refused, each recorded.
pub(crate) async fn refusals(page: &countersign_testing::Mounted, tag: &str, n: usize) {
    for i in 0..n {
        let call = countersign::Call::new(format!("{tag}{i}"), "nope", "{}");
        let _ = page.cs.call(call).await;
    }
}

/// Runs `body`, a JS function body; its return value.
pub(crate) fn run_js(body: &str) -> wasm_bindgen::JsValue {
    js_sys::Function::new_no_args(body)
        .call0(&wasm_bindgen::JsValue::NULL)
        .unwrap()
}

/// The element that has the focus.
pub(crate) fn focused() -> web_sys::Element {
    document().active_element().unwrap()
}

pub(crate) fn local_storage() -> web_sys::Storage {
    web_sys::window().unwrap().local_storage().unwrap().unwrap()
}

pub(crate) fn session_storage() -> web_sys::Storage {
    web_sys::window()
        .unwrap()
        .session_storage()
        .unwrap()
        .unwrap()
}

/// The browser says the page is going away.
pub(crate) fn pagehide() {
    let hide = web_sys::Event::new("pagehide").unwrap();
    web_sys::window().unwrap().dispatch_event(&hide).unwrap();
}

/// The page goes away as a reload does: `pagehide`, then the old page is gone.
pub(crate) fn reload(page: Page) {
    pagehide();
    drop(page);
}

// ---------------------------------------------------------------------------------
// The model's gateway, stood in for.
// ---------------------------------------------------------------------------------

/// Replaces `window.fetch` with a stand-in answering from `answers` (each
/// `[status, body, retryAfter]`, or `"network"` for a failed request), recording each
/// request's URL and body in `window.__requests`. Returns a guard that puts fetch back.
pub(crate) struct FakeFetch(wasm_bindgen::JsValue);

impl FakeFetch {
    pub(crate) fn install(answers: &str) -> Self {
        let window = web_sys::window().unwrap();
        let original = js_sys::Reflect::get(&window, &"fetch".into()).unwrap();
        let install = js_sys::Function::new_with_args(
            "answers",
            "window.__answers = answers; window.__requests = [];
             window.fetch = (input, init) => {
               const url = typeof input === 'string' ? input : input.url;
               const body = input instanceof Request ? input.clone().text() : Promise.resolve(init && init.body);
               if (url.endsWith('/v1/health')) {
                 return Promise.resolve(new Response(JSON.stringify({ ok: true, model: true }), { status: 200 }));
               }
               if (url.endsWith('/v1/audit')) {
                 return body.then(text => new Response(JSON.stringify({ appended: JSON.parse(text).length, duplicates: 0 }), { status: 200 }));
               }
               const sent = input instanceof Request ? input.headers : new Headers(init && init.headers);
               return body.then(text => {
                 window.__requests.push({ url, body: text || '', traceparent: sent.get('traceparent') || '' });
                 const next = window.__answers.length > 1 ? window.__answers.shift() : window.__answers[0];
                 if (next === 'network') return Promise.reject(new TypeError('Failed to fetch'));
                 if (next.stream) {
                   const enc = new TextEncoder();
                   const body = new ReadableStream({
                     async start(c) {
                       for (const chunk of next.stream) {
                         c.enqueue(enc.encode(chunk));
                         await new Promise(r => setTimeout(r, next.delay || 0));
                       }
                       if (next.cut) c.error(new TypeError('network')); else c.close();
                     }
                   });
                   return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
                 }
                 const headers = next[2] ? { 'retry-after': String(next[2]) } : {};
                 return new Response(next[1], { status: next[0], headers });
               });
             };",
        );
        let parsed = js_sys::JSON::parse(answers).unwrap();
        install
            .call1(&wasm_bindgen::JsValue::NULL, &parsed)
            .unwrap();
        Self(original)
    }

    pub(crate) fn requests() -> Vec<(String, String)> {
        let window = web_sys::window().unwrap();
        let list = js_sys::Reflect::get(&window, &"__requests".into()).unwrap();
        js_sys::Array::from(&list)
            .iter()
            .map(|r| {
                let get = |k: &str| {
                    js_sys::Reflect::get(&r, &k.into())
                        .unwrap()
                        .as_string()
                        .unwrap_or_default()
                };
                (get("url"), get("body"))
            })
            .collect()
    }

    /// The `traceparent` header of each request, in order (empty when none).
    pub(crate) fn traceparents() -> Vec<String> {
        let window = web_sys::window().unwrap();
        let list = js_sys::Reflect::get(&window, &"__requests".into()).unwrap();
        js_sys::Array::from(&list)
            .iter()
            .map(|r| {
                js_sys::Reflect::get(&r, &"traceparent".into())
                    .unwrap()
                    .as_string()
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Drop for FakeFetch {
    fn drop(&mut self) {
        let window = web_sys::window().unwrap();
        js_sys::Reflect::set(&window, &"fetch".into(), &self.0).unwrap();
    }
}

pub(crate) fn completion_text(text: &str) -> String {
    serde_json::json!({"choices":[{"message":{"role":"assistant","content":text}}]}).to_string()
}

pub(crate) fn completion_call(name: &str, arguments: &str) -> String {
    serde_json::json!({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
        {"id":"c1","type":"function","function":{"name":name,"arguments":arguments}}]}}]})
    .to_string()
}

// ---------------------------------------------------------------------------------
// Waiting.
// ---------------------------------------------------------------------------------

/// Waits for the restore after mount (claims settle in 60 ms).
pub(crate) async fn restored() {
    TimeoutFuture::new(150).await;
}

/// Waits for the assistant's turn to end (5 s at most).
pub(crate) async fn idle(page: &Page) {
    for _ in 0..200 {
        if !page.cs.dock().working.get_untracked() {
            return;
        }
        TimeoutFuture::new(25).await;
    }
    panic!("the assistant never finished its turn");
}

/// Waits `every_ms` at a time while `waiting` holds; fails with `what` after `polls` waits.
pub(crate) async fn wait_while(
    what: &str,
    polls: u32,
    every_ms: u32,
    mut waiting: impl FnMut() -> bool,
) {
    let mut waited = 0;
    while waiting() {
        assert!(waited < polls, "{what}");
        TimeoutFuture::new(every_ms).await;
        waited += 1;
    }
}
