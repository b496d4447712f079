//! Attacker review 4: the streamed-answer parser and the history the assistant keeps.
//! A failing test here is a break; a passing one pins a property.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::message::{ChatMessage, ModelError, ModelTurn, Role, ToolCall};
use super::stream::{Accumulator, SseDecoder};

/// Feeds `text` in pieces of `step` characters; the turn, or the first error.
fn run_in(text: &str, step: usize) -> Result<ModelTurn, ModelError> {
    let mut decoder = SseDecoder::default();
    let mut acc = Accumulator::default();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(step.max(1)) {
        let piece: String = piece.iter().collect();
        for payload in decoder.push(&piece) {
            acc.push(&payload)?;
        }
    }
    acc.finish()
}

fn run(text: &str) -> Result<ModelTurn, ModelError> {
    run_in(text, 7)
}

fn event(json: &str) -> String {
    format!("data: {json}\n\n")
}

fn calls_of(turn: Result<ModelTurn, ModelError>) -> Option<Vec<ToolCall>> {
    match turn {
        Ok(ModelTurn::ToolCalls { calls, .. }) => Some(calls),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------
// A cut or unfinished stream must yield no call.
// ---------------------------------------------------------------------------------

/// Some OpenAI-compatible servers send `"finish_reason": ""` on every intermediate
/// chunk (not `null`). The accumulator counts any non-null value as "finished", so a
/// stream cut right after the first call's arguments hands that call to the gate.
#[test]
fn an_empty_finish_reason_does_not_finish_a_cut_stream() {
    let sse = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"delete_file","arguments":"{\"path\":\"a\"}"}}]},"finish_reason":""}]}"#,
        ),
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"restore_backup","arguments":"{\"pa"}}]},"finish_reason":""}]}"#,
        ),
        // ...the connection breaks here: no real finish_reason, no [DONE].
    ]
    .concat();
    let turn = run(&sse);
    assert!(
        matches!(turn, Err(ModelError::StreamCut { .. })),
        "a cut stream reached the gate: {turn:?}"
    );
}

/// `finish_reason` (or `[DONE]`) must close the answer: chunks that add to a call after
/// it are not part of a finished answer. Here the stream is cut after such chunks and
/// a half-built second call (and the first one) reach the gate.
#[test]
fn deltas_after_finish_reason_or_done_are_refused() {
    for closer in [
        event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
        "data: [DONE]\n\n".to_owned(),
    ] {
        let sse = [
            event(
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"save","arguments":"{}"}}]}}]}"#,
            ),
            closer,
            event(
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"delete_all","arguments":"{\"con"}}]}}]}"#,
            ),
        ]
        .concat();
        let turn = run(&sse);
        assert!(
            calls_of(turn.clone()).is_none(),
            "chunks after the end were taken as calls: {turn:?}"
        );
    }
}

/// `finish_reason: "length"` means the model was cut off by its token limit: the set
/// of calls (and the last call's arguments) is truncated. It is a cut answer, not a
/// finished one; only the calls of a turn that ended by itself should reach the gate.
#[test]
fn a_turn_cut_by_the_token_limit_yields_no_call() {
    let sse = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"archive_all","arguments":"{}"}}]}}]}"#,
        ),
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"unarchive","arguments":"{\"wh"}}]},"finish_reason":"length"}]}"#,
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let turn = run(&sse);
    assert!(
        calls_of(turn.clone()).is_none(),
        "a truncated batch reached the gate: {turn:?}"
    );
}

/// Pin: whatever the chunking, a stream that stops mid-call is StreamCut (one byte at a
/// time, at every cut point of a well-formed stream).
#[test]
fn every_prefix_of_an_unfinished_stream_is_cut() {
    let sse = [
        event(r#"{"choices":[{"delta":{"content":"ok "}}]}"#),
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"save","arguments":"{\"a\":1}"}}]}}]}"#,
        ),
        event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
    ]
    .concat();
    let finish_at = sse.find(r#""finish_reason""#).unwrap();
    // Every cut before the finishing event is fully dispatched gives no call.
    for cut in 0..finish_at {
        if !sse.is_char_boundary(cut) {
            continue;
        }
        let turn = run_in(&sse[..cut], 1);
        assert!(calls_of(turn.clone()).is_none(), "cut at {cut}: {turn:?}");
    }
    assert!(calls_of(run_in(&sse, 1)).is_some());
}

