//! Gate overhead, side by side in one run so the ratio is what counts:
//! - `gate_per_call`: a `Read` action's handler called directly (from typed params and
//!   from the model's JSON text) against the same call through the whole pipeline
//!   (resolve, validate, scope, availability, decide, perform, verify, audit);
//! - `resolve_and_project`: one call and one projection with 10, 100 and 10,000
//!   registered actions (lookup should stay flat; projection is linear by nature).
//!
//! The workload is `gate_workload`, which the browser benchmark runs in wasm32 too.
//! Run with `cargo xtask bench` (or `cargo bench -p countersign --bench gate`).
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout, // the `BENCH` lines `cargo xtask bench` reads
    clippy::disallowed_methods // a benchmark reads the clock
)]

mod gate_workload;

use std::hint::black_box;

use countersign::Call;
use criterion::{criterion_group, BenchmarkId, Criterion};
use gate_workload::{direct_from_json, executor, handler, ready, through_gate, Lookup, RAW};

fn gate_per_call(c: &mut Criterion) {
    let (exec, _regs, _records) = executor(1);
    let raw = RAW;
    let mut group = c.benchmark_group("gate_per_call");
    group.bench_function("direct_handler_typed", |b| {
        b.iter(|| {
            ready(handler(black_box(Lookup {
                key: "workspace.name".into(),
            })))
        })
    });
    group.bench_function("direct_handler_from_json", |b| {
        b.iter(|| direct_from_json(black_box(raw)))
    });
    group.bench_function("through_gate", |b| {
        b.iter(|| through_gate(&exec, black_box(Call::new("tc_1", "read_0", raw))))
    });
    group.finish();
}

fn resolve_and_project(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve_and_project");
    for n in [10usize, 100, 10_000] {
        let (exec, _regs, _records) = executor(n);
        let id = format!("read_{}", n / 2);
        group.bench_with_input(BenchmarkId::new("call", n), &id, |b, id| {
            b.iter(|| {
                through_gate(
                    &exec,
                    black_box(Call::new("tc", id.as_str(), r#"{"key":"k"}"#)),
                )
            })
        });
        group.bench_with_input(BenchmarkId::new("project", n), &n, |b, _| {
            b.iter(|| black_box(exec.projection()))
        });
    }
    group.finish();
}

/// [`gate_workload::paired_ratios`], printed as `BENCH` lines for `cargo xtask bench`.
fn paired() {
    let (exec, _regs, _records) = executor(1);
    let clock = std::time::Instant::now();
    let ratios =
        gate_workload::paired_ratios(&exec, 41, 20_000, || clock.elapsed().as_nanos() as f64);
    for (name, q) in [("p25", 0.25), ("p50", 0.5), ("p75", 0.75)] {
        println!(
            "BENCH gate.native.paired_ratio.{name} {:.4}",
            gate_workload::quantile(&ratios, q)
        );
    }
}

criterion_group!(benches, gate_per_call, resolve_and_project);

fn main() {
    benches();
    // Only under `cargo bench` (criterion's test mode, `cargo test --benches`, skips it).
    if std::env::args().any(|a| a == "--bench") {
        paired();
    }
    Criterion::default().configure_from_args().final_summary();
}
