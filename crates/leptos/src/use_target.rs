//! `use_target`: name a page element that handoff steps and cards can point at.

use std::rc::Rc;

use leptos::html::ElementType;
use leptos::prelude::*;
use send_wrapper::SendWrapper;
use wasm_bindgen::JsCast;

use crate::provider::use_countersign;

/// Registers the element behind the returned `NodeRef` as page target `name`.
///
/// A handoff step with `target: Some("verification_code")` highlights this element
/// (outline and `scrollIntoView`) while the step is current. The registration ends
/// when the component unmounts.
///
/// ## Usage
///
/// ```no_run
/// use countersign_leptos::use_target;
/// use leptos::prelude::*;
///
/// # fn component() -> impl IntoView {
/// let code = use_target::<leptos::html::Input>("verification_code");
/// view! { <input node_ref=code /> }
/// # }
/// ```
pub fn use_target<E>(name: &str) -> NodeRef<E>
where
    E: ElementType,
    E::Output: JsCast + Clone + 'static,
{
    let node_ref = NodeRef::<E>::new();
    use_target_ref(name, node_ref);
    node_ref
}

/// Registers the element behind a `NodeRef` the page already holds as page target
/// `name`: [`use_target`] for a Countersign layer that is set up after the page, such
/// as one loaded lazily (`#[lazy]`) once the page is interactive. The registration
/// ends when the calling component (or `Suspense`) unmounts.
///
/// ## Usage
///
/// ```no_run
/// use countersign_leptos::use_target_ref;
/// use leptos::prelude::*;
///
/// # fn later(code: NodeRef<leptos::html::Input>) {
/// // `code` was made by the page with `NodeRef::new()`, before Countersign loaded.
/// use_target_ref("verification_code", code);
/// # }
/// ```
pub fn use_target_ref<E>(name: &str, node_ref: NodeRef<E>)
where
    E: ElementType,
    E::Output: JsCast + Clone + 'static,
{
    let Some(cs) = use_countersign() else {
        return;
    };
    let key = cs.0.page.add_target(
        name,
        Rc::new(move || {
            node_ref
                .get_untracked()
                .map(|e| e.unchecked_into::<web_sys::Element>())
        }),
    );
    let held = SendWrapper::new((cs, name.to_owned()));
    on_cleanup(move || {
        let (cs, name) = held.take();
        cs.0.page.remove_target(&name, key);
    });
}
