//! What a countersignature costs: minting (sign) and checking (verify, with the replay
//! cache), side by side with hashing the arguments alone, in one run.
#![allow(missing_docs, clippy::unwrap_used, clippy::indexing_slicing)]

use countersign_verify::{ApprovedBy, Claims, Expected, Presence, Signer, Verifier};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

fn claims(jti: u64) -> Claims {
    Claims {
        iss: "countersign-gateway".into(),
        sub: None,
        aud: countersign_verify::DEFAULT_AUDIENCE.into(),
        iat: 1_800_000_000,
        nbf: 1_800_000_000,
        exp: 1_800_000_120,
        jti: format!("{jti:032x}"),
        act: countersign_verify::Actor {
            sub: countersign::Caller::Assistant,
        },
        amr: Vec::new(),
        authorization_details: vec![countersign_verify::ActionDetail {
            type_: countersign_verify::ACTION_DETAIL_TYPE.into(),
            action: "save_workspace_name".into(),
            kind: countersign::Kind::Danger,
            call: 1,
            tool_call_id: "call_1".into(),
            args_sha256: countersign::audit::ArgsDigest::of_value(&json!({"name": "Apollo"}))
                .to_hex(),
            card_sha256: Some("ab".repeat(32)),
            decision: ApprovedBy::Once,
            grant: None,
            session: "page-0a1b2c3d4e5f".into(),
            role: "admin".into(),
            presence: Presence::Click,
            passkey: None,
        }],
        log_index: None,
    }
}

fn bench(c: &mut Criterion) {
    let signer = Signer::from_seed(&[3; 32]);
    let args = json!({"name": "Apollo"});
    let mut group = c.benchmark_group("countersignature");
    group.bench_function("digest_arguments", |b| {
        b.iter(|| countersign::audit::ArgsDigest::of_value(std::hint::black_box(&args)))
    });
    group.bench_function("mint", |b| {
        let c = claims(1);
        b.iter(|| signer.sign(std::hint::black_box(&c)).unwrap())
    });
    // Each iteration checks a fresh token (single use); the cache grows with the run, as
    // it would under load, and is capped far above what a run makes.
    let tokens: Vec<String> = (0..20_000)
        .map(|i| signer.sign(&claims(i)).unwrap())
        .collect();
    let verifier = Verifier::new("countersign-gateway")
        .trust(signer.verifying_key())
        .remember_at_most(10_000_000);
    let expected = Expected::call("save_workspace_name", &args);
    let mut next = 0usize;
    group.bench_function("verify", |b| {
        b.iter(|| {
            let token = &tokens[next % tokens.len()];
            next += 1;
            // A replayed token (after the first pass) is refused at the last step, so
            // the cost measured is the whole check either way.
            // The in-memory store answers at once: no runtime needed.
            let _ = pollster::block_on(verifier.verify(
                std::hint::black_box(token),
                &expected,
                1_800_000_010,
            ));
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
