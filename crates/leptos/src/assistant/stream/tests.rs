//! What a streamed answer hands the gate: only the calls of a stream that finished, each
//! exactly as the model sent it whatever the chunking, and for anything else an error,
//! never a panic, in bounded memory.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::*;

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

/// Feeds `text` in pieces of 7 characters, so events and lines end mid-piece.
fn run(text: &str) -> Result<ModelTurn, ModelError> {
    run_in(text, 7)
}

/// Feeds `text` one character at a time: no event may depend on how the bytes were cut.
fn run_char_by_char(text: &str) -> Result<ModelTurn, ModelError> {
    let mut decoder = SseDecoder::default();
    let mut acc = Accumulator::default();
    for c in text.chars() {
        for payload in decoder.push(&c.to_string()) {
            acc.push(&payload)?;
        }
    }
    acc.finish()
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

const TEXT: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
    data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// A cut, unfinished or failed stream yields no call: nothing of it reaches the gate.
mod only_a_finished_stream_yields_calls {
    use super::*;

    #[test]
    fn a_stream_cut_mid_arguments_yields_no_call() {
        let cut = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"save\",\"arguments\":\"{\\\"na\"}}]}}]}\n\n";
        match run_char_by_char(cut) {
            Err(ModelError::StreamCut { preparing, .. }) => assert_eq!(preparing, ["save"]),
            other => panic!("{other:?}"),
        }
    }

    /// Some OpenAI-compatible servers send `"finish_reason": ""` on every intermediate
    /// chunk (not `null`). Counted as "finished", it would hand the gate the first call of
    /// a stream cut right after that call's arguments.
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
    /// it are not part of a finished answer. Here the stream is cut after such chunks:
    /// neither a half-built second call nor the first one may reach the gate.
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

    /// Whatever the chunking, a stream that stops mid-call is StreamCut (one byte at a
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

    /// An error object mid-stream fails the turn even after complete calls.
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
}

/// The text and the calls assembled from the chunks are exactly what the model sent: no
/// argument glued onto another call, every call under its own id and a name, no text
/// taken for a call.
mod the_turn_is_what_the_model_sent {
    use super::*;

    #[test]
    fn text_chunks_join_whatever_the_line_ends() {
        assert_eq!(
            run_char_by_char(TEXT).unwrap(),
            ModelTurn::Text("Hello".into())
        );
        let crlf = format!("\u{feff}{}", TEXT.replace('\n', "\r\n"));
        assert_eq!(
            run_char_by_char(&crlf).unwrap(),
            ModelTurn::Text("Hello".into())
        );
        let cr = TEXT.replace('\n', "\r");
        assert_eq!(
            run_char_by_char(&cr).unwrap(),
            ModelTurn::Text("Hello".into())
        );
    }

    #[test]
    fn tool_call_arguments_add_up_across_chunks() {
        let sse = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"save\",\"arguments\":\"{\\\"na\"}}]}}]}\n\n\
            : a comment\n\n\
            data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"me\\\":\\\"A\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n";
        let ModelTurn::ToolCalls { calls, .. } = run_char_by_char(sse).unwrap() else {
            panic!("calls")
        };
        assert_eq!(calls[0].name, "save");
        assert_eq!(calls[0].arguments, r#"{"name":"A"}"#);
    }

    /// llama-cpp-python repeats the call's whole id and name in every chunk, where OpenAI
    /// sends them once (or in pieces): both read as the one call the model meant.
    #[test]
    fn an_id_and_name_repeated_whole_in_every_chunk_are_read_once() {
        let chunk = |args: &str| {
            event(&format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"id":"call_7","type":"function","function":{{"name":"publish_changes","arguments":"{args}"}}}}]}}}}]}}"#
            ))
        };
        let sse = [
            chunk(r#"{\"na"#),
            chunk(r#"me\":"#),
            chunk(r#"\"A\"}"#),
            event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
        ]
        .concat();
        let calls = calls_of(run(&sse)).unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "call_7");
        assert_eq!(calls[0].name, "publish_changes");
        assert_eq!(calls[0].arguments, r#"{"name":"A"}"#);
        // Pieces still join, as the OpenAI SDK joins them.
        let pieces = [
            event(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_","function":{"name":"publish_","arguments":""}}]}}]}"#),
            event(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"7","function":{"name":"changes","arguments":"{}"}}]}}]}"#),
            event(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#),
        ]
        .concat();
        let calls = calls_of(run(&pieces)).unwrap();
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_7", "publish_changes")
        );
    }

    /// Indexes that are not small non-negative integers (a string, a negative number, a
    /// float) are refused, as a skipped index is: folded into the *last* call, one call's
    /// argument text would be glued onto another's. (On wasm32 an index of 2^32 or more
    /// fails `usize::try_from`: refused too, as it is natively.)
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

    /// Like the non-streamed parser, the streamed one refuses a call with an empty id or
    /// name, and two calls with the same id. The assistant keys results and reload
    /// recovery by that id (`saved_result`, `unanswered`, the restore's `restored_ids`):
    /// with two calls sharing an id, after a reload the second call would be told the
    /// first one's result (a refused action reported as done, or the reverse) and only one
    /// of the two cards would come back.
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
        // The non-streamed parser refuses duplicate ids too.
        let body = r#"{"choices":[{"message":{"tool_calls":[
            {"id":"c1","function":{"name":"read","arguments":"{}"}},
            {"id":"c1","function":{"name":"delete_all","arguments":"{}"}}]}}]}"#;
        assert!(
            crate::assistant::parse_completion(body).is_err(),
            "duplicate ids"
        );
    }

    /// Text that looks like a tool call, or like SSE framing inside a JSON string,
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
}

/// Hostile chunks are errors, never panics or stack overflows, and what the page buffers
/// is bounded.
mod hostile_chunks_are_errors_in_bounded_memory {
    use super::*;

    #[test]
    fn hostile_chunks_are_errors_not_panics() {
        for bad in [
            "data: {not json}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999}]}}]}\n\n",
            "data: {\"error\":{\"message\":\"boom\"}}\n\n",
        ] {
            assert!(run_char_by_char(bad).is_err(), "{bad}");
        }
    }

    /// The 4 MiB cap counts only content and call fields, and the decoder buffers a line
    /// or an event before any field is read: unless the decoder caps it, a chunk padded
    /// with an ignored field (or a line that never ends) grows the page's memory without
    /// limit until the 60 s timeout.
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

    /// 100k levels of nesting is a JSON error (serde_json's recursion limit), not a
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

    /// Many calls are bounded (indexes must be dense and below 128), a huge index is an
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
}
