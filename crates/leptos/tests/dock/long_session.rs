//! A long session does not grow: 2,000 calls through the dock (approvals, denials,
//! handoffs done and cancelled, timeouts, refusals, calls allowed without a card, and
//! turns of the assistant), with the audit shipped to a gateway stand-in that is away
//! for a stretch. The dock's DOM and the page's wasm memory stay bounded, the trail
//! held in the page stays under its capacity, and every record is either in the
//! gateway's trail or counted as dropped: none disappears unrecorded.
//!
//! Also compiled into the release benchmark (`tests/perf.rs`), which prints the memory
//! and DOM figures at 0, 500 and 2,000 calls for BENCHMARKS.md.

use std::time::Duration;

use countersign::{action::NoParams, Action, Call, Confirm, Expect, Handoff, Kind, Session};
use countersign_leptos::{
    use_action, use_page_state, use_target, AgentDock, Assistant, CountersignOptions, Locale, Rule,
    Scripted,
};
use countersign_testing::Mounted;
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use wasm_bindgen::JsCast;

/// The calls driven through the dock.
const CALLS: usize = 2_000;
/// The page holds at most this many unshipped audit records (small, so the gateway's
/// absence pushes some out and the drop accounting is exercised).
const CAPACITY: usize = 1_000;

#[derive(Clone, Deserialize, JsonSchema)]
struct Named {
    /// A name.
    name: String,
}

fn named(id: &str, kind: Kind, confirm: Confirm) -> Action<Named> {
    Action::<Named>::new(id, format!("Test action {id}."))
        .title(format!("Title {id}"))
        .kind(kind)
        .confirm(confirm)
        .consequence(|p| format!("set the name to `{}`", p.name))
        .run(|p: Named| async move { Ok::<_, String>(serde_json::json!({ "name": p.name })) })
}

#[component]
fn LongPage(published: RwSignal<bool>) -> impl IntoView {
    use_action(named("save", Kind::Write, Confirm::Ask));
    use_action(named("read", Kind::Read, Confirm::Unset));
    use_action(
        Action::<NoParams>::new("publish", "Publish.")
            .title("Publish changes")
            .kind(Kind::Write)
            .handoff(
                Handoff::new(
                    "Only you can press Publish.",
                    Expect::new("the page shows published", move || {
                        published.get_untracked()
                    }),
                )
                .step("Press Publish", Some("long_publish")),
            ),
    );
    use_page_state("published", move || published.get_untracked());
    let button = use_target::<leptos::html::Button>("long_publish");
    view! { <button id="long-publish" node_ref=button>"Publish"</button> }
}

