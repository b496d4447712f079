//! What a person feels, measured in headless Chromium on the release build. Run by
//! `cargo xtask bench`, which reads the `BENCH <name> <value>` lines these tests print
//! and puts them in its table (also by hand: `cargo test --release --target
//! wasm32-unknown-unknown -p countersign-leptos --test perf -- --nocapture`).
//! - `card_latency`: a tool call handed to the assistant loop's entry point
//!   (`call_batch`) until its card's node is in the DOM, and until the next animation
//!   frame after that; 200 calls one at a time, and batches of 20 parallel calls.
//! - `gate_in_wasm`: the gate's benchmark workload (`countersign`'s
//!   `benches/gate_workload`) timed here in wasm32, for the wasm/native ratios.
//! - `long_session`: the dock's long-session run (`tests/dock/long_session.rs`), its
//!   wasm memory and DOM at 0, 500 and 2,000 calls.
//!
//! Timed tests assert nothing about time: the figures are reported, not judged.
#![cfg(target_arch = "wasm32")]
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::hint::black_box;

use countersign::{Action, Call, Confirm, Kind};
use countersign_leptos::{use_action, AgentDock};
use countersign_testing::Mounted;
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

#[path = "dock/long_session.rs"]
mod long_session;

#[path = "../../core/benches/gate_workload/mod.rs"]
mod gate_workload;

wasm_bindgen_test_configure!(run_in_browser);

/// One line for `cargo xtask bench` to read.
fn report(name: &str, value: f64) {
    let line = format!("BENCH {name} {value:.4}");
    web_sys::console::log_1(&line.into());
}

fn now_ms() -> f64 {
    web_sys::window().unwrap().performance().unwrap().now()
}

/// Resolves at the next animation frame.
async fn next_frame() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = web_sys::window().unwrap().request_animation_frame(&resolve);
    });
    JsFuture::from(promise).await.unwrap();
}

/// Waits, one microtask at a time (then, if rendering needs one, a task at a time),
/// until `ready` holds; returns when it first held.
async fn when(ready: impl Fn() -> bool) -> f64 {
    for spin in 0..100_000u32 {
        if ready() {
            return now_ms();
        }
        if spin < 1_000 {
            let yielded = js_sys::Promise::resolve(&wasm_bindgen::JsValue::NULL);
            JsFuture::from(yielded).await.unwrap();
        } else {
            TimeoutFuture::new(0).await;
        }
    }
    panic!("never happened");
}

/// `p` in 0..=100 of sorted `values` (nearest rank).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report_spread(name: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    report(&format!("{name}.p50_ms"), percentile(&values, 50.0));
    report(&format!("{name}.p95_ms"), percentile(&values, 95.0));
    report(&format!("{name}.max_ms"), percentile(&values, 100.0));
}

#[derive(Clone, Deserialize, JsonSchema)]
struct Named {
    /// A name.
    name: String,
}

/// Parallel calls go to distinct actions (calls to one action wait for each other).
const PARALLEL: usize = 20;

#[component]
fn BenchPage() -> impl IntoView {
    for i in 0..PARALLEL {
        use_action(
            Action::<Named>::new(format!("save_{i}"), "Save a name.")
                .title(format!("Save name {i}"))
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("set the name to `{}`", p.name))
                .run(|p: Named| async move { Ok::<_, String>(serde_json::json!({ "name": p.name })) }),
        );
    }
    view! { <p>"bench page"</p> }
}

fn bench_page() -> Mounted {
    let options = long_session::quiet_options(None);
    countersign_testing::mount(options, || view! { <BenchPage /> <AgentDock /> })
}

