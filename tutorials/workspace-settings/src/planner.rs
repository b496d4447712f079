//! The offline assistant's phrase table for this page (English and Chinese).

use countersign_leptos::{Locale, Reply, Rule, Scripted, READ_PAGE_STATE};
use serde_json::json;

/// The built-in offline assistant for the workspace-settings page (also the scripted
/// model the end-to-end tests put behind the gateway).
#[allow(
    clippy::expect_used,
    reason = "a fixed phrase table: a phrase it cannot match fails at the first load, and in the tests"
)]
pub fn offline(locale: Locale) -> Scripted {
    Scripted::new(
        locale,
        vec![
            Rule::new("save_workspace_name", json!({ "name": "{name}" }))
                .phrase("rename the workspace to {name}")
                .phrase("rename it to {name}")
                .phrase("call it {name}")
                .phrase("把工作区重命名为{name}")
                .phrase("重命名为{name}")
                .phrase("改名为{name}"),
            Rule::new("save_description", json!({ "description": "{text}" }))
                .phrase("set the description to {text}")
                .phrase("describe it as {text}")
                .phrase("把描述改为{text}")
                .phrase("描述改为{text}"),
            Rule::new("archive_workspace", json!({})).phrase("archive").phrase("归档"),
            Rule::new("reset_workspace", json!({})).phrase("reset").phrase("重置"),
            Rule::new("publish_changes", json!({})).phrase("publish").phrase("发布"),
            Rule::new("read_member_requests", json!({}))
                .phrase("member requests")
                .phrase("成员请求"),
            Rule::new(READ_PAGE_STATE, json!({ "key": "workspace_name" }))
                .phrase("what is the workspace called")
                .phrase("what's the workspace called")
                .phrase("what is it called")
                .phrase("工作区叫什么")
                .phrase("叫什么名字")
                .answer(Reply::new("The workspace is called “{value}”.", "工作区叫“{value}”。")),
        ],
    )
.expect("phrases the offline assistant can match")
    .help(Reply::new(
        "I'm the offline assistant. Try “rename the workspace to Apollo”, “archive it”, “reset”, “publish” or “what is the workspace called?”.",
        "我是离线助手。试试：“把工作区重命名为 Apollo”、“归档”、“重置”、“发布”或“工作区叫什么？”。",
    ))
}
