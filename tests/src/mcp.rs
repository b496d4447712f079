//! An MCP client for the scenarios: the official MCP Python SDK (`tests/mcp_client.py`)
//! in a child process, sent one JSON command per line, answering one JSON event per line.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long an MCP event may take to come (a person's decision is made well within it).
pub const MCP_WAIT: Duration = Duration::from_secs(20);

/// The Python MCP client, running.
#[derive(Debug)]
pub struct McpClient {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
    /// Whether every command asks for a legacy (2025-11-25, session) connection.
    legacy: bool,
}

impl McpClient {
    /// Starts the client against `url` with `token` (`cargo xtask setup` installs `mcp`).
    pub async fn start(url: &str, token: &str) -> Result<Self, String> {
        let script = crate::workspace_root().join("tests").join("mcp_client.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([url, token])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!("python3 does not run ({e}); `cargo xtask setup` installs the MCP SDK")
            })?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        Ok(Self {
            _child: child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
            legacy: false,
        })
    }

    /// The same client connecting as before 2026-07-28: `initialize`, a session, tool
    /// changes on the session's stream.
    pub async fn start_legacy(url: &str, token: &str) -> Result<Self, String> {
        let mut client = Self::start(url, token).await?;
        client.legacy = true;
        Ok(client)
    }

    /// Sends one command.
    pub async fn send(&mut self, command: &Value) -> Result<(), String> {
        let mut command = command.clone();
        if let (true, Some(fields)) = (self.legacy, command.as_object_mut()) {
            fields.insert("mode".into(), "legacy".into());
        }
        let line = format!("{command}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("the MCP client is gone: {e}"))
    }

    /// The first event (already seen, or still to come) that `wanted` accepts.
    pub async fn wait(&mut self, wanted: impl Fn(&Value) -> bool) -> Result<Value, String> {
        if let Some(found) = self.seen.iter().find(|e| wanted(e)) {
            return Ok(found.clone());
        }
        let deadline = tokio::time::Instant::now() + MCP_WAIT;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .map_err(|_| {
                    format!(
                        "no such MCP event within {MCP_WAIT:?}; seen: {:?}",
                        self.seen
                    )
                })?
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("the MCP client ended; seen: {:?}", self.seen))?;
            let event: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
            self.seen.push(event.clone());
            if wanted(&event) {
                return Ok(event);
            }
        }
    }

    /// The result (or error) of the call tagged `tag`.
    pub async fn outcome(&mut self, tag: &str) -> Result<Value, String> {
        self.wait(|e| ends(e, tag)).await
    }

    /// Whether the call tagged `tag` has ended, among the events read so far.
    pub fn ended(&self, tag: &str) -> bool {
        self.seen.iter().any(|e| ends(e, tag))
    }

    /// Reads what has come within `for_ms` without waiting for anything in particular.
    pub async fn drain(&mut self, for_ms: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(for_ms);
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout_at(deadline, self.lines.next_line()).await
        {
            if let Ok(event) = serde_json::from_str(&line) {
                self.seen.push(event);
            }
        }
    }
}

/// Whether `event` ends the call tagged `tag`: its result, its error, or its cancel.
fn ends(event: &Value, tag: &str) -> bool {
    event["tag"] == tag
        && ["result", "error", "cancelled"]
            .iter()
            .any(|k| event.get(k).is_some())
}
