//! A page session's trail, made by the real executor: what `evidence` and `replay` read.

use countersign::{
    Action, Call, Caller, Config, Confirm, Executor, Gesture, Kind, MemoryAudit, Session, Step,
    Timestamp,
};
use serde::Deserialize;
use serde_json::json;

#[derive(Clone, Deserialize, countersign::schemars::JsonSchema)]
#[schemars(crate = "countersign::schemars")]
struct Rename {
    name: String,
}

#[derive(Clone, Deserialize, countersign::schemars::JsonSchema)]
#[schemars(crate = "countersign::schemars")]
struct Nothing {}

/// A session's trail: a rename approved once, one denied, an "always allow" and a call it
/// covered, an archive asked of an MCP client and left to expire, and an unknown action.
pub async fn trail() -> Vec<countersign::AuditRecord> {
    trail_under(None).await
}

/// [`trail`], under `policy` (a policy file's text) when given.
pub async fn trail_under(policy: Option<&str>) -> Vec<countersign::AuditRecord> {
    let audit = MemoryAudit::new();
    let exec = Executor::new(
        Config::new("page-7", Session::new("admin", ["ws"]), [3; 32]),
        audit.clone(),
    );
    if let Some(policy) = policy {
        exec.load_policy(policy).unwrap();
    }
    let _rename = exec
        .register(
            Action::<Rename>::new("save_workspace_name", "Renames.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .run(|p: Rename| async move { Ok::<_, String>(json!({ "name": p.name })) }),
        )
        .unwrap();
    let _archive = exec
        .register(
            Action::<Nothing>::new("archive_workspace", "Archives.")
                .kind(Kind::Danger)
                .run(|_: Nothing| async move { Ok::<_, String>(json!({})) }),
        )
        .unwrap();
    let at = Timestamp::from_millis;
    let rename = |id: &str, name: &str| {
        Call::new(
            id,
            "save_workspace_name",
            json!({ "name": name }).to_string(),
        )
    };
    let finish = |step: Step| async {
        if let Step::Perform(job) = step {
            let done = job.run().await;
            exec.complete(done, at(50));
        }
    };
    for (id, gesture) in [
        ("c1", Some(Gesture::AllowOnce)),
        ("c2", None),
        ("c3", Some(Gesture::AllowForSession)),
    ] {
        let Ok(Step::Approval(card)) = exec.submit(rename(id, "Apollo"), at(10)) else {
            panic!("{id} waits for a card");
        };
        match gesture {
            Some(gesture) => finish(exec.approve(card.countersign(gesture), at(20)).unwrap()).await,
            None => {
                exec.deny(card.call, Some("not now"), at(20)).unwrap();
            }
        }
    }
    finish(exec.submit(rename("c4", "Apollo"), at(30)).unwrap()).await;
    let _ = exec
        .submit(
            Call::new("m1", "archive_workspace", "{}").by(Caller::Mcp),
            at(40),
        )
        .unwrap();
    exec.handle_timeout(at(10_000_000));
    let _ = exec
        .submit(Call::new("x1", "drop_database", "{}"), at(60))
        .unwrap();
    audit.records()
}
