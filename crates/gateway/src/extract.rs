//! The JSON body extractor: declared `application/json`, within the body cap (a JSON 413
//! otherwise), read whole.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};

use crate::error::{ApiError, ErrorCode};
use crate::AppState;

/// A request body declared `application/json`, read within the cap. Parsing is the
/// handler's, so each route words its own errors.
#[derive(Debug)]
pub(crate) struct JsonBody(pub(crate) Bytes);

impl FromRequest<AppState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let declared = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !declared {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as `application/json`",
            ));
        }
        let max = state.config.max_body_bytes;
        Bytes::from_request(request, state)
            .await
            .map(JsonBody)
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        ErrorCode::PayloadTooLarge,
                        format!("the body is over the limit of {max} bytes"),
                    )
                } else {
                    ApiError::new(ErrorCode::UnreadableBody, "the body could not be read")
                }
            })
    }
}
