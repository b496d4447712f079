//! Streamed Chat Completions: an event-stream decoder (the WHATWG `EventSource` rules:
//! a leading BOM dropped, lines ending at CRLF, LF or a lone CR, `data` lines joined with
//! LF, a blank line dispatching) and the turn the chunks add up to.
//!
//! Nothing here executes anything. A tool call is only *prepared* while its arguments
//! stream in; the turn is handed to the gate once the stream has finished, and a stream
//! that stops before it finishes yields no calls at all.

use serde_json::Value;

use crate::conversation::{ModelError, ModelTurn, Preparing, Streaming, ToolCall};

/// The most a streamed answer may add up to (text and arguments together).
const MAX_STREAMED_BYTES: usize = 4 * 1024 * 1024;
/// The longest line or event the decoder buffers before it gives up on the stream.
const MAX_EVENT_BYTES: usize = 1024 * 1024;
/// What the decoder hands on in place of an event that grew past [`MAX_EVENT_BYTES`]:
/// the accumulator refuses it (a NUL never starts a real payload).
const OVERSIZED: &str = "\u{0}oversized";
/// The longest tool call id or name taken (ids and names are echoed in every later
/// request of the conversation).
pub(crate) const MAX_CALL_ID_BYTES: usize = 256;

/// Splits a byte stream's text into event payloads (`data` fields).
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    line: String,
    data: String,
    started: bool,
    /// The last character was a CR: a following LF belongs to the same line end.
    after_cr: bool,
    /// An event outgrew the cap: everything after it is dropped.
    overflowed: bool,
}

impl SseDecoder {
    /// Feeds text; returns the payloads of the events it completed.
    pub(crate) fn push(&mut self, text: &str) -> Vec<String> {
        let mut events = Vec::new();
        if self.overflowed {
            return events;
        }
        for c in text.chars() {
            if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
                self.overflowed = true;
                self.line.clear();
                self.data.clear();
                events.push(OVERSIZED.to_owned());
                return events;
            }
            if !self.started {
                self.started = true;
                if c == '\u{feff}' {
                    continue;
                }
            }
            if self.after_cr {
                self.after_cr = false;
                if c == '\n' {
                    continue;
                }
            }
            match c {
                '\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                '\n' => self.end_line(&mut events),
                other => self.line.push(other),
            }
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if !self.data.is_empty() {
                self.data.pop();
                events.push(std::mem::take(&mut self.data));
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
        }
    }
}

#[derive(Debug, Default)]
struct CallSoFar {
    id: String,
    name: String,
    arguments: String,
}

/// Adds streamed chunks up to a turn.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    text: String,
    calls: Vec<CallSoFar>,
    /// The finish reason, once one came (a non-empty string).
    finish: Option<String>,
    done: bool,
    bytes: usize,
}

