//! OpenTelemetry traces, received by a loopback OTLP/HTTP collector that decodes the
//! protobuf it is sent (the official `opentelemetry-proto` messages): a model request
//! is a span under the page's `traceparent` and passes it on to the upstream; an audit
//! batch is a span with one per record (call id, action, outcome, reason), the page's
//! traced calls inside their own trace; no argument value, message text or key in any
//! span.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use countersign::{AuditRecord, Call, Config, Executor, MemoryAudit, Session, Timestamp};
use countersign_gateway::telemetry::Traces;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;

mod common;

use common::{chat_body, config, page_post, serve, state, upstream, Behaviour, Seen};

/// The page's model request: its trace and span.
const PAGE_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PAGE_SPAN: &str = "00f067aa0ba902b7";
/// The page's audit shipping: another trace.
const SHIP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SHIP_SPAN: &str = "b7ad6b7169203331";
/// An argument value that must never reach a span.
const ARGUMENT: &str = "Apollo-argument-value-9d1c";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// One span as the collector received it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace: String,
    span: String,
    parent: String,
    kind: i32,
    attributes: BTreeMap<String, String>,
    links: Vec<(String, String)>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// A collector on loopback: `POST /v1/traces`, protobuf in, protobuf out.
async fn collector() -> (String, Arc<Mutex<Vec<Got>>>) {
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let log = Arc::clone(&got);
    let handler = move |headers: HeaderMap, body: Bytes| {
        let log = Arc::clone(&log);
        async move {
            assert_eq!(
                headers.get("content-type").unwrap(),
                "application/x-protobuf",
                "OTLP/HTTP sends protobuf"
            );
            let request = ExportTraceServiceRequest::decode(body).unwrap();
            let mut log = log.lock().unwrap();
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .map(text)
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        log.push(Got {
                            service: service.clone(),
                            name: span.name,
                            trace: hex(&span.trace_id),
                            span: hex(&span.span_id),
                            parent: hex(&span.parent_span_id),
                            kind: span.kind,
                            attributes: span
                                .attributes
                                .iter()
                                .map(|kv| (kv.key.clone(), text(kv)))
                                .collect(),
                            links: span
                                .links
                                .iter()
                                .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                                .collect(),
                        });
                    }
                }
            }
            (
                [("content-type", "application/x-protobuf")],
                ExportTraceServiceResponse::default().encode_to_vec(),
            )
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/v1/traces", post(handler));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got)
}

/// Real records of three calls the executor refused (no action registered), their
/// arguments carrying [`ARGUMENT`]; the first two traced under the page's model request.
fn records() -> Vec<AuditRecord> {
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new("tr", Session::default(), [2; 32]),
        audit.clone(),
    );
    for i in 0..3u64 {
        let call = Call::new(
            format!("call_{i}"),
            "save_workspace_name",
            format!("{{\"name\":\"{ARGUMENT}\"}}"),
        );
        let call = if i < 2 {
            call.traced(&traceparent(PAGE_TRACE, PAGE_SPAN))
        } else {
            call
        };
        let _ = exec.submit(call, Timestamp::from_millis(i));
    }
    audit.records()
}

async fn traced_gateway(
    collector: &str,
    behaviour: Behaviour,
) -> (String, Traces, Seen, tempfile::TempDir) {
    let (up, seen) = upstream(behaviour).await;
    let endpoint = collector.to_owned();
    let traces = tokio::task::spawn_blocking(move || Traces::otlp(&endpoint, "countersign-test"))
        .await
        .unwrap()
        .unwrap();
    let (state, dir) = state(config(Some(up)));
    let base = serve(state.with_traces(traces.clone())).await;
    (base, traces, seen, dir)
}

