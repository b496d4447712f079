//! Whether an event is a real DOM event, by `Event.prototype`'s native `timeStamp`
//! getter, taken before later page scripts could replace it.

use wasm_bindgen::JsCast;

thread_local! {
    /// `Event.prototype`'s native `timeStamp` getter, taken once when the page starts.
    static TIME_STAMP: Option<js_sys::Function> = web_sys::window().and_then(|w| {
        let event = js_sys::Reflect::get(&w, &"Event".into()).ok()?;
        let proto = js_sys::Reflect::get(&event, &"prototype".into()).ok()?;
        let descriptor =
            js_sys::Reflect::get_own_property_descriptor(&proto.into(), &"timeStamp".into()).ok()?;
        js_sys::Reflect::get(&descriptor, &"get".into()).ok()?.dyn_into().ok()
    });
}

/// Whether `event` is a real DOM event: the native getter throws on anything else (a
/// plain object a script passed with `isTrusted: true`). Defence in depth only: a
/// script in the page can do much more (see the README's trust model).
pub(crate) fn is_real_event(event: &web_sys::Event) -> bool {
    TIME_STAMP.with(|getter| getter.as_ref().is_some_and(|g| g.call0(event).is_ok()))
}

/// Takes the native getter now, before later page scripts could replace it.
pub(crate) fn remember_event_brand() {
    TIME_STAMP.with(|_| ());
}
