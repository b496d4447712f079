//! The audit trail shipped to the gateway: every record delivered or named in a gap
//! (when the trail overflows, answers are lost or the page closes), a conflicting record
//! passed over, a long session bounded, and a session id of its own.

use countersign_testing::tick;
use gloo_timers::future::TimeoutFuture;
use wasm_bindgen_test::*;

use super::harness::{mount, pagehide, refusals, small_trail_page, wait_while, Setup};
use super::long_session;

#[wasm_bindgen_test]
async fn records_sent_without_an_answer_then_pushed_out_are_counted_apart_and_named() {
    // Below the least taken: the page holds 64.
    let page = small_trail_page(8);
    // The gateway writes the first batch and its answer is lost.
    long_session::set_mode("lost");
    page.cs.ship_audit("/long-audit");
    let refuse = |i: usize| {
        page.cs
            .call(countersign::Call::new(format!("a{i}"), "nope", "{}"))
    };
    let _ = refuse(0).await;
    wait_while("nothing was sent", 200, 10, || {
        long_session::stored().is_empty()
    })
    .await;
    // Then it is away while the page's trail overflows.
    long_session::set_mode("away");
    for i in 1..200 {
        let _ = refuse(i).await;
    }
    assert_eq!(page.cs.audit().held(), 64, "the least capacity");
    long_session::set_mode("up");
    long_session::caught_up(&page).await;
    let status = page.cs.shipping_status().unwrap();
    assert!(
        status.unconfirmed >= 1 && status.dropped >= 100,
        "{status:?}"
    );
    let gap = long_session::assert_every_record_kept_or_counted(&page);
    // The record whose answer was lost is in the gateway's trail, inside the gap:
    // counted as unconfirmed, never as dropped.
    assert_eq!(gap.reason["first_seq"], 1);
}

/// Waits until shipping has tried (and failed) once more: a retry after what was done
/// before it.
async fn another_failed_retry(page: &countersign_testing::Mounted) {
    let before = page.cs.shipping_status().map_or(0, |s| s.failures);
    wait_while("no retry", 400, 50, || {
        page.cs
            .shipping_status()
            .is_none_or(|s| s.failures <= before)
    })
    .await;
}

#[wasm_bindgen_test]
async fn a_gap_record_pushed_out_before_it_was_shipped_is_written_again() {
    let page = small_trail_page(64);
    long_session::set_mode("away");
    page.cs.ship_audit("/long-audit");
    refusals(&page, "a", 150).await;
    // A retry after the trail overflowed skips what was pushed out: the first gap.
    another_failed_retry(&page).await;
    // The gateway takes one batch (the first gap's record is written then, after it),
    // and is away again.
    long_session::set_mode("once");
    wait_while("the retry never came", 400, 50, || {
        long_session::stored().is_empty()
    })
    .await;
    assert!(
        long_session::stored()
            .iter()
            .all(|r| r.event != "trail_gap"),
        "the gap's record was written after the batch that went"
    );
    // The first gap's record waits in the trail and is pushed out by more calls.
    refusals(&page, "b", 150).await;
    another_failed_retry(&page).await;
    long_session::set_mode("up");
    long_session::caught_up(&page).await;
    // Every gap is named in the stand-in's trail, the first one included.
    let gap = long_session::assert_every_record_kept_or_counted(&page);
    assert_eq!(gap.reason["first_seq"], 1);
    let named = long_session::stored()
        .iter()
        .filter(|r| r.event == "trail_gap")
        .count();
    assert!(
        named >= 2,
        "the first gap's record was written again: {named}"
    );
}