/// A gateway stand-in at `/long-audit`. `window.__mode`: `up` stores each record (id,
/// `seq`, event, reason) in `window.__long` and acknowledges; `away` answers 503 and
/// stores nothing; `lost` stores the batch and then answers 503 (an answer lost after
/// the gateway wrote it); `once` acknowledges one batch and then is `away`; `portal`
/// answers 200 with a sign-in page and stores nothing (a proxy, a login redirect). A batch
/// holding the id in `window.__conflict` is refused whole with the gateway's 409
/// `audit_conflict`, naming it. Its `navigator.sendBeacon` stores what the page hands
/// it on `pagehide`, unless `window.__beaconMode` (or, unset, `__mode`) is `away`: then
/// the beacon is taken and lost on the way. With `window.__realBeacon` set it first asks
/// the browser's own `sendBeacon`, and takes only what the browser accepted (its 64 KiB
/// quota holds). `/spill-audit` is the same stand-in under another name. What earlier
/// tests' pages kept in `localStorage` for the next load is let go of first.
pub(crate) fn gateway_stand_in() {
    js_sys::Function::new_no_args(
        "window.__mode = 'up'; window.__long = []; window.__beaconMode = undefined;
         window.__conflict = undefined; window.__realBeacon = false;
         for (const k of Object.keys(localStorage)) {
           if (k.startsWith('countersign.audit.unsent ')) localStorage.removeItem(k);
         }
         const original = window.fetch;
         window.fetch = (input, init) => {
           const url = typeof input === 'string' ? input : input.url;
           if (!url.endsWith('/long-audit') && !url.endsWith('/spill-audit')) return original(input, init);
           if (window.__mode === 'away') return Promise.resolve(new Response('{}', { status: 503 }));
           if (window.__mode === 'portal') return Promise.resolve(new Response('<html>Sign in</html>', { status: 200 }));
           const body = input instanceof Request ? input.clone().text() : Promise.resolve(init.body);
           return body.then(text => {
             const batch = JSON.parse(text);
             if (batch.some(r => r.id === window.__conflict)) {
               const error = { code: 'audit_conflict', message: 'record `' + window.__conflict + '` is stored already with other contents; nothing of the batch was written' };
               return new Response(JSON.stringify({ error }), { status: 409 });
             }
             for (const r of batch) {
               if (!window.__long.some(s => s[0] === r.id)) {
                 window.__long.push([r.id, r.seq, r.event, JSON.stringify(r.reason)]);
               }
             }
             const status = window.__mode === 'lost' ? 503 : 200;
             if (window.__mode === 'once') window.__mode = 'away';
             return new Response('{\"appended\":1}', { status });
           });
         };
         const realBeacon = Navigator.prototype.sendBeacon;
         navigator.sendBeacon = (url, blob) => {
           if (!url.endsWith('/long-audit') && !url.endsWith('/spill-audit')) return false;
           if (window.__realBeacon && !realBeacon.call(navigator, url, blob)) {
             window.__refusedBeacons = (window.__refusedBeacons || 0) + 1;
             return false;
           }
           window.__beacons = (window.__beacons || 0) + 1;
           if ((window.__beaconMode || window.__mode) === 'away') return true;
           blob.text().then(text => {
             for (const r of JSON.parse(text)) {
               if (!window.__long.some(s => s[0] === r.id)) {
                 window.__long.push([r.id, r.seq, r.event, JSON.stringify(r.reason)]);
               }
             }
           });
           return true;
         };",
    )
    .call0(&wasm_bindgen::JsValue::NULL)
    .unwrap();
}

pub(crate) fn set_mode(mode: &str) {
    let window = web_sys::window().unwrap();
    js_sys::Reflect::set(&window, &"__mode".into(), &mode.into()).unwrap();
}

/// A record the stand-in stored: id, `seq`, event, and its reason as JSON.
pub(crate) struct Stored {
    pub(crate) id: String,
    pub(crate) seq: u64,
    pub(crate) event: String,
    pub(crate) reason: serde_json::Value,
}

/// What the stand-in stored, in order (each id once: the gateway drops repeats).
pub(crate) fn stored() -> Vec<Stored> {
    let window = web_sys::window().unwrap();
    js_sys::Array::from(&js_sys::Reflect::get(&window, &"__long".into()).unwrap())
        .iter()
        .map(|row| {
            let row = js_sys::Array::from(&row);
            Stored {
                id: row.get(0).as_string().unwrap(),
                seq: row.get(1).as_f64().unwrap() as u64,
                event: row.get(2).as_string().unwrap(),
                reason: serde_json::from_str(&row.get(3).as_string().unwrap()).unwrap(),
            }
        })
        .collect()
}

