//! `/v1/audit`: the page's audit records in (appended durably, idempotent by id) and the
//! trail out (JSON Lines).

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use axum::Json;
use countersign::AuditRecord;
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::{AppState, StoreError};

/// `POST /v1/audit`: a JSON array of audit records. The whole batch is validated first;
/// one bad record refuses the batch and nothing is written. Traced when traces are on.
pub(crate) async fn append_audit(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let Some(traces) = &state.traces else {
        return append(&state, &body).await.map(|(_, answer)| answer);
    };
    let span = traces.audit_batch(&headers, state.audit.kind());
    match append(&state, &body).await {
        Ok((records, answer)) => {
            span.end(
                &records,
                "ok",
                200,
                answer.get("last_seq").and_then(Value::as_u64),
            );
            Ok(answer)
        }
        Err(e) => {
            span.end(&[], e.code.as_str(), e.status.as_u16(), None);
            Err(e)
        }
    }
}

/// Validates and appends a batch; the records as stored (when traces are on), and the
/// answer.
async fn append(
    state: &AppState,
    body: &[u8],
) -> Result<(Vec<AuditRecord>, Json<Value>), ApiError> {
    let values: Vec<Value> = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body must be a JSON array of audit records ({e})"),
        )
    })?;
    if values.len() > state.config.max_audit_batch {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!(
                "a batch holds at most {} records; this one has {}",
                state.config.max_audit_batch,
                values.len()
            ),
        ));
    }
    let records = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<AuditRecord>(v)
                .map(with_summary)
                .map_err(|e| {
                    ApiError::new(
                        ErrorCode::InvalidAuditRecord,
                        format!("record {i} is invalid: {e}"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Only the gateway writes `countersigned` records (when it mints): a page's batch
    // holding one is refused whole, so the trail cannot claim a mint that never was.
    if let Some((i, _)) = records.iter().enumerate().find(|(_, r)| {
        r.event == countersign::audit::AuditEvent::Countersigned
            || r.countersignature.is_some()
            || r.approver.is_some()
    }) {
        return Err(ApiError::new(
            ErrorCode::InvalidAuditRecord,
            format!("record {i} claims a countersignature or an approver; only the gateway records those"),
        ));
    }
    if let Some((i, _)) = records.iter().enumerate().find(|(_, r)| {
        let id = r.id.as_str();
        id.is_empty() || id.len() > 200 || id.chars().any(char::is_control)
    }) {
        return Err(ApiError::new(
            ErrorCode::InvalidAuditRecord,
            format!("record {i} has no usable id"),
        ));
    }
    if let Some((i, _)) = records.iter().enumerate().find(|(_, r)| {
        r.trace
            .as_deref()
            .is_some_and(|t| !countersign::call::is_traceparent(t))
    }) {
        return Err(ApiError::new(
            ErrorCode::InvalidAuditRecord,
            format!("record {i} has a trace that is not a W3C traceparent"),
        ));
    }
    // Kept for the batch's spans only when traces are on: no copy otherwise.
    let traced = if state.traces.is_some() {
        records.clone()
    } else {
        Vec::new()
    };
    let appended = state
        .audit
        .append(records)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(id) => {
                let id: String = id.chars().take(128).collect();
                tracing::warn!(%id, "audit batch refused: another record is stored under this id");
                ApiError::new(
                    ErrorCode::AuditConflict,
                    format!("record `{id}` is stored already with other contents; nothing of the batch was written"),
                )
            }
            e => {
                tracing::error!(error = %e, "audit append failed");
                ApiError::new(
                    ErrorCode::AuditUnavailable,
                    "the audit store could not record the batch; nothing was acknowledged",
                )
            }
        })?;
    Ok((
        traced,
        Json(
            json!({ "appended": appended.appended, "duplicates": appended.duplicates, "last_seq": appended.last_seq }),
        ),
    ))
}

/// `GET /v1/audit`: the chained trail (the file, or the database's rows) as JSON Lines.
pub(crate) async fn export_audit(State(state): State<AppState>) -> Result<Response, ApiError> {
    let bytes = state.audit.export().await.map_err(|e| {
        tracing::error!(error = %e, "audit export failed");
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the audit trail could not be read",
        )
    })?;
    let mut response = Response::new(axum::body::Body::from(bytes));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(response)
}

/// The record with its reason in words, as the trail keeps it: the sentences live
/// here, where the trail is read. A page's own words are never kept (they could say
/// other than the reason).
fn with_summary(mut record: AuditRecord) -> AuditRecord {
    record.summary = crate::summary::summary(&record.reason);
    record
}
