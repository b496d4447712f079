//! One small `fetch` for the page's own-origin JSON calls, with a timeout.

use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Sends a request and returns the status and body text; `Err` when the network failed
/// or the timeout (which aborts the request) passed first.
pub(crate) async fn fetch(
    method: &str,
    url: &str,
    body: Option<&str>,
    timeout_ms: u32,
) -> Result<(u16, String), String> {
    fetch_full(method, url, body, timeout_ms)
        .await
        .map(|r| (r.status, r.body))
}

/// An answer: its status, body, and `Retry-After` in seconds when it gave one.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) retry_after_s: Option<u32>,
}

/// [`fetch`], keeping the `Retry-After` header (seconds; an HTTP date counts as absent).
pub(crate) async fn fetch_full(
    method: &str,
    url: &str,
    body: Option<&str>,
    timeout_ms: u32,
) -> Result<Answer, String> {
    let window = web_sys::window().ok_or("no window")?;
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
    }
    let abort = web_sys::AbortController::new().map_err(js_error)?;
    init.set_signal(Some(&abort.signal()));
    let request = web_sys::Request::new_with_str_and_init(url, &init).map_err(js_error)?;
    request
        .headers()
        .set("content-type", "application/json")
        .map_err(js_error)?;
    let timer = gloo_timers::callback::Timeout::new(timeout_ms, move || abort.abort());
    let response = JsFuture::from(window.fetch_with_request(&request))
        .await
        .map_err(js_error)?;
    let response: web_sys::Response = response.dyn_into().map_err(js_error)?;
    let text = JsFuture::from(response.text().map_err(js_error)?)
        .await
        .map_err(js_error)?;
    drop(timer);
    let retry_after_s = response
        .headers()
        .get("retry-after")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u32>().ok());
    Ok(Answer {
        status: response.status(),
        body: text.as_string().unwrap_or_default(),
        retry_after_s,
    })
}

fn js_error(value: JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| "the request failed".into())
}
