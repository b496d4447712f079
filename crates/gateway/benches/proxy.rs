//! Gateway benchmarks, side by side in one run:
//! - proxy overhead: `wrk` against the test upstream directly, then through the gateway
//!   (same request, same connections); throughput ratio and added p50/p99 latency;
//! - audit appends durable before the acknowledgement, batch sizes 1 and 100: the file
//!   (`fdatasync` per batch) and PostgreSQL (a throw-away cluster, synchronous commit).
//!
//! Run with `cargo xtask bench` (it installs Debian's `wrk` if missing; `cargo xtask
//! setup` installs PostgreSQL).
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::indexing_slicing
)]

/// The allocator the gateway's binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/postgres.rs"]
mod postgres;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{chat_body, config, serve, state, upstream, Behaviour};
use countersign::AuditRecord;
use countersign_gateway::{FileStore, PgStore, Secret};

struct Load {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn wrk(url: &str, script: &std::path::Path, seconds: u32) -> Load {
    let out = Command::new("wrk")
        .args(["-t2", "-c16", &format!("-d{seconds}s"), "--latency", "-s"])
        .arg(script)
        .arg(url)
        .output()
        .expect("wrk runs (cargo xtask bench installs it)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |prefix: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no `{prefix}` in wrk output:\n{text}"))
            .to_owned()
    };
    assert!(!text.contains("Non-2xx"), "errors under load:\n{text}");
    Load {
        rps: field("Requests/sec:").parse().unwrap(),
        p50_ms: millis(&field("50%")),
        p99_ms: millis(&field("99%")),
    }
}

fn millis(value: &str) -> f64 {
    let (number, factor) = if let Some(v) = value.strip_suffix("us") {
        (v, 0.001)
    } else if let Some(v) = value.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = value.strip_suffix('s') {
        (v, 1000.0)
    } else {
        (value, 1.0)
    };
    number.parse::<f64>().unwrap() * factor
}

fn records(n: usize, offset: usize) -> Vec<AuditRecord> {
    common::records(n, "bench", offset)
}

/// The least any proxy does, for scale: the body forwarded as bytes to `upstream` over
/// the same kind of pooled client, the answer returned as bytes. No auth, no model
/// rewrite, no checks, no redaction: what the gateway costs beyond this is its own.
async fn bare_proxy(upstream: String) -> String {
    use axum::body::Bytes;
    let client = reqwest::Client::new();
    let handler = move |body: Bytes| {
        let (client, upstream) = (client.clone(), upstream.clone());
        async move {
            let answer = client
                .post(upstream)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let bytes = answer.bytes().await.unwrap();
            ([("content-type", "application/json")], bytes)
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1/chat/completions")
}

fn main() {
    let seconds: u32 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pair = |behaviour: Behaviour| {
        rt.block_on(async {
            let (up, _seen) = upstream(behaviour).await;
            let mut cfg = config(Some(up.clone()));
            cfg.access.token = Some(Secret::new("bench-token"));
            cfg.upstream_timeout = Duration::from_secs(30);
            let (s, dir) = state(cfg);
            std::mem::forget(dir);
            let base = serve(s).await;
            let bare = bare_proxy(format!("{up}/chat/completions")).await;
            (
                format!("{up}/chat/completions"),
                format!("{base}/v1/chat/completions"),
                bare,
            )
        })
    };
    let script = std::env::temp_dir().join("countersign-bench-post.lua");
    let body = chat_body(false).replace('\\', "\\\\").replace('"', "\\\"");
    std::fs::write(
        &script,
        format!("wrk.method = \"POST\"\nwrk.body = \"{body}\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Authorization\"] = \"Bearer bench-token\"\n"),
    )
    .unwrap();
    // Two upstreams: one that answers at once (the gateway's pure CPU cost, on the same
    // two cores as the upstream and wrk), and one that takes 20 ms like a (fast) model.
    for (label, behaviour) in [
        ("instant upstream", Behaviour::Recorded),
        (
            "upstream taking 20 ms per answer",
            Behaviour::Slow(Duration::from_millis(20)),
        ),
    ] {
        let (direct, gateway, bare) = pair(behaviour);
        // Warm the paths, then measure them back to back in this one run.
        let _ = wrk(&direct, &script, 1);
        let _ = wrk(&gateway, &script, 1);
        let _ = wrk(&bare, &script, 1);
        let d = wrk(&direct, &script, seconds);
        let g = wrk(&gateway, &script, seconds);
        let b = wrk(&bare, &script, seconds);
        println!("\n## Proxy overhead, {label} (wrk -t2 -c16 -d{seconds}s, POST /v1/chat/completions, 1.3 KB completion)\n");
        println!("| path | requests/s | p50 | p99 |\n| --- | --- | --- | --- |");
        println!(
            "| test upstream directly | {:.0} | {:.3} ms | {:.3} ms |",
            d.rps, d.p50_ms, d.p99_ms
        );
        println!(
            "| through the gateway | {:.0} | {:.3} ms | {:.3} ms |",
            g.rps, g.p50_ms, g.p99_ms
        );
        println!(
            "| through a bare forwarding proxy (the floor: bytes in, bytes out, no checks) | {:.0} | {:.3} ms | {:.3} ms |",
            b.rps, b.p50_ms, b.p99_ms
        );
        println!(
            "\nthroughput ratio {:.2} (target >= 0.5 instant, >= 0.95 at 20 ms); added p50 {:.3} ms (target <= 0.3 ms), added p99 {:.3} ms",
            g.rps / d.rps,
            g.p50_ms - d.p50_ms,
            g.p99_ms - d.p99_ms
        );
        println!(
            "bare proxy / direct {:.2} (any proxy in this process: the ceiling); gateway / bare proxy {:.2}; added p50 over the bare proxy {:.3} ms",
            b.rps / d.rps,
            g.rps / b.rps,
            g.p50_ms - b.p50_ms
        );
    }

    println!("\n## Audit appends, durable before acknowledging: the file (fdatasync) and PostgreSQL (synchronous commit)\n");
    println!(
        "| store | batch size | records | seconds | records/s |\n| --- | --- | --- | --- | --- |"
    );
    let dir = tempfile::tempdir().unwrap();
    let key = countersign_gateway::ChainKey::new([1; 32]);
    let file = FileStore::open(dir.path().join("bench.jsonl"), key.clone()).unwrap();
    let cluster = postgres::Cluster::start();
    let database = rt.block_on(PgStore::connect(&cluster.url(), key)).unwrap();
    let mut offset = 0;
    let mut at_100 = Vec::new();
    for (batch, batches) in [(1usize, 300usize), (100, 200)] {
        for store in ["file", "PostgreSQL"] {
            let prepared: Vec<Vec<AuditRecord>> = (0..batches)
                .map(|b| records(batch, offset + b * batch))
                .collect();
            offset += batch * batches;
            let started = Instant::now();
            for records in prepared {
                if store == "file" {
                    file.append_blocking(records).unwrap();
                } else {
                    rt.block_on(database.append(records)).unwrap();
                }
            }
            let elapsed = started.elapsed().max(Duration::from_micros(1));
            let total = batch * batches;
            let rate = total as f64 / elapsed.as_secs_f64();
            if batch == 100 {
                at_100.push(rate);
            }
            println!(
                "| {store} | {batch} | {total} | {:.3} | {rate:.0} |",
                elapsed.as_secs_f64(),
            );
        }
    }
    if let [file, database] = at_100[..] {
        println!("\nPostgreSQL / file at batch 100: {:.2}", database / file);
    }
    drop(cluster);
    println!("\ntarget: >= 20,000 records/s at batch 100");
}
