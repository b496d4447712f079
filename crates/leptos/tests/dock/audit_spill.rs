//! A page that closes with unshipped audit records: they are kept in `localStorage` for
//! the next page load (which sends them), the oldest also go in a beacon within the
//! browser's own 64 KiB quota, and any that storage cannot keep are named by a
//! `trail_gap` record. Every record is delivered, kept, or named.

use countersign_leptos::AgentDock;
use countersign_testing::{tick, Mounted};
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{refusals, small_trail_page};
use super::long_session::{quiet_options, set_mode, stored};

const ENDPOINT: &str = "/spill-audit";
const PREFIX: &str = "countersign.audit.unsent /spill-audit ";

fn storage() -> web_sys::Storage {
    web_sys::window().unwrap().local_storage().unwrap().unwrap()
}

fn keys() -> Vec<String> {
    let storage = storage();
    (0..storage.length().unwrap())
        .filter_map(|i| storage.key(i).unwrap())
        .filter(|k| k.starts_with(PREFIX))
        .collect()
}

/// The ids of every record kept for the endpoint, by any page session.
fn kept() -> Vec<String> {
    keys()
        .iter()
        .flat_map(|k| {
            let text = storage().get_item(k).unwrap().unwrap();
            serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap()
        })
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

fn set_js(name: &str, value: wasm_bindgen::JsValue) {
    let window = web_sys::window().unwrap();
    js_sys::Reflect::set(&window, &name.into(), &value).unwrap();
}

fn beacons() -> u64 {
    let window = web_sys::window().unwrap();
    js_sys::Reflect::get(&window, &"__beacons".into())
        .unwrap()
        .as_f64()
        .unwrap_or(0.0) as u64
}

/// Whether the browser's own `sendBeacon` takes `bytes` bytes.
fn browser_takes(bytes: usize) -> bool {
    let window = web_sys::window().unwrap();
    // `Navigator.prototype`'s, not the stand-in's.
    let prototype = js_sys::Reflect::get(&window, &"Navigator".into())
        .and_then(|n| js_sys::Reflect::get(&n, &"prototype".into()))
        .unwrap();
    let real: js_sys::Function = js_sys::Reflect::get(&prototype, &"sendBeacon".into())
        .unwrap()
        .into();
    real.call2(
        &window.navigator(),
        &"/spill-probe".into(),
        &"x".repeat(bytes).into(),
    )
    .unwrap()
    .as_bool()
    .unwrap()
}

/// The ids and `seq`s of every record `page` wrote and still holds.
fn written(page: &Mounted) -> Vec<(String, u64)> {
    let audit = page.cs.audit();
    audit
        .slice(audit.first(), audit.len())
        .into_iter()
        .map(|r| (r.id, r.seq))
        .collect()
}

async fn close() {
    let event = web_sys::Event::new("pagehide").unwrap();
    web_sys::window().unwrap().dispatch_event(&event).unwrap();
    // The stand-in reads each beacon's body in a promise.
    tick().await;
    tick().await;
}

/// The next page load, shipping to the same endpoint.
fn next_page() -> Mounted {
    let next = countersign_testing::mount(quiet_options(Some(1_000)), || view! { <AgentDock /> });
    next.cs.ship_audit(ENDPOINT);
    next
}

/// Waits until nothing is kept for the endpoint (what was kept was sent), up to 10 s.
async fn all_sent() {
    let mut waited = 0;
    while !keys().is_empty() {
        assert!(waited < 200, "what was kept was never sent");
        TimeoutFuture::new(50).await;
        waited += 1;
    }
}

/// Stored `trail_gap` records: first and last `seq` named, and how many unconfirmed.
fn gaps() -> Vec<(u64, u64, u64)> {
    stored()
        .iter()
        .filter(|r| r.event == "trail_gap")
        .map(|r| {
            let n = |f: &str| r.reason[f].as_u64().unwrap();
            (n("first_seq"), n("last_seq"), n("unconfirmed"))
        })
        .collect()
}

/// Fills `localStorage` to the last 64 bytes; returns how many keys it took.
fn fill_storage() -> usize {
    let mut filled = 0;
    for size in [256 * 1024, 16 * 1024, 1024, 64] {
        let fill = "x".repeat(size);
        while storage()
            .set_item(&format!("spill.fill.{filled}"), &fill)
            .is_ok()
        {
            filled += 1;
            assert!(filled < 2_000, "storage never filled");
        }
    }
    filled
}

fn unfill_storage(filled: usize) {
    for i in 0..filled {
        storage().remove_item(&format!("spill.fill.{i}")).unwrap();
    }
}

#[wasm_bindgen_test]
async fn records_of_a_page_that_closes_are_kept_and_sent_by_the_next_page_load() {
    // Why a beacon cannot carry them all: the browser refuses one past 64 KiB.
    assert!(
        !browser_takes(70 * 1024),
        "the browser took a 70 KiB beacon"
    );
    TimeoutFuture::new(300).await;
    let page = small_trail_page(1_000);
    set_js("__realBeacon", true.into());
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "k", 400).await;
    let all = written(&page);
    let before = beacons();
    close().await;
    set_js("__realBeacon", false.into());
    // The gateway is away: the beacon the browser took is lost on the way.
    assert!(stored().is_empty(), "the stand-in is away");
    assert_eq!(beacons(), before + 1, "one beacon, within the quota");
    let kept = kept();
    for (id, seq) in &all {
        assert!(kept.contains(id), "seq {seq} is not kept");
    }
    let status = page.cs.shipping_status().unwrap();
    assert_eq!(
        (status.dropped, gaps().len()),
        (0, 0),
        "nothing lost, none named"
    );
    drop(page);

    // The next page load ships to the same gateway, which is back: it sends what the
    // last one kept, and lets it go once acknowledged.
    set_mode("up");
    let _next = next_page();
    all_sent().await;
    let delivered: Vec<String> = stored().into_iter().map(|r| r.id).collect();
    for (id, seq) in &all {
        assert!(
            delivered.contains(id),
            "seq {seq} never reached the gateway"
        );
    }
}

