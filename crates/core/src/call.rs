//! A call from the model and the session it arrives in.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// One request from the model: which action, with which raw JSON arguments.
///
/// Nothing here can approve anything: a call carries no ticket, and a field named
/// `confirmed` or `approved` inside `arguments` is an unknown field, refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The model's id for this tool call (OpenAI's `tool_call_id`), echoed in the result.
    pub tool_call_id: std::sync::Arc<str>,
    /// The action id the model asked for.
    pub action: String,
    /// The arguments exactly as the model sent them: a JSON object as text.
    pub arguments: String,
    /// Who asked. The card and the records name it; a grant covers only its own caller.
    #[serde(default, skip_serializing_if = "Caller::is_assistant")]
    pub caller: Caller,
    /// The model request's W3C `traceparent`, on every record of the call; see [`Call::traced`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Whether `value` is a well-formed W3C `traceparent` of version `00`:
/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, lowercase, ids not all zero.
pub fn is_traceparent(value: &str) -> bool {
    let bytes = value.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        bytes.get(range).is_some_and(|part| {
            part.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                && part.iter().any(|b| *b != b'0')
        })
    };
    bytes.len() == 55
        && value.starts_with("00-")
        && bytes.get(35) == Some(&b'-')
        && bytes.get(52) == Some(&b'-')
        && hex(3..35)
        && hex(36..52)
        && bytes.get(53..55).is_some_and(|f| {
            f.iter().all(u8::is_ascii_hexdigit) && !f.iter().any(u8::is_ascii_uppercase)
        })
}

impl Call {
    /// A call of `action` with raw JSON `arguments`.
    pub fn new(
        tool_call_id: impl Into<std::sync::Arc<str>>,
        action: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            action: action.into(),
            arguments: arguments.into(),
            caller: Caller::Assistant,
            trace: None,
        }
    }

    /// The same call, traced under `traceparent` (ignored unless [`is_traceparent`]).
    #[must_use]
    pub fn traced(mut self, traceparent: &str) -> Self {
        self.trace = is_traceparent(traceparent).then(|| traceparent.to_owned());
        self
    }

    /// The same call, asked by `caller`.
    #[must_use]
    pub fn by(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }
}

named! {
    /// Who sent a call: named on the card, it picks which grants may cover it; it approves nothing.
    #[derive(
        Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
    )]
    #[serde(rename_all = "snake_case")]
    pub enum Caller as "The caller's name in records: `assistant`, `webmcp` or `mcp`." {
        /// The page's own assistant.
        #[default]
        Assistant = "assistant",
        /// A browser agent calling a tool the page registered with WebMCP (`document.modelContext`).
        #[serde(rename = "webmcp")]
        WebMcp = "webmcp",
        /// An MCP client, through the gateway, paired with this page.
        Mcp = "mcp",
    }
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Caller {
    /// Whether this is the page's own assistant.
    pub fn is_assistant(&self) -> bool {
        *self == Caller::Assistant
    }
}

/// The executor's own id for a call, unique within one executor. Tickets and records
/// bind it, not the model's `tool_call_id` (which may repeat). 0 names no call.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct CallId(pub(crate) u64);

impl CallId {
    /// The number inside, for display and logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "call-{}", self.0)
    }
}

/// Who the assistant acts for: a role and the scopes it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The role's name, recorded in every audit record.
    pub role: String,
    /// The scopes the role holds.
    pub scopes: BTreeSet<String>,
}

impl Session {
    /// A session for `role` holding `scopes`.
    pub fn new<S: Into<String>>(
        role: impl Into<String>,
        scopes: impl IntoIterator<Item = S>,
    ) -> Self {
        // One by one: `collect` into a set would bring a sort routine of its own into the page.
        let mut held = BTreeSet::new();
        for scope in scopes {
            held.insert(scope.into());
        }
        Self {
            role: role.into(),
            scopes: held,
        }
    }

    /// Whether the session holds `scope`.
    pub fn holds(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }
}
