//! The conversation kept between turns: windowed at whole turns, never carrying
//! megabytes of one call, and restored only when every result answers its own call.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

/// `turns` turns of a person's message, one call and its result, and an answer.
fn conversation(turns: usize) -> Vec<ChatMessage> {
    (0..turns)
        .flat_map(|i| {
            let mut asked = ChatMessage::text(Role::Assistant, "");
            asked.tool_calls.push(ToolCall {
                id: format!("c{i}"),
                name: "a".into(),
                arguments: "{}".into(),
            });
            [
                ChatMessage::text(Role::User, format!("turn {i}")),
                asked,
                ChatMessage::tool(format!("c{i}"), "{}"),
                ChatMessage::text(Role::Assistant, "done"),
            ]
        })
        .collect()
}

#[test]
fn a_short_conversation_is_kept_whole() {
    let mut history = conversation(MAX_HISTORY_MESSAGES / 4);
    let before = history.clone();
    window(&mut history);
    assert_eq!(history, before);
}

#[test]
fn a_long_conversation_keeps_its_latest_whole_turns_and_stays_restorable() {
    let mut history = conversation(1_000);
    window(&mut history);
    assert!(history.len() <= MAX_HISTORY_MESSAGES, "{}", history.len());
    assert_eq!(history.len(), MAX_HISTORY_MESSAGES);
    assert_eq!(history[0].role, Role::User);
    assert_eq!(history[0].content.as_deref(), Some("turn 950"));
    assert!(valid_history(&history), "every result still has its call");
    // Windowing again changes nothing.
    let before = history.clone();
    window(&mut history);
    assert_eq!(history, before);
}

#[test]
fn a_window_cut_inside_a_turn_moves_to_the_next_turn() {
    // 202 messages: the earliest kept would be the first turn's tool result, so the
    // cut moves on to the next person's message.
    let mut history = conversation(50);
    history.push(ChatMessage::text(Role::User, "last"));
    history.push(ChatMessage::text(Role::Assistant, "ok"));
    window(&mut history);
    assert_eq!(history[0].content.as_deref(), Some("turn 1"));
    assert_eq!(history.len(), MAX_HISTORY_MESSAGES - 2);
    assert!(valid_history(&history));
}

#[test]
fn a_last_turn_longer_than_the_window_is_kept_whole() {
    let mut history = conversation(3);
    let mut long_turn = conversation(80);
    // One person's message, then 240 messages of calls and answers.
    long_turn.retain(|m| m.role != Role::User);
    history.push(ChatMessage::text(Role::User, "the long one"));
    history.extend(long_turn);
    let kept = history.len() - 12;
    window(&mut history);
    assert_eq!(history.len(), kept);
    assert_eq!(history[0].content.as_deref(), Some("the long one"));
    assert!(valid_history(&history), "every result still has its call");
}

/// Not only oversized *arguments*: a call's name and id are model text of any size (up
/// to the 4 MiB stream cap) that goes back to the model on every later step of the turn
/// and into sessionStorage (where an over-cap save is silently skipped, so a reload
/// would resume an older history). The gate refuses such a call unread (unknown
/// action); `kept` must not keep its megabytes either.
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

/// Arguments over the cap become a placeholder naming their size.
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

/// A stored conversation with two calls under one id must not pass `valid_history` with
/// one result answering both in `unanswered`: after a reload the second call (never
/// run) would be taken as answered with the first call's result.
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

#[test]
fn what_the_model_read_since_the_person_spoke_is_found_again_after_a_reload() {
    let mut asked = ChatMessage::text(Role::Assistant, "");
    for (id, name) in [
        ("r1", "read_requests"),
        ("r2", "read_docs"),
        ("w1", "rename"),
    ] {
        asked.tool_calls.push(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        });
    }
    let earlier = ChatMessage::tool(
        "old",
        r#"{"ok":true,"receipt":{"title":"Old read","untrusted":true}}"#,
    );
    let history = vec![
        ChatMessage::text(Role::User, "before"),
        earlier,
        ChatMessage::text(Role::User, "read the requests"),
        asked,
        ChatMessage::tool(
            "r1",
            r#"{"ok":true,"receipt":{"title":"Member requests","untrusted":true}}"#,
        ),
        ChatMessage::tool(
            "r2",
            r#"{"ok":false,"error":{"code":"EXECUTION_FAILED","untrusted":true}}"#,
        ),
        ChatMessage::tool("w1", r#"{"ok":true,"receipt":{"title":"Rename"}}"#),
    ];
    assert_eq!(untrusted_read(&history), ["read_requests", "read_docs"]);
    assert!(
        untrusted_read(&history[..3]).is_empty(),
        "the person spoke since"
    );
}
