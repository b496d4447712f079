//! The gate benchmark's workload, shared by the native criterion bench (`gate.rs`) and
//! the same measurement in Chromium in wasm32 (`countersign-leptos`'s `tests/perf.rs`),
//! so the two compare the very same code: a `Read` action's handler called directly
//! from the model's JSON, against the same call through the whole gate.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use countersign::{
    executor::Registration, Action, AuditRecord, Call, Config, Executor, Kind, Session, Step,
    Timestamp,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

/// The model's arguments, as raw JSON text.
pub(crate) const RAW: &str = r#"{"key":"workspace.name"}"#;

/// The action's params.
#[derive(Clone, Deserialize, JsonSchema)]
pub(crate) struct Lookup {
    /// The key to read.
    pub(crate) key: String,
}

/// The action's handler: what the page would run anyway.
pub(crate) async fn handler(p: Lookup) -> Result<Value, String> {
    Ok(json!({ "key": p.key, "value": 42 }))
}

/// Polls a future that is ready at once (the handler never waits), on every target.
pub(crate) fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the handler waited"),
    }
}

/// An executor with `n` `Read` actions (`read_0`…), its registrations, and a count of
/// the audit records built (the sink keeps none: building them is what is measured).
pub(crate) fn executor(n: usize) -> (Executor, Vec<Registration>, Rc<Cell<u64>>) {
    let records = Rc::new(Cell::new(0u64));
    let count = Rc::clone(&records);
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

/// The handler called directly, its params parsed from the model's JSON text.
pub(crate) fn direct_from_json(raw: &str) -> Result<Value, String> {
    let p: Lookup = serde_json::from_str(black_box(raw)).unwrap();
    ready(handler(p))
}

/// One call through the whole gate: resolve, validate, scope, availability, decide,
/// perform, verify, two audit records, settlement.
pub(crate) fn through_gate(exec: &Executor, call: Call) -> Value {
    let now = Timestamp::from_millis(0);
    let Step::Perform(job) = exec.submit(call, now).unwrap() else {
        panic!("a Read action runs without asking")
    };
    assert!(exec.complete(ready(job.run()), now));
    // As the page's host does: every settlement is read from the queue.
    let settled = exec.next_settled().unwrap();
    match settled.outcome {
        countersign::Outcome::Done(r) => r.result,
        countersign::Outcome::Refused(r) => panic!("{}", r.message),
    }
}

/// The gate against the handler from JSON, paired: each of `rounds` rounds times `n`
/// direct calls and `n` calls through the gate back to back (alternating which goes
/// first), and keeps their ratio. A machine that changes speed between two criterion
/// benchmarks moves both halves of a round alike, so the ratios hold where the times
/// do not. `now_ns` reads a clock in nanoseconds. Returns the ratios, sorted.
pub(crate) fn paired_ratios(
    exec: &Executor,
    rounds: usize,
    n: u32,
    now_ns: impl Fn() -> f64,
) -> Vec<f64> {
    let direct = || {
        timed(n, &now_ns, || {
            drop(black_box(direct_from_json(black_box(RAW)).unwrap()))
        })
    };
    let gate = || {
        timed(n, &now_ns, || {
            black_box(through_gate(
                exec,
                black_box(Call::new("tc_1", "read_0", RAW)),
            ));
        })
    };
    // Warm up both paths first.
    direct();
    gate();
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|round| {
            let (d, g) = if round % 2 == 0 {
                let d = direct();
                (d, gate())
            } else {
                let g = gate();
                (direct(), g)
            };
            g / d
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// How long `n` calls of `call` take, by the clock `now_ns`.
fn timed(n: u32, now_ns: &impl Fn() -> f64, call: impl Fn()) -> f64 {
    let start = now_ns();
    for _ in 0..n {
        call();
    }
    now_ns() - start
}

/// The value at `q` (0 to 1) of sorted values, nearest rank.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let last = sorted.len().saturating_sub(1);
    let at = ((last as f64) * q).round() as usize;
    sorted.get(at.min(last)).copied().unwrap_or(f64::NAN)
}
