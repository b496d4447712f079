//! The dock's passkey setting: ask the gateway whether this session's user has a passkey
//! for approvals, and register one on the person's click.

use leptos::prelude::*;
use serde_json::{json, Value};

use crate::countersign::Countersign;
use crate::http::fetch;

/// Where the passkey setting stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Setup {
    /// Not asked yet.
    Unknown,
    /// No gateway, or it does no passkeys: nothing to show.
    Off,
    /// The user has none: offer to set one up.
    Missing,
    /// The browser's prompt is open.
    Working,
    /// Set up.
    Ready,
    /// It did not work, and why.
    Failed(String),
}

/// `/v1/passkeys` beside the countersign endpoint.
fn passkeys_base(cs: &Countersign) -> Option<String> {
    let endpoint = cs.0.countersign_endpoint.as_deref()?;
    let (parent, _) = endpoint.rsplit_once('/')?;
    Some(format!("{parent}/passkeys"))
}

/// Asks the gateway whether the user (the session's role) has a passkey.
pub(crate) fn check(cs: &Countersign, state: RwSignal<Setup>) {
    let Some(base) = passkeys_base(cs) else {
        return;
    };
    let url = format!("{base}/status/{}", cs.0.role);
    leptos::task::spawn_local(async move {
        let answer = fetch("GET", &url, None, 10_000).await;
        let status = answer
            .ok()
            .filter(|(code, _)| *code == 200)
            .and_then(|(_, text)| serde_json::from_str::<Value>(&text).ok());
        let flag = |s: &Value, key: &str| s.get(key) == Some(&Value::Bool(true));
        let next = match status {
            Some(s) if flag(&s, "enabled") && flag(&s, "registered") => Setup::Ready,
            Some(s) if flag(&s, "enabled") => Setup::Missing,
            _ => Setup::Off,
        };
        state.set(next);
    });
}

/// Registers a passkey with the enrollment code the person typed: only on a person's
/// click (a script's changes nothing).
pub(crate) fn register(
    cs: &Countersign,
    event: &web_sys::MouseEvent,
    code: String,
    state: RwSignal<Setup>,
) {
    let event: &web_sys::Event = event.as_ref();
    let real = wasm_bindgen::JsCast::is_instance_of::<web_sys::Event>(event)
        && crate::event_brand::is_real_event(event);
    if !((real && event.is_trusted()) || cs.trusts_script_clicks()) {
        return;
    }
    let Some(base) = passkeys_base(cs) else {
        return;
    };
    let user = cs.0.role.clone();
    state.set(Setup::Working);
    leptos::task::spawn_local(async move {
        let next = match register_with(&base, &user, &code).await {
            Ok(()) => Setup::Ready,
            Err(why) => Setup::Failed(why),
        };
        state.set(next);
    });
}

async fn register_with(base: &str, user: &str, code: &str) -> Result<(), String> {
    let body = json!({ "user": user, "code": code }).to_string();
    let (status, text) = fetch("POST", &format!("{base}/register"), Some(&body), 15_000).await?;
    let started: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let (Some(ceremony), Some(options), 200) =
        (started.get("ceremony"), started.get("options"), status)
    else {
        return Err(error_of(&started, status));
    };
    let credential = crate::webauthn::ceremony(options, true).await?;
    let body = json!({ "ceremony": ceremony, "credential": credential }).to_string();
    let (status, text) = fetch(
        "POST",
        &format!("{base}/register/finish"),
        Some(&body),
        15_000,
    )
    .await?;
    if status == 200 {
        Ok(())
    } else {
        Err(error_of(
            &serde_json::from_str(&text).unwrap_or(Value::Null),
            status,
        ))
    }
}

fn error_of(answer: &Value, status: u16) -> String {
    answer
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map_or_else(|| format!("HTTP {status}"), str::to_owned)
}
