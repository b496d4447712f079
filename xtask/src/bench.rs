//! `cargo xtask bench`: every benchmark, then one table of what counts.
//!
//! - the gate per call natively (criterion; its medians read from `target/criterion`);
//! - countersignature mint and verify (criterion);
//! - in headless Chromium on the release build (`countersign-leptos`'s `tests/perf.rs`,
//!   whose `BENCH name value` lines are read here): card latency, the same gate
//!   workload in wasm32, and a 2,000-call session's memory and DOM;
//! - the release bundle against the bare Leptos counter (gzip -9);
//! - the gateway's proxy and audit appends (wrk, PostgreSQL), which print their own table.
//!
//! Every figure of a row comes from this one run: compare ratios across runs, not times.

use std::collections::BTreeMap;
use std::path::Path;

use crate::{cargo, release_build, root, run, size_check, Result};

/// Runs everything and prints the table. `extra` goes to criterion.
pub(crate) fn bench(extra: &[String]) -> Result {
    let mut c = cargo();
    c.args(["bench", "-p", "countersign", "--bench", "gate", "--"])
        .args(extra);
    let mut figures = bench_lines(
        "benchmark: gate overhead and lookup (criterion, then paired rounds)",
        c,
    )?;
    let mut c = cargo();
    c.args([
        "bench",
        "-p",
        "countersign-verify",
        "--bench",
        "tokens",
        "--",
    ])
    .args(extra);
    run("benchmark: countersignature mint and verify (criterion)", c)?;
    figures.extend(browser_figures()?);
    let dist = root().join("target").join("size").join("tutorial");
    release_build("trunk build --release (tutorial)", &dist, "index.html")?;
    let sizes = size_check(&dist)?;
    if !Path::new("/usr/bin/wrk").is_file() {
        crate::apt_install(&["wrk"])?;
    }
    let mut c = cargo();
    c.args(["bench", "-p", "countersign-gateway", "--bench", "proxy"]);
    run(
        "benchmark: gateway proxy overhead (wrk) and durable audit appends",
        c,
    )?;
    table(&figures, &sizes);
    Ok(())
}

/// The browser benchmarks, release build, their `BENCH` lines as a map.
fn browser_figures() -> Result<BTreeMap<String, f64>> {
    let what =
        "benchmark: card latency, the gate in wasm32, a long session (headless Chromium, release)";
    let mut c = crate::browser_suite("countersign-leptos", "perf")?;
    c.args(["--release", "--", "--nocapture"]);
    bench_lines(what, c)
}

/// Runs `c` (echoing what it prints) and reads its `BENCH name value` lines.
fn bench_lines(what: &str, mut c: std::process::Command) -> Result<BTreeMap<String, f64>> {
    println!("\n==> {what}");
    let out = c
        .output()
        .map_err(|e| format!("{what}: could not start ({e})"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{what}: failed ({})", out.status));
    }
    let figures: BTreeMap<String, f64> = text
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find("BENCH ")? + "BENCH ".len()..];
            let (name, value) = rest.trim().split_once(' ')?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect();
    if figures.is_empty() {
        return Err(format!("{what}: printed no BENCH lines"));
    }
    Ok(figures)
}

