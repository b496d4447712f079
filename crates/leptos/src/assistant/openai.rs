//! `OpenAiCompatible`: Chat Completions with `tools`, posted to the gateway at the
//! page's own origin. The provider's key never reaches the page: the gateway adds it.

use countersign::{action::LocalBoxFuture, wire::openai_tools};
use serde_json::{json, Value};

use super::client::ModelClient;
use crate::conversation::{ChatMessage, ModelError, ModelRequest, ModelTurn, Role, ToolCall};
use crate::http::{fetch, fetch_full, fetch_streaming, Streamed};

/// How long the model may say nothing before its request is abandoned: before its
/// answer starts, and between two pieces of a streamed answer (a long answer that keeps
/// streaming is never cut). An answer in one piece must come whole within it.
pub const DEFAULT_MODEL_TIMEOUT_MS: u32 = 60_000;

/// A client for an OpenAI-compatible Chat Completions endpoint (by default the
/// gateway's `/v1/chat/completions` at the page's origin).
#[derive(Clone, Debug)]
pub struct OpenAiCompatible {
    base: String,
    model: String,
    timeout_ms: u32,
    max_request_bytes: usize,
    stream: bool,
}

/// The gateway's default body cap (`--max-body-bytes`): requests are trimmed to fit.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;

impl Default for OpenAiCompatible {
    fn default() -> Self {
        Self::new("/v1")
    }
}

impl OpenAiCompatible {
    /// A client for the API under `base` (e.g. `/v1`); the model is the gateway's default.
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            base: base.into().trim_end_matches('/').to_owned(),
            model: String::from("default"),
            timeout_ms: DEFAULT_MODEL_TIMEOUT_MS,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            stream: true,
        }
    }

    /// Whether to ask for a streamed answer (`stream: true`, the default): text shows as
    /// it is written and tool calls as "preparing…" until the stream has finished. An
    /// upstream that answers in one piece anyway is read as before.
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// How long the model may say nothing, in milliseconds (see
    /// [`DEFAULT_MODEL_TIMEOUT_MS`]). Local and reasoning models may want more.
    pub fn silence_timeout_ms(mut self, ms: u32) -> Self {
        self.timeout_ms = ms;
        self
    }

    /// The server's body cap in bytes (the gateway's `--max-body-bytes`); the assistant
    /// drops the oldest turns of a conversation to stay under it.
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Names the model to ask for (the gateway may map or override it).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Whether a model answers here: `GET {base}/models` returns a model list.
    /// Anything else (404, an HTML page, a "not configured" error) is `false`.
    pub async fn probe(&self) -> bool {
        match fetch("GET", &format!("{}/models", self.base), None, 5_000).await {
            Ok((status, body)) if (200..300).contains(&status) => {
                serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| {
                        v.get("data")
                            .and_then(Value::as_array)
                            .map(|d| !d.is_empty())
                    })
                    .unwrap_or(false)
            }
            _ => false,
        }
    }

    /// Whether a Countersign gateway answers at this origin (`GET {base}/health`), and
    /// if so whether it has a model: `None` (no gateway), `Some(false)`, `Some(true)`.
    pub async fn health(&self) -> Option<bool> {
        let (status, body) = fetch("GET", &format!("{}/health", self.base), None, 5_000)
            .await
            .ok()?;
        if !(200..300).contains(&status) {
            return None;
        }
        let value: Value = serde_json::from_str(&body).ok()?;
        (value.get("ok").and_then(Value::as_bool) == Some(true))
            .then(|| value.get("model").and_then(Value::as_bool) == Some(true))
    }

    /// The request body for a conversation (public so tests can check the wire format).
    pub fn body(&self, request: &ModelRequest) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
        let mut body = serde_json::Map::new();
        body.insert("model".into(), json!(self.model));
        if self.stream {
            body.insert("stream".into(), json!(true));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            body.insert("tools".into(), openai_tools(&request.tools));
            body.insert("tool_choice".into(), json!("auto"));
        }
        Value::Object(body)
    }
}