/// Every record is in the stand-in's trail once, or skipped and counted; `trail_gap`
/// records name exactly the gaps. Returns the first gap's record.
pub(crate) fn assert_every_record_kept_or_counted(page: &Mounted) -> Stored {
    let audit = page.cs.audit();
    let status = page.cs.shipping_status().unwrap();
    let stored = stored();
    // The pushed-out records never sent are missing; those sent without an answer
    // may be there or not (the stand-in's lost answers stored them).
    let missing = audit.len() - stored.len();
    assert!(
        missing >= status.dropped && missing <= status.dropped + status.unconfirmed,
        "{missing} missing, {status:?}"
    );
    // Each time shipping had to skip, a `trail_gap` record names what it skipped (one
    // sent without an answer may have been written again: the same gap, twice).
    let mut gaps: Vec<&Stored> = stored.iter().filter(|r| r.event == "trail_gap").collect();
    gaps.sort_by_key(|g| g.reason["first_seq"].as_u64());
    gaps.dedup_by_key(|g| g.reason.to_string());
    assert!(!gaps.is_empty(), "a record of the gap");
    let range = |g: &Stored| {
        assert_eq!(g.reason["rule"], "trail_gap");
        (
            g.reason["first_seq"].as_u64().unwrap(),
            g.reason["last_seq"].as_u64().unwrap(),
        )
    };
    let named: u64 = gaps.iter().map(|g| range(g).1 - range(g).0 + 1).sum();
    assert_eq!(named as usize, status.dropped + status.unconfirmed);
    let unconfirmed: u64 = gaps
        .iter()
        .map(|g| g.reason["unconfirmed"].as_u64().unwrap())
        .sum();
    assert_eq!(unconfirmed as usize, status.unconfirmed);
    // Every `seq` outside the named gaps is stored; inside them only sent ones can be.
    let in_a_gap = |seq: u64| {
        gaps.iter().any(|g| {
            let (first, last) = range(g);
            (first..=last).contains(&seq)
        })
    };
    let seqs: Vec<u64> = stored.iter().map(|r| r.seq).collect();
    for seq in 1..=audit.len() as u64 {
        if !in_a_gap(seq) {
            assert!(seqs.contains(&seq), "seq {seq} is missing outside the gaps");
        }
    }
    assert!(
        seqs.iter().filter(|s| in_a_gap(**s)).count() <= status.unconfirmed,
        "only records sent before a gap can be inside it"
    );
    let gap = gaps[0];
    Stored {
        id: gap.id.clone(),
        seq: gap.seq,
        event: gap.event.clone(),
        reason: gap.reason.clone(),
    }
}

/// Options for a test page with nothing outside it (no countersigner, WebMCP or relay):
/// an admin session in English that takes script clicks, holding at most `capacity`
/// audit records.
pub(crate) fn quiet_options(capacity: Option<usize>) -> CountersignOptions {
    CountersignOptions {
        session: Session::new("admin", Vec::<String>::new()),
        locale: Some(Locale::En),
        trust_script_clicks: true,
        countersign_endpoint: None,
        webmcp: false,
        mcp_relay: None,
        audit_capacity: capacity,
        ..CountersignOptions::default()
    }
}

/// Waits until the gateway stand-in acknowledged every record (a retry waits at most
/// 30 s after the gateway came back), up to 40 s.
pub(crate) async fn caught_up(page: &Mounted) {
    let mut waited = 0;
    while page
        .cs
        .shipping_status()
        .is_none_or(|s| s.acknowledged < page.cs.audit().len())
    {
        assert!(
            waited < 800,
            "shipping stalled: {:?}",
            page.cs.shipping_status()
        );
        TimeoutFuture::new(50).await;
        waited += 1;
    }
}

/// What the page weighs: wasm linear memory in bytes, and element count under the root.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Weight {
    /// Bytes of wasm linear memory.
    pub(crate) memory: u64,
    /// Elements under the mounted root (the page and its dock).
    pub(crate) nodes: u32,
}

fn weigh(page: &Mounted) -> Weight {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    let buffer: js_sys::ArrayBuffer = memory.buffer().unchecked_into();
    Weight {
        memory: buffer.byte_length() as u64,
        nodes: page.root.query_selector_all("*").unwrap().length(),
    }
}

/// Waits until `selector` matches (yielding to the page), up to about two seconds.
async fn appears(page: &Mounted, selector: &str) -> bool {
    for _ in 0..400 {
        if page.q(selector).is_some() {
            return true;
        }
        TimeoutFuture::new(5).await;
    }
    false
}

/// Waits until nothing matches `selector`.
async fn gone(page: &Mounted, selector: &str) {
    for _ in 0..400 {
        if page.q(selector).is_none() {
            return;
        }
        TimeoutFuture::new(5).await;
    }
    panic!("`{selector}` stayed on screen");
}

