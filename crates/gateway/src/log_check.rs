//! `countersign-gateway check-log`: an auditor's check that a gateway's log still holds,
//! unchanged, everything an earlier signed tree head covered, without the audit key.

use std::path::Path;

use countersign_verify::Verifier;
use serde::Deserialize;

/// What `/v1/log/head` and `/v1/log/proof` answer, as far as a check reads it.
#[derive(Deserialize)]
struct Answer {
    signed: String,
    #[serde(default)]
    proof: Vec<String>,
}

/// What a check found.
#[derive(Debug, PartialEq, Eq)]
pub enum LogCheck {
    /// No earlier head was kept: the current one is kept now, to check against next time.
    First {
        /// The log's size now.
        size: u64,
    },
    /// The log holds everything the earlier head covered; the newer head is kept.
    Consistent {
        /// The earlier head's size.
        from: u64,
        /// The log's size now.
        to: u64,
    },
}

/// Checks the log of the gateway at `base` against the signed head kept in `head_file`
/// (a file with the head's compact JWS), trusting the keys `base` publishes at
/// `/.well-known/jwks.json` now and the issuer `issuer`. On success the newer head is
/// written to `head_file`. `token` is the gateway's `COUNTERSIGN_TOKEN`, if it has one.
pub async fn check_log(
    base: &str,
    head_file: &Path,
    issuer: &str,
    token: Option<&str>,
) -> Result<LogCheck, String> {
    let base = base.trim_end_matches('/');
    let client = reqwest::Client::new();
    let get = |path: String| {
        let request = client.get(format!("{base}{path}"));
        // The guard takes the token, or else the gateway's own origin (this is not a
        // browser page; with no token set the gateway serves its own origin).
        match token {
            Some(token) => request.bearer_auth(token),
            None => request.header("origin", base),
        }
    };
    let fetch = |path: String| {
        let request = get(path.clone());
        async move {
            let answer = request.send().await.map_err(|e| format!("{path}: {e}"))?;
            let status = answer.status();
            let text = answer.text().await.map_err(|e| format!("{path}: {e}"))?;
            if !status.is_success() {
                return Err(format!("{path}: {status}: {text}"));
            }
            Ok::<_, String>(text)
        }
    };
    let jwks = fetch("/.well-known/jwks.json".into()).await?;
    let verifier = Verifier::new(issuer)
        .trust_jwks(&jwks)
        .map_err(|e| format!("the gateway's keys: {e}"))?;
    let old = match std::fs::read_to_string(head_file) {
        Ok(text) => Some(text.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", head_file.display())),
    };
    let keep = |signed: &str| {
        std::fs::write(head_file, format!("{signed}\n"))
            .map_err(|e| format!("{}: {e}", head_file.display()))
    };
    let Some(old) = old else {
        let head: Answer = serde_json::from_str(&fetch("/v1/log/head".into()).await?)
            .map_err(|e| format!("/v1/log/head: {e}"))?;
        let checked = verifier
            .check_tree_head(&head.signed)
            .map_err(|e| format!("the head: {e}"))?;
        keep(&head.signed)?;
        return Ok(LogCheck::First {
            size: checked.tree_size,
        });
    };
    let from = verifier
        .check_tree_head(&old)
        .map_err(|e| format!("the kept head: {e}"))?
        .tree_size;
    let path = format!("/v1/log/proof?first={from}");
    let answer: Answer =
        serde_json::from_str(&fetch(path.clone()).await?).map_err(|e| format!("{path}: {e}"))?;
    let new = verifier
        .check_log_consistency(&old, &answer.signed, &answer.proof)
        .map_err(|e| e.to_string())?;
    keep(&answer.signed)?;
    Ok(LogCheck::Consistent {
        from,
        to: new.tree_size,
    })
}
