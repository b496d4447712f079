//! Arguments pass only if every field is one the schema shows and the typed params read.

use countersign::{Action, Confirm, Kind, Step};
use schemars::JsonSchema;

use crate::common::{at, code, World};

fn shaped<P>(id: &str) -> Action<P>
where
    P: serde::de::DeserializeOwned + JsonSchema + Clone + 'static,
{
    Action::<P>::new(id, "shapes")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(|_| async { Ok::<_, String>(()) })
}

/// One of each serde enum representation, nested, beside a flattened struct.
#[allow(dead_code, unreachable_pub, missing_docs)] // The shapes are only deserialised.
mod representations {
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    pub enum Internal {
        Row { id: u32 },
        All,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c")]
    pub enum Adjacent {
        Row { id: u32 },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Untagged {
        Plain(String),
        Full { first: String, last: String },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub enum External {
        Row { id: u32 },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Extra {
        pub note: String,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Params {
        pub internal: Option<Internal>,
        pub adjacent: Option<Adjacent>,
        pub untagged: Option<Untagged>,
        pub external: Option<External>,
        pub list: Option<Vec<Internal>>,
        #[serde(flatten)]
        pub extra: Option<Extra>,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op")]
    pub enum TopLevel {
        Rename { name: String },
        Archive {},
    }
}

#[test]
fn unknown_fields_are_refused_in_every_serde_shape() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<representations::Params>("shapes"))
        .unwrap();
    let _b = w
        .exec
        .register(shaped::<representations::TopLevel>("top"))
        .unwrap();
    let refused = [
        (
            "shapes",
            r#"{"internal":{"type":"Row","id":1,"confirmed":true}}"#,
            "internal.confirmed",
        ),
        (
            "shapes",
            r#"{"internal":{"type":"All","approved_by":"me"}}"#,
            "internal.approved_by",
        ),
        (
            "shapes",
            r#"{"adjacent":{"t":"Row","c":{"id":1,"confirmed":true}}}"#,
            "confirmed",
        ),
        (
            "shapes",
            r#"{"untagged":{"first":"a","last":"b","approved_by":"me"}}"#,
            "approved_by",
        ),
        (
            "shapes",
            r#"{"external":{"Row":{"id":1,"confirmed":true}}}"#,
            "confirmed",
        ),
        (
            "shapes",
            r#"{"list":[{"type":"All"},{"type":"Row","id":2,"confirmed":true}]}"#,
            "confirmed",
        ),
        ("shapes", r#"{"note":"n","confirmed":true}"#, "confirmed"),
        (
            "top",
            r#"{"op":"Rename","name":"a","confirmed":true}"#,
            "confirmed",
        ),
        (
            "top",
            r#"{"op":"Archive","approved_by":"me"}"#,
            "approved_by",
        ),
    ];
    for (action, args, field) in refused {
        let Step::Settled(s) = w.call(action, args, 0) else {
            panic!("{args} reached the card")
        };
        let message = s.outcome.to_model_json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(code(&s), "INVALID_ARGS", "{args}");
        assert!(message.contains(field), "{args}: {message}");
    }
    let accepted = [
        ("shapes", r#"{"internal":{"type":"Row","id":1}}"#),
        ("shapes", r#"{"internal":{"type":"All"}}"#),
        ("shapes", r#"{"adjacent":{"t":"Row","c":{"id":1}}}"#),
        ("shapes", r#"{"untagged":"plain"}"#),
        ("shapes", r#"{"untagged":{"first":"a","last":"b"}}"#),
        ("shapes", r#"{"external":{"Row":{"id":1}}}"#),
        (
            "shapes",
            r#"{"list":[{"type":"All"},{"type":"Row","id":2}]}"#,
        ),
        ("shapes", r#"{"note":"n"}"#),
        ("shapes", r#"{}"#),
        ("top", r#"{"op":"Rename","name":"a"}"#),
        ("top", r#"{"op":"Archive"}"#),
    ];
    for (action, args) in accepted {
        assert!(
            matches!(w.call(action, args, 0), Step::Approval(_)),
            "{args} was refused"
        );
    }
}

/// Shapes where serde reads, renames or drops what the schema shows otherwise.
#[allow(dead_code, unreachable_pub, missing_docs)] // The shapes are only deserialised.
mod shapes {
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Loc {
        pub dir: String,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Rest {
        pub to: String,
    }

    /// A plain struct beside a flattened one (serde drops unknown keys there).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Flat {
        pub from: Loc,
        #[serde(flatten)]
        pub rest: Rest,
    }

    /// An internally tagged enum (serde buffers the object and drops unknown keys).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op")]
    pub enum Tagged {
        Copy { from: Loc, to: String },
    }

    /// An internally tagged enum with a variant alias the schema does not show.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "op", rename_all = "snake_case")]
    pub enum Aliased {
        #[serde(alias = "remove")]
        Delete {
            path: String,
        },
        Write {
            path: String,
        },
    }

    /// A field alias inside an untagged enum.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Untagged {
        Path {
            #[serde(alias = "file")]
            path: String,
        },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsUntagged {
        pub target: Untagged,
    }

    /// An untagged enum where one alternative is an integer-keyed map (its schema has
    /// `patternProperties: {"^\\d+$": ..}`).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum NamedOrNumbered {
        Named { name: String },
        Numbered(std::collections::HashMap<u32, String>),
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsNamedOrNumbered {
        pub who: NamedOrNumbered,
    }

    /// Untagged: the first alternative that deserialises wins, and it ignores extras.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Removal {
        Gentle { path: String },
        Forced { path: String, force: bool },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsRemoval {
        pub removal: Removal,
    }

    /// A field alias on a plain struct.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct PlainAlias {
        #[serde(alias = "file")]
        pub path: String,
    }

    /// `#[serde(default)]`, `rename`, nested Option/Vec/HashMap.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Nested {
        #[serde(default, rename = "Path")]
        pub path: Option<String>,
        #[serde(default)]
        pub items: Vec<Option<Loc>>,
        #[serde(default)]
        pub map: std::collections::HashMap<String, Loc>,
    }

    /// A recursive type (`$ref` back to itself).
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Tree {
        pub name: String,
        #[serde(default)]
        pub children: Vec<Tree>,
    }

    /// An internally tagged enum whose variant holds a recursive type.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    pub enum TreeOp {
        Plant { tree: Tree },
    }

    /// Flat params with a field serde reads and then passes over (`IgnoredAny`): the
    /// model is shown it, the person sees it on the card, `run` never gets it.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Discarded {
        pub name: String,
        #[schemars(with = "String")]
        pub note: serde::de::IgnoredAny,
    }

    /// Flat params whose hand-written schema shows the model a field (`ghost`) their
    /// `Deserialize` does not read: the schema check lets it through, serde drops it.
    #[derive(Clone, Debug, Deserialize)]
    pub struct Ghost {
        pub name: String,
    }

    impl JsonSchema for Ghost {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            "Ghost".into()
        }

        fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
            schemars::json_schema!({
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "ghost": { "type": "string" },
                },
                "required": ["name"],
                "additionalProperties": false,
            })
        }
    }
}

/// The gate refuses what the params' schema refuses: a float for an integer, an
/// undeclared field, a missing required one, an array for an object, any field of a
/// struct that declares none.
#[test]
fn the_check_refuses_what_the_schema_refuses() {
    #[derive(Clone, Debug, serde::Deserialize, JsonSchema)]
    #[allow(dead_code)] // Only deserialised.
    struct Keyed {
        key: String,
        n: Option<i64>,
    }
    let w = World::new();
    let _a = w.exec.register(shaped::<Keyed>("keyed")).unwrap();
    let _b = w.exec.register(shaped::<legit::Empty>("empty")).unwrap();
    for (action, args, fits) in [
        ("keyed", r#"{"key":"k"}"#, true),
        ("keyed", r#"{"key":"k","n":2}"#, true),
        ("keyed", r#"{"key":"k","n":2.5}"#, false),
        ("keyed", r#"{"key":"k","confirmed":true}"#, false),
        ("keyed", r#"{"n":2}"#, false),
        ("keyed", r#"["k"]"#, false),
        ("empty", r#"{}"#, true),
        ("empty", r#"{"x":1}"#, false),
        ("empty", r#"{"a":{}}"#, false),
    ] {
        let checked = w.exec.check_arguments(action, args);
        assert_eq!(checked.is_ok(), fits, "{action} {args}: {checked:?}");
    }
}

fn refused_as_invalid(w: &World, action: &str, args: &str) -> Result<(), String> {
    match w.call(action, args, 0) {
        Step::Settled(s) if code(&s) == "INVALID_ARGS" => Ok(()),
        Step::Settled(s) => Err(format!("{args}: refused as {}", code(&s))),
        Step::Approval(card) => {
            w.exec.deny(card.call, None, at(0)).unwrap();
            Err(format!("{action} {args}: accepted, reached the card"))
        }
        other => Err(format!("{args}: {other:?}")),
    }
}

/// A nested struct may be sent as a JSON array (serde's `visit_seq`); the schema says
/// object, so schema_check records a type mismatch and stops checking the object's
/// remaining fields, including an unknown one serde dropped beside a flatten or inside
/// an internally tagged enum.
#[test]
fn an_unknown_field_after_a_type_mismatch_is_still_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Flat>("flat")).unwrap();
    let _b = w.exec.register(shaped::<shapes::Tagged>("tagged")).unwrap();
    // Sanity: without the array trick both are refused.
    refused_as_invalid(&w, "flat", r#"{"from":{"dir":"a"},"to":"b","zzz":true}"#).unwrap();
    refused_as_invalid(
        &w,
        "tagged",
        r#"{"op":"Copy","from":{"dir":"a"},"to":"b","zzz":true}"#,
    )
    .unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        ("flat", r#"{"from":["a"],"to":"b","zzz":true}"#),
        (
            "tagged",
            r#"{"op":"Copy","from":["a"],"to":"b","zzz":true}"#,
        ),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "unknown field accepted: {accepted:#?}");
}

/// Aliases: the schema shows one name, serde accepts another.
#[test]
fn an_alias_the_schema_does_not_show_is_refused() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<shapes::Aliased>("aliased"))
        .unwrap();
    let _b = w
        .exec
        .register(shaped::<shapes::HoldsUntagged>("untagged"))
        .unwrap();
    let _c = w
        .exec
        .register(shaped::<shapes::PlainAlias>("plain"))
        .unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        // A variant alias, plus an unknown field serde drops.
        ("aliased", r#"{"op":"remove","path":"a","zzz":true}"#),
        ("untagged", r#"{"target":{"file":"a"}}"#),
        ("plain", r#"{"file":"a"}"#),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "{accepted:#?}");
}

/// Variant aliases alone (no extra field): a value the schema does not allow.
#[test]
fn a_variant_alias_alone_is_refused() {
    let w = World::new();
    let _a = w
        .exec
        .register(shaped::<shapes::Aliased>("aliased"))
        .unwrap();
    refused_as_invalid(&w, "aliased", r#"{"op":"remove","path":"a"}"#).unwrap();
}

#[test]
fn defaults_renames_nested_options_maps_and_recursion_refuse_unknown_fields() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Nested>("nested")).unwrap();
    let _b = w.exec.register(shaped::<shapes::Tree>("tree")).unwrap();
    let _c = w.exec.register(shaped::<shapes::TreeOp>("treeop")).unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        ("nested", r#"{"path":"a"}"#),
        ("nested", r#"{"Path":"a","zzz":1}"#),
        ("nested", r#"{"items":[null,{"dir":"a","zzz":1}]}"#),
        ("nested", r#"{"map":{"k":{"dir":"a","zzz":1}}}"#),
        (
            "tree",
            r#"{"name":"a","children":[{"name":"b","children":[{"name":"c","zzz":1}]}]}"#,
        ),
        (
            "treeop",
            r#"{"kind":"Plant","tree":{"name":"a","children":[{"name":"b","zzz":1}]}}"#,
        ),
        ("treeop", r#"{"kind":"Plant","tree":{"name":"a","zzz":1}}"#),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(accepted.is_empty(), "{accepted:#?}");
    for (action, args) in [
        (
            "nested",
            r#"{"Path":"a","items":[null,{"dir":"b"}],"map":{"k":{"dir":"c"}}}"#,
        ),
        (
            "treeop",
            r#"{"kind":"Plant","tree":{"name":"a","children":[{"name":"b"}]}}"#,
        ),
    ] {
        assert!(
            matches!(w.call(action, args, 0), Step::Approval(_)),
            "{args} was refused"
        );
    }
}

/// Flat params read without `serde_ignored` (the schema check vouches for every field)
/// only where serde reads every field the schema shows, each as a value: a field shown
/// to the model but dropped by serde (not read, or read and passed over) is still
/// refused, and the call never reaches its card.
#[test]
fn a_field_the_schema_shows_but_serde_drops_is_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<shapes::Ghost>("ghost")).unwrap();
    refused_as_invalid(&w, "ghost", r#"{"name":"a","ghost":"rm -rf"}"#).unwrap();
    // A field serde names but reads as nothing: refused as well.
    let _b = w
        .exec
        .register(shaped::<shapes::Discarded>("discarded"))
        .unwrap();
    refused_as_invalid(&w, "discarded", r#"{"name":"a","note":"rm -rf"}"#).unwrap();
    assert!(
        matches!(w.call("ghost", r#"{"name":"a"}"#, 0), Step::Approval(_)),
        "the field serde reads is accepted"
    );
}

/// The array trick inside a recursive tagged shape, deeper down.
#[test]
fn an_unknown_field_hidden_behind_a_deep_mismatch_is_refused() {
    let w = World::new();
    let _c = w.exec.register(shaped::<shapes::TreeOp>("treeop")).unwrap();
    refused_as_invalid(&w, "treeop", r#"{"kind":"Plant","tree":["a",[]],"zzz":1}"#).unwrap();
}

/// `patternProperties` makes schema_check treat the object as open to *any* key, not
/// only keys matching the pattern; serde picks the struct alternative and drops the key.
#[test]
fn an_integer_keyed_map_alternative_does_not_open_an_object_to_every_key() {
    // A struct without `deny_unknown_fields` and a map overlap: refused at registration.
    let w = World::new();
    let registered = w
        .exec
        .register(shaped::<shapes::HoldsNamedOrNumbered>("who"));
    assert!(
        matches!(
            registered,
            Err(countersign::executor::RegisterError::Ambiguous(..))
        ),
        "{registered:?}"
    );
}

/// What the person saw is what runs: the card must not show `force: true` for a call
/// whose typed params (serde's first matching untagged alternative) dropped it.
#[test]
fn the_card_never_shows_a_field_the_typed_params_dropped() {
    // `Gentle { path }` takes `{"path", "force"}` too (serde drops `force`): the two
    // overlap, so the params never register and no card can show a dropped field.
    let w = World::new();
    let registered = w.exec.register(
        Action::<shapes::HoldsRemoval>::new("rm", "remove")
            .kind(Kind::Danger)
            .run(|_p: shapes::HoldsRemoval| async { Ok::<_, String>(()) }),
    );
    assert!(
        matches!(
            registered,
            Err(countersign::executor::RegisterError::Ambiguous(..))
        ),
        "{registered:?}"
    );
    assert!(w.runs().is_empty());
}

/// Params the check must not refuse: what serde reads and the schema shows.
#[allow(dead_code, unreachable_pub, missing_docs)] // The shapes are only deserialised.
mod legit {
    use std::collections::{BTreeMap, HashMap};

    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Empty {}

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Strict {
        pub name: String,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Extras {
        pub name: String,
        #[serde(flatten)]
        pub rest: HashMap<String, serde_json::Value>,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Many {
        #[serde(default)]
        pub any: Option<serde_json::Value>,
        #[serde(default)]
        pub tags: HashMap<String, u32>,
        #[serde(default)]
        pub empty: Option<Empty>,
        #[serde(default)]
        pub by_id: BTreeMap<u32, String>,
        #[serde(default)]
        pub big: Option<u128>,
        #[serde(default)]
        pub low: Option<i64>,
        #[serde(default)]
        pub letter: Option<char>,
        #[serde(default)]
        pub strict: Option<Strict>,
        #[serde(default)]
        pub pair: Option<(u8, String)>,
        #[serde(default)]
        pub boxed: Option<Box<Strict>>,
    }

    /// Untagged: the strict alternative refuses the extra field, serde goes on to the
    /// next one, which declares it.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Note {
        Bare(Strict),
        Full { name: String, note: String },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct HoldsNote {
        pub note: Note,
    }
}

/// The schema check refuses nothing serde reads as shown: a `serde_json::Value` (any
/// object in it), a `HashMap<String, _>` (any key), an empty struct as `{}` or `null`
/// behind `Option`, an integer-keyed map, `u128`/`i64` at their ends, a `char` spelt
/// with escapes, an escaped key, a tuple, `deny_unknown_fields`, a flattened map.
#[test]
fn legitimate_params_of_every_common_shape_reach_the_card() {
    let w = World::new();
    let _a = w.exec.register(shaped::<legit::Many>("many")).unwrap();
    let _b = w.exec.register(shaped::<legit::Empty>("empty")).unwrap();
    let _c = w.exec.register(shaped::<legit::Extras>("extras")).unwrap();
    let mut refused = Vec::new();
    for (action, args) in [
        ("many", r#"{}"#),
        (
            "many",
            r#"{"any":{"x":{"y":[1,{"z":null}]},"confirmed":true}}"#,
        ),
        ("many", r#"{"any":[1,"a"]}"#),
        ("many", r#"{"tags":{"confirmed":1,"approved_by":2,"":3}}"#),
        ("many", r#"{"empty":{}}"#),
        ("many", r#"{"empty":null}"#),
        ("many", r#"{"by_id":{"7":"a","4294967295":"b"}}"#),
        ("many", r#"{"big":9007199254740991}"#),
        ("many", r#"{"low":-9007199254740991}"#),
        ("many", r#"{"letter":"\ud83d\ude00"}"#),
        ("many", r#"{"l\u0065tter":"a"}"#),
        ("many", r#"{"strict":{"name":"a"}}"#),
        ("many", r#"{"pair":[255,"a"]}"#),
        ("many", r#"{"boxed":{"name":"a"}}"#),
        ("empty", r#"{}"#),
        ("empty", ""),
        ("extras", r#"{"name":"a","color":"red","n":[1]}"#),
    ] {
        match w.call(action, args, 0) {
            Step::Approval(card) => {
                w.exec.deny(card.call, None, at(0)).unwrap();
            }
            Step::Settled(s) => refused.push(format!(
                "{action} {args}: {}",
                s.outcome.to_model_json()["error"]["message"]
            )),
            other => panic!("{other:?}"),
        }
    }
    assert!(w.runs().is_empty());
    assert!(refused.is_empty(), "{refused:#?}");
}

/// What serde would not read as the card shows it is refused: a number serde_json keeps
/// as a float (`-0`, `1.0`, `1e2`) for an integer, a number out of range (or past
/// ±(2^53 - 1), where the canonical form would not hold it exactly), a number
/// spelt as a string, a char of two, a field or key of an empty struct, a map key serde
/// does not read as the integer it spells.
#[test]
fn values_serde_would_not_read_as_shown_are_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<legit::Many>("many")).unwrap();
    let _b = w.exec.register(shaped::<legit::Empty>("empty")).unwrap();
    let mut accepted = Vec::new();
    for (action, args) in [
        ("many", r#"{"tags":{"a":-0}}"#),
        ("many", r#"{"tags":{"a":1.0}}"#),
        ("many", r#"{"tags":{"a":1e2}}"#),
        ("many", r#"{"tags":{"a":4294967296}}"#),
        ("many", r#"{"tags":{"a":"5"}}"#),
        ("many", r#"{"big":-1}"#),
        ("many", r#"{"big":1e39}"#),
        // A `u128` above `u64` is a float to serde_json (no `arbitrary_precision`):
        // refused, never rounded.
        ("many", r#"{"big":340282366920938463463374607431768211455}"#),
        ("many", r#"{"low":9223372036854775808}"#),
        // Integers past ±(2^53 - 1) are refused whatever the type: not every reader of
        // the digest holds them exactly (canonical.rs).
        ("many", r#"{"big":18446744073709551615}"#),
        ("many", r#"{"low":-9223372036854775808}"#),
        ("many", r#"{"letter":"ab"}"#),
        ("many", r#"{"letter":""}"#),
        ("many", r#"{"letter":"e\u0301"}"#),
        ("many", r#"{"empty":{"all":true}}"#),
        ("many", r#"{"empty":[]}"#),
        ("many", r#"{"by_id":{"07":"a"}}"#),
        ("many", r#"{"by_id":{"+7":"a"}}"#),
        ("many", r#"{"by_id":{"-7":"a"}}"#),
        ("many", r#"{"by_id":{"4294967296":"a"}}"#),
        ("many", r#"{"by_id":{"7":"a","07":"b"}}"#),
        ("many", r#"{"strict":{"name":"a","force":true}}"#),
        ("many", r#"{"pair":[256,"a"]}"#),
        ("many", r#"{"pair":[1]}"#),
        ("many", r#"{"pair":[1,"a",true]}"#),
        ("empty", r#"{"all":true}"#),
        ("empty", r#"[]"#),
        ("empty", r#"null"#),
    ] {
        if let Err(e) = refused_as_invalid(&w, action, args) {
            accepted.push(e);
        }
    }
    assert!(w.runs().is_empty());
    assert!(accepted.is_empty(), "{accepted:#?}");
}

/// Broke (fails closed: a legitimate call refused, nothing wrong runs): an untagged
/// alternative with `deny_unknown_fields` refuses an extra field, and serde goes on to
/// the next alternative, which declares it. The check chooses alternatives in its open
/// mode, which passes over undeclared fields even where the schema says
/// `additionalProperties: false`, so it chooses `Bare`, then judges `note` undeclared.
/// Fixed: while an alternative is chosen, `deny_unknown_fields` refuses undeclared
/// fields, as serde does.
#[test]
fn break_a_strict_alternative_passed_over_for_the_next_one_is_not_refused() {
    let w = World::new();
    let _a = w.exec.register(shaped::<legit::HoldsNote>("note")).unwrap();
    for args in [
        r#"{"note":{"name":"a"}}"#,
        r#"{"note":{"name":"a","note":"b"}}"#,
    ] {
        match w.call("note", args, 0) {
            Step::Approval(card) => {
                w.exec.deny(card.call, None, at(0)).unwrap();
            }
            Step::Settled(s) => panic!("{args}: {}", s.outcome.to_model_json()["error"]["message"]),
            other => panic!("{other:?}"),
        }
    }
    assert!(w.runs().is_empty());
}
