//! `use_action`: declare an action from a component, for the component's lifetime.

use countersign::Action;
use leptos::prelude::*;
use schemars::JsonSchema;
use send_wrapper::SendWrapper;
use serde::de::DeserializeOwned;

use crate::provider::use_countersign;

/// Options for [`use_action_with_options`].
#[derive(Clone, Debug, Default)]
pub struct UseActionOptions {
    /// A page target (see [`crate::use_target`]) the dock points at while this action's
    /// approval card is shown. Default: none.
    pub target: Option<String>,
}

impl UseActionOptions {
    /// Binds the action to the page target `name`.
    pub fn target(mut self, name: impl Into<String>) -> Self {
        self.target = Some(name.into());
        self
    }
}

/// What [`use_action`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseActionReturn {
    /// The action's id.
    pub id: String,
    /// Whether it was registered, and why not (also logged to the console).
    pub registered: Registered,
}

/// Whether [`use_action`] registered the action. Unless it did, the model cannot call it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registered {
    /// Registered while the component is mounted.
    Yes,
    /// No `provide_countersign` above the component.
    NoProvider,
    /// The declaration was refused, for this reason.
    Refused(String),
}

/// Registers `action` while the calling component is mounted.
///
/// Unmounting unregisters it; a call waiting for approval or a handoff then settles as
/// `UNAVAILABLE` and its card disappears. Availability can follow a signal:
/// `.available(move || !archived.get_untracked())` hides the action from the model and
/// refuses its calls while the signal says so.
///
/// ## Usage
///
/// ```no_run
/// use countersign::{Action, Confirm, Kind, action::NoParams};
/// use countersign_leptos::use_action;
///
/// # fn component() {
/// use_action(
///     Action::<NoParams>::new("archive_workspace", "Archive the workspace.")
///         .kind(Kind::Danger)
///         .run(|_| async { Ok::<_, String>(()) }),
/// );
/// # }
/// ```
pub fn use_action<P>(action: Action<P>) -> UseActionReturn
where
    P: DeserializeOwned + JsonSchema + Clone + 'static,
{
    use_action_with_options(action, UseActionOptions::default())
}

/// [`use_action`] with options.
pub fn use_action_with_options<P>(action: Action<P>, options: UseActionOptions) -> UseActionReturn
where
    P: DeserializeOwned + JsonSchema + Clone + 'static,
{
    let id = action.id().to_owned();
    let Some(cs) = use_countersign() else {
        leptos::logging::error!(
            "countersign: `{id}` not registered: no provide_countersign above this component"
        );
        return UseActionReturn {
            id,
            registered: Registered::NoProvider,
        };
    };
    match cs.executor().register(action) {
        Ok(registration) => {
            if let Some(target) = options.target {
                cs.0.page.bind_action_target(&id, &target);
            }
            cs.pump();
            let held = SendWrapper::new((registration, cs, id.clone()));
            on_cleanup(move || {
                let (registration, cs, id) = held.take();
                registration.unregister();
                cs.0.page.unbind_action_target(&id);
                cs.pump();
            });
            UseActionReturn {
                id,
                registered: Registered::Yes,
            }
        }
        Err(e) => {
            leptos::logging::error!("countersign: {e}");
            UseActionReturn {
                id,
                registered: Registered::Refused(e.to_string()),
            }
        }
    }
}
