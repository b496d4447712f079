//! The page's side of the MCP relay against a stand-in `WebSocket` that speaks the
//! gateway's messages (the real gateway and the official MCP SDK are in the tutorial's
//! end-to-end suite). What is checked here is what the page must get right by itself:
//! the code on screen, the tools sent, a relayed call asked and answered, a cancel, and
//! after a dropped connection, nothing run twice and nothing the gateway forgot left up.

use countersign_testing::tick;
use gloo_timers::future::TimeoutFuture;
use js_sys::{Function, JSON};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

use super::harness::*;

const URL: &str = "ws://relay.test/v1/relay";

/// Installs the stand-in as `window.WebSocket` (the real one is put back on drop).
struct StandIn;

impl StandIn {
    fn install() -> Self {
        run(r#"
          window.__RealWebSocket = window.__RealWebSocket || window.WebSocket;
          window.__sockets = [];
          window.WebSocket = class {
            constructor(url) {
              this.url = url; this.readyState = 0; this.sent = [];
              window.__sockets.push(this);
              setTimeout(() => { this.readyState = 1; if (this.onopen) this.onopen(new Event('open')); }, 0);
            }
            send(text) { if (this.readyState !== 1) throw new Error('not open'); this.sent.push(text); }
            close(code) { this.readyState = 3; this.closedWith = code; }
          };
          window.WebSocket.OPEN = 1;
        "#);
        Self
    }

    /// How many sockets the page opened.
    fn opened(&self) -> usize {
        number("return window.__sockets.length;")
    }

    /// Delivers `message` on socket `n`, as the gateway would.
    fn deliver(&self, n: usize, message: serde_json::Value) {
        let script = format!(
            "const s = window.__sockets[{n}]; s.onmessage(new MessageEvent('message', {{ data: {} }}));",
            serde_json::Value::String(message.to_string())
        );
        run(&script);
    }

    /// Socket `n` drops (the network, or the gateway going away).
    fn drop_socket(&self, n: usize) {
        run(&format!(
            "const s = window.__sockets[{n}]; s.readyState = 3; s.onclose(new Event('close'));"
        ));
    }

    /// What the page sent on socket `n`.
    fn sent(&self, n: usize) -> Vec<serde_json::Value> {
        let text = JSON::stringify(&eval(&format!("return window.__sockets[{n}].sent;")))
            .unwrap()
            .as_string()
            .unwrap();
        serde_json::from_str::<Vec<String>>(&text)
            .unwrap()
            .iter()
            .map(|m| serde_json::from_str(m).unwrap())
            .collect()
    }

    /// The results the page sent on socket `n`, by call id.
    fn results(&self, n: usize) -> Vec<(String, serde_json::Value)> {
        self.sent(n)
            .into_iter()
            .filter(|m| m["type"] == "result")
            .map(|m| {
                let content = serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
                (m["id"].as_str().unwrap().to_owned(), content)
            })
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        run("window.WebSocket = window.__RealWebSocket;");
    }
}

fn eval(source: &str) -> JsValue {
    Function::new_no_args(source).call0(&JsValue::NULL).unwrap()
}

fn run(source: &str) {
    eval(source);
}

fn number(source: &str) -> usize {
    eval(source).as_f64().unwrap() as usize
}

/// Long enough for a person to have read a card an agent's call just put on screen.
async fn looked() {
    TimeoutFuture::new(750).await;
}

/// A page with the relay, paired as `CODE` on socket 0.
async fn paired(stand_in: &StandIn) -> Page {
    paired_with_limit(stand_in, 1024 * 1024).await
}

/// [`paired`], the gateway taking messages up to `max_bytes`.
async fn paired_with_limit(stand_in: &StandIn, max_bytes: usize) -> Page {
    let page = mount(Setup {
        mcp_relay: Some(URL.into()),
        ..Setup::default()
    });
    TimeoutFuture::new(20).await;
    assert_eq!(stand_in.opened(), 1);
    let hello = &stand_in.sent(0)[0];
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["key"].as_str().unwrap().len(), 64);
    stand_in.deliver(0, pairing(&[], max_bytes));
    tick().await;
    page
}

fn pairing(waiting: &[&str], max_bytes: usize) -> serde_json::Value {
    serde_json::json!({"type": "paired", "code": "K7QM-4T2P-9XHD", "waiting": waiting, "max_bytes": max_bytes})
}

