//! `GET /v1/health`: no auth; says whether a model is configured.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::AppState;

/// `GET /v1/health`.
pub(crate) async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "ok": true, "model": state.config.upstream.is_some() }))
}
