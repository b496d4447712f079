//! A scripted model behind the gateway: the tutorial's own phrase table, answering over
//! the real Chat Completions wire format (streamed as server-sent events when the request
//! says `stream: true`, the text a few words at a time and tool arguments in pieces), so
//! the page's `OpenAiCompatible` client and the gateway's proxy are exercised end to end.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use countersign::{policy::ApprovalPolicy, wire::ToolAnnotations, wire::ToolSpec};
use countersign_leptos::assistant::{ChatMessage, ModelRequest, ModelTurn, Role, ToolCall};
use countersign_leptos::Locale;
use serde_json::{json, Value};

/// How many answers went out as event streams (the page asked for `stream: true`).
static STREAMED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many answers went out in one piece.
static WHOLE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many of the scripted model's answers were streamed, and how many were not.
pub fn streamed_answers() -> (usize, usize) {
    (
        STREAMED.load(std::sync::atomic::Ordering::Relaxed),
        WHOLE.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Starts the scripted model on loopback; returns its API base (`http://…/v1`).
pub async fn scripted_model() -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let app = Router::new().route("/v1/chat/completions", post(complete));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/v1"))
}

async fn complete(body: Bytes) -> Result<axum::response::Response, (StatusCode, String)> {
    let bad = |m: &str| (StatusCode::BAD_REQUEST, m.to_owned());
    let value: Value = serde_json::from_slice(&body).map_err(|_| bad("not JSON"))?;
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no messages"))?
        .iter()
        .map(message_from_wire)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad("a message is malformed"))?;
    let tools = value
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| tools.iter().filter_map(tool_from_wire).collect())
        .unwrap_or_default();
    let planner = workspace_settings::offline_assistant(Locale::En);
    let turn = planner.plan(&ModelRequest {
        messages,
        tools,
        trace: None,
    });
    let (message, finish) = match turn {
        ModelTurn::Text(text) => (json!({ "role": "assistant", "content": text }), "stop"),
        ModelTurn::ToolCalls { text, calls } => {
            let calls: Vec<Value> = calls
                .into_iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
                .collect();
            (
                json!({ "role": "assistant", "content": text, "tool_calls": calls }),
                "tool_calls",
            )
        }
    };
    use axum::response::IntoResponse;
    if value.get("stream").and_then(Value::as_bool) == Some(true) {
        STREAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = stream_events(&message, finish);
        return Ok((
            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
            body,
        )
            .into_response());
    }
    WHOLE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Json(json!({
        "id": "chatcmpl-e2e",
        "object": "chat.completion",
        "created": 0,
        "model": value.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }]
    }))
    .into_response())
}

/// The message as a Chat Completions event stream: text a few words per chunk, each tool
/// call's arguments in two pieces, then the finish reason and `[DONE]`.
fn stream_events(message: &Value, finish: &str) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let event = json!({
            "id": "chatcmpl-e2e",
            "object": "chat.completion.chunk",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
        });
        format!("data: {event}\n\n")
    };
    let mut out = chunk(json!({ "role": "assistant" }), None);
    if let Some(text) = message.get("content").and_then(Value::as_str) {
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        for piece in words.chunks(3) {
            out.push_str(&chunk(json!({ "content": piece.concat() }), None));
        }
    }
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        let cut = arguments
            .char_indices()
            .map(|(i, _)| i)
            .nth(arguments.chars().count() / 2)
            .unwrap_or(0);
        let (first, rest) = arguments.split_at(cut);
        out.push_str(&chunk(
            json!({ "tool_calls": [{ "index": index, "id": call["id"], "type": "function",
                "function": { "name": call.pointer("/function/name"), "arguments": first } }] }),
            None,
        ));
        out.push_str(&chunk(
            json!({ "tool_calls": [{ "index": index, "function": { "arguments": rest } }] }),
            None,
        ));
    }
    out.push_str(&chunk(json!({}), Some(finish)));
    out.push_str("data: [DONE]\n\n");
    out
}

fn message_from_wire(m: &Value) -> Option<ChatMessage> {
    let role = match m.get("role")?.as_str()? {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => return None,
    };
    let tool_calls = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| {
                    Some(ToolCall {
                        id: c.get("id")?.as_str()?.to_owned(),
                        name: c.pointer("/function/name")?.as_str()?.to_owned(),
                        arguments: c.pointer("/function/arguments")?.as_str()?.to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ChatMessage {
        role,
        content: m.get("content").and_then(Value::as_str).map(str::to_owned),
        tool_calls,
        tool_call_id: m
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn tool_from_wire(t: &Value) -> Option<ToolSpec> {
    let name = t.pointer("/function/name")?.as_str()?.to_owned();
    Some(ToolSpec {
        description: t
            .pointer("/function/description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        parameters: t
            .pointer("/function/parameters")
            .cloned()
            .unwrap_or(Value::Null),
        // The wire format carries no title; the model only knows the name.
        annotations: ToolAnnotations {
            title: name.clone(),
            read_only_hint: false,
            destructive_hint: false,
            approval: ApprovalPolicy::None,
            handoff: false,
            untrusted_content_hint: false,
        },
        name,
    })
}
