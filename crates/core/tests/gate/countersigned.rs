//! A countersigned action runs only with a token minted for exactly the person's approval.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::{
    action::LocalBoxFuture, audit::ArgsDigest, audit::AuditEvent, countersignature::ApprovedBy,
    countersignature::Countersignature, countersignature::Countersigner,
    countersignature::MintRequest, Action, Gesture, Kind, Mode, Reason, Step,
};

use crate::common::{at, code, drive, for_call, Named, World};

/// A signer that logs every request and answers with `answer` (a token or a refusal).
#[derive(Clone)]
struct Signer {
    asked: Rc<RefCell<Vec<MintRequest>>>,
    answer: Result<&'static str, &'static str>,
}

impl Countersigner for Signer {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        self.asked.borrow_mut().push(request);
        let answer = self.answer;
        Box::pin(async move { answer.map(Countersignature::new).map_err(str::to_owned) })
    }
}

/// A countersigned action that logs `id:name:token` when it runs.
fn signed(w: &World, id: &str, kind: Kind) -> Action<Named> {
    let runs = Rc::clone(&w.runs);
    let tag = id.to_owned();
    Action::<Named>::new(id, "a countersigned action")
        .kind(kind)
        .run_countersigned(move |p: Named, token: Countersignature| {
            let runs = Rc::clone(&runs);
            let tag = tag.clone();
            async move {
                runs.borrow_mut()
                    .push(format!("{tag}:{}:{}", p.name, token.as_str()));
                Ok::<_, String>(serde_json::json!({ "name": p.name }))
            }
        })
}

fn world(answer: Result<&'static str, &'static str>) -> (World, Signer) {
    let mut w = World::new();
    w.add(signed(&w, "archive", Kind::Danger));
    w.add(signed(&w, "rename", Kind::Write));
    w.add(signed(&w, "look", Kind::Read));
    let signer = Signer {
        asked: Rc::default(),
        answer,
    };
    w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
    (w, signer)
}

#[test]
fn an_approved_call_runs_with_a_token_bound_to_exactly_that_approval() {
    let (w, signer) = world(Ok("tok-1"));
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let settled = w.allow(&card, Gesture::AllowOnce, 10).unwrap();
    assert!(
        matches!(settled.outcome, countersign::Outcome::Done(_)),
        "{settled:?}"
    );
    assert_eq!(w.runs(), ["archive:Acme:tok-1"]);
    let asked = signer.asked.borrow();
    assert_eq!(asked.len(), 1);
    let request = &asked[0];
    assert_eq!(request.call, card.call);
    assert_eq!(&*request.tool_call_id, "tc");
    assert_eq!(request.action, "archive");
    assert_eq!(request.args_sha256, card.args_sha256);
    assert_eq!(
        request.args_sha256,
        ArgsDigest::of_value(&serde_json::json!({"name": "Acme"}))
    );
    assert_eq!(request.card_sha256, Some(card.words_sha256()));
    assert_eq!(request.approved_by, ApprovedBy::Once);
    assert_eq!(request.grant, None);
    assert_eq!(request.session, "test");
    assert_eq!(request.role, "admin");
    assert_eq!(w.terminal(card.call).len(), 1);
}

#[test]
fn without_a_signer_the_approved_call_never_runs() {
    let mut w = World::new();
    w.add(signed(&w, "archive", Kind::Danger));
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let settled = w.allow(&card, Gesture::AllowOnce, 10).unwrap();
    assert_eq!(code(&settled), "NOT_COUNTERSIGNED");
    assert!(w.runs().is_empty());
    let terminal = w.terminal(card.call);
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].reason, Reason::NotCountersigned);
    let said = serde_json::to_string(&settled.to_model_json()).unwrap();
    assert!(said.contains("no countersigner"), "{said}");
}

#[test]
fn a_refused_mint_settles_the_call_and_run_is_never_reached() {
    let (w, signer) = world(Err("the gateway said 503 audit_unavailable"));
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let settled = w.allow(&card, Gesture::AllowOnce, 10).unwrap();
    assert_eq!(code(&settled), "NOT_COUNTERSIGNED");
    assert!(w.runs().is_empty());
    assert_eq!(signer.asked.borrow().len(), 1);
    let terminal = w.terminal(card.call);
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].event, AuditEvent::Settled);
    let said = serde_json::to_string(&settled.to_model_json()).unwrap();
    assert!(said.contains("audit_unavailable"), "{said}");
}