fn wire_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = serde_json::Map::new();
    out.insert("role".into(), json!(role));
    // Always a string: an assistant message that only calls tools says `""`. Servers
    // refuse `null` (llama-cpp-python's request check) and a missing field (its chat
    // templates read `content` of every message); every one takes `""`.
    out.insert(
        "content".into(),
        json!(message.content.as_deref().unwrap_or_default()),
    );
    if !message.tool_calls.is_empty() {
        let calls = message
            .tool_calls
            .iter()
            .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
            .collect();
        out.insert("tool_calls".into(), calls);
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(out)
}

/// Reads a Chat Completions response body into a turn.
pub fn parse_completion(body: &str) -> Result<ModelTurn, ModelError> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| ModelError::Malformed(format!("not JSON ({e})")))?;
    let message = value
        .pointer("/choices/0/message")
        .ok_or_else(|| ModelError::Malformed("no choices[0].message".into()))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .map(|c| {
                let id = c.get("id").and_then(Value::as_str);
                let name = c.pointer("/function/name").and_then(Value::as_str);
                let arguments = c.pointer("/function/arguments");
                match (id, name) {
                    (Some(id), Some(name)) => Ok(ToolCall {
                        id: id.to_owned(),
                        name: name.to_owned(),
                        // Arguments are a JSON string by the spec; some servers send an object.
                        arguments: match arguments {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => String::from("{}"),
                        },
                    }),
                    _ => Err(ModelError::Malformed(
                        "a tool call lacks an id or a function name".into(),
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ModelError::Malformed("tool_calls is not a list".into())),
    };
    if calls.is_empty() {
        return Ok(ModelTurn::Text(text.unwrap_or_default()));
    }
    super::stream::check_calls(
        calls
            .iter()
            .map(|c: &ToolCall| (c.id.as_str(), c.name.as_str())),
    )?;
    // Calls cut by the token limit or a filter never reach the gate.
    let finish = value
        .pointer("/choices/0/finish_reason")
        .and_then(Value::as_str);
    if matches!(finish, Some("length" | "content_filter")) {
        return Err(ModelError::Malformed(
            "the answer was cut off before its tool calls were complete".into(),
        ));
    }
    Ok(ModelTurn::ToolCalls { text, calls })
}

/// How long to wait after a 429 that names no `Retry-After`.
pub const DEFAULT_RETRY_AFTER_S: u32 = 5;

/// Reads an error answer (`{"error":{"code","message"}}`, and `Retry-After` for a 429)
/// into a model error.
pub fn parse_error_with(status: u16, body: &str, retry_after_s: Option<u32>) -> ModelError {
    let message: String = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect();
    match status {
        401 => ModelError::Unauthorized(message),
        413 => ModelError::TooLarge,
        429 => ModelError::RateLimited {
            retry_after_s: retry_after_s.unwrap_or(DEFAULT_RETRY_AFTER_S),
        },
        _ => parse_error(status, body),
    }
}

/// Reads an error body (`{"error":{"code","message"}}`) into a model error.
pub fn parse_error(status: u16, body: &str) -> ModelError {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = value
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("");
    let message = value
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("");
    if code == "not_configured" {
        ModelError::NotConfigured
    } else if matches!(status, 400..=499) && status != 429 && !code.is_empty() {
        // The gateway said no to this page: show why, do not fall back silently.
        ModelError::Refused {
            code: code.chars().take(64).collect(),
            message: message.chars().take(300).collect(),
        }
    } else {
        ModelError::Failed {
            status,
            message: message.chars().take(300).collect(),
        }
    }
}

impl ModelClient for OpenAiCompatible {
    fn request_cap(&self) -> Option<usize> {
        Some(self.max_request_bytes)
    }

    fn complete_streaming(
        &self,
        request: ModelRequest,
        progress: std::rc::Rc<dyn Fn(&super::Streaming)>,
    ) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        if !self.stream {
            return self.complete(request);
        }
        let url = format!("{}/chat/completions", self.base);
        let body = self.body(&request).to_string();
        let timeout = self.timeout_ms;
        let trace = request.trace;
        Box::pin(async move {
            let header = trace.as_deref().map(|t| ("traceparent", t));
            let mut decoder = super::stream::SseDecoder::default();
            let mut acc = super::stream::Accumulator::default();
            let mut failed = None;
            let streamed = fetch_streaming(&url, &body, header, timeout, |text| {
                if failed.is_some() {
                    return;
                }
                for payload in decoder.push(text) {
                    if let Err(e) = acc.push(&payload) {
                        failed = Some(e);
                        return;
                    }
                }
                progress(&acc.view());
            })
            .await
            .map_err(ModelError::Unavailable)?;
            match streamed {
                Streamed::Whole(answer) if (200..300).contains(&answer.status) => {
                    parse_completion(&answer.body)
                }
                Streamed::Whole(answer) => Err(parse_error_with(
                    answer.status,
                    &answer.body,
                    answer.retry_after_s,
                )),
                Streamed::Stream => match failed {
                    Some(error) => Err(error),
                    None => acc.finish(),
                },
            }
        })
    }

    fn complete(&self, request: ModelRequest) -> LocalBoxFuture<Result<ModelTurn, ModelError>> {
        let url = format!("{}/chat/completions", self.base);
        let body = self.body(&request).to_string();
        let timeout = self.timeout_ms;
        let trace = request.trace;
        Box::pin(async move {
            let header = trace.as_deref().map(|t| ("traceparent", t));
            let answer = fetch_full("POST", &url, Some(&body), header, timeout)
                .await
                .map_err(ModelError::Unavailable)?;
            if (200..300).contains(&answer.status) {
                parse_completion(&answer.body)
            } else {
                Err(parse_error_with(
                    answer.status,
                    &answer.body,
                    answer.retry_after_s,
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_response_becomes_calls() {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"archive_workspace","arguments":"{}"}}]},
            "finish_reason":"tool_calls"}]}"#;
        assert_eq!(
            parse_completion(body).unwrap(),
            ModelTurn::ToolCalls {
                text: None,
                calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "archive_workspace".into(),
                    arguments: "{}".into()
                }],
            }
        );
    }

    #[test]
    fn text_and_malformed_responses() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":"Hello"}}]}"#;
        assert_eq!(
            parse_completion(body).unwrap(),
            ModelTurn::Text("Hello".into())
        );
        assert!(matches!(
            parse_completion("<html>"),
            Err(ModelError::Malformed(_))
        ));
        assert!(matches!(
            parse_completion(r#"{"choices":[]}"#),
            Err(ModelError::Malformed(_))
        ));
        let bad = r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"x"}}]}}]}"#;
        assert!(matches!(
            parse_completion(bad),
            Err(ModelError::Malformed(_))
        ));
    }

    #[test]
    fn errors_map_to_not_configured_or_unavailable() {
        assert_eq!(
            parse_error(
                503,
                r#"{"error":{"code":"not_configured","message":"no upstream"}}"#
            ),
            ModelError::NotConfigured
        );
        assert_eq!(
            parse_error(502, "oops"),
            ModelError::Failed {
                status: 502,
                message: String::new()
            }
        );
        assert_eq!(
            parse_error_with(429, "{}", Some(3)),
            ModelError::RateLimited { retry_after_s: 3 }
        );
        assert_eq!(
            parse_error_with(429, "{}", None),
            ModelError::RateLimited {
                retry_after_s: DEFAULT_RETRY_AFTER_S
            }
        );
        assert_eq!(parse_error_with(413, "", None), ModelError::TooLarge);
        assert_eq!(
            parse_error_with(
                401,
                r#"{"error":{"code":"unauthorized","message":"wrong token"}}"#,
                None
            ),
            ModelError::Unauthorized("wrong token".into())
        );
    }

    #[test]
    fn the_body_speaks_the_chat_completions_wire_format() {
        let client = OpenAiCompatible::default().model("m");
        let request = ModelRequest {
            messages: vec![
                ChatMessage::text(Role::User, "hi"),
                ChatMessage {
                    role: Role::Assistant,
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "a".into(),
                        arguments: "{}".into(),
                    }],
                    tool_call_id: None,
                },
                ChatMessage::tool("c1", r#"{"ok":true}"#),
            ],
            tools: Vec::new(),
            trace: None,
        };
        let body = client.body(&request);
        assert_eq!(body["model"], "m");
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["name"],
            "a"
        );
        assert_eq!(
            body["messages"][1].get("content"),
            Some(&json!("")),
            "a message of tool calls alone says an empty content: {}",
            body["messages"][1]
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert!(body.get("tools").is_none());
    }
}
