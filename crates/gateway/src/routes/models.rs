//! `GET /v1/models`: the configured model, or `not_configured`.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::AppState;

pub(crate) async fn models(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let upstream = state
        .config
        .upstream
        .as_ref()
        .ok_or_else(ApiError::not_configured)?;
    Ok(Json(json!({
        "object": "list",
        "data": [{ "id": upstream.model, "object": "model", "created": 0, "owned_by": "countersign-gateway" }]
    })))
}