#[test]
fn a_denial_mints_nothing() {
    let (w, signer) = world(Ok("tok"));
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let settled = w.exec.deny(card.call, None, at(5)).unwrap();
    assert_eq!(code(&settled), "PERMISSION_DENIED");
    assert!(signer.asked.borrow().is_empty());
    assert!(w.runs().is_empty());
}

#[test]
fn a_read_level_action_that_takes_a_token_is_still_asked() {
    let (w, signer) = world(Ok("tok"));
    let card = w.card("look", r#"{"name":"x"}"#, 0);
    assert!(
        signer.asked.borrow().is_empty(),
        "minted before the person approved"
    );
    let asked = for_call(&w.audit, card.call);
    assert_eq!(asked.last().unwrap().reason, Reason::NeedsCountersignature);
    assert!(w.runs().is_empty());
}

#[test]
fn no_mode_runs_a_countersigned_action_for_the_person() {
    for mode in [Mode::Away, Mode::Unattended] {
        let (w, signer) = world(Ok("tok"));
        w.exec.set_mode(mode).unwrap();
        for action in ["look", "rename", "archive"] {
            let Step::Settled(settled) = w.call(action, r#"{"name":"x"}"#, 0) else {
                panic!("{mode:?} {action}: asked or ran");
            };
            assert_eq!(code(&settled), "POLICY_DENIED", "{mode:?} {action}");
        }
        assert!(signer.asked.borrow().is_empty());
        assert!(w.runs().is_empty());
    }
    // Bypass skips approvals elsewhere; a countersignature still needs the person.
    let (w, signer) = world(Ok("tok"));
    w.exec.set_mode(Mode::Bypass).unwrap();
    let card = w.card("rename", r#"{"name":"x"}"#, 0);
    assert!(signer.asked.borrow().is_empty());
    w.allow(&card, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(signer.asked.borrow()[0].approved_by, ApprovedBy::Once);
}

#[test]
fn a_grant_mints_tokens_that_name_it_and_nothing_else_does() {
    let (w, signer) = world(Ok("tok"));
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    assert!(card.offers_session_grant);
    w.allow(&card, Gesture::AllowForSession, 5).unwrap();
    let grant = signer.asked.borrow()[0].grant.unwrap();
    assert_eq!(signer.asked.borrow()[0].approved_by, ApprovedBy::Grant);
    assert_eq!(
        signer.asked.borrow()[0].card_sha256,
        Some(card.words_sha256())
    );
    // The next call runs under the grant, with a token that says so.
    let step = w.call("rename", r#"{"name":"b"}"#, 10);
    let settled = drive(&w.exec, step, 10).unwrap();
    assert!(matches!(settled.outcome, countersign::Outcome::Done(_)));
    let asked = signer.asked.borrow();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].approved_by, ApprovedBy::Grant);
    assert_eq!(asked[1].grant, Some(grant));
    assert_eq!(asked[1].card_sha256, None);
    assert_eq!(w.runs(), ["rename:a:tok", "rename:b:tok"]);
}

#[test]
fn an_edited_call_is_signed_for_the_edited_arguments() {
    let (w, signer) = world(Ok("tok"));
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    let Step::Approval(edited) = w.exec.edit(card.call, r#"{"name":"b"}"#, at(3)).unwrap() else {
        panic!("an edit asks again");
    };
    w.allow(&edited, Gesture::AllowOnce, 5).unwrap();
    let asked = signer.asked.borrow();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].call, edited.call);
    assert_eq!(
        asked[0].args_sha256,
        ArgsDigest::of_value(&serde_json::json!({"name": "b"}))
    );
    assert_eq!(w.runs(), ["rename:b:tok"]);
}

#[test]
fn declaring_a_countersigned_run_changes_the_declaration() {
    let w = World::new();
    let plain = w
        .exec
        .register(w.action("x", Kind::Write, countersign::Confirm::Ask));
    let plain_digest = w.exec.registration("x");
    drop(plain);
    let _signed = w.exec.register(signed(&w, "x", Kind::Write)).unwrap();
    assert_ne!(w.exec.registration("x"), plain_digest);
    // The token is never printed whole.
    assert_eq!(
        format!("{:?}", Countersignature::new("secret.token.value")),
        "Countersignature(18 bytes)"
    );
}

