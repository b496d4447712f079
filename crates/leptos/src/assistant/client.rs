//! The model client trait.

use countersign::action::LocalBoxFuture;

use crate::conversation::{ModelError, ModelRequest, ModelTurn};

/// Something that answers a conversation with text or tool calls.
pub trait ModelClient {
    /// Answers one request.
    fn complete(&self, request: ModelRequest) -> LocalBoxFuture<Result<ModelTurn, ModelError>>;

    /// Whether this is the built-in offline assistant (the dock shows a badge).
    fn is_offline(&self) -> bool {
        false
    }

    /// Answers one request, reporting what has arrived so far to `progress` while the
    /// answer streams in. Nothing it reports can run: the turn reaches the gate only
    /// when this resolves. Default: [`ModelClient::complete`], no progress.
    fn complete_streaming(
        &self,
        request: ModelRequest,
        progress: std::rc::Rc<dyn Fn(&super::Streaming)>,
    ) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        let _ = progress;
        self.complete(request)
    }

    /// The largest request body this client's server takes, in bytes, if it has a cap:
    /// the assistant drops the oldest turns to fit under it.
    fn request_cap(&self) -> Option<usize> {
        None
    }
}
