//! Countersignatures: the mint route (its audit record first, strict input), the JWKS,
//! every field of the core's mint request carried into the verifier's claims, the
//! tutorial's backend refusing every token that does not cover exactly its call. (Stock
//! libraries in Python and Node checking a token: `stock_libraries.rs`.)
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::{config, page_post, serve, state};
use countersign::action::LocalBoxFuture;
use countersign::audit::AuditEvent;
use countersign::countersignature::{Countersignature, Countersigner, MintRequest};
use countersign::ticket::GrantId;
use countersign::{
    Action, Call, Caller, Config, Confirm, Executor, Gesture, Kind, MemoryAudit, Session, Step,
    Timestamp,
};
use countersign_verify::{ActionDetail, ApprovedBy, Claims, Expected, Presence, Signer, Verifier};
use serde_json::{json, Value};

const SEED: [u8; 32] = [9; 32];

fn digest(args: &Value) -> String {
    countersign::audit::ArgsDigest::of_value(args).to_hex()
}

fn mint_body(action: &str, args: &Value) -> Value {
    json!({
        "call": 3,
        "tool_call_id": "call_abc",
        "action": action,
        "kind": "danger",
        "args_sha256": digest(args),
        "card_sha256": "cd".repeat(32),
        "approved_by": "once",
        "grant": null,
        "session": "page-0a1b2c",
        "role": "admin",
    })
}

async fn gateway(demo: bool) -> (String, countersign_gateway::AppState, tempfile::TempDir) {
    let mut cfg = config(None);
    cfg.demo_backend = demo;
    let (s, dir) = state(cfg);
    let s = s.with_signing_seed(&SEED);
    (serve(s.clone()).await, s, dir)
}

