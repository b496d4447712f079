//! The flat reading against the value's, on the same text: the fields, the keyed
//! digest, the schema's answer and the typed params must all be what the value path
//! gives, wherever the flat reading gives anything.
use super::*;
use crate::schema_check::Plain;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Strings {
    a: String,
    b: Option<String>,
    #[serde(default)]
    c: bool,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
enum Color {
    Red,
    #[serde(rename = "green")]
    Green,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Shapes {
    color: Option<Color>,
    #[serde(rename = "x-y", alias = "bb")]
    xy: Option<char>,
    #[serde(default)]
    none: Option<()>,
    #[serde(default)]
    unit: (),
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Newtype(Strings);

/// A key from a few: those one of the types above declares (one escaped), or any.
fn key() -> impl Strategy<Value = String> {
    let strings = vec![r#""a""#, r#""b""#, r#""c""#, r#""\u0061""#];
    let shapes = vec![
        r#""color""#,
        r#""x-y""#,
        r#""bb""#,
        r#""none""#,
        r#""unit""#,
    ];
    let any = vec![
        r#""a""#,
        r#""color""#,
        r#""z""#,
        r#""""#,
        r#""x\u002dy""#,
        r#""$serde_json::private::RawValue""#,
        r#""$serde_json::private::Number""#,
    ];
    prop_oneof![
        prop::sample::select(strings),
        prop::sample::select(shapes),
        prop::sample::select(any),
    ]
    .prop_map(str::to_owned)
}

/// A string as JSON text: as serde_json writes it, or with every character escaped.
fn string() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        any::<String>(),
        prop::sample::select(vec!["Red", "green", "Green", "x", "", "é", "\u{1f600}"])
            .prop_map(str::to_owned),
    ];
    (text, any::<bool>()).prop_map(|(text, escaped)| {
        if !escaped {
            return serde_json::to_string(&text).unwrap_or_default();
        }
        let mut out = String::from("\"");
        for unit in text.encode_utf16() {
            out.push_str(&format!("\\u{unit:04x}"));
        }
        out.push('"');
        out
    })
}

/// A value as JSON text: mostly flat, sometimes not.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => string(),
        2 => prop::sample::select(vec!["true", "false", "null"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["1", "-0.5", "[]", "{}", "[\"a\"]"])
            .prop_map(str::to_owned),
    ]
}

/// An object's text, with a little whitespace, up to ten fields (keys may repeat).
fn object() -> impl Strategy<Value = String> {
    (prop::collection::vec((key(), value()), 0..6), any::<bool>()).prop_map(|(fields, spaced)| {
        let gap = if spaced { " \n" } else { "" };
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{gap}{k}{gap}:{gap}{v}"))
            .collect();
        format!("{gap}{{{}{gap}}}{gap}", body.join(","))
    })
}

fn plain_of<P: JsonSchema>() -> Plain {
    Plain::compile(&crate::projection::schema_for::<P>())
}

fn same_params<P: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
    flat: &FlatArgs<'_>,
    value: &Value,
) -> Result<(), TestCaseError> {
    if let Ok(from_flat) = P::deserialize(flat) {
        prop_assert_eq!(P::deserialize(value).ok(), Some(from_flat));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn flat_arguments_read_as_their_value_does(text in object()) {
        let mut flat = FlatArgs::new();
        if !flat.read(&text) {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let Value::Object(map) = &value else {
            return Err(TestCaseError::fail("not an object"));
        };
        // The same fields, each once.
        prop_assert_eq!(map.len(), flat.fields().len());
        for (key, scalar) in flat.fields() {
            prop_assert!(map.get(&**key).is_some_and(|v| scalar.is(v)), "{key}");
        }
        // The same keyed digest, and the parse a later stage makes.
        let key = crate::AuditKey::new([7; 32]);
        prop_assert_eq!(key.digest_flat(&flat), key.digest(&value));
        prop_assert_eq!(crate::arguments::Arguments::flat(&text).into_value(), value.clone());
        // The same answer from the schema, wherever the fields give one.
        for plain in [plain_of::<Strings>(), plain_of::<Shapes>(), plain_of::<Newtype>()] {
            if let Some(fits) = plain.fits_flat(&flat) {
                prop_assert_eq!(Some(fits), plain.fits(&value));
            }
        }
        // The same params, wherever the fields read as any.
        same_params::<Strings>(&flat, &value)?;
        same_params::<Shapes>(&flat, &value)?;
        same_params::<Newtype>(&flat, &value)?;
        same_params::<Option<Strings>>(&flat, &value)?;
        same_params::<std::collections::BTreeMap<String, Value>>(&flat, &value)?;
    }
}

#[test]
fn what_is_not_flat_is_not_read_as_flat() {
    for text in [
        r#"{"a":1}"#,
        r#"{"a":[]}"#,
        r#"{"a":{}}"#,
        r#"{"a":"x","a":"y"}"#,
        r#"{"a":"x"} x"#,
        r#"["a"]"#,
        r#""a""#,
        "",
        r#"{"a":"\ud800"}"#,
        r#"{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":""}"#,
        // serde_json's own keys: a value parsed with its `raw_value` or
        // `arbitrary_precision` feature is what the string holds, not this object.
        r#"{"$serde_json::private::RawValue":"{\"a\":\"x\"}"}"#,
        r#"{"$serde_json::private::Number":"1"}"#,
        r#"{"a":"x","\u0024serde_json::private::RawValue":"1"}"#,
    ] {
        assert!(!FlatArgs::new().read(text), "{text}");
    }
    let mut flat = FlatArgs::new();
    assert!(flat.read(r#"{"b":"x\n","a":true,"c":null}"#));
    let keys: Vec<&str> = flat.fields().iter().map(|(k, _)| &**k).collect();
    assert_eq!(keys, ["a", "b", "c"]);
}

#[test]
fn flat_fields_read_into_params_as_the_value_reads_them() {
    let text = r#"{"color":"green","x-y":"\u00e9","none":null,"unit":null}"#;
    let mut flat = FlatArgs::new();
    assert!(flat.read(text));
    let shapes = Shapes::deserialize(&flat).unwrap();
    assert_eq!(
        shapes,
        Shapes {
            color: Some(Color::Green),
            xy: Some('é'),
            none: None,
            unit: ()
        }
    );
    assert_eq!(plain_of::<Shapes>().fits_flat(&flat), Some(true));
}
