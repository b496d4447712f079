//! Gate overhead, side by side in one run so the ratio is what counts:
//! - `gate_per_call`: a `Read` action's handler called directly (from typed params and
//!   from the model's JSON text) against the same call through the whole pipeline
//!   (resolve, validate, scope, availability, decide, perform, verify, audit);
//! - `resolve_and_project`: one call and one projection with 10, 100 and 10,000
//!   registered actions (lookup should stay flat; projection is linear by nature).
//!
//! Run with `cargo xtask bench` (or `cargo bench -p countersign --bench gate`).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;

use countersign::{
    Action, AuditRecord, Call, Config, Executor, Kind, Registration, Session, Step, Timestamp,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Clone, Deserialize, JsonSchema)]
struct Lookup {
    /// The key to read.
    key: String,
}

async fn handler(p: Lookup) -> Result<Value, String> {
    Ok(json!({ "key": p.key, "value": 42 }))
}

fn executor(n: usize) -> (Executor, Vec<Registration>, Rc<Cell<u64>>) {
    let records = Rc::new(Cell::new(0u64));
    let count = Rc::clone(&records);
    // The audit sink counts records: the gate's cost of building each one is measured.
    let sink = move |r: AuditRecord| {
        black_box(&r);
        count.set(count.get() + 1);
    };
    let exec = Executor::new(
        Config::new("bench", Session::new("admin", ["s"]), [5; 32]),
        sink,
    );
    let regs = (0..n)
        .map(|i| {
            exec.register(
                Action::<Lookup>::new(format!("read_{i}"), "Read a value.")
                    .kind(Kind::Read)
                    .run(handler),
            )
            .unwrap()
        })
        .collect();
    (exec, regs, records)
}

fn through_gate(exec: &Executor, call: Call) -> Value {
    let now = Timestamp::from_millis(0);
    let Step::Perform(job) = exec.submit(call, now).unwrap() else {
        panic!("a Read action runs without asking")
    };
    let settled = exec.complete(pollster::block_on(job.run()), now).unwrap();
    exec.drain_settled();
    match settled.outcome {
        countersign::Outcome::Done(r) => r.result,
        countersign::Outcome::Refused(r) => panic!("{}", r.message),
    }
}

fn gate_per_call(c: &mut Criterion) {
    let (exec, _regs, _records) = executor(1);
    let raw = r#"{"key":"workspace.name"}"#;
    let mut group = c.benchmark_group("gate_per_call");
    group.bench_function("direct_handler_typed", |b| {
        b.iter(|| {
            pollster::block_on(handler(black_box(Lookup {
                key: "workspace.name".into(),
            })))
        })
    });
    group.bench_function("direct_handler_from_json", |b| {
        b.iter(|| {
            let p: Lookup = serde_json::from_str(black_box(raw)).unwrap();
            pollster::block_on(handler(p))
        })
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

criterion_group!(benches, gate_per_call, resolve_and_project);
criterion_main!(benches);