#[wasm_bindgen_test]
async fn records_storage_cannot_keep_are_named_and_so_are_those_pushed_out_before() {
    let filled = fill_storage();
    // A small trail, the gateway away: records are pushed out before the page closes,
    // and a `trail_gap` record names them; storage is full, so nothing can be kept.
    let page = small_trail_page(200);
    set_js("__realBeacon", true.into());
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "n", 300).await;
    // The gateway is back as the page closes: beacons arrive.
    set_js("__beaconMode", "up".into());
    close().await;
    unfill_storage(filled);
    set_js("__realBeacon", false.into());
    assert!(kept().is_empty(), "storage was full, yet records were kept");
    let gaps = gaps();
    assert!(
        gaps.len() >= 2,
        "the earlier loss and the loss at close: {gaps:?}"
    );
    let delivered: Vec<u64> = stored().iter().map(|r| r.seq).collect();
    let written = page.cs.audit().len() as u64;
    for seq in 1..=written {
        assert!(
            delivered.contains(&seq) || gaps.iter().any(|(a, b, _)| (*a..=*b).contains(&seq)),
            "seq {seq} is neither delivered nor named: {gaps:?}"
        );
    }
    // The loss at close counts what the beacon carried as unconfirmed.
    let (first, last, unconfirmed) = *gaps.iter().max_by_key(|g| g.1).unwrap();
    let carried = delivered
        .iter()
        .filter(|s| (first..=last).contains(s))
        .count();
    assert_eq!(unconfirmed, carried as u64, "{gaps:?}");
    let status = page.cs.shipping_status().unwrap();
    assert!(
        status.dropped > 0 && status.unconfirmed >= carried,
        "{status:?}"
    );
}

#[wasm_bindgen_test]
async fn a_kept_record_the_gateway_refuses_by_name_is_let_go_alone() {
    let page = small_trail_page(1_000);
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "c", 5).await;
    let all = written(&page);
    close().await;
    drop(page);
    // The gateway holds another record under the third one's id.
    set_js("__conflict", all[2].0.clone().into());
    set_mode("up");
    let _next = next_page();
    all_sent().await;
    let delivered: Vec<String> = stored().into_iter().map(|r| r.id).collect();
    for (i, (id, seq)) in all.iter().enumerate() {
        assert_eq!(delivered.contains(id), i != 2, "seq {seq}");
    }
}

