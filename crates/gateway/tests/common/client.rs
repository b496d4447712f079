//! What a client of the gateway sees: one chat request against a hostile upstream, and
//! the event stream as a spec-following `EventSource` parses it.

use serde_json::Value;

use super::{chat_body, config, page_post, serve, state, upstream, Behaviour, KEY};

pub async fn ask(behaviour: Behaviour, stream: bool) -> (u16, String) {
    let (url, _seen) = upstream(behaviour).await;
    let (s, _dir) = state(config(Some(url)));
    let base = serve(s).await;
    let client = reqwest::Client::new();
    let response = page_post(
        &client,
        format!("{base}/v1/chat/completions"),
        chat_body(stream),
    )
    .send()
    .await
    .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    (status, body)
}

/// The key split in two: `sk-test-` and the rest.
pub fn halves() -> (&'static str, &'static str) {
    KEY.split_at(8)
}

pub fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// An event stream parsed as the WHATWG `EventSource` algorithm does (and the OpenAI
/// SDKs, eventsource-parser, …): a leading BOM is dropped, lines end at CRLF, LF *or a
/// lone CR*, a blank line dispatches, `data` lines are joined with LF.
pub fn spec_events(body: &str) -> Vec<String> {
    let body = body.strip_prefix('\u{feff}').unwrap_or(body);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lines.push(std::mem::take(&mut line));
            }
            '\n' => lines.push(std::mem::take(&mut line)),
            other => line.push(other),
        }
    }
    lines.push(line);
    let mut events = Vec::new();
    let mut data = String::new();
    for line in lines {
        if line.is_empty() {
            if !data.is_empty() {
                data.pop();
                events.push(std::mem::take(&mut data));
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f.to_owned(), v.strip_prefix(' ').unwrap_or(v).to_owned()),
            None => (line.clone(), String::new()),
        };
        if field == "data" {
            data.push_str(&value);
            data.push('\n');
        }
    }
    events
}
