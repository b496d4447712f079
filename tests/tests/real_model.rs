//! The page and the gateway against a model server nobody here wrote: llama-cpp-python's
//! OpenAI-compatible server with a small local model. A text turn streams from it to the
//! dock, whole; and every request of a turn with a tool call, its approval and its
//! result (the history a real server must take) reaches it byte for byte and is taken.
#![allow(clippy::print_stdout, missing_docs)]

use std::time::Duration;

use countersign_e2e::real_model::{witness, LlamaServer};
use countersign_e2e::{build_tutorial, ensure, scripted_model, Browser, Gateway};

/// Long enough for the small model to finish a short answer on a slow machine.
const ANSWER: Duration = Duration::from_secs(180);

#[tokio::test]
async fn a_real_model_server_streams_a_turn_and_takes_the_page_s_history() -> Result<(), String> {
    let dist = build_tutorial()?;
    let llama = LlamaServer::start().await?;
    let scripted = scripted_model().await?;
    let (upstream, heard) = witness(llama.base.clone(), scripted).await?;
    let audit = std::env::temp_dir().join(format!("countersign-real-model-{}", std::process::id()));
    std::fs::create_dir_all(&audit).map_err(|e| e.to_string())?;
    let mut gateway = Gateway::start(dist, upstream, audit.join("audit.jsonl")).await?;
    let browser = Browser::start().await?;
    let ui = browser.ui(gateway.base(), "real-model-")?;
    let outcome = async {
        ui.open("en").await?;
        // The real server's own answer, streamed through the gateway to the dock.
        ui.say("hello, who are you?").await?;
        let deadline = tokio::time::Instant::now() + ANSWER;
        loop {
            let done = ui.count(".cs-msg--assistant").await? > 0
                && ui.count(".cs-msg--streaming, .cs-preparing").await? == 0;
            if done {
                break;
            }
            ensure(
                tokio::time::Instant::now() < deadline,
                "the real server's answer never finished in the dock",
            )?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let answer = ui.text(".cs-msg--assistant").await?;
        ensure(
            !answer.trim().is_empty(),
            "an empty answer from the real server",
        )?;
        ensure(
            ui.count(".cs-msg--error").await? == 0,
            format!(
                "an error after the real server's answer: {}",
                ui.text(".cs-msg--error").await.unwrap_or_default()
            ),
        )?;
        ui.shot("answer").await?;
        // A tool call (the scripted model's, so it is the same on every run), approved;
        // the history after it, with the call and its result, goes to the real server too.
        ui.say("rename the workspace to Apollo").await?;
        ui.wait_for(".cs-allow-once").await?;
        ui.click(".cs-allow-once").await?;
        ui.wait_text("#current-name", "Apollo").await?;
        ui.answer_contains("Done").await?;
        ensure(
            ui.count(".cs-msg--error").await? == 0,
            "an error in the tool turn",
        )?;
        let heard = heard.lock().map(|h| h.clone()).unwrap_or_default();
        println!("real model server heard: {heard:?}");
        ensure(
            heard.iter().any(|h| h.passed_through && h.status == 200),
            "the text turn did not come from the real server",
        )?;
        ensure(
            heard.iter().any(|h| h.tool_history),
            "no request with the tool call's history reached the real server",
        )?;
        for h in heard.iter().filter(|h| !h.passed_through) {
            ensure(
                h.status == 200 && h.events > 0,
                format!("the real server did not take the page's request: {h:?}"),
            )?;
        }
        Ok(())
    }
    .await;
    let _ = browser.client.close().await;
    gateway.stop().await;
    let _ = std::fs::remove_dir_all(&audit);
    outcome
}