async fn mint(client: &reqwest::Client, base: &str, body: &Value) -> (u16, Value) {
    let r = page_post(client, format!("{base}/v1/countersign"), body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn perform(
    client: &reqwest::Client,
    base: &str,
    action: &str,
    args: &Value,
    token: Option<&str>,
) -> (u16, Value) {
    let mut r = page_post(client, format!("{base}/v1/demo/{action}"), args.to_string());
    if let Some(token) = token {
        r = r.header("countersignature", token);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_minted_token_is_recorded_first_and_checks_out_under_the_published_key() {
    let (base, s, _dir) = gateway(false).await;
    let client = reqwest::Client::new();
    let (status, answer) = mint(&client, &base, &mint_body("archive_workspace", &json!({}))).await;
    assert_eq!(status, 200, "{answer}");
    let token = answer["countersignature"].as_str().unwrap();
    let jwks = client
        .get(format!("{base}/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !jwks.contains("\"d\""),
        "the JWKS holds private key material: {jwks}"
    );
    let verifier = Verifier::new("countersign-gateway")
        .trust_jwks(&jwks)
        .unwrap();
    let claims = verifier
        .verify_now(token, &Expected::call("archive_workspace", &json!({})))
        .await
        .unwrap();
    let detail = claims.detail().unwrap();
    assert_eq!(detail.call, 3);
    assert_eq!(&*detail.tool_call_id, "call_abc");
    assert_eq!(
        detail.card_sha256.as_deref(),
        Some("cd".repeat(32).as_str())
    );
    assert_eq!(detail.decision, ApprovedBy::Once);
    assert_eq!(detail.kind, Kind::Danger);
    assert_eq!(detail.session, "page-0a1b2c");
    assert_eq!(detail.role, "admin");
    assert_eq!(detail.presence, Presence::Click);
    // A click is the page's word: no approver, no authentication method.
    assert_eq!((claims.sub.as_deref(), claims.amr.len()), (None, 0));
    assert_eq!(claims.aud, countersign_verify::DEFAULT_AUDIENCE);
    assert_eq!(claims.exp - claims.iat, 120);
    assert_eq!(claims.nbf, claims.iat);
    assert_eq!(answer["id"], json!(claims.jti));
    // The mint is the audit record: one, naming the token.
    let trail = String::from_utf8(s.audit.export().await.unwrap()).unwrap();
    let lines: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    let record: countersign::AuditRecord =
        serde_json::from_value(lines[0]["record"].clone()).unwrap();
    assert_eq!(record.event, AuditEvent::Countersigned);
    assert_eq!(
        record.countersignature.as_deref(),
        Some(claims.jti.as_str())
    );
    // The arguments as the trail keys them, never the plain digest the token binds.
    assert_eq!(
        record.args_digest,
        common::test_key().countersigned_digest(&digest(&json!({})))
    );
    assert_eq!(record.call, 3);
}

/// The page's executor asks this countersigner for tokens; it keeps each request and
/// answers with a stand-in token, so the executor's own requests can be sent here.
#[derive(Clone, Default)]
struct Kept(Rc<RefCell<Vec<MintRequest>>>);

impl Countersigner for Kept {
    fn mint(&self, request: MintRequest) -> LocalBoxFuture<Result<Countersignature, String>> {
        self.0.borrow_mut().push(request);
        Box::pin(async { Ok(Countersignature::new("kept")) })
    }
}

/// The parameters of the page's `save_workspace_name`.
#[derive(Clone, Debug, serde::Deserialize, countersign::schemars::JsonSchema)]
#[schemars(crate = "countersign::schemars")]
struct Rename {
    /// The workspace's new name.
    name: String,
}

/// The mint requests a page's executor makes for `args`: a call the assistant asked for,
/// allowed once; a call an MCP client asked for, allowed for the session (the card that
/// makes a grant); and the MCP client's next call, which that grant covers (no card).
async fn executor_requests(args: &Value) -> Vec<MintRequest> {
    let exec = Executor::new(
        Config::new(
            "page-0a1b2c",
            Session::new("admin", ["workspace.write"]),
            [42; 32],
        ),
        MemoryAudit::new(),
    );
    let _registration = exec
        .register(
            Action::<Rename>::new("save_workspace_name", "Renames the workspace.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .run_countersigned(|p: Rename, _: Countersignature| async move {
                    Ok::<_, String>(json!({ "name": p.name }))
                }),
        )
        .unwrap();
    let kept = Kept::default();
    exec.set_countersigner(Rc::new(kept.clone())).unwrap();
    let at = Timestamp::from_millis;
    let run = |step: Step| async {
        let Step::Perform(job) = step else {
            panic!("expected the countersigned run, got {step:?}");
        };
        let completion = job.run().await;
        assert!(exec.complete(completion, at(20)));
    };
    let arguments = args.to_string();
    let submit = |id: &str, caller: Caller| {
        exec.submit(
            Call::new(id, "save_workspace_name", arguments.as_str()).by(caller),
            at(0),
        )
        .unwrap()
    };
    for (id, caller, gesture) in [
        ("call_1", Caller::Assistant, Gesture::AllowOnce),
        ("call_2", Caller::Mcp, Gesture::AllowForSession),
    ] {
        let Step::Approval(card) = submit(id, caller) else {
            panic!("{id} should wait for its card");
        };
        run(exec.approve(card.countersign(gesture), at(10)).unwrap()).await;
    }
    run(submit("call_3", Caller::Mcp)).await;
    kept.0.take()
}

/// A value as it goes over the wire: where the two crates' types differ, their JSON must not.
fn wire(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap()
}

/// The core's `MintRequest` (what the page asks) and the verifier's `Claims` (what a
/// backend reads) are two crates' names for one token: each request the page's executor
/// makes, minted by the gateway, verifies into claims that carry every one of its fields
/// unchanged, and besides them only what the gateway adds. Both are taken apart without
/// `..`, so a field added to either fails to compile here until it is carried across.
#[tokio::test]
async fn every_field_of_a_mint_request_comes_back_in_the_verified_claims() {
    let (base, s, _dir) = gateway(false).await;
    let client = reqwest::Client::new();
    let jwks = client
        .get(format!("{base}/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let verifier = Verifier::new("countersign-gateway")
        .trust_jwks(&jwks)
        .unwrap();
    let args = json!({"name": "Apollo"});
    let requests = executor_requests(&args).await;
    let shapes: Vec<_> = requests
        .iter()
        .map(|r| (r.card_sha256.is_some(), r.grant.is_some(), r.caller))
        .collect();
    assert_eq!(
        shapes,
        [
            (true, false, Caller::Assistant),
            (true, true, Caller::Mcp),
            (false, true, Caller::Mcp)
        ]
    );
    for (minted, request) in requests.into_iter().enumerate() {
        let (status, answer) = mint(&client, &base, &wire(&request)).await;
        assert_eq!(status, 200, "{request:?}: {answer}");
        let claims = verifier
            .verify_now(
                answer["countersignature"].as_str().unwrap(),
                &Expected::call("save_workspace_name", &args),
            )
            .await
            .unwrap();
        let MintRequest {
            call,
            tool_call_id,
            action,
            kind,
            args_sha256,
            card_sha256,
            approved_by,
            grant,
            session,
            role,
            presence,
            caller,
            arguments,
        } = request;
        let Claims {
            iss,
            sub,
            aud,
            iat,
            nbf,
            exp,
            jti,
            act,
            amr,
            mut authorization_details,
            log_index,
        } = claims;
        assert_eq!(authorization_details.len(), 1);
        let ActionDetail {
            type_,
            action: signed_action,
            kind: signed_kind,
            call: signed_call,
            tool_call_id: signed_tool_call_id,
            args_sha256: signed_args_sha256,
            card_sha256: signed_card_sha256,
            decision: signed_approved_by,
            grant: signed_grant,
            session: signed_session,
            role: signed_role,
            presence: signed_presence,
            passkey,
        } = authorization_details.remove(0);
        assert_eq!(type_, countersign_verify::ACTION_DETAIL_TYPE);
        assert_eq!(signed_kind, kind);
        assert_eq!(signed_call, call.get());
        assert_eq!(signed_tool_call_id, tool_call_id);
        assert_eq!(signed_action, action);
        assert_eq!(signed_args_sha256, args_sha256.to_hex());
        // The arguments ride along for the approval window; the token binds their digest.
        assert_eq!(
            countersign::audit::ArgsDigest::of_value(&arguments).to_hex(),
            signed_args_sha256
        );
        assert_eq!(wire(signed_card_sha256), wire(card_sha256));
        assert_eq!(wire(signed_approved_by), wire(approved_by));
        assert_eq!(signed_grant, grant.map(GrantId::get));
        assert_eq!(signed_session, session);
        assert_eq!(signed_role, role);
        assert_eq!(wire(signed_presence), wire(presence));
        assert_eq!(act.sub, caller);
        // What the gateway adds, and nothing more.
        assert_eq!(iss, "countersign-gateway");
        assert_eq!(aud, countersign_verify::DEFAULT_AUDIENCE);
        assert_eq!((sub, amr), (None, Vec::<String>::new()));
        assert_eq!(nbf, iat);
        // Each mint is the trail's next line: its place in the verifiable log.
        assert_eq!(log_index, Some(minted as u64));
        assert_eq!(answer["id"], json!(jti));
        assert_eq!(exp - iat, 120);
        assert_eq!(passkey, None);
    }
    assert_eq!(s.audit.count().await.unwrap(), 3);
}

#[tokio::test]
async fn malformed_mint_requests_get_json_errors_and_mint_nothing() {
    let (base, s, _dir) = gateway(false).await;
    let client = reqwest::Client::new();
    let good = mint_body("archive_workspace", &json!({}));
    let with = |key: &str, value: Value| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let mut unknown = good.clone();
    unknown["presence"] = json!("passkey");
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("args_sha256");
    let cases = [
        unknown,
        missing,
        with("args_sha256", json!("ABC")),
        with("args_sha256", json!("A".repeat(64))),
        with("card_sha256", json!("zz")),
        with("action", json!("rm -rf /")),
        with("action", json!("a".repeat(65))),
        with("tool_call_id", json!("x".repeat(129))),
        with("tool_call_id", json!("")),
        with("session", json!("line\nbreak")),
        with("session", json!("page-\u{202e}cba")),
        with("tool_call_id", json!("call\u{200b}1")),
        with("role", json!("ad\u{2066}min")),
        with("role", json!("")),
        with("approved_by", json!("model")),
        with("approved_by", json!("grant")),
        with("grant", json!(4)),
        with("card_sha256", Value::Null),
        with("call", json!(-1)),
        with("call", json!("3")),
        json!([]),
        json!("archive"),
    ];
    for body in cases {
        let (status, answer) = mint(&client, &base, &body).await;
        assert_eq!(status, 400, "{body} → {answer}");
        assert!(answer["error"]["code"].is_string(), "{answer}");
    }
    // Not JSON, not declared JSON, too large.
    let r = page_post(&client, format!("{base}/v1/countersign"), "{".into())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = client
        .post(format!("{base}/v1/countersign"))
        .header("origin", "http://127.0.0.1:8787")
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "text/plain")
        .body(good.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let huge = with("tool_call_id", json!("x".repeat(2 * 1024 * 1024)));
    let (status, _) = mint(&client, &base, &huge).await;
    assert_eq!(status, 413);
    // A grant decision with its grant, and a grant-covered call without a card, are fine.
    let covered = with("approved_by", json!("grant"));
    let mut covered = covered;
    covered["grant"] = json!(2);
    covered["card_sha256"] = Value::Null;
    assert_eq!(mint(&client, &base, &covered).await.0, 200);
    assert_eq!(
        s.audit.count().await.unwrap(),
        1,
        "a refused request was recorded"
    );
}

#[tokio::test]
async fn only_the_page_or_a_token_holder_may_mint() {
    let mut cfg = config(None);
    cfg.access.token = Some(countersign_gateway::Secret::new("t0k"));
    let (s, _dir) = state(cfg);
    let base = serve(s.clone()).await;
    let client = reqwest::Client::new();
    let body = mint_body("archive_workspace", &json!({}));
    let r = client
        .post(format!("{base}/v1/countersign"))
        .header("content-type", "application/json")
        .header("origin", "https://evil.example")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = client
        .post(format!("{base}/v1/countersign"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(s.audit.count().await.unwrap(), 0);
}

/// A rotation: the gateway signs with its new key, publishes the retired one beside it,
/// and a token the retired key signed just before the switch is still taken, once; a
/// token for another audience is not.
#[tokio::test]
async fn after_a_key_rotation_tokens_of_the_retired_key_still_verify() {
    let mut cfg = config(None);
    cfg.demo_backend = true;
    let (s, _dir) = state(cfg);
    let old = Signer::from_seed(&SEED);
    let s = s.with_signing_keys(&[10; 32], &[SEED]);
    let base = serve(s.clone()).await;
    let client = reqwest::Client::new();
    let jwks: Value = client
        .get(format!("{base}/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [Signer::from_seed(&[10; 32]).kid(), old.kid()]);
    let (_, minted) = mint(&client, &base, &mint_body("archive_workspace", &json!({}))).await;
    // The new key signs: a verifier that trusts only it takes the minted token.
    let only_new =
        Verifier::new("countersign-gateway").trust(Signer::from_seed(&[10; 32]).verifying_key());
    only_new
        .verify_now(
            minted["countersignature"].as_str().unwrap(),
            &Expected::call("archive_workspace", &json!({})),
        )
        .await
        .unwrap();
    let before = old.sign(&claims("archive_workspace", 5)).unwrap();
    let (status, answer) = perform(
        &client,
        &base,
        "archive_workspace",
        &json!({}),
        Some(&before),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let elsewhere = old
        .sign(&Claims {
            aud: "billing".into(),
            jti: "44".repeat(16),
            ..claims("reset_workspace", 5)
        })
        .unwrap();
    let (status, answer) = perform(
        &client,
        &base,
        "reset_workspace",
        &json!({}),
        Some(&elsewhere),
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (401, Some("wrong_audience"))
    );
}

#[tokio::test]
async fn the_tutorial_backend_takes_exactly_one_matching_token() {
    let (base, _s, _dir) = gateway(true).await;
    let client = reqwest::Client::new();
    let args = json!({});
    let (_, a) = mint(&client, &base, &mint_body("archive_workspace", &args)).await;
    let archive = a["countersignature"].as_str().unwrap().to_owned();
    // No token: refused before anything happens.
    let (status, answer) = perform(&client, &base, "archive_workspace", &args, None).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (401, Some("no_countersignature"))
    );
    // Used on another action.
    let (status, answer) = perform(&client, &base, "reset_workspace", &args, Some(&archive)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (403, Some("wrong_action"))
    );
    // Used on other arguments.
    let (status, answer) = perform(
        &client,
        &base,
        "archive_workspace",
        &json!({"force": true}),
        Some(&archive),
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (403, Some("wrong_arguments"))
    );
    // The right call: done, once.
    let (status, answer) =
        perform(&client, &base, "archive_workspace", &args, Some(&archive)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["done"], "archived");
    let (status, answer) =
        perform(&client, &base, "archive_workspace", &args, Some(&archive)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("replayed"))
    );
    // Signed with another key (even claiming to be this issuer).
    let forged = Signer::from_seed(&[1; 32])
        .sign(&claims("reset_workspace", 0))
        .unwrap();
    let (status, answer) = perform(&client, &base, "reset_workspace", &args, Some(&forged)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (401, Some("unknown_key"))
    );
    // Expired: signed by the real key two minutes ago.
    let old = Signer::from_seed(&SEED)
        .sign(&claims("reset_workspace", 130))
        .unwrap();
    let (status, answer) = perform(&client, &base, "reset_workspace", &args, Some(&old)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (401, Some("expired"))
    );
    // Garbage and a huge header.
    let (status, _) = perform(&client, &base, "reset_workspace", &args, Some("a.b.c")).await;
    assert_eq!(status, 401);
    let huge = "a".repeat(5000);
    let (status, _) = perform(&client, &base, "reset_workspace", &args, Some(&huge)).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_page_cannot_write_a_countersigned_record_into_the_trail() {
    let (base, s, _dir) = gateway(false).await;
    let client = reqwest::Client::new();
    let mut records = common::records(2, "page-x", 0);
    records[1].event = AuditEvent::Countersigned;
    let r = page_post(
        &client,
        format!("{base}/v1/audit"),
        serde_json::to_string(&records).unwrap(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let mut records = common::records(1, "page-y", 0);
    records[0].countersignature = Some("00".repeat(16));
    let r = page_post(
        &client,
        format!("{base}/v1/audit"),
        serde_json::to_string(&records).unwrap(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        s.audit.count().await.unwrap(),
        0,
        "nothing of a refused batch is written"
    );
}

#[tokio::test]
async fn a_hostile_path_gets_a_json_error() {
    let (base, _s, _dir) = gateway(true).await;
    let client = reqwest::Client::new();
    for path in [
        "%FF",
        "archive_workspace%00",
        "..%2F..%2Fetc",
        "drop_everything",
    ] {
        let r = page_post(&client, format!("{base}/v1/demo/{path}"), "{}".into())
            .header("countersignature", "a.b.c")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path}");
        let body: Value = r.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{path}: {body}");
    }
}

#[tokio::test]
async fn without_the_flag_there_is_no_tutorial_backend() {
    let (base, _s, _dir) = gateway(false).await;
    let client = reqwest::Client::new();
    let (status, _) = perform(&client, &base, "archive_workspace", &json!({}), Some("x")).await;
    assert_eq!(status, 404);
}

fn claims(action: &str, age_secs: u64) -> Claims {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Claims {
        iss: "countersign-gateway".into(),
        sub: None,
        aud: countersign_verify::DEFAULT_AUDIENCE.into(),
        iat: now - age_secs,
        nbf: now - age_secs,
        exp: now - age_secs + 120,
        jti: format!("{:032x}", now ^ age_secs),
        act: countersign_verify::Actor {
            sub: countersign::Caller::Assistant,
        },
        amr: Vec::new(),
        authorization_details: vec![ActionDetail {
            type_: countersign_verify::ACTION_DETAIL_TYPE.into(),
            action: action.into(),
            kind: Kind::Danger,
            call: 1,
            tool_call_id: "t".into(),
            args_sha256: digest(&json!({})),
            card_sha256: None,
            decision: ApprovedBy::Grant,
            grant: Some(1),
            session: "s".into(),
            role: "admin".into(),
            presence: Presence::Click,
            passkey: None,
        }],
        log_index: None,
    }
}

#[test]
fn the_signing_key_file_is_created_private_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signing.key");
    let seed = countersign_gateway::load_or_create_signing_seed(&path).unwrap();
    assert_eq!(
        countersign_gateway::load_or_create_signing_seed(&path).unwrap(),
        seed
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    std::fs::write(&path, "not a key").unwrap();
    assert!(countersign_gateway::load_or_create_signing_seed(&path).is_err());
}

async fn with_passkeys() -> (String, countersign_gateway::AppState, tempfile::TempDir) {
    let (s, dir) = state(config(None));
    let passkeys = countersign_gateway::passkeys::Passkeys::open(
        &countersign_gateway::passkeys::PasskeyConfig {
            rp_id: "localhost".into(),
            rp_origin: "http://localhost:8787".into(),
            file: Some(dir.path().join("passkeys.json")),
        },
    )
    .unwrap();
    let s = s.with_signing_seed(&SEED).with_passkeys(passkeys);
    (serve(s.clone()).await, s, dir)
}

fn passkey_body(action: &str) -> Value {
    let mut body = mint_body(action, &json!({}));
    body["presence"] = json!("passkey");
    body
}

#[tokio::test]
async fn passkey_presence_is_refused_without_passkeys_or_a_valid_assertion() {
    let client = reqwest::Client::new();
    // Passkeys off: nothing to check an assertion with.
    let (base, s, _dir) = gateway(false).await;
    let r = page_post(
        &client,
        format!("{base}/v1/countersign/challenge"),
        passkey_body("reset_workspace").to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(s.audit.count().await.unwrap(), 0);
    // Passkeys on, none registered: the dock is told to set one up.
    let (base, s, _dir) = with_passkeys().await;
    let r = page_post(
        &client,
        format!("{base}/v1/countersign/challenge"),
        passkey_body("reset_workspace").to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_passkey");
    // A passkey mint without an assertion, or with a made-up one.
    let (status, answer) = mint(&client, &base, &passkey_body("reset_workspace")).await;
    assert_eq!(status, 400, "{answer}");
    let mut forged = passkey_body("reset_workspace");
    forged["assertion"] = json!({"ceremony": "0".repeat(32), "credential": {"id": "x"}});
    let (status, answer) = mint(&client, &base, &forged).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (403, Some("passkey_rejected"))
    );
    // A click mint that smuggles an assertion.
    let mut smuggled = mint_body("reset_workspace", &json!({}));
    smuggled["assertion"] = json!({"ceremony": "0", "credential": {}});
    assert_eq!(mint(&client, &base, &smuggled).await.0, 400);
    assert_eq!(
        s.audit.count().await.unwrap(),
        0,
        "a refused mint was recorded"
    );
}

#[tokio::test]
async fn registering_a_passkey_takes_the_enrollment_code_and_user_verification() {
    let client = reqwest::Client::new();
    let (base, s, _dir) = with_passkeys().await;
    let passkeys = s.passkeys.clone().unwrap();
    let status: Value = client
        .get(format!("{base}/v1/passkeys/status/admin"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status, json!({"enabled": true, "registered": false}));
    let register = |body: Value| {
        let client = client.clone();
        let url = format!("{base}/v1/passkeys/register");
        async move {
            let r = page_post(&client, url, body.to_string())
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    // A script in the page can call this route; without the code it enrolls nothing.
    assert_eq!(register(json!({"user": "admin"})).await.0, 400);
    let (status, answer) = register(json!({"user": "admin", "code": "AAAAA-AAAAA"})).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (403, Some("passkey_rejected"))
    );
    // Five wrong tries burn a code; the right one after that is refused too.
    let code = passkeys.issue_enrollment_code("admin").unwrap();
    for _ in 0..5 {
        assert_eq!(
            register(json!({"user": "admin", "code": "BBBBB-BBBBB"}))
                .await
                .0,
            403
        );
    }
    assert_eq!(
        register(json!({"user": "admin", "code": code})).await.0,
        403
    );
    // A code is for one user, once.
    let code = passkeys.issue_enrollment_code("admin").unwrap();
    assert_eq!(
        register(json!({"user": "intruder", "code": code})).await.0,
        403
    );
    let (status, started) = register(json!({"user": "admin", "code": code.to_lowercase()})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(
        register(json!({"user": "admin", "code": code})).await.0,
        403
    );
    let options = &started["options"]["publicKey"];
    assert_eq!(
        options["authenticatorSelection"]["userVerification"],
        "required"
    );
    assert_eq!(options["rp"]["id"], "localhost");
    // A made-up credential, an unknown ceremony, a bad user, extra fields.
    for (path, body, want) in [
        (
            "register/finish",
            json!({"ceremony": started["ceremony"], "credential": {"id": "x"}}),
            403,
        ),
        (
            "register/finish",
            json!({"ceremony": started["ceremony"], "credential": {}}),
            403,
        ),
        (
            "register/finish",
            json!({"ceremony": "nope", "credential": {}}),
            403,
        ),
        ("register", json!({"user": "../etc", "code": "x"}), 400),
        (
            "register",
            json!({"user": "admin", "code": "x", "admin": true}),
            400,
        ),
        ("register", json!([]), 400),
    ] {
        let r = page_post(
            &client,
            format!("{base}/v1/passkeys/{path}"),
            body.to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status().as_u16(), want, "{path} {body}");
        let answer: Value = r.json().await.unwrap();
        assert!(answer["error"]["code"].is_string(), "{answer}");
    }
    // A hostile user name in the status path gets a JSON error.
    let r = client
        .get(format!("{base}/v1/passkeys/status/%FF"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.json::<Value>().await.unwrap()["error"]["code"].is_string());
}

/// The relying party checks the page's exact origin, port included (webauthn-rs without
/// `allow_any_port`); `serve --help` says so, and never that any port is accepted.
#[test]
fn the_passkey_origin_help_says_the_port_is_checked() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_countersign-gateway"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let start = help.find("--rp-origin").unwrap();
    let end = help[start..].find("--passkey-file").unwrap() + start;
    let rp_origin = &help[start..end];
    assert!(rp_origin.contains("port included"), "{rp_origin}");
    assert!(!rp_origin.contains("any port"), "{rp_origin}");
}