#[wasm_bindgen_test]
async fn records_handed_to_the_beacon_on_pagehide_are_named_when_some_were_pushed_out() {
    let page = small_trail_page(64);
    long_session::set_mode("away");
    page.cs.ship_audit("/long-audit");
    refusals(&page, "a", 150).await;
    // A retry has failed and skipped what was pushed out; more is pushed out since.
    wait_while("no retry", 400, 50, || {
        page.cs.shipping_status().is_none_or(|s| s.failures < 2)
    })
    .await;
    refusals(&page, "b", 100).await;
    // The gateway is back as the page closes: the beacon arrives.
    js_sys::Reflect::set(
        &web_sys::window().unwrap(),
        &"__beaconMode".into(),
        &"up".into(),
    )
    .unwrap();
    pagehide();
    tick().await;
    tick().await;
    // What the beacon carried, with what was named as lost, is every record.
    let stored = long_session::stored();
    let gaps: Vec<(u64, u64)> = stored
        .iter()
        .filter(|r| r.event == "trail_gap")
        .map(|r| {
            (
                r.reason["first_seq"].as_u64().unwrap(),
                r.reason["last_seq"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(!gaps.is_empty(), "the loss is named");
    let seqs: Vec<u64> = stored.iter().map(|r| r.seq).collect();
    for seq in 1..=page.cs.audit().len() as u64 {
        assert!(
            seqs.contains(&seq) || gaps.iter().any(|(a, b)| (*a..=*b).contains(&seq)),
            "seq {seq} is neither delivered nor named: {gaps:?}"
        );
    }
}

#[wasm_bindgen_test]
async fn a_long_session_stays_bounded_and_every_record_is_shipped_or_counted() {
    let [start, at_500, at_2000] = long_session::long_session().await;
    web_sys::console::log_1(&format!("long session: {start:?} → {at_500:?} → {at_2000:?}").into());
    // Past 500 calls the dock's lists are at their caps: the DOM does not grow.
    assert!(
        at_2000.nodes <= at_500.nodes + 20,
        "dock DOM grew: {at_500:?} → {at_2000:?}"
    );
    // Nor does memory, beyond the allocator's slack: 1,500 more calls would take
    // megabytes if records, settled calls or the conversation were kept.
    assert!(
        at_2000.memory <= at_500.memory + 1024 * 1024,
        "wasm memory grew: {at_500:?} → {at_2000:?}"
    );
}

/// A stand-in gateway audit route at `/test-audit` that stores records by id and
/// answers 409 `audit_conflict` (naming the id) for a batch holding `conflict`.
fn conflicting_audit_route(conflict: &str) {
    let install = js_sys::Function::new_with_args(
        "conflict",
        "window.__stored = []; window.__posts = 0;
         const original = window.fetch;
         window.fetch = (input, init) => {
           const url = typeof input === 'string' ? input : input.url;
           if (!url.endsWith('/test-audit')) return original(input, init);
           const body = input instanceof Request ? input.clone().text() : Promise.resolve(init.body);
           return body.then(text => {
             window.__posts += 1;
             const batch = JSON.parse(text);
             if (batch.some(r => r.id === conflict)) {
               const error = { error: { code: 'audit_conflict', message: 'record `' + conflict + '` is stored already with other contents; nothing of the batch was written', type: 'countersign_gateway' } };
               return new Response(JSON.stringify(error), { status: 409 });
             }
             for (const r of batch) window.__stored.push(r.id);
             return new Response(JSON.stringify({ appended: batch.length, duplicates: 0 }), { status: 200 });
           });
         };",
    );
    install
        .call1(&wasm_bindgen::JsValue::NULL, &conflict.into())
        .unwrap();
}

#[wasm_bindgen_test]
async fn a_conflicting_record_is_passed_over_and_every_other_one_shipped() {
    let page = mount(Setup::default());
    for i in 0..5 {
        let _ = page
            .cs
            .call(countersign::Call::new(
                format!("c{i}"),
                "no_such_action",
                "{}",
            ))
            .await;
    }
    let ids: Vec<String> = page
        .cs
        .audit()
        .records()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(ids.len() >= 4, "{ids:?}");
    // The third record is held by the gateway under another record: a 409.
    let conflict = ids[2].clone();
    conflicting_audit_route(&conflict);
    page.cs.ship_audit("/test-audit");
    let mut waited = 0;
    while page
        .cs
        .shipping_status()
        .is_none_or(|s| s.acknowledged < ids.len())
    {
        assert!(
            waited < 200,
            "shipping stalled: {:?}",
            page.cs.shipping_status()
        );
        TimeoutFuture::new(25).await;
        waited += 1;
    }
    let status = page.cs.shipping_status().unwrap();
    assert_eq!((status.conflicts, status.failures), (1, 0));
    let window = web_sys::window().unwrap();
    let stored: Vec<String> =
        js_sys::Array::from(&js_sys::Reflect::get(&window, &"__stored".into()).unwrap())
            .iter()
            .map(|v| v.as_string().unwrap())
            .collect();
    let expected: Vec<String> = ids.iter().filter(|id| **id != conflict).cloned().collect();
    assert_eq!(stored, expected, "every other record, in order, once");
    // Refused whole, then the two before it, then the conflict alone, then the rest.
    let posts = js_sys::Reflect::get(&window, &"__posts".into())
        .unwrap()
        .as_f64()
        .unwrap();
    assert_eq!(posts, 4.0);
}

#[wasm_bindgen_test]
async fn a_session_id_is_128_random_bits_of_its_own() {
    let page = mount(Setup::default());
    let _ = page
        .cs
        .call(countersign::Call::new("c0", "no_such_action", "{}"))
        .await;
    let session = page.cs.audit().records()[0].session.clone();
    let hex = session.strip_prefix("page-").unwrap();
    assert_eq!(hex.len(), 32, "{session}");
    assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
    let other = mount(Setup::default());
    let _ = other
        .cs
        .call(countersign::Call::new("c0", "no_such_action", "{}"))
        .await;
    assert_ne!(other.cs.audit().records()[0].session, session);
}

/// A gateway that refuses the page's records (its origin is not allowed) is not silent:
/// the dock's log says so once, as an error with the gateway's own sentence naming the
/// flag that fixes it, however often shipping retries; once the gateway takes them, the
/// log says that too.
#[wasm_bindgen_test]
async fn a_refused_trail_is_said_in_the_dock_once_with_the_fix() {
    let install = js_sys::Function::new_no_args(
        "window.__accept = false;
         const original = window.fetch;
         window.__originalFetch = original;
         window.fetch = (input, init) => {
           const url = typeof input === 'string' ? input : input.url;
           if (!url.endsWith('/refusing-audit')) return original(input, init);
           if (window.__accept) {
             const body = input instanceof Request ? input.clone().text() : Promise.resolve(init.body);
             return body.then(text => new Response(JSON.stringify({ appended: JSON.parse(text).length, duplicates: 0 }), { status: 200 }));
           }
           const error = { error: { code: 'origin_not_allowed', message: 'origin `http://127.0.0.1:8080` is not allowed;\\nstart the gateway with `--allowed-origin http://127.0.0.1:8080`', type: 'countersign_gateway' } };
           return Promise.resolve(new Response(JSON.stringify(error), { status: 403 }));
         };",
    );
    install.call0(&wasm_bindgen::JsValue::NULL).unwrap();
    let page = mount(Setup::default());
    let _ = page
        .cs
        .call(countersign::Call::new("c1", "no_such_action", "{}"))
        .await;
    page.cs.ship_audit("/refusing-audit");
    // Refused twice (the first try, and the retry a second later): said once.
    wait_while("no second refusal", 200, 25, || {
        page.cs
            .shipping_status()
            .is_none_or(|s| !s.refused || s.failures < 2)
    })
    .await;
    tick().await;
    let log = page.text(".cs-log");
    assert_eq!(
        log.matches("refuses this page's audit records").count(),
        1,
        "{log}"
    );
    assert!(
        log.contains("--allowed-origin http://127.0.0.1:8080"),
        "{log}"
    );
    assert!(
        page.q(".cs-msg--error")
            .is_some_and(|e| !e.inner_text().contains('\n')),
        "the gateway's sentence is one escaped error line"
    );
    // The gateway takes them again: said, and the records go.
    let window = web_sys::window().unwrap();
    js_sys::Reflect::set(&window, &"__accept".into(), &true.into()).unwrap();
    wait_while("not taken again", 200, 25, || {
        page.cs.shipping_status().is_none_or(|s| s.refused)
    })
    .await;
    tick().await;
    assert!(
        page.text(".cs-log")
            .contains("The gateway takes this page's audit records again."),
        "{}",
        page.text(".cs-log")
    );
    assert!(page.cs.shipping_status().unwrap().acknowledged >= 1);
    let original = js_sys::Reflect::get(&window, &"__originalFetch".into()).unwrap();
    js_sys::Reflect::set(&window, &"fetch".into(), &original).unwrap();
}
