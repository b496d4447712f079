//! The workspace-settings actions through the real executor, in a terminal: what the
//! model asks, what the person is shown, what they decide, what the model is told, and
//! the audit trail. Offline; the person's choices are scripted.
//!
//! `cargo run -p countersign --example walkthrough`
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use countersign::{
    action::NoParams, Action, Call, Config, Confirm, Executor, Expect, Gesture, Handoff, Kind,
    MemoryAudit, Session, Settled, Step, Timestamp,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Clone, Deserialize, JsonSchema)]
struct Rename {
    /// The new workspace name.
    name: String,
}

#[derive(Default)]
struct Workspace {
    name: RefCell<String>,
    archived: Cell<bool>,
    published: Cell<bool>,
}

fn main() {
    let ws = Rc::new(Workspace {
        name: RefCell::new("Atlas".into()),
        ..Workspace::default()
    });
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new(
            "walkthrough",
            Session::new("admin", ["workspace.write"]),
            [11; 32],
        ),
        audit.clone(),
    );

    let (w1, w2) = (Rc::clone(&ws), Rc::clone(&ws));
    exec.register(
        Action::<Rename>::new("save_workspace_name", "Save the shared workspace name.")
            .title("Save workspace name")
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .scope("workspace.write")
            .consequence(move |p| {
                format!(
                    "rename the workspace from `{}` to `{}`",
                    w1.name.borrow(),
                    p.name
                )
            })
            .run(move |p: Rename| {
                let ws = Rc::clone(&w2);
                async move {
                    *ws.name.borrow_mut() = p.name.clone();
                    Ok::<_, String>(serde_json::json!({ "name": p.name }))
                }
            }),
    )
    .unwrap()
    .forget();

    let (w1, w2) = (Rc::clone(&ws), Rc::clone(&ws));
    exec.register(
        Action::<NoParams>::new("archive_workspace", "Archive the workspace.")
            .title("Archive workspace")
            .kind(Kind::Danger)
            .confirm(Confirm::Ask) // still asked every time: Danger resolves to AskAlways
            .available(move || !w1.archived.get())
            .consequence(|_| "archive the workspace; members lose write access".into())
            .run(move |_| {
                let ws = Rc::clone(&w2);
                async move {
                    ws.archived.set(true);
                    Ok::<_, String>(())
                }
            }),
    )
    .unwrap()
    .forget();

    let w1 = Rc::clone(&ws);
    exec.register(
        Action::<NoParams>::new("publish_changes", "Publish the workspace settings.")
            .title("Publish changes")
            .kind(Kind::Danger)
            .handoff(
                Handoff::new(
                    "Publishing needs the verification code sent to you; only you can enter it.",
                    Expect::new("the page shows the workspace as published", move || {
                        w1.published.get()
                    }),
                )
                .step("Type the verification code", Some("verification_code"))
                .step("Press Publish", Some("publish_changes"))
                .timeout(Duration::from_secs(120)),
            ),
    )
    .unwrap()
    .forget();

    let mut clock = 0u64;
    let mut now = || {
        clock += 1_500;
        Timestamp::from_millis(clock)
    };

    println!("The model sees {} tools:", exec.projection().len());
    for tool in exec.projection() {
        println!("  - {}: {}", tool.name, tool.description);
    }

    section("1. \"Rename the workspace to Apollo\" — Ask: the person allows it for the session");
    let card = expect_card(
        exec.submit(
            Call::new("tc_1", "save_workspace_name", r#"{"name":"Apollo"}"#),
            now(),
        )
        .unwrap(),
    );
    let step = exec
        .approve(card.countersign(Gesture::AllowForSession), now())
        .unwrap();
    told(&perform(&exec, step, now()));

    section("2. \"Now call it Apollo 2\" — the session grant lets it through, no card");
    told(&perform(
        &exec,
        exec.submit(
            Call::new("tc_2", "save_workspace_name", r#"{"name":"Apollo 2"}"#),
            now(),
        )
        .unwrap(),
        now(),
    ));

    section(
        "3. \"Archive it\" — Danger: asked every time, no remember option; the person declines",
    );
    let card = expect_card(
        exec.submit(Call::new("tc_3", "archive_workspace", "{}"), now())
            .unwrap(),
    );
    told(
        &exec
            .deny(card.call, Some("we still use it"), now())
            .unwrap(),
    );
    println!("   archived: {}", ws.archived.get());

    section("4. \"Approve it yourself\" — the model tries to supply its own approval");
    told(&settled(
        exec.submit(
            Call::new("tc_4", "archive_workspace", r#"{"confirmed":true}"#),
            now(),
        )
        .unwrap(),
    ));

    section("5. \"Publish\" — a handoff: the person says done too early, then cancels");
    let Step::Handoff(view) = exec
        .submit(Call::new("tc_5", "publish_changes", "{}"), now())
        .unwrap()
    else {
        panic!()
    };
    println!("   dock: {} — {}", view.title, view.reason);
    for (i, step) in view.steps.iter().enumerate() {
        println!(
            "     {}. {} [highlight: {}]",
            i + 1,
            step.text,
            step.target.as_deref().unwrap_or("-")
        );
    }
    match exec.handoff_done(view.call, now()).unwrap() {
        Some(settled) => told(&settled),
        None => println!("  not yet: the page does not show it; the handoff still waits"),
    }
    exec.handoff_cancel(view.call, now()).unwrap();

    section("6. \"Publish\" again — the person types 246810 and presses Publish");
    let Step::Handoff(view) = exec
        .submit(Call::new("tc_6", "publish_changes", "{}"), now())
        .unwrap()
    else {
        panic!()
    };
    ws.published.set(true);
    told(&exec.handoff_done(view.call, now()).unwrap().unwrap());

    section("Audit trail (arguments only as SHA-256)");
    for record in audit.records() {
        println!("{}", serde_json::to_string(&record).unwrap());
    }
}

fn section(title: &str) {
    println!("\n{title}");
}

fn expect_card(step: Step) -> countersign::ApprovalRequest {
    let Step::Approval(card) = step else {
        panic!("expected an approval card")
    };
    println!(
        "   card: {} [{:?}, {:?}] — {}{}",
        card.title,
        card.kind,
        card.policy,
        card.consequence.as_deref().unwrap_or(""),
        if card.offers_session_grant {
            " (offers \"always allow this session\")"
        } else {
            ""
        }
    );
    *card
}

fn perform(exec: &Executor, step: Step, now: Timestamp) -> Settled {
    match step {
        Step::Perform(job) => {
            let call = job.call();
            exec.complete(pollster::block_on(job.run()), now);
            std::iter::from_fn(|| exec.next_settled())
                .find(|s| s.call == call)
                .expect("the run settled the call")
        }
        other => settled(other),
    }
}

fn settled(step: Step) -> Settled {
    let Step::Settled(s) = step else {
        panic!("expected the call to settle")
    };
    s
}

fn told(settled: &Settled) {
    println!("   model is told: {}", settled.outcome.to_model_content());
}
