//! `countersign-gateway check-log`: an auditor's check that a gateway's log still holds,
//! unchanged, everything an earlier signed tree head covered, without the audit key.

use std::path::Path;

use countersign_verify::log::TreeHead;
use countersign_verify::Verifier;
use serde::{Deserialize, Serialize};

/// What the head file keeps: the head's claims as checked, and the signed head.
#[derive(Serialize, Deserialize)]
struct Kept {
    head: TreeHead,
    signed: String,
}

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

/// Checks the log of the gateway at `base` against the head kept in `head_file` (its
/// claims, checked when kept, and the signed head), trusting for the newer head the keys
/// `base` publishes at `/.well-known/jwks.json` now and the issuer `issuer`. On success
/// the newer head is kept in `head_file`. The first run keeps the head it gets as it is
/// (trust on first use: compare it with one taken elsewhere). `token` is the gateway's
/// `COUNTERSIGN_TOKEN`, if it has one.
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
    // The kept head: its claims, checked when it was kept (a key rotation since may have
    // dropped the key that signed it), and the signed head itself, for the record.
    let old: Option<Kept> = match std::fs::read_to_string(head_file) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a kept head ({e})", head_file.display()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", head_file.display())),
    };
    // Written whole or not at all: a crash mid-write keeps the previous head.
    let keep = |head: TreeHead, signed: &str| {
        let kept = Kept {
            head,
            signed: signed.to_owned(),
        };
        let text = serde_json::to_string_pretty(&kept).map_err(|e| e.to_string())?;
        let mut temporary = head_file.as_os_str().to_owned();
        temporary.push(".new");
        std::fs::write(&temporary, text + "\n")
            .and_then(|()| std::fs::rename(&temporary, head_file))
            .map_err(|e| format!("{}: {e}", head_file.display()))
    };
    let Some(old) = old else {
        let head: Answer = serde_json::from_str(&fetch("/v1/log/head".into()).await?)
            .map_err(|e| format!("/v1/log/head: {e}"))?;
        let checked = verifier
            .check_tree_head(&head.signed)
            .map_err(|e| format!("the head: {e}"))?;
        let size = checked.tree_size;
        keep(checked, &head.signed)?;
        return Ok(LogCheck::First { size });
    };
    let from = old.head.tree_size;
    let path = format!("/v1/log/proof?first={from}");
    let answer: Answer =
        serde_json::from_str(&fetch(path.clone()).await?).map_err(|e| format!("{path}: {e}"))?;
    let new = verifier
        .check_log_extends(&old.head, &answer.signed, &answer.proof)
        .map_err(|e| e.to_string())?;
    let to = new.tree_size;
    keep(new, &answer.signed)?;
    Ok(LogCheck::Consistent { from, to })
}
