//! The page's countersigner: asks the gateway's `/v1/countersign` to mint a token for an
//! approved call. No gateway, or a refusal, is a reason in words; the call then settles
//! as `NOT_COUNTERSIGNED` and its run is never reached.

use countersign::{
    action::LocalBoxFuture, countersignature::Countersignature, countersignature::Countersigner,
    countersignature::MintRequest, countersignature::Presence,
};
use serde_json::Value;

use crate::http::fetch;

/// Mints through the gateway at `endpoint`.
pub(crate) struct GatewayCountersigner {
    endpoint: String,
}

impl GatewayCountersigner {
    pub(crate) fn new(endpoint: String) -> Self {
        Self { endpoint }
    }
}

/// The gateway's refusal, in words a person reads: its own sentence, or that no gateway
/// answered (no error ids).
pub(crate) fn refused(endpoint: &str, status: u16, answer: &Value) -> String {
    let said = |key: &str| answer.pointer(key).and_then(Value::as_str);
    match (said("/error/code"), said("/error/message")) {
        (Some("no_passkey"), _) => "no passkey is set up for approvals: open the assistant panel's settings (\u{2699}), set one up, then ask again".into(),
        (Some(_), Some(message)) => format!("the gateway refused it: {message}"),
        (Some(code), None) => format!("the gateway refused it ({code})"),
        (None, _) => format!("no Countersign gateway answers at {endpoint} (HTTP {status})"),
    }
}

/// For a call that needs passkey presence: the gateway's challenge (derived from the
/// call's binding), the person's assertion, and the request to mint with it.
async fn with_assertion(endpoint: &str, request: &MintRequest) -> Result<String, Refusal> {
    let body = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let url = format!("{endpoint}/challenge");
    let (status, text) = fetch("POST", &url, Some(&body), 15_000)
        .await
        .map_err(|e| format!("no gateway answered at {url} ({e})"))?;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let (Some(ceremony), Some(options), 200) =
        (answer.get("ceremony"), answer.get("options"), status)
    else {
        return Err(Refusal::of(&url, status, &answer));
    };
    let credential = crate::webauthn::ceremony(options, false)
        .await
        .map_err(|e| format!("the passkey was not used ({e})"))?;
    // The request as the click path writes it, with the assertion as one more field
    // (spliced into the text: no second way to write a request).
    let body = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let fields = body
        .strip_suffix('}')
        .ok_or_else(|| "the request is not an object".to_owned())?;
    let assertion = serde_json::json!({ "ceremony": ceremony, "credential": credential });
    Ok(format!(r#"{fields},"assertion":{assertion}}}"#))
}

/// Why the gateway minted nothing here: its words, and whether it said the call is
/// approved in its approval window instead.
pub(crate) struct Refusal {
    words: String,
    window: bool,
}

impl From<String> for Refusal {
    fn from(words: String) -> Self {
        Self {
            words,
            window: false,
        }
    }
}

impl Refusal {
    fn of(url: &str, status: u16, answer: &Value) -> Self {
        Self {
            words: refused(url, status, answer),
            window: answer.pointer("/error/code").and_then(Value::as_str)
                == Some("window_required"),
        }
    }
}

/// Asks the gateway at `endpoint` to mint for `request` (with the person's passkey when
/// it needs one).
async fn mint_here(endpoint: &str, request: &MintRequest) -> Result<Countersignature, Refusal> {
    let body = match request.presence {
        Presence::Passkey => with_assertion(endpoint, request).await?,
        Presence::Click | Presence::Window => {
            serde_json::to_string(request).map_err(|e| e.to_string())?
        }
    };
    let (status, text) = fetch("POST", endpoint, Some(&body), 15_000)
        .await
        .map_err(|e| format!("no gateway answered at {endpoint} ({e})"))?;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match answer.get("countersignature").and_then(Value::as_str) {
        Some(token) if status == 200 => Ok(Countersignature::new(token)),
        _ => Err(Refusal::of(endpoint, status, &answer)),
    }
}

impl Countersigner for GatewayCountersigner {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        let endpoint = self.endpoint.clone();
        Box::pin(async move {
            if request.presence != Presence::Window {
                match mint_here(&endpoint, &request).await {
                    Ok(token) => return Ok(token),
                    // The server's declarations put the action in its approval window:
                    // what the page declares is a floor, never the last word.
                    Err(Refusal { window: true, .. }) => {}
                    Err(refusal) => return Err(refusal.words),
                }
            }
            crate::approval_window::approve(&endpoint, &request).await
        })
    }
}