fn relayed(id: &str, name: &str) -> serde_json::Value {
    serde_json::json!({"type": "call", "id": id, "name": name, "arguments": "{\"name\":\"Relayed\"}"})
}

#[wasm_bindgen_test]
async fn a_paired_page_shows_its_code_and_sends_its_tools() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    // The code waits in the dock's settings, shown when the person opens them.
    page.click(".cs-settings__toggle");
    assert_eq!(
        page.q(".cs-pairing-code")
            .map(|e| e.inner_text())
            .as_deref(),
        Some("K7QM-4T2P-9XHD")
    );
    let tools = stand_in
        .sent(0)
        .into_iter()
        .find(|m| m["type"] == "tools")
        .expect("the tools were sent");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"save") && names.contains(&"read_page_state"),
        "{names:?}"
    );
    // Said as it is for an MCP client: a write is asked.
    let note = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "note")
        .unwrap();
    assert_eq!(note["annotations"]["approval"], "ask");
}

#[wasm_bindgen_test]
async fn a_relayed_call_is_asked_answered_and_a_cancel_withdraws() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    stand_in.deliver(0, relayed("mcp-a", "save"));
    tick().await;
    let caller = page.q(".cs-card .cs-caller").unwrap().inner_text();
    assert!(caller.contains("MCP"), "{caller}");
    assert!(stand_in.results(0).is_empty(), "answered before the person");
    looked().await;
    page.click(".cs-allow-once");
    tick().await;
    let results = stand_in.results(0);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "mcp-a");
    assert_eq!(results[0].1["ok"], true);
    // Cancelled by its client while the card waits: withdrawn, never run.
    stand_in.deliver(0, relayed("mcp-b", "save"));
    tick().await;
    assert!(page.q(".cs-card").is_some());
    stand_in.deliver(0, serde_json::json!({"type": "cancel", "id": "mcp-b"}));
    tick().await;
    assert!(page.q(".cs-card").is_none());
    let results = stand_in.results(0);
    assert_eq!(results[1].0, "mcp-b");
    assert_eq!(results[1].1["error"]["code"], "CANCELLED");
    assert_eq!(page.runs(), ["save:Relayed"]);
}

#[wasm_bindgen_test]
async fn after_a_drop_nothing_runs_twice_and_nothing_forgotten_stays_up() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    stand_in.deliver(0, relayed("mcp-done", "save"));
    stand_in.deliver(0, relayed("mcp-forgotten", "archive"));
    tick().await;
    assert_eq!(page.cs.executor().approvals().len(), 2);
    // The connection drops; the person approves the rename meanwhile.
    stand_in.drop_socket(0);
    tick().await;
    assert!(
        page.q(".cs-pairing-code").is_none(),
        "a code on screen with no relay"
    );
    looked().await;
    page.click(".cs-allow-once");
    tick().await;
    // The page opens a new connection; the gateway still waits for the rename (its
    // answer was not delivered) and sends it again, but has given up on the archive.
    TimeoutFuture::new(1_200).await;
    assert_eq!(stand_in.opened(), 2, "no reconnect");
    stand_in.deliver(1, pairing(&["mcp-done"], 1024 * 1024));
    stand_in.deliver(1, relayed("mcp-done", "save"));
    tick().await;
    // The rename's answer is delivered once, it ran once, and no second card came up.
    let results = stand_in.results(1);
    let done: Vec<_> = results.iter().filter(|(id, _)| id == "mcp-done").collect();
    assert_eq!(done.len(), 1, "{results:?}");
    assert_eq!(done[0].1["ok"], true);
    assert_eq!(page.runs(), ["save:Relayed"]);
    let asked_again = page
        .cs
        .executor()
        .approvals()
        .iter()
        .any(|a| a.action == "save");
    assert!(!asked_again, "a replayed call is asked again");
    // The archive the gateway forgot is withdrawn, not left for the person to approve.
    assert!(
        page.q(".cs-card").is_none(),
        "a forgotten call is still on screen"
    );
    assert!(page.cs.executor().approvals().is_empty());
}

