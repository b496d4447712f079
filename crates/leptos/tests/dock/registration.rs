//! `use_action` says whether the model can call the action, and why not.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::{action::NoParams, Action, Kind};
use countersign_leptos::{use_action, CountersignOptions, Registered};
use leptos::prelude::*;
use wasm_bindgen_test::*;

fn archive(id: &str) -> Action<NoParams> {
    Action::<NoParams>::new(id, "Archive.")
        .kind(Kind::Write)
        .run(|_| async { Ok::<_, String>(()) })
}

#[wasm_bindgen_test]
fn use_action_says_registered_refused_or_without_a_provider() {
    let seen: Rc<RefCell<Vec<Registered>>> = Rc::default();
    let kept = Rc::clone(&seen);
    let page = countersign_testing::mount(CountersignOptions::default(), move || {
        let mut seen = kept.borrow_mut();
        seen.push(use_action(archive("archive")).registered);
        seen.push(use_action(archive("bad id!")).registered);
    });
    let seen = seen.borrow();
    assert_eq!(seen[0], Registered::Yes);
    assert!(
        matches!(&seen[1], Registered::Refused(why) if why.contains("bad id!")),
        "{:?}",
        seen[1]
    );
    assert!(page
        .cs
        .executor()
        .action_ids()
        .contains(&"archive".to_owned()));
    let outside = Owner::new().with(|| use_action(archive("archive")).registered);
    assert_eq!(outside, Registered::NoProvider);
}
