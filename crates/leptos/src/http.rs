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
    fetch_full(method, url, body, None, timeout_ms)
        .await
        .map(|r| (r.status, r.body))
}

/// An answer: its status, body, and `Retry-After` in seconds when it gave one.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) retry_after_s: Option<u32>,
}

/// [`fetch`] with one more request `header`, keeping the `Retry-After` header (seconds;
/// an HTTP date counts as absent).
pub(crate) async fn fetch_full(
    method: &str,
    url: &str,
    body: Option<&str>,
    header: Option<(&str, &str)>,
    timeout_ms: u32,
) -> Result<Answer, String> {
    let (response, _, timer) = send(method, url, body, header, timeout_ms).await?;
    let answer = whole(response).await;
    drop(timer);
    answer
}

/// POSTs the arguments the person approved (as JSON, exactly as digested into the
/// token) to `url` with the token in the `Countersignature` header, as an action
/// declared with [`countersign::Action::run_countersigned`] sends its own backend
/// request; returns the status and body text. The backend checks the token
/// (`countersign-verify`, or any JOSE library) against the action and that body.
pub async fn post_countersigned(
    url: &str,
    token: &countersign::countersignature::Countersignature,
) -> Result<(u16, String), String> {
    let body = serde_json::to_string(token.arguments()).map_err(|e| e.to_string())?;
    let header = ("countersignature", token.as_str());
    let (response, _, timer) = send("POST", url, Some(&body), Some(header), 15_000).await?;
    let answer = whole(response).await;
    drop(timer);
    answer.map(|a| (a.status, a.body))
}

/// Sends a JSON request that the returned timer aborts after `timeout_ms` (keep it
/// alive for as long as the body is read), with the controller that aborts it.
async fn send(
    method: &str,
    url: &str,
    body: Option<&str>,
    header: Option<(&str, &str)>,
    timeout_ms: u32,
) -> Result<
    (
        web_sys::Response,
        web_sys::AbortController,
        gloo_timers::callback::Timeout,
    ),
    String,
> {
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
    if let Some((name, value)) = header {
        request.headers().set(name, value).map_err(js_error)?;
    }
    let timer = abort_after(&abort, timeout_ms);
    let response = JsFuture::from(window.fetch_with_request(&request))
        .await
        .map_err(js_error)?;
    Ok((response.dyn_into().map_err(js_error)?, abort, timer))
}

/// A timer that aborts the request `timeout_ms` from now (dropping it cancels that).
fn abort_after(
    abort: &web_sys::AbortController,
    timeout_ms: u32,
) -> gloo_timers::callback::Timeout {
    let abort = abort.clone();
    gloo_timers::callback::Timeout::new(timeout_ms, move || abort.abort())
}

/// The whole body of an answer, with its status and `Retry-After`.
async fn whole(response: web_sys::Response) -> Result<Answer, String> {
    let text = JsFuture::from(response.text().map_err(js_error)?)
        .await
        .map_err(js_error)?;
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

/// What a streaming request got: an event stream (fed to `on_text` as it arrived), or a
/// whole answer (an error, or an upstream that does not stream).
pub(crate) enum Streamed {
    /// The body was an event stream, already handed over piece by piece.
    Stream,
    /// The body in one piece.
    Whole(Answer),
}

/// Sends a request; an event-stream answer is decoded (UTF-8 across chunk boundaries)
/// and handed to `on_text` as it arrives. A connection that breaks mid-stream just ends
/// the stream: whoever reads it decides whether it was complete. `silence_ms` is how
/// long the server may say nothing (before its answer, and between two chunks): a long
/// answer that keeps streaming is never cut.
pub(crate) async fn fetch_streaming(
    url: &str,
    body: &str,
    header: Option<(&str, &str)>,
    silence_ms: u32,
    mut on_text: impl FnMut(&str),
) -> Result<Streamed, String> {
    let (response, abort, mut timer) = send("POST", url, Some(body), header, silence_ms).await?;
    let status = response.status();
    let event_stream = response
        .headers()
        .get("content-type")
        .ok()
        .flatten()
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    let body = response
        .body()
        .filter(|_| event_stream && (200..300).contains(&status));
    let Some(body) = body else {
        let answer = whole(response).await;
        drop(timer);
        return answer.map(Streamed::Whole);
    };
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let decoder = web_sys::TextDecoder::new().map_err(js_error)?;
    let options = web_sys::TextDecodeOptions::new();
    options.set_stream(true);
    loop {
        // A broken connection rejects the read: the stream simply ends here.
        let Ok(chunk) = JsFuture::from(reader.read()).await else {
            break;
        };
        let done = js_sys::Reflect::get(&chunk, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            break;
        }
        let Ok(value) = js_sys::Reflect::get(&chunk, &"value".into()) else {
            break;
        };
        let Ok(bytes) = value.dyn_into::<js_sys::Uint8Array>() else {
            break;
        };
        // Something arrived: the silence starts again.
        timer = abort_after(&abort, silence_ms);
        if let Ok(text) = decoder.decode_with_js_u8_array_and_options(&bytes, &options) {
            on_text(&text);
        }
    }
    drop(timer);
    Ok(Streamed::Stream)
}
