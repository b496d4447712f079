//! Streaming: shown as it arrives, never executed before it has finished.

use gloo_timers::future::TimeoutFuture;
use wasm_bindgen_test::*;

use super::harness::{completion_text, idle, mount_online, mount_with_client, say, FakeFetch};

fn sse(chunk: serde_json::Value) -> String {
    format!("data: {chunk}\n\n")
}

fn text_chunk(text: &str, finish: bool) -> String {
    sse(
        serde_json::json!({"choices":[{"index":0,"delta":{"content":text},"finish_reason": if finish { serde_json::json!("stop") } else { serde_json::Value::Null }}]}),
    )
}

fn call_chunk(first: bool, arguments: &str, finish: bool) -> String {
    let mut call = serde_json::json!({"index":0,"function":{"arguments":arguments}});
    if first {
        call["id"] = "c1".into();
        call["function"]["name"] = "save".into();
    }
    sse(
        serde_json::json!({"choices":[{"index":0,"delta":{"tool_calls":[call]},"finish_reason": if finish { serde_json::json!("tool_calls") } else { serde_json::Value::Null }}]}),
    )
}

fn streamed(chunks: Vec<String>, delay: u32, cut: bool) -> serde_json::Value {
    serde_json::json!({"stream": chunks, "delay": delay, "cut": cut})
}

#[wasm_bindgen_test]
async fn streamed_text_appears_as_it_arrives() {
    let chunks = vec![
        text_chunk("Hel", false),
        text_chunk("lo there", true),
        "data: [DONE]\n\n".into(),
    ];
    let answers = serde_json::json!([streamed(chunks, 150, false)]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "hi").await;
    TimeoutFuture::new(60).await;
    assert_eq!(
        page.text(".cs-msg--streaming"),
        "Hel",
        "the first words, before the rest"
    );
    idle(&page).await;
    assert!(page.q(".cs-msg--streaming").is_none());
    assert!(page.text(".cs-log").contains("Hello there"));
    let sent = &FakeFetch::requests()[0].1;
    assert!(
        sent.contains(r#""stream":true"#),
        "the page asks for a stream"
    );
}

#[wasm_bindgen_test]
async fn a_tool_call_is_only_prepared_while_its_arguments_stream_in() {
    let chunks = vec![
        call_chunk(true, r#"{"na"#, false),
        call_chunk(false, r#"me":"Apo"#, false),
        call_chunk(false, r#"llo"}"#, true),
        "data: [DONE]\n\n".into(),
    ];
    let answers = serde_json::json!([
        streamed(chunks, 150, false),
        [200, completion_text("Renamed.")]
    ]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "rename it").await;
    TimeoutFuture::new(60).await;
    assert!(
        page.text(".cs-preparing").contains("Title save"),
        "a preparing card, named by the page"
    );
    assert!(
        page.q(".cs-card").is_none(),
        "nothing to approve while arguments stream in"
    );
    assert_eq!(
        page.cs.executor().live_calls(),
        0,
        "the gate has not seen it"
    );
    for _ in 0..40 {
        if page.q(".cs-card").is_some() {
            break;
        }
        TimeoutFuture::new(25).await;
    }
    assert!(page.q(".cs-preparing").is_none());
    assert!(
        page.text(".cs-card__args").contains("Apollo"),
        "the card, once the stream finished"
    );
    page.click(".cs-allow-once");
    idle(&page).await;
    assert_eq!(page.runs(), ["save:Apollo"]);
}

#[wasm_bindgen_test]
async fn a_stream_cut_mid_arguments_runs_nothing_and_the_model_is_told() {
    let chunks = vec![call_chunk(true, r#"{"name":"Apo"#, false)];
    let answers = serde_json::json!([streamed(chunks, 20, true), [200, completion_text("Sorry.")]]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "rename it").await;
    idle(&page).await;
    assert!(page.q(".cs-card").is_none());
    assert!(page.runs().is_empty());
    assert!(page.text(".cs-msg--error").contains("cut off"));
    assert_eq!(page.terminal_records(), 0, "the gate never saw it");
    say(&page, "and now?").await;
    idle(&page).await;
    let next = &FakeFetch::requests()[1].1;
    assert!(
        next.contains("cut off before it finished"),
        "the model hears of it"
    );
}

#[wasm_bindgen_test]
async fn streamed_arguments_that_never_parse_are_refused_by_the_gate() {
    let chunks = vec![
        call_chunk(true, r#"{"name":"Apo"#, true),
        "data: [DONE]\n\n".into(),
    ];
    let answers = serde_json::json!([
        streamed(chunks, 0, false),
        [200, completion_text("It failed.")]
    ]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "rename it").await;
    idle(&page).await;
    assert!(page.q(".cs-card").is_none(), "never a card to approve");
    assert!(page.runs().is_empty());
    assert!(FakeFetch::requests()[1].1.contains("INVALID_ARGS"));
}

/// The model's time limit is on silence, not on the whole answer: a long answer that
/// keeps streaming is read to its end (local and reasoning models stream for minutes).
#[wasm_bindgen_test]
async fn a_long_answer_that_keeps_streaming_is_never_cut() {
    let words = [
        "A long ", "answer ", "that ", "keeps ", "coming, ", "piece ", "by ", "piece.",
    ];
    let mut chunks: Vec<String> = words.iter().map(|w| text_chunk(w, false)).collect();
    chunks.push(text_chunk("", true));
    chunks.push("data: [DONE]\n\n".into());
    // Ten pieces 150 ms apart: 1.5 s in all, three times the 500 ms of silence allowed.
    let answers = serde_json::json!([streamed(chunks, 150, false)]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let client = countersign_leptos::OpenAiCompatible::default().silence_timeout_ms(500);
    let page = mount_with_client(client);
    say(&page, "tell me at length").await;
    idle(&page).await;
    assert!(
        page.text(".cs-log")
            .contains("A long answer that keeps coming, piece by piece."),
        "{}",
        page.text(".cs-log")
    );
    assert!(!page.text(".cs-log").contains("offline"), "no fallback");
}
