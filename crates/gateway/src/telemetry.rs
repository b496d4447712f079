//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf), off unless an endpoint is
//! configured (`--otlp-endpoint`, or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! - Each proxied model request is a `chat.completions` span (kind server), a child of
//!   the page's `traceparent`; the upstream request carries this span as its
//!   `traceparent`, so one trace runs page → gateway → model provider.
//! - Each audit batch is an `audit.append` span, and each record in it an `audit <event>`
//!   span with the call's id, action, outcome and reason. A record the page traced
//!   ([`countersign::Call::trace`]) is a child of that trace, so the call's approval and
//!   its end sit in the trace of the model request it came from; the batch is linked.
//!
//! What a span never holds: argument values (a record has only their keyed digest, which
//! is left out too), message text, keys, tokens, pairing codes. Strings copied from
//! records have their control, bidi and format characters escaped and are cut to 128
//! characters. A streamed answer's span ends when its headers are sent: how the stream
//! ended is not in it. The gateway samples every span itself, whatever the page's
//! `traceparent` flags say.

use axum::http::{HeaderMap, HeaderValue};
use countersign::AuditRecord;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

/// The trace exporter and the gateway's tracer. Cheap to clone.
#[derive(Clone)]
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traces(..)")
    }
}

/// The longest text a span attribute copies from a record: the page sends the records,
/// so their strings are bounded here whatever the page's own limits were.
const MAX_ATTRIBUTE_CHARS: usize = 128;

/// A record's text as a span attribute. The page sends the records, and an action name
/// in them is whatever a model or an MCP client made up: control, bidi and invisible
/// format characters are escaped (`\u{1b}`), so none can forge a line or reorder text
/// where the trace is read, and the result is cut to [`MAX_ATTRIBUTE_CHARS`] characters
/// (an escape is never split).
fn bounded(text: &str) -> String {
    let mut out = String::new();
    let mut room = MAX_ATTRIBUTE_CHARS;
    for c in text.chars() {
        let hidden = c.is_control()
            || countersign::text::is_bidi_control(c)
            || countersign::text::is_format_char(c);
        let piece: String = if hidden {
            c.escape_unicode().collect()
        } else {
            c.into()
        };
        let Some(left) = room.checked_sub(piece.chars().count()) else {
            break;
        };
        room = left;
        out.push_str(&piece);
    }
    out
}

/// The parent a request names in its `traceparent` header (none if absent or malformed).
fn parent_of(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&HeaderExtractor(headers))
}

/// The context of a record's own `traceparent`, if it has a well-formed one.
fn context_of(traceparent: &str) -> Option<SpanContext> {
    if !countersign::call::is_traceparent(traceparent) {
        return None;
    }
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", HeaderValue::from_str(traceparent).ok()?);
    let cx = parent_of(&headers);
    let span = cx.span().span_context().clone();
    span.is_valid().then_some(span)
}

impl Traces {
    /// Exports to the OTLP/HTTP collector at `endpoint` (its base: `/v1/traces` is
    /// added), as service `service`. The exporter's blocking HTTP client must be built
    /// outside an async context: call this before the runtime, or in `spawn_blocking`.
    pub fn otlp(endpoint: &str, service: &str) -> Result<Self, String> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .map_err(|e| format!("the OTLP exporter: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            // The gateway records its own spans whatever the page's sampled flag says.
            .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("countersign-gateway");
        Ok(Self { provider, tracer })
    }

    /// Sends every finished span now (blocking).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!(error = %e, "traces could not be flushed");
        }
    }

    /// Flushes and stops the exporter (blocking).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "the trace exporter did not stop cleanly");
        }
    }

    /// A server span for a `POST` to `route`, under the page's `traceparent`.
    fn server_span(
        &self,
        headers: &HeaderMap,
        name: &'static str,
        route: &'static str,
        more: impl IntoIterator<Item = KeyValue>,
    ) -> Context {
        let parent = parent_of(headers);
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("http.route", route),
        ];
        attributes.extend(more);
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        parent.with_span(span)
    }

    /// Starts the span of one proxied model request, under the page's `traceparent`.
    pub(crate) fn model_request(&self, headers: &HeaderMap, model: &str) -> ModelSpan {
        ModelSpan(self.server_span(
            headers,
            "chat.completions",
            "/v1/chat/completions",
            [
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.request.model", model.to_owned()),
            ],
        ))
    }

    /// Starts the span of one audit batch, under the page's `traceparent`.
    pub(crate) fn audit_batch(&self, headers: &HeaderMap, store: &'static str) -> BatchSpan {
        BatchSpan {
            cx: self.server_span(
                headers,
                "audit.append",
                "/v1/audit",
                [KeyValue::new("countersign.audit.store", store)],
            ),
            tracer: self.tracer.clone(),
        }
    }
}

