//! The conversation as model clients see it (Chat Completions shapes), and what the
//! dock shows of an answer while it streams in.

use serde::{Deserialize, Serialize};

/// Who said a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: String,
    /// The action id it asked for.
    pub name: String,
    /// The raw JSON arguments text.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// The text, if any.
    pub content: Option<String>,
    /// The tool calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with text only.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A tool result answering `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.into()),
        }
    }
}

/// What a model client is asked: the conversation and the projected tools.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The conversation so far, system message first.
    pub messages: Vec<ChatMessage>,
    /// The projection: what the model may call now.
    pub tools: Vec<countersign::wire::ToolSpec>,
    /// The W3C `traceparent` of this request, fresh per request: a client sends it as
    /// the `traceparent` header, and the calls the answer holds carry it into their
    /// audit records, so a tracing backend follows each call from here through the
    /// gateway to the model. `None` sends none.
    pub trace: Option<String>,
}

/// What a model client answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelTurn {
    /// A final text answer: the turn ends.
    Text(String),
    /// Tool calls to run (with optional text said alongside).
    ToolCalls {
        /// Text said with the calls.
        text: Option<String>,
        /// The calls, in order.
        calls: Vec<ToolCall>,
    },
}

/// Why a model client could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// No model is configured here: use the offline assistant.
    #[error("no model is configured")]
    NotConfigured,
    /// The gateway could not be reached (the network failed, or the request timed out):
    /// the offline assistant may stand in, visibly, until the person tries again.
    #[error("the model could not answer: {0}")]
    Unavailable(String),
    /// The gateway or the model failed on its side (5xx): retried with backoff, then
    /// shown; never a reason to go offline for good.
    #[error("the model failed (HTTP {status}): {message}")]
    Failed {
        /// The HTTP status.
        status: u16,
        /// What the gateway said.
        message: String,
    },
    /// Too many requests (429): retried after `retry_after_s`, then shown.
    #[error("the model is rate-limited; retry after {retry_after_s} s")]
    RateLimited {
        /// How long to wait, from `Retry-After` (a default when it gave none).
        retry_after_s: u32,
    },
    /// The request was too large for the gateway (413).
    #[error("the conversation is too large for the gateway")]
    TooLarge,
    /// The gateway (its token) or the model provider (its key) refused the request (401).
    #[error("the request was not authorised: {0}")]
    Unauthorized(String),
    /// The gateway refused this page's request (a wrong origin, a missing token, a
    /// foreign host): a setup problem to show, never a reason to fall back silently.
    #[error("the gateway refused this page ({code}): {message}")]
    Refused {
        /// The gateway's error code, e.g. `origin_not_allowed`.
        code: String,
        /// Its explanation, naming what fixes it.
        message: String,
    },
    /// The answer was not in the expected format.
    #[error("the model's answer was malformed: {0}")]
    Malformed(String),
    /// A streamed answer stopped before it finished: nothing of it reaches the gate.
    #[error("the model's answer was cut off")]
    StreamCut {
        /// The text that had arrived.
        text: String,
        /// The names of the tool calls that were being prepared (model text).
        preparing: Vec<String>,
    },
}

/// A tool call while its arguments stream in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preparing {
    /// The tool's name as streamed so far (model text: show it escaped).
    pub name: String,
    /// How many bytes of arguments have arrived.
    pub bytes: usize,
}

/// What a streamed answer holds so far: what the dock shows while it arrives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Streaming {
    /// The text so far.
    pub text: String,
    /// Tool calls being prepared, in index order. None of them can run yet.
    pub preparing: Vec<Preparing>,
}