// ---------------------------------------------------------------------------------
// Hostile chunks: errors, never panics or loops; memory bounded.
// ---------------------------------------------------------------------------------

/// The 4 MiB cap counts only content and call fields; the decoder buffers a line or an
/// event of any size first. A chunk padded with an ignored field (or a line that never
/// ends) grows the page's memory without limit until the 60 s timeout.
#[test]
fn an_event_larger_than_the_cap_is_refused() {
    let padding = "x".repeat(6 * 1024 * 1024);
    let sse = event(&format!(
        r#"{{"choices":[{{"delta":{{"content":"hi"}},"logprobs":"{padding}"}}]}}"#
    )) + &event(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#);
    let turn = run_in(&sse, 64 * 1024);
    assert!(
        turn.is_err(),
        "a 6 MiB event was buffered and accepted whole: {:?}",
        turn.map(|_| ())
    );
}

/// Pin: 100k levels of nesting is a JSON error (serde_json's recursion limit), not a
/// stack overflow.
#[test]
fn deeply_nested_chunks_are_errors_not_overflows() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(run(&event(&deep)).is_err());
    let deep_obj = format!(
        r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"function":{{"name":{}1{}}}}}]}}}}]}}"#,
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    assert!(run(&event(&deep_obj)).is_err());
}

/// Pin: many calls are bounded (indexes must be dense and below 128), a huge index is an
/// error, and the text cap holds across many small deltas.
#[test]
fn call_count_index_and_size_are_bounded() {
    let mut many = String::new();
    for i in 0..200 {
        many.push_str(&event(&format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"id":"c{i}","function":{{"name":"save","arguments":"{{}}"}}}}]}}}}]}}"#
        )));
    }
    many.push_str("data: [DONE]\n\n");
    assert!(run_in(&many, 4096).is_err());
    for index in ["18446744073709551615", "128", "1"] {
        let sse = event(&format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{index},"function":{{"name":"x"}}}}]}}}}]}}"#
        ));
        assert!(run(&sse).is_err(), "index {index}");
    }
    let chunk = "y".repeat(64 * 1024);
    let mut big = String::new();
    for _ in 0..80 {
        big.push_str(&event(&format!(
            r#"{{"choices":[{{"delta":{{"content":"{chunk}"}}}}]}}"#
        )));
    }
    big.push_str("data: [DONE]\n\n");
    assert!(matches!(
        run_in(&big, 1 << 20),
        Err(ModelError::Malformed(_))
    ));
}

/// Indexes that are not small non-negative integers (a string, a negative number, a
/// float) are not errors: they are silently folded into the *last* call, so one call's
/// argument text is glued onto another's. (On wasm32 an index of 2^32 or more also
/// fails `usize::try_from` and folds the same way, where natively it is an error.) The
/// parser should refuse such a chunk, as it does a skipped index.
#[test]
fn non_integer_indexes_are_refused_not_folded_into_the_last_call() {
    for index in [r#""1""#, "-1", "1.0", "null", "true"] {
        let sse = [
            event(
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"save","arguments":"{\"a\":"}}]}}]}"#,
            ),
            event(&format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{index},"function":{{"arguments":"1}}"}}}}]}}}}]}}"#
            )),
            event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
        ]
        .concat();
        let turn = run(&sse);
        assert!(turn.is_err(), "index {index} was folded: {turn:?}");
    }
}

/// The non-streamed parser refuses a call without an id or a name; the streamed one
/// hands a call with an empty id and/or empty name to the gate, and two calls with the
/// same id. The assistant keys results and reload recovery by that id
/// (`saved_result`, `unanswered`, the restore's `restored_ids`): with two calls sharing
/// an id, after a reload the second call is told the first one's result (a refused
/// action reported as done, or the reverse) and only one of the two cards comes back.
#[test]
fn streamed_calls_need_a_unique_nonempty_id_and_a_name() {
    let no_id = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"save","arguments":"{}"}}]}}]}"#,
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let no_name = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":"{}"}}]}}]}"#,
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let same_id = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":"{}"}}]}}]}"#,
        ),
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1","function":{"name":"delete_all","arguments":"{}"}}]}}]}"#,
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    for (what, sse) in [("no id", no_id), ("no name", no_name), ("same id", same_id)] {
        let turn = run(&sse);
        assert!(turn.is_err(), "{what}: {turn:?}");
    }
    // The non-streamed parser accepts duplicate ids too.
    let body = r#"{"choices":[{"message":{"tool_calls":[
        {"id":"c1","function":{"name":"read","arguments":"{}"}},
        {"id":"c1","function":{"name":"delete_all","arguments":"{}"}}]}}]}"#;
    assert!(super::parse_completion(body).is_err(), "duplicate ids");
}