#[wasm_bindgen_test]
async fn kept_records_stay_while_the_answer_is_not_the_gateways() {
    let page = small_trail_page(1_000);
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "w", 5).await;
    close().await;
    drop(page);
    let before = kept();
    assert_eq!(before.len(), 5);
    // Still away: the next load's try fails, and everything stays kept.
    let next = next_page();
    TimeoutFuture::new(300).await;
    assert_eq!(kept(), before, "kept records were let go without an answer");
    // The gateway comes back: the page's next acknowledged batch sends them too.
    set_mode("up");
    let mut waited = 0;
    while !keys().is_empty() {
        let _ = next
            .cs
            .call(countersign::Call::new(format!("w{waited}"), "nope", "{}"))
            .await;
        assert!(
            waited < 800,
            "kept records were never sent once the gateway was back"
        );
        TimeoutFuture::new(50).await;
        waited += 1;
    }
    let delivered: Vec<String> = stored().into_iter().map(|r| r.id).collect();
    assert!(before.iter().all(|id| delivered.contains(id)));
}

#[wasm_bindgen_test]
async fn kept_text_that_is_not_audit_records_is_let_go_and_never_sent() {
    for hostile in [
        "not json".to_owned(),
        r#"[{"seq":1}]"#.to_owned(),
        r#"{"id":"x-1"}"#.to_owned(),
        format!("[{}]", vec![r#"{"id":"big"}"#; 200_000].join(",")),
    ] {
        let page = small_trail_page(1_000);
        storage().set_item(&format!("{PREFIX}x"), &hostile).unwrap();
        set_mode("up");
        page.cs.ship_audit(ENDPOINT);
        TimeoutFuture::new(100).await;
        assert!(keys().is_empty(), "kept as it was");
        assert!(stored().is_empty(), "sent on: {:?}", stored().len());
        drop(page);
    }
}

#[wasm_bindgen_test]
async fn kept_records_stay_when_a_200_is_not_the_gateways_answer() {
    let page = small_trail_page(1_000);
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "p", 5).await;
    close().await;
    drop(page);
    let before = kept();
    assert_eq!(before.len(), 5);
    // A login page answers for the gateway: 200, and nothing taken.
    set_mode("portal");
    let _next = next_page();
    TimeoutFuture::new(300).await;
    assert_eq!(kept(), before, "a sign-in page's 200 let kept records go");
    assert!(stored().is_empty());
}

#[wasm_bindgen_test]
async fn a_gap_record_storage_cannot_hold_goes_with_the_record_naming_the_loss_at_close() {
    // Other page sessions' kept records fill the endpoint's room in storage.
    let filler = format!("{PREFIX}filler");
    let one = r#"{"id":"filler"}"#;
    storage()
        .set_item(&filler, &format!("[{}]", vec![one; 70_000].join(",")))
        .unwrap();
    // A small trail, the gateway away: records are pushed out, and a `trail_gap` record
    // names them; at close nothing more fits, and the beacon is lost on the way.
    let page = small_trail_page(64);
    // (The stand-in let go of kept keys as it was installed.)
    storage()
        .set_item(&filler, &format!("[{}]", vec![one; 70_000].join(",")))
        .unwrap();
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "g", 150).await;
    let session = page.cs.audit().slice(page.cs.audit().first(), 1)[0]
        .session
        .to_string();
    let written = page.cs.audit().len() as u64;
    close().await;
    storage().remove_item(&filler).unwrap();
    drop(page);
    // The next page load sends what was kept: the records naming both losses.
    set_mode("up");
    let _next = next_page();
    all_sent().await;
    let ours = |id: &str| {
        id.strip_prefix(&session)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|seq| seq.parse::<u64>().is_ok())
    };
    let stored: Vec<_> = stored().into_iter().filter(|r| ours(&r.id)).collect();
    let named: Vec<(u64, u64)> = stored
        .iter()
        .filter(|r| r.event == "trail_gap")
        .map(|r| {
            let n = |f: &str| r.reason[f].as_u64().unwrap();
            (n("first_seq"), n("last_seq"))
        })
        .collect();
    assert!(
        named.len() >= 2,
        "the earlier loss and the loss at close: {named:?}"
    );
    for seq in 1..=written {
        assert!(
            stored.iter().any(|r| r.seq == seq)
                || named.iter().any(|(a, b)| (*a..=*b).contains(&seq)),
            "seq {seq} is neither delivered nor named: {named:?}"
        );
    }
}
