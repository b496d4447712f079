//! The trail as a verifiable log (RFC 9162): `GET /v1/log/head` signs the current tree
//! head, `GET /v1/log/proof?first=M` proves that the first `M` lines are unchanged in it,
//! and `GET /v1/log/inclusion?index=I` that line `I` is in it. Each leaf is one line of
//! the trail as exported (the same bytes from the file and from PostgreSQL), so anyone
//! holding an earlier signed head can check, without the audit key, that nothing it
//! covered was removed or rewritten.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Query, State};
use axum::Json;
use countersign_verify::log::{self, Hash, TreeHead};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::AppState;

/// The leaf hashes of the trail as it is now, in order.
async fn leaves(state: &AppState) -> Result<Vec<Hash>, ApiError> {
    Ok(lines(state)
        .await?
        .iter()
        .map(|l| log::leaf_hash(l))
        .collect())
}

/// The trail's lines as it is now, in order (each without its newline).
async fn lines(state: &AppState) -> Result<Vec<Vec<u8>>, ApiError> {
    let bytes = state.audit.export_checked().await.map_err(|e| {
        tracing::error!(error = %e, "the trail does not check under the audit key; no log head");
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the audit trail could not be read, or does not check under its key: no head is signed over it",
        )
    })?;
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// The signed head of the tree over `leaves`, with its size and root, and `more`.
fn signed_head(
    state: &AppState,
    leaves: &[Hash],
    more: serde_json::Map<String, Value>,
) -> Result<Value, ApiError> {
    let head = TreeHead {
        iss: state.config.issuer.clone(),
        iat: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        tree_size: leaves.len() as u64,
        root_hash: log::to_hex(&log::root(leaves)),
    };
    let signed = state.signer.sign_tree_head(&head).map_err(|_| {
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the tree head could not be encoded",
        )
    })?;
    let mut answer = more;
    answer.insert("tree_size".into(), json!(head.tree_size));
    answer.insert("root_hash".into(), json!(head.root_hash));
    answer.insert("signed".into(), json!(signed));
    Ok(Value::Object(answer))
}

/// `GET /v1/log/head`: the current tree head, signed with the key the JWKS publishes.
pub(crate) async fn head(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let leaves = leaves(&state).await?;
    Ok(Json(signed_head(&state, &leaves, serde_json::Map::new())?))
}

/// The query of `GET /v1/log/proof`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProofQuery {
    /// The size of the earlier head.
    first: u64,
}

/// `GET /v1/log/proof?first=M`: the current signed head and the consistency proof from
/// the tree of the first `M` lines to it.
pub(crate) async fn proof(
    State(state): State<AppState>,
    query: Result<Query<ProofQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Ok(Query(query)) = query else {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`first` (the earlier head's tree_size) is required, as a number",
        ));
    };
    let leaves = leaves(&state).await?;
    if query.first > leaves.len() as u64 {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "the log holds {} lines, fewer than the {} of that head: it was cut",
                leaves.len(),
                query.first
            ),
        ));
    }
    let first = usize::try_from(query.first).unwrap_or(usize::MAX);
    let proof: Vec<String> = log::consistency_proof(first, &leaves)
        .iter()
        .map(log::to_hex)
        .collect();
    let mut more = serde_json::Map::new();
    more.insert("first".into(), json!(query.first));
    more.insert("proof".into(), json!(proof));
    Ok(Json(signed_head(&state, &leaves, more)?))
}

/// The query of `GET /v1/log/inclusion`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InclusionQuery {
    /// The line's index, from 0 (its `seq` minus one).
    index: u64,
}

/// `GET /v1/log/inclusion?index=I`: the current signed head, line `I` with its leaf hash,
/// and the proof that it is in the tree.
pub(crate) async fn inclusion(
    State(state): State<AppState>,
    query: Result<Query<InclusionQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Ok(Query(query)) = query else {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`index` (the line's seq minus one) is required, as a number",
        ));
    };
    let lines = lines(&state).await?;
    let leaves: Vec<Hash> = lines.iter().map(|l| log::leaf_hash(l)).collect();
    let index = usize::try_from(query.index).unwrap_or(usize::MAX);
    let (Some(leaf), Some(line)) = (leaves.get(index), lines.get(index)) else {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("the log holds {} lines", leaves.len()),
        ));
    };
    let proof: Vec<String> = log::inclusion_proof(index, &leaves)
        .iter()
        .map(log::to_hex)
        .collect();
    let mut more = serde_json::Map::new();
    more.insert("index".into(), json!(query.index));
    more.insert("leaf_hash".into(), json!(log::to_hex(leaf)));
    // The line itself, so the asker can hash it and read what it records.
    more.insert("line".into(), json!(String::from_utf8_lossy(line)));
    more.insert("proof".into(), json!(proof));
    Ok(Json(signed_head(&state, &leaves, more)?))
}