/// Pin: text that looks like a tool call, or like SSE framing inside a JSON string,
/// stays text; a name streamed after the arguments still names the call the gate sees
/// (the card is drawn from the finished call, never from the "preparing" view).
#[test]
fn text_never_becomes_a_call() {
    let sse = [
        event(
            r#"{"choices":[{"delta":{"content":"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"x\",\"function\":{\"name\":\"delete_all\"}}]}}]}\n\n"}}]}"#,
        ),
        event(r#"{"choices":[{"delta":{"content":"{\"tool_calls\":[{\"name\":\"delete_all\"}]}"}}]}"#),
        event(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#),
    ]
    .concat();
    match run(&sse).unwrap() {
        ModelTurn::Text(text) => assert!(text.contains("delete_all")),
        other => panic!("text became calls: {other:?}"),
    }
    // A raw newline cannot be inside a JSON string, so a payload cannot split itself.
    let raw = "data: {\"choices\":[{\"delta\":{\"content\":\"a\n\ndata: [DONE]\n\n";
    assert!(run(raw).is_err());
}

/// Pin: an error object mid-stream fails the turn even after complete calls.
#[test]
fn a_mid_stream_error_discards_the_calls() {
    let sse = [
        event(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"save","arguments":"{}"}}]}}]}"#,
        ),
        event(r#"{"error":{"message":"upstream overloaded"}}"#),
        event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
    ]
    .concat();
    assert!(run(&sse).is_err());
}

// ---------------------------------------------------------------------------------
// The history carried back to the model.
// ---------------------------------------------------------------------------------

/// `kept` replaces only oversized *arguments*; a call's name and id are model text of
/// any size (up to the 4 MiB stream cap) and go back to the model on every later step of
/// the turn and into sessionStorage (where an over-cap save is silently skipped, so a
/// reload resumes an older history). The gate refuses the call unread (unknown action),
/// but the history still carries megabytes.
#[test]
fn the_history_never_carries_megabytes_of_a_refused_call() {
    let cap = 16 * 1024;
    let call = ToolCall {
        id: "i".repeat(1024 * 1024),
        name: "n".repeat(2 * 1024 * 1024),
        arguments: "{}".into(),
    };
    let kept = super::kept(&call, cap);
    let size = serde_json::to_string(&kept).unwrap().len();
    assert!(
        size <= 2 * cap,
        "the history keeps {size} bytes of one call"
    );
}

/// Pin: arguments over the cap become a placeholder naming their size.
#[test]
fn oversized_arguments_become_a_placeholder() {
    let call = ToolCall {
        id: "c1".into(),
        name: "save".into(),
        arguments: format!(r#"{{"a":"{}"}}"#, "z".repeat(100_000)),
    };
    let kept = super::kept(&call, 16 * 1024);
    assert!(kept.arguments.len() < 200);
    assert!(kept.arguments.contains("omitted"));
}

/// A stored conversation with two calls under one id passes `valid_history`, and one
/// result answers both in `unanswered`: the second call (never run) is treated as
/// answered with the first call's result after a reload.
#[test]
fn a_restored_history_with_a_repeated_call_id_is_refused() {
    let history = vec![
        ChatMessage::text(Role::User, "tidy up"),
        ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![
                ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                },
                ToolCall {
                    id: "c1".into(),
                    name: "delete_all".into(),
                    arguments: "{}".into(),
                },
            ],
            tool_call_id: None,
        },
        ChatMessage::tool("c1", r#"{"ok":true}"#),
    ];
    let open = super::unanswered(&history);
    assert!(
        !super::valid_history(&history) || open.len() == 1,
        "delete_all was never answered, yet counts as answered: {open:?}"
    );
}
