//! The scripted person of `countersign-testing` presses each of the dock's controls and
//! gets the outcome a person's press gets: allowed once or for the session, denied,
//! edited, answered, declined, a handoff done or cancelled.

use countersign_testing::{code, tick};
use leptos::prelude::Set;
use wasm_bindgen_test::*;

use super::harness::{mount, Setup};

#[wasm_bindgen_test]
async fn the_scripted_person_presses_every_control_of_the_dock() {
    let page = mount(Setup::default());
    let once = page.call("save", r#"{"name":"Apollo"}"#);
    tick().await;
    page.allow_once().await;
    assert_eq!(code(&once.await), "OK");
    let denied = page.call("archive", r#"{"name":"w"}"#);
    tick().await;
    page.deny().await;
    assert_eq!(code(&denied.await), "PERMISSION_DENIED");
    let edited = page.call("rename", r#"{"name":"Apollo"}"#);
    tick().await;
    page.edit(&[("name", "Artemis")]).await;
    assert!(page.text(".cs-card__consequence").contains("Artemis"));
    page.allow_once().await;
    assert_eq!(code(&edited.await), "OK");
    let granted = page.call("rename", r#"{"name":"Hermes"}"#);
    tick().await;
    page.allow_for_session().await;
    assert_eq!(code(&granted.await), "OK");
    assert_eq!(
        page.runs(),
        ["save:Apollo", "rename:Artemis", "rename:Hermes"]
    );
    let answered = page.call("pick", "{}");
    tick().await;
    page.answer(&[("colour", "blue"), ("count", "3")]).await;
    assert_eq!(code(&answered.await), "OK");
    let declined = page.call("pick", "{}");
    tick().await;
    page.decline().await;
    assert_eq!(code(&declined.await), "QUESTION_DECLINED");
    let cancelled = page.call("publish", "{}");
    tick().await;
    page.handoff_cancel().await;
    assert_eq!(code(&cancelled.await), "HANDOFF_CANCELLED");
    let published = page.call("publish", "{}");
    tick().await;
    page.signals.published.set(true);
    tick().await;
    page.handoff_done().await;
    assert_eq!(code(&published.await), "OK");
    // One terminal record per call, and the edited call's original ended as superseded.
    assert_eq!(page.terminal_records(), 9);
}
