//! Every shape of token a backend might be handed: the one that holds, and each way a
//! token can be wrong, malformed or hostile.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use countersign_verify::{
    ActionDetail, ApprovedBy, Claims, Expected, Presence, Signer, Verifier, VerifyError,
    MAX_TOKEN_BYTES,
};
use ed25519_dalek::Signer as _;
use serde_json::json;

const NOW: u64 = 1_800_000_000;

fn claims() -> Claims {
    Claims {
        iss: "gw".into(),
        sub: None,
        aud: countersign_verify::DEFAULT_AUDIENCE.into(),
        iat: NOW,
        nbf: NOW,
        exp: NOW + 120,
        jti: "0123456789abcdef0123456789abcdef".into(),
        act: countersign_verify::Actor {
            sub: countersign::Caller::Assistant,
        },
        amr: Vec::new(),
        authorization_details: vec![countersign_verify::ActionDetail {
            type_: countersign_verify::ACTION_DETAIL_TYPE.into(),
            action: "archive_workspace".into(),
            kind: countersign::Kind::Danger,
            call: 7,
            tool_call_id: "call_1".into(),
            args_sha256: countersign::audit::ArgsDigest::of_value(&json!({})).to_hex(),
            card_sha256: Some("ab".repeat(32)),
            decision: ApprovedBy::Once,
            grant: None,
            session: "s1".into(),
            role: "admin".into(),
            presence: Presence::Click,
            passkey: None,
        }],
        log_index: None,
    }
}

/// The approved call in `c`.
fn detail(c: &mut Claims) -> &mut ActionDetail {
    &mut c.authorization_details[0]
}

fn signer() -> Signer {
    Signer::from_seed(&[7; 32])
}

fn verifier() -> Verifier {
    Verifier::new("gw").trust(signer().verifying_key())
}

fn archive() -> Expected<'static> {
    Expected::call("archive_workspace", &json!({}))
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header and claims, signed by `key` (seed).
fn forge(header: &serde_json::Value, claims: &serde_json::Value, seed: u8) -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
    let signed = format!(
        "{}.{}",
        b64(&serde_json::to_vec(header).unwrap()),
        b64(&serde_json::to_vec(claims).unwrap())
    );
    let sig = key.sign(signed.as_bytes());
    format!("{signed}.{}", b64(&sig.to_bytes()))
}

fn header() -> serde_json::Value {
    json!({ "alg": "Ed25519", "kid": signer().kid(), "typ": "countersign-approval+jwt" })
}

#[tokio::test]
async fn a_good_token_holds_once() {
    let v = verifier();
    let token = signer().sign(&claims()).unwrap();
    let got = v.verify(&token, &archive(), NOW + 1).await.unwrap();
    assert_eq!(got, claims());
    assert_eq!(
        v.verify(&token, &archive(), NOW + 2).await,
        Err(VerifyError::Replayed)
    );
    assert_eq!(v.remembered(), 1);
}

#[tokio::test]
async fn a_token_covers_only_its_action_and_arguments_and_time() {
    let token = signer().sign(&claims()).unwrap();
    let v = verifier();
    assert_eq!(
        v.verify(&token, &Expected::call("reset_workspace", &json!({})), NOW)
            .await,
        Err(VerifyError::WrongAction)
    );
    assert_eq!(
        v.verify(
            &token,
            &Expected::call("archive_workspace", &json!({"force": true})),
            NOW
        )
        .await,
        Err(VerifyError::WrongArguments)
    );
    assert_eq!(
        v.verify(&token, &archive(), NOW + 125).await,
        Err(VerifyError::Expired)
    );
    assert_eq!(
        v.verify(&token, &archive(), NOW - 60).await,
        Err(VerifyError::NotYetValid)
    );
    assert_eq!(
        v.verify(&token, &archive().with_passkey(), NOW).await,
        Err(VerifyError::Presence)
    );
    // None of the refusals spent it.
    assert!(v.verify(&token, &archive(), NOW).await.is_ok());
}

#[tokio::test]
async fn a_lifetime_that_is_empty_or_too_long_is_refused() {
    for (iat, exp) in [(NOW, NOW), (NOW, NOW - 1), (NOW, NOW + 3600)] {
        let mut c = claims();
        c.iat = iat;
        c.exp = exp;
        let token = signer().sign(&c).unwrap();
        assert_eq!(
            verifier().verify(&token, &archive(), NOW).await,
            Err(VerifyError::Lifetime)
        );
    }
}

