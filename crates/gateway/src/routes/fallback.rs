//! Answers for what no route takes: an unknown path, a method a route does not take.

use crate::error::{ApiError, ErrorCode};

/// Any path no route takes.
pub(crate) async fn unknown_route() -> ApiError {
    ApiError::new(ErrorCode::UnknownRoute, "there is no such route")
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this route does not take that method",
    )
}
