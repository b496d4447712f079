//! The validate stage: raw model text to typed params, refusing anything unexpected.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::canonical::Unread;
use crate::codes::quote;

/// The default cap on a call's raw arguments, in bytes.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 16 * 1024;

/// Parses raw arguments into a JSON object (blank text is `{}`). Refused: over `max_bytes`,
/// not JSON, not an object, or with an inexact number ([`crate::canonical::read`]).
pub(crate) fn parse_object(raw: &str, max_bytes: usize) -> Result<Value, String> {
    if raw.len() > max_bytes {
        return Err(format!(
            "arguments are {} bytes, over the limit of {max_bytes}",
            raw.len()
        ));
    }
    if means_no_arguments(raw) {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let value = crate::canonical::read(raw).map_err(|unread| match unread {
        Unread::NotJson(e) => format!("arguments are not valid JSON ({e})"),
        Unread::Inexact(refusal) => refusal,
    })?;
    if !value.is_object() {
        return Err(format!(
            "arguments must be a JSON object, not {}",
            kind_of(&value)
        ));
    }
    Ok(value)
}

/// Whether raw text stands for `{}`: blank, as models send for actions without params.
pub(crate) fn means_no_arguments(raw: &str) -> bool {
    // Arguments almost always start with their `{`: no need to walk them.
    !raw.starts_with('{') && raw.trim().is_empty()
}

/// Deserialises into `P`, refusing unknown fields at any depth, `deny_unknown_fields` or not.
pub(crate) fn into_params<P: DeserializeOwned>(value: &Value) -> Result<P, String> {
    let mut unknown = Vec::new();
    let params = {
        // serde_ignored writes `?` for an `Option`'s inside; the model knows no such step.
        let mut note = |path: serde_ignored::Path<'_>| {
            let shown: Vec<String> = path
                .to_string()
                .split('.')
                .filter(|part| *part != "?")
                .map(str::to_owned)
                .collect();
            unknown.push(shown.join("."));
        };
        let ignored = serde_ignored::Deserializer::new(value, &mut note);
        // One pass that knows where it failed: one copy of `P`'s reader in the page.
        serde_path_to_error::deserialize::<_, P>(ignored).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." || inner.to_string().starts_with("unknown field") {
                format!("{inner}")
            } else {
                format!("{} is invalid: {inner}", quote(&path, 64))
            }
        })?
    };
    if let Some(first) = unknown.first() {
        return Err(format!(
            "unknown field {}; only the action's declared params are accepted",
            quote(first, 64)
        ));
    }
    Ok(params)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