/// Ends a server span with the answer's status and outcome (`ok` or the error code); an
/// outcome other than `ok` is the span's error status.
fn finish(cx: &Context, status: u16, outcome: &str) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status),
    ));
    span.set_attribute(KeyValue::new("countersign.outcome", outcome.to_owned()));
    if outcome != "ok" {
        span.set_status(Status::error(outcome.to_owned()));
    }
    span.end();
}

/// The span of a model request in flight.
pub(crate) struct ModelSpan(Context);

impl ModelSpan {
    /// The `traceparent` the upstream request carries: this span.
    pub(crate) fn traceparent(&self) -> Option<HeaderValue> {
        let mut headers = HeaderMap::new();
        TraceContextPropagator::new().inject_context(&self.0, &mut HeaderInjector(&mut headers));
        headers.remove("traceparent")
    }

    /// Ends the span with the answer's status and outcome (`ok` or the error code).
    pub(crate) fn end(self, status: u16, outcome: &str, streamed: bool) {
        self.0
            .span()
            .set_attribute(KeyValue::new("countersign.streamed", streamed));
        finish(&self.0, status, outcome);
    }
}

/// The span of an audit batch in flight.
pub(crate) struct BatchSpan {
    cx: Context,
    tracer: SdkTracer,
}

impl BatchSpan {
    /// Ends the batch's span: one child span per record the store took (`appended`
    /// true) or refused with the batch, and the outcome (`ok` or the error code).
    pub(crate) fn end(
        self,
        records: &[AuditRecord],
        outcome: &str,
        status: u16,
        last_seq: Option<u64>,
    ) {
        let batch = self.cx.span().span_context().clone();
        for record in records {
            self.record_span(record, &batch, outcome);
        }
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "countersign.audit.records",
            i64::try_from(records.len()).unwrap_or(i64::MAX),
        ));
        if let Some(seq) = last_seq {
            // The trail's length after the batch, kept outside the trail: a tail cut
            // later (with an old head put back) disagrees with it.
            span.set_attribute(KeyValue::new(
                "countersign.audit.last_seq",
                i64::try_from(seq).unwrap_or(i64::MAX),
            ));
        }
        finish(&self.cx, status, outcome);
    }

    fn record_span(&self, record: &AuditRecord, batch: &SpanContext, stored: &str) {
        let event = serde_json::to_value(record.event)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let caller = record.caller.as_str();
        let mut attributes = vec![
            KeyValue::new("countersign.record_id", bounded(record.id.as_str())),
            KeyValue::new("countersign.session", bounded(&record.session)),
            KeyValue::new(
                "countersign.call",
                i64::try_from(record.call).unwrap_or(i64::MAX),
            ),
            KeyValue::new("countersign.call_id", bounded(&record.tool_call_id)),
            KeyValue::new("countersign.caller", caller),
            KeyValue::new("countersign.action", bounded(&record.action)),
            KeyValue::new("countersign.event", event.clone()),
            KeyValue::new("countersign.reason", record.reason.rule()),
            KeyValue::new("countersign.stored", stored.to_owned()),
        ];
        if let Some(outcome) = &record.outcome {
            attributes.push(KeyValue::new("countersign.outcome", bounded(outcome)));
        }
        // The call's own trace when the page traced it; else the batch's.
        let own = record.trace.as_deref().and_then(context_of);
        let parent = match &own {
            Some(span) => Context::new().with_remote_span_context(span.clone()),
            None => self.cx.clone(),
        };
        let mut builder = self
            .tracer
            .span_builder(format!("audit {event}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        if own.is_some() {
            builder = builder.with_links(vec![Link::with_context(batch.clone())]);
        }
        builder.start_with_context(&self.tracer, &parent).end();
    }
}
