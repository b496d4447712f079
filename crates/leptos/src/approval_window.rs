//! The approval window, from the page: a call the server approves only in its
//! Countersign window is opened there, and the page waits for the person's decision. The
//! window draws its own card and mints the token; the page only carries it to the run.

use countersign::countersignature::{Countersignature, MintRequest};
use serde_json::Value;

use crate::http::fetch;

/// How long one wait for the window's decision is held open, in seconds.
const WAIT_S: u32 = 25;

/// Opens `request` in the approval window (the gateway beside `endpoint`, which is its
/// `/v1/countersign`) and waits for the person there: the token, or why there is none.
pub(crate) async fn approve(
    endpoint: &str,
    request: &MintRequest,
) -> Result<Countersignature, String> {
    // Opened at once, while the person's click still lets a page open a window; sent to
    // the window's address when the gateway gives it. Blocked: nothing is asked for.
    let Some(popup) = web_sys::window().and_then(|w| {
        w.open_with_url_and_target_and_features("", "countersign-window", "popup")
            .ok()
            .flatten()
    }) else {
        return Err("the browser did not open the Countersign approval window: allow pop-ups for this page, then approve again".into());
    };
    let decided = decide(endpoint, request, &popup).await;
    if decided.is_err() {
        let _ = popup.close();
    }
    decided
}

/// Opens the request, sends `popup` to the window, and waits for the decision.
async fn decide(
    endpoint: &str,
    request: &MintRequest,
    popup: &web_sys::Window,
) -> Result<Countersignature, String> {
    let requests = format!(
        "{}/window/requests",
        endpoint.strip_suffix("/countersign").unwrap_or(endpoint)
    );
    // The call as the mint request writes it, with the arguments the window draws from.
    let call = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let call = format!(
        r#"{},"arguments":{}}}"#,
        call.strip_suffix('}').unwrap_or(&call),
        request.arguments
    );
    let (mut method, mut url, mut body) = ("POST", requests.clone(), Some(call));
    loop {
        let (status, text) = fetch(method, &url, body.as_deref(), (WAIT_S + 10) * 1000)
            .await
            .map_err(|e| format!("no gateway answered at {url} ({e})"))?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let said = |key: &str| answer.get(key).and_then(Value::as_str);
        return Err(match (status, said("state"), said("id"), said("url")) {
            // Opened: the person is sent there, and the page waits for the decision (a
            // page that stops waiting, reloaded or closed, leaves the request to end).
            (200, None, Some(key), Some(window)) => {
                popup
                    .location()
                    .set_href(window)
                    .map_err(|_| format!("the approval window could not be opened at {window}"))?;
                (method, url, body) = ("GET", format!("{requests}/{key}?wait={WAIT_S}"), None);
                continue;
            }
            (200, Some("approved"), ..) => match said("countersignature") {
                Some(token) => return Ok(Countersignature::new(token)),
                None => "the gateway sent no countersignature".to_owned(),
            },
            (200, Some("waiting" | "being approved"), ..) => continue,
            (200, Some("denied"), ..) => "it was denied in the Countersign approval window".into(),
            (200, Some("expired"), ..) => {
                "nobody approved it in the Countersign approval window in time".into()
            }
            _ => crate::countersigner::refused(&url, status, &answer),
        });
    }
}
