//! The page's countersigner: asks the gateway's `/v1/countersign` to mint a token for an
//! approved call. No gateway, or a refusal, is a reason in words; the call then settles
//! as `NOT_COUNTERSIGNED` and its run is never reached.

use countersign::{Countersignature, Countersigner, LocalBoxFuture, MintRequest};
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

impl Countersigner for GatewayCountersigner {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        let endpoint = self.endpoint.clone();
        Box::pin(async move {
            let body = serde_json::to_string(&request).map_err(|e| e.to_string())?;
            let (status, text) = fetch("POST", &endpoint, Some(&body), 15_000)
                .await
                .map_err(|e| format!("no gateway answered at {endpoint} ({e})"))?;
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match answer.get("countersignature").and_then(Value::as_str) {
                Some(token) if status == 200 => Ok(Countersignature::new(token)),
                _ => {
                    let code = answer
                        .pointer("/error/code")
                        .and_then(Value::as_str)
                        .unwrap_or("no_gateway");
                    Err(format!(
                        "the gateway at {endpoint} did not mint one (HTTP {status}, {code})"
                    ))
                }
            }
        })
    }
}