async fn flushed(traces: &Traces) {
    let traces = traces.clone();
    tokio::task::spawn_blocking(move || traces.flush())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_is_followed_from_the_page_through_the_gateway_to_the_model() {
    let (collector, got) = collector().await;
    let (base, traces, seen, _dir) = traced_gateway(&collector, Behaviour::Recorded).await;
    let client = reqwest::Client::new();

    let answer = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(false),
    )
    .header("traceparent", traceparent(PAGE_TRACE, PAGE_SPAN))
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let mut records = records();
    assert_eq!(records.len(), 3);
    // The page sends the records: a string longer than the page's own limits is cut.
    records[2].tool_call_id = "x".repeat(1000);
    let stored = page_post(
        &client,
        format!("{base}/v1/audit"),
        serde_json::to_string(&records).unwrap(),
    )
    .header("traceparent", traceparent(SHIP_TRACE, SHIP_SPAN))
    .send()
    .await
    .unwrap();
    assert_eq!(stored.status(), 200);
    // A record whose trace is not a traceparent refuses its batch, traced as refused.
    let mut bad = records.clone();
    bad[0].trace = Some("00-zz".into());
    let refused = page_post(
        &client,
        format!("{base}/v1/audit"),
        serde_json::to_string(&bad).unwrap(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refused.status(), 400);
    flushed(&traces).await;
    let spans = got.lock().unwrap().clone();

    // The model request: a server span under the page's, passed on to the upstream.
    let chat: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name == "chat.completions")
        .collect();
    assert_eq!(chat.len(), 1, "{spans:#?}");
    let chat = chat[0];
    assert_eq!(
        (chat.trace.as_str(), chat.parent.as_str()),
        (PAGE_TRACE, PAGE_SPAN)
    );
    assert_eq!(chat.kind, 2, "server");
    assert_eq!(chat.service, "countersign-test");
    assert_eq!(chat.attributes["gen_ai.request.model"], "gpt-4o-mini");
    assert_eq!(chat.attributes["countersign.outcome"], "ok");
    assert_eq!(chat.attributes["http.response.status_code"], "200");
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].0.get("traceparent").unwrap().to_str().unwrap(),
        traceparent(PAGE_TRACE, &chat.span),
        "the upstream request carries the gateway's span"
    );

    // The batch: a server span under the shipping request's trace.
    let batches: Vec<&Got> = spans.iter().filter(|s| s.name == "audit.append").collect();
    assert_eq!(batches.len(), 2, "{spans:#?}");
    let batch = batches
        .iter()
        .find(|s| s.attributes["countersign.outcome"] == "ok")
        .unwrap();
    assert_eq!(
        (batch.trace.as_str(), batch.parent.as_str()),
        (SHIP_TRACE, SHIP_SPAN)
    );
    assert_eq!(batch.attributes["countersign.audit.records"], "3");
    assert_eq!(batch.attributes["countersign.audit.store"], "file");
    assert_eq!(batch.attributes["countersign.audit.last_seq"], "3");
    let refused = batches
        .iter()
        .find(|s| s.attributes["countersign.outcome"] != "ok")
        .unwrap();
    assert_eq!(
        refused.attributes["countersign.outcome"],
        "invalid_audit_record"
    );
    assert_eq!(refused.attributes["http.response.status_code"], "400");

    // Each record: the call's id, action, outcome and reason; a traced call's records in
    // the model request's trace (linked to the batch), the untraced one under the batch.
    let per_record: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name.starts_with("audit "))
        .collect();
    assert_eq!(per_record.len(), records.len(), "{spans:#?}");
    for record in &records {
        let span = per_record
            .iter()
            .find(|s| record.id == s.attributes["countersign.record_id"])
            .unwrap();
        let call_id: String = record.tool_call_id.chars().take(128).collect();
        assert_eq!(span.attributes["countersign.call_id"], call_id);
        assert_eq!(span.attributes["countersign.action"], &*record.action);
        assert_eq!(
            span.attributes["countersign.outcome"],
            record.outcome.clone().unwrap()
        );
        assert_eq!(span.attributes["countersign.reason"], record.reason.rule());
        if record.trace.is_some() {
            assert_eq!(
                (span.trace.as_str(), span.parent.as_str()),
                (PAGE_TRACE, PAGE_SPAN)
            );
            assert_eq!(span.links, [(batch.trace.clone(), batch.span.clone())]);
        } else {
            assert_eq!(
                (span.trace.as_str(), span.parent.as_str()),
                (SHIP_TRACE, batch.span.as_str())
            );
            assert!(span.links.is_empty());
        }
    }

    // Nothing else was sent, and no span holds an argument, the message or a key.
    assert_eq!(spans.len(), 1 + 2 + records.len(), "{spans:#?}");
    for span in &spans {
        for (key, value) in &span.attributes {
            for secret in [ARGUMENT, "Apollo", common::KEY, "rename the workspace"] {
                assert!(!value.contains(secret), "{key} = {value} in {}", span.name);
            }
            for record in &records {
                assert!(
                    !value.contains(record.args_digest.as_str()),
                    "{key} holds the digest"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_failure_is_a_failed_span_even_unsampled_and_off_means_the_trace_only_passes() {
    let (collector, got) = collector().await;
    let (base, traces, _seen, _dir) =
        traced_gateway(&collector, Behaviour::Status(500, "{}".into())).await;
    let client = reqwest::Client::new();
    let answer = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(true),
    )
    // Sent with the page's "not sampled" flag: the gateway records its span anyway.
    .header("traceparent", format!("00-{PAGE_TRACE}-{PAGE_SPAN}-00"))
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status(), 502);
    flushed(&traces).await;
    let spans = got.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].attributes["countersign.outcome"], "upstream_error");
    assert_eq!(spans[0].attributes["http.response.status_code"], "502");
    assert_eq!(
        (spans[0].trace.as_str(), spans[0].parent.as_str()),
        (PAGE_TRACE, PAGE_SPAN)
    );

    // Without an endpoint nothing is exported; the page's traceparent still reaches the
    // upstream unchanged, and a malformed one is dropped, never passed on.
    let (up, seen) = upstream(Behaviour::Recorded).await;
    let (state, _dir) = state(config(Some(up)));
    let base = serve(state).await;
    for (sent, expected) in [
        (
            traceparent(PAGE_TRACE, PAGE_SPAN),
            Some(traceparent(PAGE_TRACE, PAGE_SPAN)),
        ),
        ("00-not-a-trace\r\nx: y".replace("\r\n", ""), None),
        (
            traceparent("00000000000000000000000000000000", PAGE_SPAN),
            None,
        ),
    ] {
        let answer = page_post(
            &client,
            format!("{base}/v1/chat/completions"),
            chat_body(false),
        )
        .header("traceparent", sent)
        .send()
        .await
        .unwrap();
        assert_eq!(answer.status(), 200);
        let last = seen.requests.lock().unwrap().last().cloned().unwrap();
        assert_eq!(
            last.0
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_owned()),
            expected
        );
    }
    assert_eq!(
        got.lock().unwrap().len(),
        1,
        "an untraced gateway sent spans"
    );
}

