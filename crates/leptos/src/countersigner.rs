//! The page's countersigner: asks the gateway's `/v1/countersign` to mint a token for an
//! approved call. No gateway, or a refusal, is a reason in words; the call then settles
//! as `NOT_COUNTERSIGNED` and its run is never reached.

use countersign::{
    action::LocalBoxFuture, countersignature::Countersignature, countersignature::Countersigner,
    countersignature::MintRequest,
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
fn refused(endpoint: &str, status: u16, answer: &Value) -> String {
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
async fn with_assertion(endpoint: &str, request: &MintRequest) -> Result<String, String> {
    let body = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let url = format!("{endpoint}/challenge");
    let (status, text) = fetch("POST", &url, Some(&body), 15_000)
        .await
        .map_err(|e| format!("no gateway answered at {url} ({e})"))?;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let (Some(ceremony), Some(options), 200) =
        (answer.get("ceremony"), answer.get("options"), status)
    else {
        return Err(refused(&url, status, &answer));
    };
    let credential = crate::webauthn::ceremony(options, false)
        .await
        .map_err(|e| format!("the passkey was not used ({e})"))?;
    // The request as the click path writes it, with the assertion as one more field
    // (spliced into the text: no second way to write a request).
    let body = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let fields = body
        .strip_suffix('}')
        .ok_or("the request is not an object")?;
    let assertion = serde_json::json!({ "ceremony": ceremony, "credential": credential });
    Ok(format!(r#"{fields},"assertion":{assertion}}}"#))
}

impl Countersigner for GatewayCountersigner {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        let endpoint = self.endpoint.clone();
        Box::pin(async move {
            let body = match request.presence {
                // The gateway answers a window action with why it mints none here.
                countersign::countersignature::Presence::Click
                | countersign::countersignature::Presence::Window => {
                    serde_json::to_string(&request).map_err(|e| e.to_string())?
                }
                countersign::countersignature::Presence::Passkey => {
                    with_assertion(&endpoint, &request).await?
                }
            };
            let (status, text) = fetch("POST", &endpoint, Some(&body), 15_000)
                .await
                .map_err(|e| format!("no gateway answered at {endpoint} ({e})"))?;
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match answer.get("countersignature").and_then(Value::as_str) {
                Some(token) if status == 200 => Ok(Countersignature::new(token)),
                _ => Err(refused(&endpoint, status, &answer)),
            }
        })
    }
}