/// Drives `CALLS` calls and returns the weights at 0, 500 and 2,000 calls.
pub(crate) async fn long_session() -> [Weight; 3] {
    gateway_stand_in();
    let published = RwSignal::new(false);
    let options = CountersignOptions {
        approval_timeout: Some(Duration::from_millis(300)),
        ..quiet_options(Some(CAPACITY))
    };
    let assistant = Assistant::new(
        Scripted::new(
            Locale::En,
            vec![
                Rule::new("save", serde_json::json!({"name": "{name}"})).phrase("rename to {name}")
            ],
        )
        .expect("phrases the offline assistant can match"),
    );
    let chat = assistant.clone();
    let page = countersign_testing::mount(options, move || {
        view! { <LongPage published=published /> <AgentDock assistant=chat /> }
    });
    page.cs.ship_audit("/long-audit");
    let mut weights = vec![weigh(&page)];
    for i in 0..CALLS {
        // The gateway is away for a stretch long enough to fill the page's trail.
        if i == 300 {
            set_mode("away");
        }
        if i == 900 {
            set_mode("up");
        }
        let name = format!("n{i}");
        let args = format!(r#"{{"name":"{name}"}}"#);
        match i % 10 {
            // A turn of the assistant: its call waits for a card, allowed once.
            0 => {
                let cs = page.cs.clone();
                let turn = assistant.clone();
                let text = format!("rename to {name}");
                let answer = std::rc::Rc::new(std::cell::RefCell::new(None));
                let slot = std::rc::Rc::clone(&answer);
                leptos::task::spawn_local(async move {
                    let result = turn.send(&cs, &text).await;
                    *slot.borrow_mut() = Some(result.is_ok());
                });
                assert!(appears(&page, ".cs-card .cs-allow-once").await, "turn {i}");
                page.click(".cs-allow-once");
                for _ in 0..400 {
                    if answer.borrow().is_some() {
                        break;
                    }
                    TimeoutFuture::new(5).await;
                }
                assert_eq!(*answer.borrow(), Some(true), "turn {i}");
            }
            // Approved, denied, and left to time out (every 100th).
            1..=5 => {
                // The call is submitted now; its future resolves when it settles.
                let settled = page.cs.call(Call::new(format!("c{i}"), "save", &args));
                assert!(appears(&page, ".cs-card .cs-allow-once").await, "call {i}");
                match i % 10 {
                    _ if i % 100 == 5 => {} // the card times out
                    4 | 5 => page.click(".cs-deny"),
                    _ => page.click(".cs-allow-once"),
                }
                let settled = settled.await;
                let code = settled.outcome.code_str();
                let want = match i % 10 {
                    _ if i % 100 == 5 => "APPROVAL_TIMEOUT",
                    4 | 5 => "PERMISSION_DENIED",
                    _ => "OK",
                };
                assert_eq!(code, want, "call {i}");
            }
            // Allowed without a card.
            6 => {
                let settled = page
                    .cs
                    .call(Call::new(format!("c{i}"), "read", &args))
                    .await;
                assert_eq!(settled.outcome.code_str(), "OK");
            }
            // A handoff, done (the person pressed Publish) or cancelled.
            7 | 8 => {
                published.set(false);
                let settled = page.cs.call(Call::new(format!("c{i}"), "publish", "{}"));
                assert!(appears(&page, ".cs-handoff").await, "handoff {i}");
                if i % 10 == 7 {
                    published.set(true);
                    page.click(".cs-handoff-done");
                } else {
                    page.click(".cs-handoff-cancel");
                }
                let settled = settled.await;
                let want = if i % 10 == 7 {
                    "OK"
                } else {
                    "HANDOFF_CANCELLED"
                };
                assert_eq!(settled.outcome.code_str(), want, "handoff {i}");
            }
            // Refused before any card: an action that does not exist.
            _ => {
                let settled = page.cs.call(Call::new(format!("c{i}"), "nope", "{}")).await;
                assert_eq!(settled.outcome.code_str(), "UNKNOWN_ACTION");
            }
        }
        gone(&page, ".cs-card").await;
        gone(&page, ".cs-handoff").await;
        if i + 1 == 500 || i + 1 == CALLS {
            weights.push(weigh(&page));
        }
    }
    // Shipping catches up (its retry waits at most 30 s after the gateway came back).
    let audit = page.cs.audit().clone();
    caught_up(&page).await;
    let status = page.cs.shipping_status().unwrap();
    assert!(status.dropped > 0, "the gateway's absence filled the trail");
    assert!(audit.dropped().count >= status.dropped);
    let gap = assert_every_record_kept_or_counted(&page);
    // Answers were refused, not lost: nothing inside the gap reached the stand-in.
    assert_eq!(
        stored().len() + status.dropped + status.unconfirmed,
        audit.len()
    );
    assert_eq!(gap.reason["rule"], "trail_gap");
    // Everything acknowledged was let go of.
    assert_eq!(audit.held(), 0);
    [weights[0], weights[1], weights[2]]
}
