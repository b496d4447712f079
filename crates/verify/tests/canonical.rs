//! A backend that reads the arguments with serde_json digests them as the stock RFC 8785
//! libraries do, so a token minted for what the person approved verifies: the gate's
//! interop table (`crates/core/tests/gate/canonical.json`), read as a backend reads it.
#![allow(clippy::unwrap_used, clippy::panic)]

use countersign::audit::ArgsDigest;
use countersign_verify::{ApprovedBy, Claims, Expected, Presence, Signer, Verifier};
use serde::Deserialize;

const NOW: u64 = 1_800_000_000;

#[derive(Deserialize)]
struct Table {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    arguments: String,
    canonical: Option<String>,
}

fn claims(jti: String, args_sha256: String) -> Claims {
    Claims {
        iss: "gw".into(),
        jti,
        iat: NOW,
        exp: NOW + 120,
        call: 7,
        tool_call_id: "call_1".into(),
        action: "archive_workspace".into(),
        args_sha256,
        card_sha256: None,
        approved_by: ApprovedBy::Once,
        grant: None,
        session: "s1".into(),
        role: "admin".into(),
        presence: Presence::Click,
        passkey: None,
        caller: countersign::Caller::Assistant,
    }
}

#[tokio::test]
async fn a_token_for_the_canonical_text_verifies_against_the_arguments_as_read() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/tests/gate/canonical.json"
    );
    let table: Table = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let signer = Signer::from_seed(&[7; 32]);
    let verifier = Verifier::new("gw").trust(signer.verifying_key());
    let mut checked = 0;
    for (i, case) in table.cases.iter().enumerate() {
        // Where stock libraries disagree (integers beyond 2^53) there is no digest to share.
        let Some(canonical) = &case.canonical else {
            continue;
        };
        let minted = ArgsDigest::of_bytes(canonical.as_bytes()).to_hex();
        let token = signer.sign(&claims(format!("{i:032x}"), minted)).unwrap();
        let arguments: serde_json::Value = serde_json::from_str(&case.arguments).unwrap();
        let expected = Expected::call("archive_workspace", &arguments);
        if let Err(e) = verifier.verify(&token, &expected, NOW + 1).await {
            panic!("{}: {e:?}", case.name);
        }
        checked += 1;
    }
    assert!(checked > 25, "the table has its cases");
}