/// An action name a model or an MCP client made up (a terminal escape, a forged log
/// line, a bidi override, 10,000 characters more) reaches a record's span escaped and
/// cut: as the page's executor writes it, and as a page that does not escape sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_made_up_action_name_reaches_its_span_escaped_and_cut() {
    let (collector, got) = collector().await;
    let (base, traces, _seen, _dir) = traced_gateway(&collector, Behaviour::Recorded).await;
    let made_up = format!(
        "\u{1b}[2J\nINFO approved by admin\u{202e}{}",
        "x".repeat(10_000)
    );
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new("mu", Session::default(), [2; 32]),
        audit.clone(),
    );
    let call = Call::new("call_mcp", made_up.as_str(), "{}").by(countersign::Caller::Mcp);
    let _ = exec.submit(call, Timestamp::from_millis(1));
    let mut records = audit.records();
    assert_eq!(records.len(), 1, "one refusal: unknown action");
    let mut raw = records[0].clone();
    raw.id = "mu-raw".into();
    raw.action = made_up.clone();
    records.push(raw);
    let stored = page_post(
        &reqwest::Client::new(),
        format!("{base}/v1/audit"),
        serde_json::to_string(&records).unwrap(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(stored.status(), 200);
    flushed(&traces).await;
    let spans = got.lock().unwrap().clone();
    let actions: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("audit ") && s.name != "audit.append")
        .map(|s| s.attributes["countersign.action"].as_str())
        .collect();
    assert_eq!(actions.len(), 2, "{spans:#?}");
    for action in &actions {
        assert!(action.chars().count() <= 128, "{action}");
        assert!(
            !action.chars().any(|c| c.is_control()
                || countersign::text::is_bidi_control(c)
                || countersign::text::is_format_char(c)),
            "{action:?}"
        );
        assert!(action.contains("INFO approved by admin"), "{action}");
    }
    let raw = actions
        .iter()
        .find(|a| a.starts_with("\\u{1b}[2J\\u{a}"))
        .unwrap_or_else(|| panic!("{actions:?}"));
    assert!(raw.contains("admin\\u{202e}xxx"), "{raw}");
}
