//! `GET /v1/health`: no auth; says whether a model is configured, and whether the page
//! may open its MCP relay.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::AppState;

/// `GET /v1/health`.
pub(crate) async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "ok": true,
        "model": state.config.upstream.is_some(),
        "mcp": state.config.mcp_token.is_some(),
    }))
}