impl Accumulator {
    /// Takes one event's payload. `Err` for a payload that is not a chunk or an answer
    /// that grew past the cap.
    pub(crate) fn push(&mut self, payload: &str) -> Result<(), ModelError> {
        if payload == OVERSIZED {
            return Err(ModelError::Malformed(format!(
                "a streamed event grew past {MAX_EVENT_BYTES} bytes"
            )));
        }
        if payload.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(payload)
            .map_err(|e| ModelError::Malformed(format!("a streamed chunk is not JSON ({e})")))?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the stream reported an error");
            return Err(ModelError::Failed {
                status: 200,
                message: message.chars().take(300).collect(),
            });
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(());
        };
        let delta = choice
            .get("delta")
            .filter(|d| d.as_object().is_some_and(|o| !o.is_empty()));
        // Nothing may be added once the answer said it finished.
        if delta.is_some() && (self.done || self.finish.is_some()) {
            return Err(ModelError::Malformed(
                "the stream went on after it finished".into(),
            ));
        }
        if let Some(delta) = delta {
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.grow(text.len())?;
                self.text.push_str(text);
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.call_delta(call)?;
            }
        }
        if let Some(reason) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    fn grow(&mut self, by: usize) -> Result<(), ModelError> {
        self.bytes = self.bytes.saturating_add(by);
        if self.bytes > MAX_STREAMED_BYTES {
            return Err(ModelError::Malformed(format!(
                "the streamed answer grew past {MAX_STREAMED_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn call_delta(&mut self, call: &Value) -> Result<(), ModelError> {
        // A missing index continues the only call so far (some servers leave it out);
        // anything present must be a small non-negative integer.
        let index = match call.get("index") {
            None if self.calls.len() > 1 => {
                return Err(ModelError::Malformed(
                    "a streamed tool call has no index".into(),
                ))
            }
            None => self.calls.len().saturating_sub(1),
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| {
                    ModelError::Malformed("a streamed tool call has a bad index".into())
                })?,
        };
        // A model cannot open calls far beyond the ones it has: indexes are dense.
        if index > self.calls.len() || index >= 128 {
            return Err(ModelError::Malformed(
                "a streamed tool call skips an index".into(),
            ));
        }
        if index == self.calls.len() {
            self.calls.push(CallSoFar::default());
        }
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.grow(id.len() + name.len() + arguments.len())?;
        if let Some(slot) = self.calls.get_mut(index) {
            join_piece(&mut slot.id, id);
            join_piece(&mut slot.name, name);
            slot.arguments.push_str(arguments);
        }
        Ok(())
    }

    /// What the dock shows now.
    pub(crate) fn view(&self) -> Streaming {
        Streaming {
            text: self.text.clone(),
            preparing: self
                .calls
                .iter()
                .map(|c| Preparing {
                    name: c.name.clone(),
                    bytes: c.arguments.len(),
                })
                .collect(),
        }
    }

    /// The turn, once the stream has ended. A stream that stopped before it finished
    /// (no `finish_reason` and no `[DONE]`) gives [`ModelError::StreamCut`]: no call of
    /// it reaches the gate.
    pub(crate) fn finish(self) -> Result<ModelTurn, ModelError> {
        // Finished means the model said so: `stop` or `tool_calls` (or `[DONE]` with no
        // reason at all). A cut by the token limit or a filter is a cut.
        let finished = match self.finish.as_deref() {
            Some("stop" | "tool_calls" | "function_call") => true,
            Some(_) => false,
            None => self.done,
        };
        if !finished {
            return Err(ModelError::StreamCut {
                text: self.text,
                preparing: self.calls.into_iter().map(|c| c.name).collect(),
            });
        }
        check_calls(self.calls.iter().map(|c| (c.id.as_str(), c.name.as_str())))?;
        let text = (!self.text.is_empty()).then_some(self.text);
        if self.calls.is_empty() {
            return Ok(ModelTurn::Text(text.unwrap_or_default()));
        }
        let calls = self
            .calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.name,
                arguments: if c.arguments.is_empty() {
                    "{}".into()
                } else {
                    c.arguments
                },
            })
            .collect();
        Ok(ModelTurn::ToolCalls { text, calls })
    }
}

/// Every call needs an id and a name, short, and no two calls one id (results and a
/// reload's recovery are keyed by it).
pub(crate) fn check_calls<'a>(
    calls: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<(), ModelError> {
    let mut seen: Vec<&str> = Vec::new();
    for (id, name) in calls {
        if id.is_empty() || name.is_empty() {
            return Err(ModelError::Malformed(
                "a tool call lacks an id or a name".into(),
            ));
        }
        if id.len() > MAX_CALL_ID_BYTES || name.len() > MAX_CALL_ID_BYTES {
            return Err(ModelError::Malformed(
                "a tool call's id or name is too long".into(),
            ));
        }
        if seen.contains(&id) {
            return Err(ModelError::Malformed("two tool calls share one id".into()));
        }
        seen.push(id);
    }
    Ok(())
}

/// Adds a streamed piece of a call's id or name. Servers send each in pieces to join (as
/// the OpenAI SDK joins them) or whole in every chunk (llama-cpp-python): a piece equal to
/// all that is held is that repeat. The name is checked against the page's actions anyway.
fn join_piece(held: &mut String, piece: &str) {
    if held.as_str() != piece {
        held.push_str(piece);
    }
}

#[cfg(test)]
mod tests;
