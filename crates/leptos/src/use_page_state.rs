//! `use_page_state`: read-only page state the assistant may see.

use std::rc::Rc;

use leptos::prelude::*;
use send_wrapper::SendWrapper;
use serde::Serialize;

use crate::provider::use_countersign;

/// Exposes `read()` to the model under `key`, read-only, while the component is mounted.
///
/// The built-in action `read_page_state` (kind `Read`, never asks) returns these
/// values, so the assistant can answer "what is the workspace called?" without a call
/// that changes anything. `read` runs on demand, so it reports the page as it is now.
///
/// ## Usage
///
/// ```no_run
/// use countersign_leptos::use_page_state;
/// use leptos::prelude::*;
///
/// # fn component() {
/// let name = RwSignal::new(String::from("Atlas"));
/// use_page_state("workspace_name", move || name.get());
/// # }
/// ```
pub fn use_page_state<T, F>(key: &str, read: F)
where
    T: Serialize,
    F: Fn() -> T + 'static,
{
    let Some(cs) = use_countersign() else {
        return;
    };
    let handle = cs.0.page.add_state(
        key,
        // Read untracked: the model's read is no reactive context, so `todos.with(…)`
        // works as written, without Leptos warning on every read.
        Rc::new(move || serde_json::to_value(untrack(&read)).unwrap_or(serde_json::Value::Null)),
    );
    let held = SendWrapper::new((cs, key.to_owned()));
    on_cleanup(move || {
        let (cs, key) = held.take();
        cs.0.page.remove_state(&key, handle);
    });
}