/// A criterion median in nanoseconds (`target/criterion/<id>/new/estimates.json`).
fn criterion_ns(id: &str) -> Option<f64> {
    let path = root()
        .join("target")
        .join("criterion")
        .join(id)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    // `"median":{"confidence_interval":{…},"point_estimate":N,…}`
    let median = &text[text.find("\"median\"")?..];
    let at = median.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let number: String = median[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        .collect();
    number.parse().ok()
}

fn table(figures: &BTreeMap<String, f64>, sizes: &crate::Sizes) {
    let b = |name: &str| figures.get(name).copied();
    let ms = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2} ms"));
    let ns = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0} ns"));
    let x = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2}×"));
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
    let kb = |bytes: u64| format!("{:.1} KB", bytes as f64 / 1024.0);
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut row = |what: &str, value: String, note: String| {
        rows.push((what.to_owned(), value, note));
    };
    let bundle_ratio = sizes.tutorial_gz as f64 / sizes.counter_gz.max(1) as f64;
    row(
        "bundle: tutorial before interactive, wasm + JS, gzip -9",
        kb(sizes.tutorial_gz),
        format!(
            "{bundle_ratio:.2}× the bare counter ({}); target ≤ 3×",
            kb(sizes.counter_gz)
        ),
    );
    row(
        "bundle: tutorial dock ready (the page, the dock's part, its chunks)",
        kb(sizes.tutorial_gz + sizes.tutorial_dock_gz),
        "target ≤ 160 KB (issue 38)".into(),
    );
    let total = sizes.tutorial_gz + sizes.tutorial_lazy_gz;
    row(
        "bundle: tutorial in all, with the lazy Countersign layer",
        kb(total),
        format!(
            "{:.2}× the counter; the lazy part {}",
            total as f64 / sizes.counter_gz.max(1) as f64,
            kb(sizes.tutorial_lazy_gz)
        ),
    );
    for (case, label) in [
        ("one_at_a_time", "200 calls one at a time"),
        ("batch_of_20", "batches of 20 parallel calls"),
    ] {
        for (end, to) in [("to_dom", "card in the DOM"), ("to_frame", "next frame")] {
            let key = |p: &str| b(&format!("card.{case}.{end}.{p}_ms"));
            row(
                &format!("card latency, {label}: call → {to}, p95"),
                ms(key("p95")),
                format!(
                    "p50 {}, max {}; target p95 ≤ 16 ms",
                    ms(key("p50")),
                    ms(key("max"))
                ),
            );
        }
    }
    let native_direct = criterion_ns("gate_per_call/direct_handler_from_json");
    let native_gate = criterion_ns("gate_per_call/through_gate");
    row(
        "gate per call, native, paired rounds: through the gate / handler from JSON, median",
        x(b("gate.native.paired_ratio.p50")),
        format!(
            "quartiles {} to {} over 41 rounds of 20,000 calls each way; target ≤ 6×",
            x(b("gate.native.paired_ratio.p25")),
            x(b("gate.native.paired_ratio.p75"))
        ),
    );
    row(
        "gate per call, native, criterion: through the gate / handler from JSON",
        x(ratio(native_gate, native_direct)),
        format!(
            "{} / {} (criterion medians, each timed on its own)",
            ns(native_gate),
            ns(native_direct)
        ),
    );
    let (wasm_direct, wasm_gate) = (b("gate.wasm.direct_ns"), b("gate.wasm.through_gate_ns"));
    row(
        "gate per call, wasm32 in Chromium: through the gate / handler",
        x(ratio(wasm_gate, wasm_direct)),
        format!(
            "{} / {}; paired rounds, median: {}",
            ns(wasm_gate),
            ns(wasm_direct),
            x(b("gate.wasm.paired_ratio.p50"))
        ),
    );
    row(
        "wasm / native: the gate",
        x(ratio(wasm_gate, native_gate)),
        String::new(),
    );
    row(
        "wasm / native: the handler from JSON",
        x(ratio(wasm_direct, native_direct)),
        String::new(),
    );
    let call = |n: u32| criterion_ns(&format!("resolve_and_project/call/{n}"));
    row(
        "one call with 10,000 actions / with 10",
        x(ratio(call(10_000), call(10))),
        format!("{} / {}; flat is 1×", ns(call(10_000)), ns(call(10))),
    );
    for calls in [0, 500, 2_000] {
        let memory = b(&format!("long_session.{calls}.memory_kb"));
        let nodes = b(&format!("long_session.{calls}.dom_nodes"));
        row(
            &format!("long session after {calls} calls: wasm memory"),
            memory.map_or("—".into(), |m| format!("{:.0} KB", m)),
            format!(
                "{} DOM elements",
                nodes.map_or("—".into(), |n| format!("{n:.0}"))
            ),
        );
    }
    println!("\n| measure | value | detail |\n| --- | --- | --- |");
    for (what, value, note) in rows {
        println!("| {what} | {value} | {note} |");
    }
}
