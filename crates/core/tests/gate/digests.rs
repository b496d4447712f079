//! A call's arguments have one digest however they are spelt; the audit's is keyed.

use countersign::audit::{ArgsDigest, AuditKey};
use serde_json::{json, Value};

#[test]
fn key_order_and_whitespace_do_not_change_the_digest() {
    let key = AuditKey::new([7; 32]);
    let a = key.digest_raw(r#"{"b": [1, {"y":1,"x":2}], "a": "z"}"#);
    let b = key.digest_raw(r#"{"a":"z","b":[1,{"x":2,"y":1}]}"#);
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

/// The canonical text of a two-member object, built by hand: keys in UTF-16 order,
/// strings and values as serde_json writes them (which is as RFC 8785 escapes strings).
fn two_members(a: (&str, &Value), b: (&str, &Value)) -> Vec<u8> {
    let ((k1, v1), (k2, v2)) = if a.0.encode_utf16().lt(b.0.encode_utf16()) {
        (a, b)
    } else {
        (b, a)
    };
    let text = |v: &Value| serde_json::to_string(v).unwrap_or_default();
    format!(
        "{{{}:{},{}:{}}}",
        text(&json!(k1)),
        text(v1),
        text(&json!(k2)),
        text(v2)
    )
    .into_bytes()
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
        let expected = two_members((text, &json!(text)), ("k", &json!([text])));
        assert_eq!(
            ArgsDigest::of_value(&Value::Object(map)),
            ArgsDigest::of_bytes(&expected),
            "{text:?}"
        );
    }
}

#[test]
fn keys_sort_by_utf16_code_units_not_by_code_points() {
    // U+1F600 is D83D DE00 in UTF-16, before U+FB01; by code point it comes after.
    let value = json!({ "\u{fb01}": 2, "\u{1f600}": 1 });
    assert_eq!(
        ArgsDigest::of_value(&value),
        ArgsDigest::of_bytes("{\"\u{1f600}\":1,\"\u{fb01}\":2}".as_bytes())
    );
}

#[test]
fn integers_beyond_2_53_keep_their_own_digest() {
    // A backend that reads 2^53 + 1 exactly never matches a token for 2^53, as it would
    // if the integer were rounded to a double first.
    let exact = ArgsDigest::of_value(&json!({ "n": 9_007_199_254_740_993_u64 }));
    assert_eq!(exact, ArgsDigest::of_bytes(br#"{"n":9007199254740993}"#));
    assert_ne!(
        exact,
        ArgsDigest::of_value(&json!({ "n": 9_007_199_254_740_992_u64 }))
    );
    assert_ne!(
        exact,
        ArgsDigest::of_value(&json!({ "n": 9_007_199_254_740_992.0 }))
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]
    /// Any text, as a key and as a value (alone and in an array), hashes as
    /// serde_json's compact text of it, members in UTF-16 order.
    #[test]
    fn any_string_hashes_as_serde_json_writes_it(
        text in proptest::prelude::any::<String>(),
        other in "[ -~\\x00-\\x1f\\x7f\\u{80}-\\u{10ffff}]{0,12}",
    ) {
        proptest::prop_assume!(text != other);
        let inner = json!([text.clone(), { "k": text }]);
        let mut map = serde_json::Map::new();
        map.insert(text.clone(), json!(other));
        map.insert(other.clone(), inner.clone());
        let expected = two_members((&text, &json!(other)), (&other, &inner));
        proptest::prop_assert_eq!(
            ArgsDigest::of_value(&Value::Object(map)),
            ArgsDigest::of_bytes(&expected)
        );
    }
}

#[test]
fn malformed_arguments_still_get_a_digest_of_their_bytes() {
    let key = AuditKey::new([7; 32]);
    assert_eq!(key.digest_raw("{oops"), key.digest_bytes(b"{oops"));
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
