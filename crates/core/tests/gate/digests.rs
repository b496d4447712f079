//! A call's arguments have one digest however they are spelt; the audit's is keyed.

use countersign::audit::{ArgsDigest, AuditKey};
use serde_json::{json, Value};

#[test]
fn key_order_and_whitespace_do_not_change_the_digest() {
    let a = ArgsDigest::of_raw(r#"{"b": [1, {"y":1,"x":2}], "a": "z"}"#);
    let b = ArgsDigest::of_raw(r#"{"a":"z","b":[1,{"x":2,"y":1}]}"#);
    assert_eq!(a, b);
}

#[test]
fn different_arguments_have_different_digests() {
    assert_ne!(
        ArgsDigest::of_value(&json!({"name": "Apollo"})),
        ArgsDigest::of_value(&json!({"name": "Apollo "}))
    );
}

#[test]
fn the_digest_is_sha256_of_the_canonical_text() {
    // sha256("{}"), computed independently.
    assert_eq!(
        ArgsDigest::of_value(&json!({})).to_hex(),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn strings_hash_as_their_compact_json_text_escapes_and_all() {
    let texts = [
        "",
        "plain",
        "é ü 中 😀",
        "a\"b",
        "a\\b",
        "line\nbreak",
        "\u{0}",
        "\u{1f}",
        " ",
        "\u{7f}",
        "\u{2028}",
        "</script>",
        "tab\t",
        &"long ".repeat(40),
        &"\"quoted\" ".repeat(30),
        &format!("{}\n{}", "a".repeat(127), "b".repeat(129)),
    ];
    for text in texts {
        let mut map = serde_json::Map::new();
        map.insert(text.to_owned(), json!(text));
        map.insert("k".to_owned(), json!([text]));
        let value = Value::Object(map);
        let compact = serde_json::to_string(&value).unwrap_or_default();
        assert_eq!(
            ArgsDigest::of_value(&value),
            ArgsDigest::of_bytes(compact.as_bytes()),
            "{text:?}"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]
    /// Any text, as a key and as a value (alone and in an array), hashes as
    /// serde_json's compact text of it.
    #[test]
    fn any_string_hashes_as_serde_json_writes_it(
        text in proptest::prelude::any::<String>(),
        other in "[ -~\\x00-\\x1f\\x7f\\u{80}-\\u{10ffff}]{0,12}",
    ) {
        let mut map = serde_json::Map::new();
        map.insert(text.clone(), json!(other));
        map.insert(other.clone(), json!([text.clone(), { "k": text }]));
        let value = Value::Object(map);
        let compact = serde_json::to_string(&value).unwrap_or_default();
        proptest::prop_assert_eq!(
            ArgsDigest::of_value(&value),
            ArgsDigest::of_bytes(compact.as_bytes())
        );
    }
}

#[test]
fn malformed_arguments_still_get_a_digest_of_their_bytes() {
    assert_eq!(ArgsDigest::of_raw("{oops"), ArgsDigest::of_bytes(b"{oops"));
}

#[test]
fn a_keyed_digest_cannot_be_confirmed_without_the_key() {
    let args = json!({"row": 7});
    let key = AuditKey::new([9; 32]);
    let recorded = key.digest(&args);
    // A reader of the trail hashing guesses finds nothing.
    assert_ne!(recorded, ArgsDigest::of_value(&args));
    assert_ne!(recorded, AuditKey::new([8; 32]).digest(&args));
    // The key's holder can check a claimed argument, and a wrong claim fails.
    assert_eq!(recorded, key.digest(&json!({ "row": 7 })));
    assert_ne!(recorded, key.digest(&json!({ "row": 8 })));
    assert_eq!(key.digest_raw(r#"{ "row" : 7 }"#), recorded);
}

#[test]
fn hex_round_trips_and_bad_hex_is_refused() {
    let d = ArgsDigest::of_bytes(b"x");
    assert_eq!(ArgsDigest::try_from(d.to_hex()).ok(), Some(d));
    assert!(ArgsDigest::try_from("zz".repeat(32)).is_err());
    assert!(ArgsDigest::try_from("ab".to_string()).is_err());
}