#[test]
fn run_gets_the_approved_arguments_exactly_as_digested() {
    let mut w = World::new();
    let seen = Rc::new(RefCell::new(None));
    let got = Rc::clone(&seen);
    w.add(
        Action::<Named>::new("archive", "x")
            .kind(Kind::Danger)
            .run_countersigned(move |_p: Named, token: Countersignature| {
                *got.borrow_mut() = Some(token.arguments().clone());
                async { Ok::<_, String>(serde_json::json!({})) }
            }),
    );
    let signer = Signer {
        asked: Rc::default(),
        answer: Ok("t"),
    };
    w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
    let card = w.card("archive", r#"{ "name" : "Acme" }"#, 0);
    w.allow(&card, Gesture::AllowOnce, 5).unwrap();
    let arguments = seen.borrow().clone().unwrap();
    assert_eq!(arguments, serde_json::json!({"name": "Acme"}));
    assert_eq!(
        ArgsDigest::of_value(&arguments),
        signer.asked.borrow()[0].args_sha256
    );
}

/// A countersigner that answers only when told.
struct Held(Rc<RefCell<Option<futures_channel::oneshot::Receiver<()>>>>);

impl Countersigner for Held {
    fn mint(&self, _: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        let wait = self.0.borrow_mut().take();
        Box::pin(async move {
            if let Some(wait) = wait {
                let _ = wait.await;
            }
            Ok(Countersignature::new("late"))
        })
    }
}

#[test]
fn a_call_settled_while_its_token_is_minted_never_runs() {
    let mut w = World::new();
    w.add(signed(&w, "archive", Kind::Danger));
    let (release, wait) = futures_channel::oneshot::channel();
    w.exec
        .set_countersigner(Rc::new(Held(Rc::new(RefCell::new(Some(wait))))))
        .unwrap();
    let card = w.card("archive", r#"{"name":"Acme"}"#, 0);
    let Step::Perform(job) = w
        .exec
        .approve(card.countersign(Gesture::AllowOnce), at(5))
        .unwrap()
    else {
        panic!("an approved call goes to perform");
    };
    // The page goes away while the gateway is still minting.
    let ended = w.exec.shutdown(at(6));
    assert_eq!(ended.len(), 1);
    let _ = release.send(());
    let completion = pollster::block_on(job.run());
    assert!(!w.exec.complete(completion, at(7)));
    assert!(w.runs().is_empty(), "ran after the call had ended");
    assert_eq!(w.terminal(card.call).len(), 1);
}

#[test]
fn a_grant_read_back_from_storage_never_covers_a_countersigned_action() {
    let (w, signer) = world(Ok("tok"));
    let card = w.card("rename", r#"{"name":"a"}"#, 0);
    w.allow(&card, Gesture::AllowForSession, 5).unwrap();
    let basis = w.exec.grants()[0].basis.clone();
    // A new page session reads the grant back (or a script planted it).
    let (fresh, _) = world(Ok("tok"));
    assert!(matches!(
        fresh.exec.restore_grant(&basis, at(10)),
        Err(countersign::ticket::RestoreError::NotOffered(_))
    ));
    assert!(matches!(
        fresh.call("rename", r#"{"name":"b"}"#, 20),
        Step::Approval(_)
    ));
    assert_eq!(signer.asked.borrow().len(), 1);
}

#[test]
fn a_passkey_action_asks_for_passkey_presence_and_needs_a_countersigned_run() {
    let (mut w, signer) = world(Ok("tok"));
    w.add(signed(&w, "reset", Kind::Danger).needs_passkey());
    let card = w.card("reset", r#"{"name":"x"}"#, 0);
    w.allow(&card, Gesture::AllowOnce, 5).unwrap();
    assert_eq!(
        signer.asked.borrow()[0].presence,
        countersign::countersignature::Presence::Passkey
    );
    let card = w.card("archive", r#"{"name":"x"}"#, 10);
    w.allow(&card, Gesture::AllowOnce, 15).unwrap();
    assert_eq!(
        signer.asked.borrow()[1].presence,
        countersign::countersignature::Presence::Click
    );
    // A passkey nothing would check is refused at registration.
    let plain = w
        .action("plain", Kind::Danger, countersign::Confirm::Ask)
        .needs_passkey();
    assert!(matches!(
        w.exec.register(plain),
        Err(countersign::executor::RegisterError::PasskeyWithoutCountersignature(_))
    ));
}

#[test]
fn a_policy_file_can_ask_a_passkey_and_never_lowers_one() {
    let (mut w, signer) = world(Ok("tok"));
    w.add(signed(&w, "reset", Kind::Danger).needs_passkey());
    w.add(w.action("plain", Kind::Write, countersign::Confirm::Ask));
    w.exec
        .load_policy(
            r#"{"roles": {"admin": {"scopes": ["workspace.write"], "overrides": {
                "archive": {"presence": "passkey"},
                "reset": {"presence": "click"},
                "plain": {"presence": "passkey"}
            }}}}"#,
        )
        .unwrap();
    for (action, at_ms) in [("archive", 0), ("reset", 10)] {
        let card = w.card(action, r#"{"name":"x"}"#, at_ms);
        w.allow(&card, Gesture::AllowOnce, at_ms + 5).unwrap();
    }
    let asked = signer.asked.borrow();
    assert_eq!(
        asked[0].presence,
        countersign::countersignature::Presence::Passkey,
        "raised by the file"
    );
    assert_eq!(
        asked[1].presence,
        countersign::countersignature::Presence::Passkey,
        "never lowered"
    );
    // An action that cannot carry a token cannot honour the file: refused, not run.
    let card = w.card("plain", r#"{"name":"x"}"#, 20);
    let settled = w.allow(&card, Gesture::AllowOnce, 25).unwrap();
    assert_eq!(code(&settled), "NOT_COUNTERSIGNED");
    assert!(!w.runs().iter().any(|r| r.starts_with("plain")));
    assert!(countersign::policy::PolicyFile::from_json(
        r#"{"roles": {"admin": {"overrides": {"archive": {"presence": "face"}}}}}"#
    )
    .is_err());
}

#[test]
fn a_window_action_asks_for_the_window_and_nothing_lowers_it() {
    use countersign::countersignature::Presence;
    let mut config = countersign::Config::new(
        "s",
        countersign::Session::new("admin", ["workspace.write"]),
        [7; 32],
    );
    // Agents' calls need a passkey here: that raises to a passkey, never lowers the window.
    config.agents_need_passkey = true;
    let mut w = World::with_config(config);
    let signer = Signer {
        asked: Rc::default(),
        answer: Ok("tok"),
    };
    w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
    w.add(signed(&w, "reset", Kind::Danger).needs_window());
    w.add(signed(&w, "archive", Kind::Danger));
    assert_eq!(w.exec.presence_of("reset"), Some(Presence::Window));
    w.exec
        .load_policy(
            r#"{"roles": {"admin": {"scopes": ["workspace.write"], "overrides": {
                "reset": {"presence": "click"},
                "archive": {"presence": "window"}
            }}}}"#,
        )
        .unwrap();
    let card = w.card("reset", r#"{"name":"x"}"#, 0);
    w.allow(&card, Gesture::AllowOnce, 5).unwrap();
    let step = w
        .exec
        .submit(
            countersign::Call::new("tc", "reset", r#"{"name":"y"}"#)
                .by(countersign::Caller::WebMcp),
            at(10),
        )
        .unwrap();
    let Step::Approval(card) = step else {
        panic!("asked");
    };
    w.allow(&card, Gesture::AllowOnce, 15).unwrap();
    let card = w.card("archive", r#"{"name":"x"}"#, 20);
    w.allow(&card, Gesture::AllowOnce, 25).unwrap();
    let asked: Vec<Presence> = signer.asked.borrow().iter().map(|r| r.presence).collect();
    assert_eq!(
        asked,
        [Presence::Window; 3],
        "declared, an agent's, raised by the file"
    );
    // A window nothing would check is refused at registration.
    let plain = w
        .action("plain", Kind::Danger, countersign::Confirm::Ask)
        .needs_window();
    assert!(matches!(
        w.exec.register(plain),
        Err(countersign::executor::RegisterError::PasskeyWithoutCountersignature(_))
    ));
}

#[test]
fn where_the_page_says_so_an_agents_countersigned_call_needs_the_passkey() {
    use countersign::{countersignature::Presence, Caller};
    for (on, caller, want) in [
        (false, Caller::WebMcp, Presence::Click),
        (true, Caller::WebMcp, Presence::Passkey),
        (true, Caller::Mcp, Presence::Passkey),
        (true, Caller::Assistant, Presence::Click),
    ] {
        let mut config = countersign::Config::new(
            "s",
            countersign::Session::new("admin", Vec::<String>::new()),
            [7; 32],
        );
        config.agents_need_passkey = on;
        let mut w = World::with_config(config);
        w.add(signed(&w, "archive", Kind::Danger));
        let signer = Signer {
            asked: Rc::default(),
            answer: Ok("tok"),
        };
        w.exec.set_countersigner(Rc::new(signer.clone())).unwrap();
        let step = w
            .exec
            .submit(
                countersign::Call::new("tc", "archive", r#"{"name":"A"}"#).by(caller),
                at(0),
            )
            .unwrap();
        let Step::Approval(card) = step else {
            panic!("asked");
        };
        w.allow(&card, Gesture::AllowOnce, 1).unwrap();
        let asked = signer.asked.borrow();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].presence, want, "{on} {caller}");
        assert_eq!(asked[0].caller, caller);
    }
}

#[test]
fn a_countersigned_run_takes_the_params_it_was_approved_with() {
    let (w, _signer) = world(Ok("tok-7"));
    let runs = Rc::clone(&w.runs);
    let _reg = w
        .exec
        .register(
            Action::<Named>::new("publish", "Publish.")
                .kind(Kind::Write)
                .run_countersigned(move |p: Named, token: Countersignature| {
                    let runs = Rc::clone(&runs);
                    async move {
                        runs.borrow_mut()
                            .push(format!("publish:{}:{}", p.name, token.as_str()));
                        Ok::<_, String>(serde_json::json!({ "name": p.name }))
                    }
                }),
        )
        .unwrap();
    let card = w.card("publish", r#"{"name":"v2"}"#, 0);
    let settled = w.allow(&card, Gesture::AllowOnce, 10).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["publish:v2:tok-7"], "ran once, with its token");
}

/// A purge whose card says how many rows would go, read from `rows` when it is drawn.
fn purge(rows: Rc<std::cell::Cell<u64>>) -> Action<Named> {
    Action::<Named>::new("purge", "delete rows")
        .title("Purge rows")
        .kind(Kind::Danger)
        .consequence(|p: &Named| format!("the old rows of {} are deleted", p.name))
        .preview(move |_| {
            countersign::text::Preview::diff("-kept\u{202e}").count("rows deleted", rows.get())
        })
        .run_countersigned(|_: Named, _: Countersignature| async {
            Ok::<_, String>(serde_json::json!({}))
        })
}

#[test]
fn a_backend_with_the_same_declarations_draws_the_card_the_token_binds() {
    // The page, whose data says 1 row, and a backend whose data says 1 row as well.
    let page_rows = Rc::new(std::cell::Cell::new(1));
    let (mut page, signer) = world(Ok("tok"));
    page.add(purge(Rc::clone(&page_rows)));
    let mut backend = World::new();
    let backend_rows = Rc::new(std::cell::Cell::new(1));
    backend.add(purge(Rc::clone(&backend_rows)));
    let card = page.card("purge", r#"{"name":"Acme"}"#, 0);
    page.allow(&card, Gesture::AllowOnce, 5).unwrap();
    let bound = signer.asked.borrow()[0].card_sha256.unwrap();
    // The words a backend draws: the same action, title, kind, consequence, preview and
    // arguments, as they are (not as a card escapes them for display), in the documented
    // shape (what a backend in another language hashes).
    assert_eq!(
        bound.to_hex(),
        ArgsDigest::of_value(&serde_json::json!({
            "action": "purge", "title": "Purge rows", "kind": "danger",
            "consequence": "the old rows of Acme are deleted",
            "preview": {"diff": "-kept\u{202e}", "counts": [["rows deleted", 1]]},
            "arguments": {"name": "Acme"},
        }))
        .to_hex()
    );
    let drawn = backend.card("purge", r#"{"name":"Acme"}"#, 100);
    assert_eq!(drawn.words_sha256(), bound);
    // The backend's data moved on: 101 rows would go, and the card no longer holds.
    backend_rows.set(101);
    let now = backend.card("purge", r#"{"name":"Acme"}"#, 200);
    assert_ne!(now.words_sha256(), bound);
}