#[tokio::test]
async fn another_key_or_issuer_is_refused() {
    let other = Signer::from_seed(&[8; 32]);
    let token = other.sign(&claims()).unwrap();
    assert_eq!(
        verifier().verify(&token, &archive(), NOW).await,
        Err(VerifyError::UnknownKey)
    );
    // Another key claiming the trusted key's id.
    let token = forge(&header(), &serde_json::to_value(claims()).unwrap(), 8);
    assert_eq!(
        verifier().verify(&token, &archive(), NOW).await,
        Err(VerifyError::BadSignature)
    );
    let mut c = claims();
    c.iss = "someone-else".into();
    let token = signer().sign(&c).unwrap();
    assert_eq!(
        verifier().verify(&token, &archive(), NOW).await,
        Err(VerifyError::WrongIssuer)
    );
}

#[tokio::test]
async fn a_changed_claim_or_signature_is_refused() {
    let token = signer().sign(&claims()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut c = claims();
    detail(&mut c).action = "reset_workspace".into();
    let swapped = format!(
        "{}.{}.{}",
        parts[0],
        b64(&serde_json::to_vec(&c).unwrap()),
        parts[2]
    );
    assert_eq!(
        verifier()
            .verify(
                &swapped,
                &Expected::call("reset_workspace", &json!({})),
                NOW
            )
            .await,
        Err(VerifyError::BadSignature)
    );
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    sig[10] ^= 1;
    let flipped = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
    assert_eq!(
        verifier().verify(&flipped, &archive(), NOW).await,
        Err(VerifyError::BadSignature)
    );
}

#[tokio::test]
async fn every_truncation_is_refused() {
    let token = signer().sign(&claims()).unwrap();
    let v = verifier();
    for cut in 0..token.len() {
        assert!(
            v.verify(&token[..cut], &archive(), NOW).await.is_err(),
            "cut at {cut}"
        );
    }
    assert_eq!(v.remembered(), 0);
}

#[tokio::test]
async fn other_algorithms_and_headers_are_refused() {
    let c = serde_json::to_value(claims()).unwrap();
    let kid = signer().kid().to_owned();
    // `none`, with and without a signature part.
    let none = format!(
        "{}.{}.",
        b64(
            json!({"alg": "none", "kid": kid, "typ": "countersign-approval+jwt"})
                .to_string()
                .as_bytes()
        ),
        b64(c.to_string().as_bytes())
    );
    assert!(matches!(
        verifier().verify(&none, &archive(), NOW).await,
        Err(VerifyError::Header)
    ));
    let none_two_parts = none.trim_end_matches('.').to_owned();
    assert!(verifier()
        .verify(&none_two_parts, &archive(), NOW)
        .await
        .is_err());
    for alg in ["HS256", "RS256", "ES256", "eddsa", "ed25519", "Ed448"] {
        let token = forge(
            &json!({"alg": alg, "kid": kid, "typ": "countersign-approval+jwt"}),
            &c,
            7,
        );
        assert_eq!(
            verifier().verify(&token, &archive(), NOW).await,
            Err(VerifyError::Header),
            "{alg}"
        );
    }
    // Another type: a login JWT, an access token or the earlier format, signed by the
    // same key, is not a countersignature.
    for typ in ["JWT", "at+jwt", "countersign+jwt"] {
        let token = forge(&json!({"alg": "Ed25519", "kid": kid, "typ": typ}), &c, 7);
        assert_eq!(
            verifier().verify(&token, &archive(), NOW).await,
            Err(VerifyError::Header),
            "{typ}"
        );
    }
    // An embedded key, a key URL, `crit`, a missing kid: never followed, refused.
    for extra in [
        json!({"alg": "EdDSA", "kid": kid, "typ": "countersign-approval+jwt", "jwk": {"kty": "OKP"}}),
        json!({"alg": "EdDSA", "kid": kid, "typ": "countersign-approval+jwt", "jku": "https://evil"}),
        json!({"alg": "EdDSA", "kid": kid, "typ": "countersign-approval+jwt", "crit": ["exp"]}),
        json!({"alg": "EdDSA", "typ": "countersign-approval+jwt"}),
        json!(["EdDSA"]),
    ] {
        let token = forge(&extra, &c, 7);
        assert!(
            matches!(
                verifier().verify(&token, &archive(), NOW).await,
                Err(VerifyError::Malformed(_))
            ),
            "{extra}"
        );
    }
}

#[tokio::test]
async fn bad_base64_and_bad_json_are_refused() {
    let token = signer().sign(&claims()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let bad = [
        format!("{}=.{}.{}", parts[0], parts[1], parts[2]),
        format!("{}.{}.{}=", parts[0], parts[1], parts[2]),
        format!("{}.{}+.{}", parts[0], parts[1], parts[2]),
        format!("{}.{}.{}", parts[0].replace('e', "/"), parts[1], parts[2]),
        format!(" {token}"),
        format!("{token}\n"),
        format!("{token}.x"),
        format!("{}.{}.{}", b64(b"not json"), parts[1], parts[2]),
        format!("{}.{}.{}", parts[0], b64(b"{\"iss\":1}"), parts[2]),
        "..".into(),
        String::new(),
        "\u{0}.\u{0}.\u{0}".into(),
        "é.é.é".into(),
    ];
    for token in bad {
        assert!(
            verifier().verify(&token, &archive(), NOW).await.is_err(),
            "{token:?}"
        );
    }
}

#[tokio::test]
async fn a_huge_token_is_refused_unread() {
    let huge = "a".repeat(MAX_TOKEN_BYTES + 1);
    assert_eq!(
        verifier().verify(&huge, &archive(), NOW).await,
        Err(VerifyError::TooLarge)
    );
    let huge = format!("{}.{}.{}", "a".repeat(10_000_000), "b", "c");
    assert_eq!(
        verifier().verify(&huge, &archive(), NOW).await,
        Err(VerifyError::TooLarge)
    );
}

#[tokio::test]
async fn a_full_replay_cache_refuses_instead_of_forgetting() {
    let v = verifier().remember_at_most(2);
    let mint = |jti: &str, exp: u64| {
        let mut c = claims();
        c.jti = jti.into();
        c.exp = exp;
        signer().sign(&c).unwrap()
    };
    v.verify(&mint("a", NOW + 100), &archive(), NOW)
        .await
        .unwrap();
    v.verify(&mint("b", NOW + 10), &archive(), NOW)
        .await
        .unwrap();
    assert_eq!(
        v.verify(&mint("c", NOW + 100), &archive(), NOW).await,
        Err(VerifyError::Busy)
    );
    // Once "b" has expired its slot is freed; "a" is still remembered.
    v.verify(&mint("c", NOW + 100), &archive(), NOW + 20)
        .await
        .unwrap();
    assert_eq!(
        v.verify(&mint("a", NOW + 100), &archive(), NOW + 20).await,
        Err(VerifyError::Replayed)
    );
}

#[tokio::test]
async fn a_jwk_set_is_checked_before_it_is_trusted() {
    let jwks = serde_json::to_string(&signer().jwks()).unwrap();
    let v = Verifier::new("gw").trust_jwks(&jwks).unwrap();
    let token = signer().sign(&claims()).unwrap();
    assert!(v.verify(&token, &archive(), NOW).await.is_ok());
    let mut set = serde_json::to_value(signer().jwks()).unwrap();
    set["keys"][0]["kid"] = json!("chosen-by-attacker");
    assert!(Verifier::new("gw").trust_jwks(&set.to_string()).is_err());
    let mut set = serde_json::to_value(signer().jwks()).unwrap();
    set["keys"][0]["kty"] = json!("RSA");
    assert!(Verifier::new("gw").trust_jwks(&set.to_string()).is_err());
    let mut set = serde_json::to_value(signer().jwks()).unwrap();
    set["keys"][0]["x"] = json!("AAAA");
    assert!(Verifier::new("gw").trust_jwks(&set.to_string()).is_err());
    assert!(Verifier::new("gw").trust_jwks(r#"{"keys":[]}"#).is_err());
    assert!(Verifier::new("gw").trust_jwks("[").is_err());
}

#[tokio::test]
async fn an_id_is_kept_as_long_as_its_token_is_accepted() {
    // Tokens are accepted until exp + leeway; a full cache must not forget an id before.
    let v = verifier().remember_at_most(2);
    let mint = |jti: &str, exp: u64| {
        let mut c = claims();
        c.jti = jti.into();
        c.exp = exp;
        signer().sign(&c).unwrap()
    };
    let e = NOW + 100;
    v.verify(&mint("a", e), &archive(), NOW).await.unwrap();
    v.verify(&mint("b", e), &archive(), NOW).await.unwrap();
    assert_eq!(
        v.verify(&mint("c", e + 50), &archive(), e).await,
        Err(VerifyError::Busy)
    );
    assert_eq!(
        v.verify(&mint("a", e), &archive(), e + 1).await,
        Err(VerifyError::Replayed)
    );
    // Past exp + leeway the old ids go, and so does the token they named.
    v.verify(&mint("c", e + 50), &archive(), e + 5)
        .await
        .unwrap();
    assert_eq!(
        v.verify(&mint("a", e), &archive(), e + 5).await,
        Err(VerifyError::Expired)
    );
}

#[tokio::test]
async fn a_clock_stepped_back_does_not_bring_a_spent_token_back() {
    // A full cache forgets ids by the clock of the moment; once it has, a clock stepped
    // back must not make their tokens new again.
    let v = verifier().remember_at_most(2);
    let mint = |jti: &str, iat: u64| {
        let mut c = claims();
        c.jti = jti.into();
        c.iat = iat;
        c.exp = iat + 120;
        signer().sign(&c).unwrap()
    };
    v.verify(&mint("a", NOW), &archive(), NOW).await.unwrap();
    v.verify(&mint("b", NOW), &archive(), NOW).await.unwrap();
    // The clock jumps ahead: "a" and "b" are past, and forgotten to make room.
    let ahead = NOW + 1000;
    v.verify(&mint("c", ahead), &archive(), ahead)
        .await
        .unwrap();
    // Back to the true time: both are refused, not taken again.
    for jti in ["a", "b"] {
        assert_eq!(
            v.verify(&mint(jti, NOW), &archive(), NOW + 1).await,
            Err(VerifyError::Expired),
            "{jti}"
        );
    }
    assert_eq!(v.remembered(), 1);
    // A token newer than what was forgotten is still taken.
    v.verify(&mint("d", NOW + 2), &archive(), NOW + 2)
        .await
        .unwrap();
    assert_eq!(v.remembered(), 2);
}

#[tokio::test]
async fn a_passkey_token_names_its_credential_and_its_role_is_checked() {
    let mut c = claims();
    detail(&mut c).presence = Presence::Passkey;
    c.sub = Some("admin".into());
    let without_credential = signer().sign(&c).unwrap();
    assert_eq!(
        verifier()
            .verify(&without_credential, &archive().with_passkey(), NOW)
            .await,
        Err(VerifyError::Presence)
    );
    detail(&mut c).passkey = Some("Y3JlZGVudGlhbA".into());
    c.jti = "11".repeat(16);
    let token = signer().sign(&c).unwrap();
    let v = verifier();
    assert_eq!(
        v.verify(&token, &archive().with_passkey().with_role("viewer"), NOW)
            .await,
        Err(VerifyError::WrongRole)
    );
    let got = v
        .verify(&token, &archive().with_passkey().with_role("admin"), NOW)
        .await
        .unwrap();
    assert_eq!(
        got.detail().and_then(|d| d.passkey.as_deref()),
        Some("Y3JlZGVudGlhbA")
    );
}

#[tokio::test]
async fn an_unreachable_store_answers_503_and_keeps_its_cause_to_the_backend() {
    use axum::response::IntoResponse as _;
    use http_body_util::BodyExt as _;
    let refused = VerifyError::Unavailable("PostgreSQL: password authentication failed".into());
    assert!(refused
        .to_string()
        .contains("password authentication failed"));
    let response = refused.into_response();
    assert_eq!(response.status(), 503);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "unavailable");
    assert!(
        !body.to_string().contains("PostgreSQL"),
        "the cause reached the client: {body}"
    );
}

/// A backend that reads the arguments with serde_json digests them as the stock RFC 8785
/// libraries do, so a token minted for what the person approved verifies: the gate's
/// interop table (`crates/core/tests/gate/canonical.json`), read as a backend reads it.
#[tokio::test]
async fn a_token_for_the_canonical_text_verifies_against_the_arguments_as_read() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/tests/gate/canonical.json"
    );
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let signer = Signer::from_seed(&[7; 32]);
    let verifier = Verifier::new("gw").trust(signer.verifying_key());
    let mut checked = 0;
    for (i, case) in table["cases"].as_array().unwrap().iter().enumerate() {
        // Where stock libraries disagree (integers beyond 2^53) there is no digest to share.
        let Some(canonical) = case["canonical"].as_str() else {
            continue;
        };
        let minted = countersign::audit::ArgsDigest::of_bytes(canonical.as_bytes()).to_hex();
        let mut claims = Claims {
            jti: format!("{i:032x}"),
            ..claims()
        };
        detail(&mut claims).args_sha256 = minted;
        detail(&mut claims).card_sha256 = None;
        let token = signer.sign(&claims).unwrap();
        let arguments: serde_json::Value =
            serde_json::from_str(case["arguments"].as_str().unwrap()).unwrap();
        let expected = Expected::call("archive_workspace", &arguments);
        if let Err(e) = verifier.verify(&token, &expected, NOW + 1).await {
            panic!("{}: {e:?}", case["name"]);
        }
        checked += 1;
    }
    assert!(checked > 25, "the table has its cases");
}

/// The deprecated, polymorphic `EdDSA` still verifies with the same Ed25519 key during
/// the transition (RFC 9864); the gateway names only `Ed25519`.
#[tokio::test]
async fn the_deprecated_eddsa_name_verifies_with_the_same_key() {
    let kid = signer().kid().to_owned();
    let c = serde_json::to_value(claims()).unwrap();
    let token = forge(
        &json!({"alg": "EdDSA", "kid": kid, "typ": "countersign-approval+jwt"}),
        &c,
        7,
    );
    assert!(verifier().verify(&token, &archive(), NOW).await.is_ok());
    let minted = signer().sign(&claims()).unwrap();
    let header: serde_json::Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(minted.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "Ed25519");
    assert_eq!(header["typ"], "countersign-approval+jwt");
}

/// A token for another backend, not valid yet, or with no single entry of our type
/// is refused before single use: nothing is spent.
#[tokio::test]
async fn a_token_for_another_audience_or_not_yet_valid_or_without_its_call_is_refused() {
    let v = verifier();
    let other = Claims {
        aud: "billing".into(),
        ..claims()
    };
    let token = signer().sign(&other).unwrap();
    assert_eq!(
        v.verify(&token, &archive(), NOW).await,
        Err(VerifyError::WrongAudience)
    );
    let v_billing = Verifier::new("gw")
        .audience("billing")
        .trust(signer().verifying_key());
    assert!(v_billing.verify(&token, &archive(), NOW).await.is_ok());
    let later = Claims {
        nbf: NOW + 60,
        ..claims()
    };
    let token = signer().sign(&later).unwrap();
    assert_eq!(
        v.verify(&token, &archive(), NOW).await,
        Err(VerifyError::NotYetValid)
    );
    let mut two = claims();
    two.authorization_details
        .push(two.authorization_details[0].clone());
    let none = Claims {
        authorization_details: Vec::new(),
        ..claims()
    };
    for claims in [two, none] {
        let token = signer().sign(&claims).unwrap();
        assert!(matches!(
            v.verify(&token, &archive(), NOW).await,
            Err(VerifyError::Malformed(_))
        ));
    }
    // A passkey presence without the approver it proved is no passkey presence.
    let mut unnamed = claims();
    detail(&mut unnamed).presence = Presence::Passkey;
    detail(&mut unnamed).passkey = Some("Y3JlZGVudGlhbA".into());
    let token = signer().sign(&unnamed).unwrap();
    assert_eq!(
        v.verify(&token, &archive().with_passkey(), NOW).await,
        Err(VerifyError::Presence)
    );
    assert_eq!(v.remembered(), 0);
}

/// Key rotation: the new key signs, the retired one is still published, and a token it
/// signed before the switch verifies against the published set.
#[tokio::test]
async fn a_retired_key_keeps_verifying_the_tokens_it_signed() {
    let old = Signer::from_seed(&[7; 32]);
    let new = Signer::from_seed(&[9; 32]).publish_retired(&old.verifying_key());
    let jwks = serde_json::to_string(&new.jwks()).unwrap();
    let set: serde_json::Value = serde_json::from_str(&jwks).unwrap();
    assert_eq!(set["keys"][0]["kid"], new.kid());
    assert_eq!(set["keys"][1]["kid"], old.kid());
    assert_eq!(set["keys"][0]["alg"], "Ed25519");
    let v = Verifier::new("gw").trust_jwks(&jwks).unwrap();
    let before = old.sign(&claims()).unwrap();
    let after = new
        .sign(&Claims {
            jti: "22".repeat(16),
            ..claims()
        })
        .unwrap();
    assert!(v.verify(&before, &archive(), NOW).await.is_ok());
    assert!(v.verify(&after, &archive(), NOW).await.is_ok());
    // A verifier that refreshes its set follows the rotation without a restart: the
    // next key is taken, and a key no longer published stops verifying.
    let shared = Verifier::new("gw").trust(old.verifying_key());
    let next = new
        .sign(&Claims {
            jti: "77".repeat(16),
            ..claims()
        })
        .unwrap();
    assert_eq!(
        shared.verify(&next, &archive(), NOW).await,
        Err(VerifyError::UnknownKey)
    );
    shared.refresh_jwks(&jwks).unwrap();
    assert!(shared.verify(&next, &archive(), NOW).await.is_ok());
    assert!(shared.refresh_jwks("{\"keys\":[]}").is_err());
    shared
        .refresh_jwks(&serde_json::to_string(&Signer::from_seed(&[9; 32]).jwks()).unwrap())
        .unwrap();
    let late = old
        .sign(&Claims {
            jti: "88".repeat(16),
            ..claims()
        })
        .unwrap();
    assert_eq!(
        shared.verify(&late, &archive(), NOW).await,
        Err(VerifyError::UnknownKey)
    );
    // Once dropped from the set, the old key's tokens are refused.
    let v = Verifier::new("gw")
        .trust_jwks(&serde_json::to_string(&Signer::from_seed(&[9; 32]).jwks()).unwrap())
        .unwrap();
    let again = old
        .sign(&Claims {
            jti: "33".repeat(16),
            ..claims()
        })
        .unwrap();
    assert_eq!(
        v.verify(&again, &archive(), NOW).await,
        Err(VerifyError::UnknownKey)
    );
}

fn receipt_for(approval: Option<&str>) -> countersign_verify::ReceiptClaims {
    countersign_verify::ReceiptClaims {
        iss: "gw".into(),
        iat: NOW,
        jti: "55".repeat(16),
        act: countersign_verify::Actor {
            sub: countersign::Caller::Mcp,
        },
        outcome: countersign_verify::CallOutcome {
            call: "mcp-1".into(),
            action: "archive_workspace".into(),
            args_sha256: countersign::audit::ArgsDigest::of_value(&json!({})).to_hex(),
            ok: true,
            code: "OK".into(),
            said_by: "page".into(),
            result_sha256: "00".repeat(32),
            approval_sha256: approval.map(countersign_verify::token_sha256),
            approval_jti: approval.map(|_| claims().jti),
        },
    }
}

/// A receipt checks against the approval it names, and against no other; a receipt is
/// never a countersignature, nor a countersignature a receipt.
#[tokio::test]
async fn a_receipt_names_its_approval_and_is_never_taken_for_one() {
    let approval = signer().sign(&claims()).unwrap();
    let other = signer()
        .sign(&Claims {
            jti: "66".repeat(16),
            ..claims()
        })
        .unwrap();
    let receipt = signer()
        .sign_receipt(&receipt_for(Some(&approval)))
        .unwrap();
    let v = verifier();
    let got = v.check_receipt(&receipt, Some(&approval)).unwrap();
    assert_eq!(got, receipt_for(Some(&approval)));
    assert!(v.check_receipt(&receipt, None).is_ok());
    assert_eq!(
        v.check_receipt(&receipt, Some(&other)),
        Err(VerifyError::WrongApproval)
    );
    // A refusal's receipt names no approval: given one, it does not match.
    let silent = signer().sign_receipt(&receipt_for(None)).unwrap();
    assert_eq!(
        v.check_receipt(&silent, Some(&approval)),
        Err(VerifyError::WrongApproval)
    );
    // Types never cross.
    assert_eq!(
        v.verify(&receipt, &archive(), NOW).await,
        Err(VerifyError::Header)
    );
    assert_eq!(v.check_receipt(&approval, None), Err(VerifyError::Header));
    // Another signer's receipt, or a changed one, is refused.
    let forged = Signer::from_seed(&[8; 32])
        .sign_receipt(&receipt_for(None))
        .unwrap();
    assert_eq!(v.check_receipt(&forged, None), Err(VerifyError::UnknownKey));
    let (head, rest) = silent.split_once('.').unwrap();
    let (_, sig) = rest.split_once('.').unwrap();
    let mut changed = receipt_for(None);
    changed.outcome.code = "DENIED".into();
    changed.outcome.ok = false;
    let swapped = format!(
        "{head}.{}.{sig}",
        b64(&serde_json::to_vec(&changed).unwrap())
    );
    assert_eq!(
        v.check_receipt(&swapped, None),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(v.remembered(), 0);
}

/// An entry of another type in `authorization_details` is passed over (the format can
/// grow); a malformed entry of ours makes the token unreadable.
#[tokio::test]
async fn entries_of_other_types_are_passed_over() {
    let mut c = serde_json::to_value(claims()).unwrap();
    c["authorization_details"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "payment_initiation", "instructedAmount": {"amount": "1"}}));
    let token = forge(&header(), &c, 7);
    assert!(verifier().verify(&token, &archive(), NOW).await.is_ok());
    let mut broken = serde_json::to_value(claims()).unwrap();
    broken["authorization_details"][0]["call"] = json!("seven");
    broken["jti"] = json!("99".repeat(16));
    let token = forge(&header(), &broken, 7);
    assert!(matches!(
        verifier().verify(&token, &archive(), NOW).await,
        Err(VerifyError::Malformed(_))
    ));
}

