//! The MCP relay's messages between the gateway and the page, declared once for both:
//! one JSON object per WebSocket text message, named by its `type`. Read through
//! `serde_json::Value`: a derived tagged enum's reader would add to the page's download.

use serde_json::Value;

/// A message from the gateway to the page (written by the gateway only, so the derive
/// costs the page nothing).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToPage {
    /// The first message: the code the dock shows, and the relayed calls that still wait
    /// (sent again right after; the page withdraws any other MCP call it has live).
    Paired {
        /// The pairing code.
        code: String,
        /// The ids of the calls that still wait for the page's answer.
        waiting: Vec<String>,
        /// The largest message the page may send (a bigger one ends the connection).
        max_bytes: usize,
    },
    /// An MCP client's tool call, for the page's executor.
    Call {
        /// The call's id (the executor's `tool_call_id`): random, never reused.
        id: String,
        /// The tool (action) name, as the client sent it.
        name: String,
        /// The arguments as JSON text, as the client sent them.
        arguments: String,
    },
    /// The client cancelled the call, or went away: withdraw it if it still waits.
    Cancel {
        /// The call's id.
        id: String,
    },
    /// The gateway refused what the page sent, or the connection.
    Error {
        /// Why, in words.
        message: String,
    },
}

/// A message from the page to the gateway.
#[derive(Clone, Debug, PartialEq)]
pub enum ToGateway {
    /// The first message: the page's secret key (the gateway derives the code from it).
    Hello {
        /// 32 to 128 characters of `[A-Za-z0-9_-]`.
        key: String,
    },
    /// The tools MCP callers see, as [`crate::wire::ToolSpec`]s serialise.
    Tools {
        /// The list as JSON text (an array): the page writes it straight from its
        /// `ToolSpec`s, with no `Value` in between.
        tools: String,
    },
    /// A relayed call's result, for the MCP client.
    Result {
        /// The call's id.
        id: String,
        /// The result as the model would get it (JSON text).
        content: String,
    },
}

impl ToPage {
    /// The message as sent.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The message in `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text).ok()?;
        let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
        Some(match value.get("type")?.as_str()? {
            "paired" => ToPage::Paired {
                code: text("code")?,
                waiting: value
                    .get("waiting")?
                    .as_array()?
                    .iter()
                    .map(|id| id.as_str().map(str::to_owned))
                    .collect::<Option<_>>()?,
                max_bytes: usize::try_from(value.get("max_bytes")?.as_u64()?).ok()?,
            },
            "call" => ToPage::Call {
                id: text("id")?,
                name: text("name")?,
                arguments: text("arguments")?,
            },
            "cancel" => ToPage::Cancel { id: text("id")? },
            "error" => ToPage::Error {
                message: text("message")?,
            },
            _ => return None,
        })
    }
}

impl ToGateway {
    /// The message as sent. (Written as text, not through a `Value`: this is the page's
    /// side, and its download.)
    pub fn to_json(&self) -> String {
        let quoted = |text: &str| Value::from(text).to_string();
        match self {
            ToGateway::Hello { key } => format!(r#"{{"type":"hello","key":{}}}"#, quoted(key)),
            ToGateway::Tools { tools } => format!(r#"{{"type":"tools","tools":{tools}}}"#),
            ToGateway::Result { id, content } => format!(
                r#"{{"type":"result","id":{},"content":{}}}"#,
                quoted(id),
                quoted(content)
            ),
        }
    }

    /// The message in `text`; an error says what is wrong. A field the message does not
    /// have is refused.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not a relay message ({e})"))?;
        let object = value
            .as_object()
            .ok_or("not a relay message (not an object)")?;
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let fields: &[&str] = match kind {
            "hello" => &["type", "key"],
            "tools" => &["type", "tools"],
            "result" => &["type", "id", "content"],
            _ => return Err(format!("not a relay message (unknown type `{kind:.40}`)")),
        };
        if let Some(extra) = object.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(format!("not a relay message (unknown field `{extra:.40}`)"));
        }
        let text = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("not a relay message (`{key}` must be text)"))
        };
        Ok(match kind {
            "hello" => ToGateway::Hello { key: text("key")? },
            "tools" => ToGateway::Tools {
                tools: object
                    .get("tools")
                    .filter(|t| t.is_array())
                    .ok_or("not a relay message (`tools` must be a list)")?
                    .to_string(),
            },
            _ => ToGateway::Result {
                id: text("id")?,
                content: text("content")?,
            },
        })
    }
}
