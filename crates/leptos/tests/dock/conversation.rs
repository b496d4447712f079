//! The conversation around the gate: a turn through the chat, the history sent back to
//! the model (bounded, traced), the gateway's errors and rate limits, and the offline
//! assistant when the gateway is unreachable.

use countersign_testing::tick;
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;
use wasm_bindgen_test::*;

use super::harness::{
    completion_call, completion_text, idle, mount, mount_online, mount_with_model, say, FakeFetch,
    Setup,
};

#[wasm_bindgen_test]
async fn the_chat_runs_a_turn_through_the_gate_and_reports_a_denial() {
    let page = mount(Setup {
        assistant: true,
        ..Setup::default()
    });
    assert!(
        page.q(".cs-badge--offline")
            .map(|b| !b.hidden())
            .unwrap_or(false),
        "offline badge shown"
    );
    page.type_into(".cs-input", "please archive it");
    tick().await;
    page.click(".cs-send");
    tick().await;
    assert!(
        !page.q(".cs-working").unwrap().hidden(),
        "working state visible"
    );
    assert!(page.q(".cs-card").is_some());
    page.click(".cs-deny");
    tick().await;
    tick().await;
    assert!(page.q(".cs-working").unwrap().hidden());
    let answer = page.last_answer();
    assert!(answer.contains("Not done"), "{answer}");
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn a_refused_oversized_argument_never_travels_back_in_the_history() {
    let huge = format!(r#"{{"name":"{}"}}"#, "x".repeat(1_200_000));
    let answers = serde_json::json!([
        [200, completion_call("save", &huge)],
        [200, completion_text("It was refused.")]
    ]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "rename it").await;
    idle(&page).await;
    let requests = FakeFetch::requests();
    assert_eq!(
        requests.len(),
        2,
        "the model heard back once: {}",
        page.text(".cs-log")
    );
    let second = &requests[1].1;
    assert!(
        second.len() < 20_000,
        "the second request carries {} bytes",
        second.len()
    );
    assert!(second.contains("INVALID_ARGS"), "the model learns why");
    assert!(
        second.contains("over the limit"),
        "a placeholder names the size"
    );
    assert!(page.text(".cs-log").contains("It was refused."));
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn each_model_request_is_traced_and_its_calls_records_carry_the_trace() {
    let answers = serde_json::json!([
        [200, completion_call("no_such_action", "{}")],
        [200, completion_text("That does not exist.")]
    ]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "do the thing").await;
    idle(&page).await;
    let traces = FakeFetch::traceparents();
    assert_eq!(traces.len(), 2, "{traces:?}");
    for trace in &traces {
        assert!(countersign::call::is_traceparent(trace), "{trace}");
    }
    assert_ne!(traces[0], traces[1], "one trace per request");
    // The call came from the first request's answer: each of its records carries that
    // request's traceparent, and nothing else does.
    let records: Vec<_> = page
        .cs
        .audit()
        .records()
        .into_iter()
        .filter(|r| &*r.tool_call_id == "c1")
        .collect();
    assert!(!records.is_empty());
    assert!(
        records
            .iter()
            .all(|r| r.trace.as_deref() == Some(traces[0].as_str())),
        "{records:?}"
    );
    assert!(page.runs().is_empty());
}

#[wasm_bindgen_test]
async fn a_history_over_the_gateway_cap_drops_its_oldest_turns_and_says_so() {
    let _fetch = FakeFetch::install(&serde_json::json!([[200, completion_text("ok")]]).to_string());
    let page = mount_online(Some(40_000));
    for turn in 0..6 {
        say(&page, &format!("turn {turn} {}", "y".repeat(9_000))).await;
        idle(&page).await;
    }
    let requests = FakeFetch::requests();
    assert!(
        requests.iter().all(|(_, body)| body.len() <= 40_000),
        "every request fits the cap"
    );
    let last = &requests.last().unwrap().1;
    assert!(last.contains("turn 5"), "the turn in progress is kept");
    assert!(!last.contains("turn 0"), "the oldest turn went first");
    assert!(page.text(".cs-log").contains("older turns were left out"));
}

#[wasm_bindgen_test]
async fn the_gateway_s_errors_are_said_in_words_and_never_send_the_session_offline() {
    for (status, words) in [(401, "(401)"), (413, "(413)"), (500, "kept failing")] {
        let _fetch = FakeFetch::install(
            &serde_json::json!([[status, r#"{"error":{"code":"x","message":"no"}}"#]]).to_string(),
        );
        let page = mount_online(None);
        say(&page, "hello").await;
        idle(&page).await;
        let error = page.text(".cs-msg--error");
        assert!(error.contains(words), "{status}: {error}");
        assert!(
            !page.cs.dock().offline.get_untracked(),
            "{status} sent the session offline"
        );
        // The next message goes to the model again.
        let before = FakeFetch::requests().len();
        say(&page, "again").await;
        idle(&page).await;
        assert!(
            FakeFetch::requests().len() > before,
            "{status}: the model was not asked again"
        );
    }
}

/// A turn that fails after something ran says what ran, never "nothing was done"; one
/// that ran nothing says so; an empty answer is said, not an empty bubble.
#[wasm_bindgen_test]
async fn a_failed_turn_says_what_it_ran_before_the_failure() {
    let call = serde_json::json!({"choices":[{"message":{"role":"assistant","content":null,
        "tool_calls":[{"id":"c1","type":"function","function":{"name":"note","arguments":"{\"name\":\"a\"}"}}]}}]})
    .to_string();
    let failed = r#"{"error":{"code":"x","message":"no"}}"#;
    let _fetch = FakeFetch::install(&serde_json::json!([[200, call], [500, failed]]).to_string());
    let page = mount_online(None);
    say(&page, "note a").await;
    idle(&page).await;
    assert_eq!(page.runs(), ["note:a"]);
    let error = page.text(".cs-msg--error");
    assert!(
        error.contains("Done in this turn before that: Title note."),
        "{error}"
    );
    assert!(!error.contains("othing was"), "{error}");
    let _fetch = FakeFetch::install(&serde_json::json!([[500, failed]]).to_string());
    let page = mount_online(None);
    say(&page, "hello").await;
    idle(&page).await;
    assert!(page
        .text(".cs-msg--error")
        .contains("Nothing was run in this turn."));
    let _fetch = FakeFetch::install(&serde_json::json!([[200, completion_text("")]]).to_string());
    let page = mount_online(None);
    say(&page, "hello").await;
    idle(&page).await;
    assert!(page.text(".cs-log").contains("The model gave no answer."));
    assert!(page.q(".cs-msg--assistant").is_none(), "no empty bubble");
}

#[wasm_bindgen_test]
async fn a_rate_limit_waits_for_retry_after_and_recovers() {
    let answers = serde_json::json!([[429, "{}", 1], [200, completion_text("Here now.")]]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "hello").await;
    tick().await;
    tick().await;
    assert!(page.text(".cs-log").contains("trying again in 1 s"));
    idle(&page).await;
    assert!(page.text(".cs-log").contains("Here now."));
    assert!(page.q(".cs-msg--error").is_none());
    assert_eq!(FakeFetch::requests().len(), 2);
}

#[wasm_bindgen_test]
async fn an_unreachable_gateway_switches_to_the_offline_assistant_visibly_and_the_person_can_leave_it(
) {
    let answers = serde_json::json!(["network", [200, completion_text("Back with the model.")]]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_with_model(None, true);
    TimeoutFuture::new(100).await; // the health probe: a model is there
    assert!(!page.cs.dock().offline.get_untracked());
    say(&page, "hello").await;
    idle(&page).await;
    assert!(
        page.cs.dock().offline.get_untracked(),
        "the offline assistant took over"
    );
    assert!(page
        .text(".cs-log")
        .contains("offline assistant answers now"));
    page.click(".cs-go-online");
    TimeoutFuture::new(100).await;
    assert!(
        !page.cs.dock().offline.get_untracked(),
        "the person left the offline state"
    );
    assert!(page.text(".cs-log").contains("The model answers again."));
    say(&page, "hello again").await;
    idle(&page).await;
    assert!(page.text(".cs-log").contains("Back with the model."));
}

#[wasm_bindgen_test]
async fn a_turn_with_too_many_calls_runs_sixteen_and_records_every_refusal() {
    let calls: Vec<serde_json::Value> = (0..20)
        .map(|i| serde_json::json!({"id": format!("c{i}"), "type": "function", "function": {"name": "note", "arguments": format!(r#"{{"name":"n{i}"}}"#)}}))
        .collect();
    let first = serde_json::json!({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":calls}}]}).to_string();
    let answers = serde_json::json!([[200, first], [200, completion_text("Noted.")]]);
    let _fetch = FakeFetch::install(&answers.to_string());
    let page = mount_online(None);
    say(&page, "note twenty things").await;
    idle(&page).await;
    assert_eq!(page.runs().len(), 16);
    let second = &FakeFetch::requests()[1].1;
    assert_eq!(
        second.matches("too_many_calls").count(),
        4,
        "the rest are answered, not run"
    );
    // Every call the page answered is in the trail: one terminal record each.
    let records = page.cs.audit().records();
    for i in 0..20 {
        let id = format!("c{i}");
        let terminal: Vec<_> = records
            .iter()
            .filter(|r| r.tool_call_id == id && r.is_terminal())
            .collect();
        assert_eq!(terminal.len(), 1, "{id}");
        let over = terminal[0].reason == countersign::Reason::TooManyCalls { cap: 16 };
        assert_eq!(over, i >= 16, "{id}");
    }
    assert!(page.text(".cs-log").contains("Noted."));
}