#[tokio::test]
async fn a_window_token_is_the_only_one_a_window_action_takes() {
    let v = verifier();
    // A click and a page's passkey are refused where the window is asked.
    let mut c = claims();
    assert_eq!(
        v.verify(&signer().sign(&c).unwrap(), &archive().with_window(), NOW)
            .await,
        Err(VerifyError::Presence)
    );
    detail(&mut c).presence = Presence::Passkey;
    detail(&mut c).passkey = Some("Y3JlZGVudGlhbA".into());
    c.sub = Some("admin".into());
    c.jti = "21".repeat(16);
    assert_eq!(
        v.verify(&signer().sign(&c).unwrap(), &archive().with_window(), NOW)
            .await,
        Err(VerifyError::Presence)
    );
    // A window token without its approver or credential is refused too.
    detail(&mut c).presence = Presence::Window;
    c.sub = None;
    c.jti = "22".repeat(16);
    assert_eq!(
        v.verify(&signer().sign(&c).unwrap(), &archive().with_window(), NOW)
            .await,
        Err(VerifyError::Presence)
    );
    // The window's own: its approver is `sub`; it also counts as a passkey.
    c.sub = Some("alice".into());
    c.jti = "23".repeat(16);
    let got = v
        .verify(&signer().sign(&c).unwrap(), &archive().with_window(), NOW)
        .await
        .unwrap();
    assert_eq!(got.sub.as_deref(), Some("alice"));
    c.jti = "24".repeat(16);
    assert!(v
        .verify(&signer().sign(&c).unwrap(), &archive().with_passkey(), NOW)
        .await
        .is_ok());
}

#[tokio::test]
async fn a_card_that_no_longer_holds_is_refused_before_the_token_is_spent() {
    let v = verifier();
    let mut c = claims();
    c.jti = "31".repeat(16);
    let token = signer().sign(&c).unwrap();
    // The card drawn now differs from the one approved ("ab…"): refused, and not spent.
    assert_eq!(
        v.verify(&token, &archive().with_card("cd".repeat(32)), NOW)
            .await,
        Err(VerifyError::WrongCard)
    );
    assert_eq!(VerifyError::WrongCard.code(), "wrong_card");
    // The same card: taken.
    assert!(v
        .verify(&token, &archive().with_card("ab".repeat(32)), NOW)
        .await
        .is_ok());
}
