//! A page that closes with more unshipped audit records than a beacon carries: the
//! browser's own `sendBeacon` refuses past its 64 KiB keepalive quota, so the oldest
//! records go in one beacon, the next are kept in `localStorage` for the next page load,
//! and any that fit neither are named by a `trail_gap` record. Every record is
//! delivered, kept, or named.

use countersign::AuditRecord;
use countersign_leptos::AgentDock;
use countersign_testing::{tick, Mounted};
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::long_session::{quiet_options, set_mode, stored};
use super::{refusals, small_trail_page};

const ENDPOINT: &str = "/spill-audit";
const KEY: &str = "countersign.audit.unsent:/spill-audit";

fn storage() -> web_sys::Storage {
    web_sys::window().unwrap().local_storage().unwrap().unwrap()
}

fn kept() -> Vec<AuditRecord> {
    storage()
        .get_item(KEY)
        .unwrap()
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_default()
}

fn set_real_beacon(on: bool) {
    let window = web_sys::window().unwrap();
    js_sys::Reflect::set(&window, &"__realBeacon".into(), &on.into()).unwrap();
}

/// Whether the browser's own `sendBeacon` takes `bytes` bytes.
fn browser_takes(bytes: usize) -> bool {
    let navigator = web_sys::window().unwrap().navigator();
    let body = "x".repeat(bytes);
    // `Navigator.prototype`'s, not the stand-in's.
    let real = js_sys::Reflect::get(
        &js_sys::Reflect::get(&web_sys::window().unwrap(), &"Navigator".into())
            .and_then(|n| js_sys::Reflect::get(&n, &"prototype".into()))
            .unwrap(),
        &"sendBeacon".into(),
    )
    .unwrap();
    let real: js_sys::Function = real.into();
    real.call2(&navigator, &"/spill-probe".into(), &body.into())
        .unwrap()
        .as_bool()
        .unwrap()
}

/// The ids and `seq`s of every record `page` wrote.
fn written(page: &Mounted) -> Vec<(String, u64)> {
    let audit = page.cs.audit();
    audit
        .slice(audit.first(), audit.len())
        .into_iter()
        .map(|r| (r.id, r.seq))
        .collect()
}

async fn close(page: &Mounted) -> Vec<(String, u64)> {
    let all = written(page);
    let event = web_sys::Event::new("pagehide").unwrap();
    web_sys::window().unwrap().dispatch_event(&event).unwrap();
    // The stand-in reads each beacon's body in a promise.
    tick().await;
    tick().await;
    all
}

#[wasm_bindgen_test]
async fn records_past_the_beacon_quota_are_kept_and_sent_by_the_next_page_load() {
    storage().remove_item(KEY).unwrap();
    // The reason for all of it: the browser refuses a beacon past 64 KiB.
    assert!(
        !browser_takes(70 * 1024),
        "the browser took a 70 KiB beacon"
    );
    TimeoutFuture::new(300).await;
    let page = small_trail_page(1_000);
    set_real_beacon(true);
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "k", 400).await;
    let all = close(&page).await;
    let delivered: Vec<String> = stored().into_iter().map(|r| r.id).collect();
    let kept: Vec<String> = kept().into_iter().map(|r| r.id).collect();
    for (id, seq) in &all {
        assert!(
            delivered.contains(id) || kept.contains(id),
            "seq {seq} is neither delivered nor kept"
        );
    }
    assert!(!delivered.is_empty(), "the beacon carried none");
    assert!(
        !kept.is_empty(),
        "none was kept: the test needs more than a beacon holds"
    );
    assert_eq!(page.cs.shipping_status().unwrap().dropped, 0, "none lost");
    assert!(
        stored().iter().all(|r| r.event != "trail_gap"),
        "nothing was lost, so no gap is named"
    );
    drop(page);

    // The next page load ships to the same gateway, which is back: it sends what the
    // last one kept first, and lets it go once acknowledged.
    set_mode("up");
    let next = countersign_testing::mount(quiet_options(Some(1_000)), || view! { <AgentDock /> });
    next.cs.ship_audit(ENDPOINT);
    let mut waited = 0;
    while storage().get_item(KEY).unwrap().is_some() {
        assert!(waited < 200, "what was kept was never sent");
        TimeoutFuture::new(50).await;
        waited += 1;
    }
    let delivered: Vec<String> = stored().into_iter().map(|r| r.id).collect();
    for (id, seq) in &all {
        assert!(
            delivered.contains(id),
            "seq {seq} never reached the gateway"
        );
    }
    set_real_beacon(false);
}

#[wasm_bindgen_test]
async fn records_that_fit_neither_the_beacon_nor_storage_are_named_by_a_gap_record() {
    storage().remove_item(KEY).unwrap();
    TimeoutFuture::new(300).await;
    // Storage full: the page's own data took the origin's quota.
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
    let page = small_trail_page(1_000);
    set_real_beacon(true);
    set_mode("away");
    page.cs.ship_audit(ENDPOINT);
    refusals(&page, "n", 300).await;
    let all = close(&page).await;
    for i in 0..filled {
        storage().remove_item(&format!("spill.fill.{i}")).unwrap();
    }
    set_real_beacon(false);
    assert!(kept().is_empty(), "storage was full, yet records were kept");
    let stored = stored();
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
    assert_eq!(gaps.len(), 1, "one loss, named once: {gaps:?}");
    let (first, last) = gaps[0];
    let delivered: Vec<&str> = stored.iter().map(|r| r.id.as_str()).collect();
    for (id, seq) in &all {
        let named = (first..=last).contains(seq);
        assert!(
            delivered.contains(&id.as_str()) != named,
            "seq {seq}: delivered {}, named {named}",
            delivered.contains(&id.as_str())
        );
    }
    assert_eq!(
        page.cs.shipping_status().unwrap().dropped as u64,
        last - first + 1,
        "the loss is counted"
    );
}

#[wasm_bindgen_test]
async fn kept_text_that_is_not_audit_records_is_let_go_and_never_sent() {
    for hostile in [
        "not json".to_owned(),
        r#"[{"id":"x-1"}]"#.to_owned(),
        r#"{"id":"x-1"}"#.to_owned(),
        format!("[{}]", "1,".repeat(1_200_000)),
    ] {
        storage().set_item(KEY, &hostile).unwrap();
        let page = small_trail_page(1_000);
        set_mode("up");
        page.cs.ship_audit(ENDPOINT);
        TimeoutFuture::new(100).await;
        assert!(storage().get_item(KEY).unwrap().is_none(), "kept as it was");
        assert!(stored().is_empty(), "sent on: {:?}", stored().len());
        drop(page);
    }
}
