//! The model client trait.

use countersign::LocalBoxFuture;

use super::message::{ModelError, ModelRequest, ModelTurn};

/// Something that answers a conversation with text or tool calls.
pub trait ModelClient {
    /// Answers one request.
    fn complete(&self, request: ModelRequest) -> LocalBoxFuture<Result<ModelTurn, ModelError>>;

    /// Whether this is the built-in offline assistant (the dock shows a badge).
    fn is_offline(&self) -> bool {
        false
    }
}
