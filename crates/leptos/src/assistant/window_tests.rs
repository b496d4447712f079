//! The conversation kept between turns is windowed at whole turns.
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