#[wasm_bindgen_test]
async fn an_answer_lost_with_the_connection_is_sent_again() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    stand_in.deliver(0, relayed("mcp-x", "save"));
    tick().await;
    looked().await;
    page.click(".cs-allow-once");
    tick().await;
    // Sent on the old connection, but lost with it: the gateway still waits.
    assert_eq!(stand_in.results(0).len(), 1);
    stand_in.drop_socket(0);
    TimeoutFuture::new(1_200).await;
    stand_in.deliver(1, pairing(&["mcp-x"], 1024 * 1024));
    stand_in.deliver(1, relayed("mcp-x", "save"));
    tick().await;
    let again = stand_in.results(1);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].0, "mcp-x");
    assert_eq!(again[0].1["ok"], true);
    assert_eq!(page.runs(), ["save:Relayed"], "run once");
}

#[wasm_bindgen_test]
async fn a_connection_not_back_in_time_withdraws_what_waits() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    stand_in.deliver(0, relayed("mcp-y", "save"));
    tick().await;
    assert!(page.q(".cs-card").is_some());
    stand_in.drop_socket(0);
    // The gateway gives up on the call after 10 s; the page withdraws it before that.
    TimeoutFuture::new(9_500).await;
    tick().await;
    assert!(
        page.q(".cs-card").is_none(),
        "a call its client was told failed is still up"
    );
    assert!(page.cs.executor().approvals().is_empty());
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn a_gateway_that_stops_takes_its_calls_with_it_at_once() {
    let stand_in = StandIn::install();
    let page = paired(&stand_in).await;
    stand_in.deliver(0, relayed("mcp-z", "save"));
    tick().await;
    run("const s = window.__sockets[0]; s.readyState = 3; \
         s.onclose(new CloseEvent('close', { code: 1012, reason: 'the gateway is stopping' }));");
    tick().await;
    assert!(
        page.q(".cs-card").is_none(),
        "a call the stopped gateway forgot is up"
    );
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn what_is_too_large_to_relay_is_said_not_sent() {
    let stand_in = StandIn::install();
    let page = paired_with_limit(&stand_in, 300).await;
    // The tools do not fit: not sent (sending would end the connection).
    assert!(stand_in.sent(0).iter().all(|m| m["type"] != "tools"));
    stand_in.deliver(0, relayed("mcp-big", "read_page_state"));
    tick().await;
    let results = stand_in.results(0);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["error"]["code"], "RESULT_TOO_LARGE");
    assert!(stand_in.sent(0).iter().all(|m| m.to_string().len() <= 300));
    drop(page);
}

#[wasm_bindgen_test]
async fn relayed_calls_are_refused_before_the_gate_while_the_trail_waits_for_the_gateway() {
    let stand_in = StandIn::install();
    super::long_session::gateway_stand_in();
    super::long_session::set_mode("away");
    let page = mount(Setup {
        mcp_relay: Some(URL.into()),
        audit_capacity: Some(64),
        ..Setup::default()
    });
    TimeoutFuture::new(20).await;
    stand_in.deliver(0, pairing(&[], 1024 * 1024));
    tick().await;
    page.cs.ship_audit("/long-audit");
    // Each call to an action the page does not have is one record, refused at resolve.
    for i in 0..40 {
        stand_in.deliver(0, relayed(&format!("mcp-{i}"), "nope"));
        tick().await;
    }
    let results = stand_in.results(0);
    assert_eq!(results.len(), 40, "every relayed call is answered");
    let codes: Vec<&str> = results
        .iter()
        .map(|(_, c)| c["error"]["code"].as_str().unwrap())
        .collect();
    // Half the trail (32 of 64) waits for the gateway: the rest are refused before the
    // gate, saying why, and write nothing.
    assert!(
        codes[..32].iter().all(|c| *c == "UNKNOWN_ACTION"),
        "{codes:?}"
    );
    assert!(codes[32..].iter().all(|c| *c == "UNAVAILABLE"), "{codes:?}");
    assert!(
        results[39]
            .1
            .to_string()
            .contains("not reaching the gateway"),
        "{:?}",
        results[39].1
    );
    assert_eq!(page.cs.audit().len(), 32, "the refused calls wrote nothing");
    // The gateway comes back: once the trail is shipped, relayed calls go through again.
    super::long_session::set_mode("up");
    super::long_session::caught_up(&page.mounted).await;
    stand_in.deliver(0, relayed("mcp-after", "nope"));
    tick().await;
    let last = stand_in.results(0).pop().unwrap();
    assert_eq!(last.0, "mcp-after");
    assert_eq!(last.1["error"]["code"], "UNKNOWN_ACTION", "{:?}", last.1);
}
