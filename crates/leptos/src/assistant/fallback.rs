//! `Fallback`: a model client that falls back to the offline assistant when no model
//! answers, and says so (the dock's "offline assistant" badge).

use std::cell::Cell;
use std::rc::Rc;

use countersign::action::LocalBoxFuture;

use super::client::ModelClient;
use crate::conversation::{ModelError, ModelRequest, ModelTurn};

/// Tries the primary client; on "not configured" or "unreachable" switches to the
/// offline one, until [`FallbackSwitch::set_online`] (the dock's "try the model again").
/// A failing model (5xx), a rate limit, a refusal or a malformed answer is an error to
/// show, never a reason to switch.
pub struct Fallback<P, O> {
    primary: Rc<P>,
    offline: Rc<O>,
    using_offline: Rc<Cell<bool>>,
}

impl<P, O> std::fmt::Debug for Fallback<P, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("using_offline", &self.using_offline.get())
            .finish_non_exhaustive()
    }
}

impl<P: ModelClient + 'static, O: ModelClient + 'static> Fallback<P, O> {
    /// Starts on the primary client unless `start_offline` (e.g. a failed probe).
    pub fn new(primary: P, offline: O, start_offline: bool) -> Self {
        Self {
            primary: Rc::new(primary),
            offline: Rc::new(offline),
            using_offline: Rc::new(Cell::new(start_offline)),
        }
    }
}

impl<P: ModelClient + 'static, O: ModelClient + 'static> Fallback<P, O> {
    /// Asks the primary client with `ask`, unless offline; on "not configured" or
    /// "unreachable" switches to the offline one and asks it the same way.
    fn answer(
        &self,
        request: ModelRequest,
        ask: impl Fn(&dyn ModelClient, ModelRequest) -> LocalBoxFuture<Result<ModelTurn, ModelError>>
            + 'static,
    ) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        let (primary, offline, flag) = (
            Rc::clone(&self.primary),
            Rc::clone(&self.offline),
            Rc::clone(&self.using_offline),
        );
        Box::pin(async move {
            if !flag.get() {
                match ask(primary.as_ref(), request.clone()).await {
                    Err(ModelError::NotConfigured | ModelError::Unavailable(_)) => flag.set(true),
                    other => return other,
                }
            }
            ask(offline.as_ref(), request).await
        })
    }
}

impl<P, O> Fallback<P, O> {
    /// A handle to switch back to the primary client later (e.g. after a probe succeeds).
    pub fn switch(&self) -> FallbackSwitch {
        FallbackSwitch(Rc::clone(&self.using_offline))
    }
}

/// Switches a [`Fallback`] between its primary and offline clients.
#[derive(Clone, Debug)]
pub struct FallbackSwitch(Rc<Cell<bool>>);

impl FallbackSwitch {
    /// Uses the primary client (`true`) or the offline one (`false`) from the next request on.
    pub fn set_online(&self, online: bool) {
        self.0.set(!online);
    }

    /// Whether the offline client is in use.
    pub fn is_offline(&self) -> bool {
        self.0.get()
    }
}

impl<P: ModelClient + 'static, O: ModelClient + 'static> ModelClient for Fallback<P, O> {
    fn complete(&self, request: ModelRequest) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        self.answer(request, |client, request| client.complete(request))
    }

    fn complete_streaming(
        &self,
        request: ModelRequest,
        progress: Rc<dyn Fn(&super::Streaming)>,
    ) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        self.answer(request, move |client, request| {
            client.complete_streaming(request, Rc::clone(&progress))
        })
    }

    fn is_offline(&self) -> bool {
        self.using_offline.get()
    }

    fn request_cap(&self) -> Option<usize> {
        if self.using_offline.get() {
            self.offline.request_cap()
        } else {
            self.primary.request_cap()
        }
    }
}