#[wasm_bindgen_test]
async fn card_latency() {
    let page = bench_page();
    let card = |page: &Mounted| page.q(".cs-card .cs-allow-once").is_some();
    // Warm up: the first card builds the dock's views once.
    for round in 0..2 {
        let calls = vec![Call::new(format!("w{round}"), "save_0", r#"{"name":"w"}"#)];
        let settled = page.cs.call_batch(calls);
        when(|| card(&page)).await;
        page.click(".cs-allow-once");
        let _ = settled.await;
        when(|| !card(&page)).await;
    }
    let (mut to_dom, mut to_frame) = (Vec::new(), Vec::new());
    for i in 0..200 {
        let args = format!(r#"{{"name":"n{i}"}}"#);
        let arrived = now_ms();
        let settled = page
            .cs
            .call_batch(vec![Call::new(format!("c{i}"), "save_0", args)]);
        let shown = when(|| card(&page)).await;
        next_frame().await;
        let framed = now_ms();
        to_dom.push(shown - arrived);
        to_frame.push(framed - arrived);
        page.click(".cs-allow-once");
        let results = settled.await;
        assert_eq!(results[0].outcome.code_str(), "OK");
        when(|| !card(&page)).await;
    }
    report_spread("card.one_at_a_time.to_dom", to_dom);
    report_spread("card.one_at_a_time.to_frame", to_frame);

    let (mut to_dom, mut to_frame) = (Vec::new(), Vec::new());
    for round in 0..10 {
        let calls = (0..PARALLEL)
            .map(|i| {
                Call::new(
                    format!("b{round}_{i}"),
                    format!("save_{i}"),
                    format!(r#"{{"name":"b{i}"}}"#),
                )
            })
            .collect();
        let arrived = now_ms();
        let settled = page.cs.call_batch(calls);
        // The first card on screen, with the whole batch queued behind it.
        let shown =
            when(|| card(&page) && page.text(".cs-card__count").contains(&PARALLEL.to_string()))
                .await;
        next_frame().await;
        let framed = now_ms();
        to_dom.push(shown - arrived);
        to_frame.push(framed - arrived);
        page.click(".cs-allow-batch");
        let results = settled.await;
        assert!(results.iter().all(|r| r.outcome.code_str() == "OK"));
        when(|| !card(&page)).await;
    }
    report_spread("card.batch_of_20.to_dom", to_dom);
    report_spread("card.batch_of_20.to_frame", to_frame);
}

/// Nanoseconds per iteration of `f`: the median of 15 rounds of `n` iterations.
fn per_call_ns(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n {
        f(); // warm up
    }
    let mut rounds: Vec<f64> = (0..15)
        .map(|_| {
            let start = now_ms();
            for _ in 0..n {
                f();
            }
            (now_ms() - start) * 1e6 / f64::from(n)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

#[wasm_bindgen_test]
fn gate_in_wasm() {
    let (exec, _regs, _records) = gate_workload::executor(1);
    let direct = per_call_ns(20_000, || {
        black_box(gate_workload::direct_from_json(black_box(gate_workload::RAW)).unwrap());
    });
    let gate = per_call_ns(5_000, || {
        black_box(gate_workload::through_gate(
            &exec,
            black_box(Call::new("tc_1", "read_0", gate_workload::RAW)),
        ));
    });
    report("gate.wasm.direct_ns", direct);
    report("gate.wasm.through_gate_ns", gate);
    let ratios = gate_workload::paired_ratios(&exec, 21, 5_000, || now_ms() * 1e6);
    report(
        "gate.wasm.paired_ratio.p50",
        gate_workload::quantile(&ratios, 0.5),
    );
    report("gate.wasm.ratio", gate / direct);
}

#[wasm_bindgen_test]
async fn long_session() {
    let [start, at_500, at_2000] = long_session::long_session().await;
    for (calls, weight) in [(0, start), (500, at_500), (2_000, at_2000)] {
        report(
            &format!("long_session.{calls}.memory_kb"),
            weight.memory as f64 / 1024.0,
        );
        report(
            &format!("long_session.{calls}.dom_nodes"),
            f64::from(weight.nodes),
        );
    }
}
