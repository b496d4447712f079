//! The second guard against unknown fields: the arguments checked against the JSON Schema
//! the model was shown, as if every object in it said `additionalProperties: false`.
//!
//! serde (with `serde_ignored`) refuses unknown fields in plain structs, but not inside
//! internally tagged or untagged enums, nor beside `#[serde(flatten)]`: those buffer the
//! object and drop what no variant wants. The schema knows every field each shape may
//! have, so a field it does not declare is refused whatever serde did with it. A value
//! of another type than the schema shows (a struct written as an array, which serde
//! accepts) is refused too: the model was shown the schema, and unknown fields could
//! hide behind such a value.

use serde_json::{Map, Value};

/// Where the arguments left the schema.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    /// A field no schema in force declares, at this path.
    Undeclared(String),
    /// The value's type, constant or required fields do not fit, at this path.
    Mismatch(String),
}

/// How strictly an object's fields are judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Every field must be declared.
    Closed,
    /// Undeclared fields are passed over, as serde does when it picks an untagged variant.
    Open,
}

/// Why the arguments do not fit the schema the model was shown, if they do not: a field
/// it does not declare, or a value of another type (serde may accept a struct written as
/// an array; the schema did not offer that).
pub(crate) fn misfit(schema: &Value, value: &Value) -> Option<String> {
    // Most params are plain objects: checked without allocating. Anything with
    // alternatives, references or a misfit goes through the full check, which also
    // words the error.
    if plain_fits(schema, value) == Some(true) {
        return None;
    }
    full_misfit(schema, value)
}

/// [`misfit`] for an action's params, whose schema was compiled once at registration:
/// the same answer, without looking keys up by name on every call.
pub(crate) fn misfit_compiled(plain: &Plain, schema: &Value, value: &Value) -> Option<String> {
    if plain.fits(value) == Some(true) {
        return None;
    }
    full_misfit(schema, value)
}

fn full_misfit(schema: &Value, value: &Value) -> Option<String> {
    let mut path = String::new();
    match check(
        schema,
        vec![(schema, false)],
        value,
        &mut path,
        Mode::Closed,
    ) {
        Ok(()) => None,
        Err(Miss::Undeclared(at)) => Some(format!(
            "unknown field {}; only the action's declared params are accepted",
            crate::outcome::quote(&at, 64)
        )),
        Err(Miss::Mismatch(at)) if at.is_empty() => {
            Some("the arguments do not match the declared params".to_owned())
        }
        Err(Miss::Mismatch(at)) => Some(format!(
            "{} does not match the declared params",
            crate::outcome::quote(&at, 64)
        )),
    }
}

/// Whether `value` fits a schema without alternatives or references: `None` when the
/// schema has those (the full check decides), `Some(false)` on any misfit.
fn plain_fits(schema: &Value, value: &Value) -> Option<bool> {
    let Some(object) = schema.as_object() else {
        return Some(*schema != Value::Bool(false));
    };
    if ["allOf", "anyOf", "oneOf", "$ref", "patternProperties"]
        .iter()
        .any(|k| object.contains_key(*k))
    {
        return None;
    }
    if !fits_scalar(schema, value) {
        return Some(false);
    }
    match value {
        Value::Object(fields) => {
            let properties = object.get("properties").and_then(Value::as_object);
            let extra = object
                .get("additionalProperties")
                .filter(|e| **e != Value::Bool(false));
            // A free-form object (no field named, none closed off) takes any field;
            // `additionalProperties: false` alone takes none.
            if properties.is_none()
                && !object.contains_key("additionalProperties")
                && !object.contains_key("required")
            {
                return Some(true);
            }
            let required = object.get("required").and_then(Value::as_array);
            if required
                .into_iter()
                .flatten()
                .any(|name| name.as_str().is_some_and(|n| !fields.contains_key(n)))
            {
                return Some(false);
            }
            for (key, item) in fields {
                let Some(sub) = properties.and_then(|p| p.get(key)).or(extra) else {
                    return Some(false);
                };
                if plain_fits(sub, item)? {
                    continue;
                }
                return Some(false);
            }
            Some(true)
        }
        Value::Array(items) => {
            if object.contains_key("prefixItems") {
                return None;
            }
            let Some(sub) = object.get("items") else {
                return Some(true);
            };
            for item in items {
                if !plain_fits(sub, item)? {
                    return Some(false);
                }
            }
            Some(true)
        }
        _ => Some(true),
    }
}

/// A schema compiled for [`plain_fits`]'s question, asked once per call: each rule read
/// from the schema once, at registration, instead of looked up by name on every call.
/// It answers exactly as [`plain_fits`] does (a test holds the two together).
#[derive(Clone, Debug)]
pub(crate) enum Plain {
    /// Not an object: anything fits but `false`.
    Bool(bool),
    /// Alternatives or references: the full check decides.
    Complex,
    /// An object schema without alternatives.
    Node(Box<PlainNode>),
}

/// One object schema's rules, as [`plain_fits`] reads them.
#[derive(Clone, Debug)]
pub(crate) struct PlainNode {
    /// `const`, if any.
    constant: Option<Value>,
    /// `enum`, if an array.
    options: Option<Vec<Value>>,
    /// The JSON types `type` allows, as a bit set ([`type_bit`]); all when it names none.
    types: u8,
    /// `properties`, if an object.
    properties: Option<Vec<(String, Plain)>>,
    /// `additionalProperties`, unless absent or `false`.
    extra: Option<Plain>,
    /// Whether the schema has an `additionalProperties` key at all.
    has_additional: bool,
    /// Whether the schema has a `required` key at all.
    has_required: bool,
    /// The names in `required`, if an array.
    required: Vec<String>,
    /// Whether it has `prefixItems` (arrays then go to the full check).
    prefix_items: bool,
    /// `items`, if any.
    items: Option<Plain>,
}

impl PlainNode {
    /// The rule a field named `key` must fit: its declared property's, else
    /// `additionalProperties`'s; none when no such field is allowed.
    fn rule_for(&self, key: &str) -> Option<&Plain> {
        let declared = self.properties.as_deref().and_then(|p| {
            p.binary_search_by(|(name, _)| name.as_str().cmp(key))
                .ok()
                .and_then(|at| p.get(at))
                .map(|(_, sub)| sub)
        });
        declared.or(self.extra.as_ref())
    }
}

const ALL_TYPES: u8 = 0x7f;

/// The bit of one JSON Schema type name; every bit for a name it does not know.
fn type_bit(name: &str) -> u8 {
    match name {
        "object" => 1,
        "array" => 2,
        "string" => 4,
        "boolean" => 8,
        "null" => 16,
        "integer" => 32,
        "number" => 64,
        _ => ALL_TYPES,
    }
}

/// The bits of the types `value` counts as (an integer is a number too).
fn value_bits(value: &Value) -> u8 {
    match value {
        Value::Object(_) => 1,
        Value::Array(_) => 2,
        Value::String(_) => 4,
        Value::Bool(_) => 8,
        Value::Null => 16,
        Value::Number(n) if n.is_i64() || n.is_u64() => 32 | 64,
        Value::Number(_) => 64,
    }
}

impl Plain {
    /// Compiles a schema (or a sub-schema).
    pub(crate) fn compile(schema: &Value) -> Self {
        let Some(object) = schema.as_object() else {
            return Plain::Bool(*schema != Value::Bool(false));
        };
        if ["allOf", "anyOf", "oneOf", "$ref", "patternProperties"]
            .iter()
            .any(|k| object.contains_key(*k))
        {
            return Plain::Complex;
        }
        let types = match object.get("type") {
            Some(Value::String(name)) => type_bit(name),
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(Value::as_str)
                .fold(0, |bits, name| bits | type_bit(name)),
            _ => ALL_TYPES,
        };
        Plain::Node(Box::new(PlainNode {
            constant: object.get("const").cloned(),
            options: object.get("enum").and_then(Value::as_array).cloned(),
            types,
            properties: object
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| {
                    let mut declared: Vec<(String, Plain)> = p
                        .iter()
                        .map(|(name, sub)| (name.clone(), Plain::compile(sub)))
                        .collect();
                    // Sorted for the binary search, whatever order the map keeps.
                    declared.sort_by(|a, b| a.0.cmp(&b.0));
                    declared
                }),
            has_additional: object.contains_key("additionalProperties"),
            extra: object
                .get("additionalProperties")
                .filter(|e| **e != Value::Bool(false))
                .map(Plain::compile),
            has_required: object.contains_key("required"),
            required: object
                .get("required")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            prefix_items: object.contains_key("prefixItems"),
            items: object.get("items").map(Plain::compile),
        }))
    }

    /// The property names of a flat object schema: `type` exactly `object`, declared
    /// `properties`, no other property allowed, and each property of explicit types
    /// none of which is an object (an array only of such items), so no field sits
    /// below a field. `None` for any other schema.
    pub(crate) fn flat_properties(&self) -> Option<Vec<&str>> {
        fn holds_no_field(plain: &Plain) -> bool {
            let Plain::Node(node) = plain else {
                return false;
            };
            let array_of_plain = node.items.as_ref().is_some_and(holds_no_field);
            node.types & type_bit("object") == 0
                && (node.types & type_bit("array") == 0 || (array_of_plain && !node.prefix_items))
                && node.extra.is_none()
        }
        let Plain::Node(node) = self else {
            return None;
        };
        if node.types != type_bit("object") || node.extra.is_some() {
            return None;
        }
        node.properties
            .as_ref()?
            .iter()
            .map(|(name, sub)| holds_no_field(sub).then_some(name.as_str()))
            .collect()
    }

    /// What [`Plain::fits`] answers for the value flat arguments parse to, where the
    /// schema is an object schema with declared properties and no `const` or `enum` of
    /// its own; `None` for any other schema (the value is checked then). A test holds the
    /// two together.
    pub(crate) fn fits_flat(&self, flat: &crate::flat::FlatArgs<'_>) -> Option<bool> {
        let Plain::Node(node) = self else {
            return None;
        };
        if node.constant.is_some() || node.options.is_some() || node.types & type_bit("object") == 0
        {
            return None;
        }
        node.properties.as_ref()?;
        if node.required.iter().any(|n| flat.get(n).is_none()) {
            return Some(false);
        }
        for (key, item) in flat.fields() {
            let Some(sub) = node.rule_for(key) else {
                return Some(false);
            };
            if !sub.fits_scalar(item)? {
                return Some(false);
            }
        }
        Some(true)
    }

    /// What [`Plain::fits`] answers for a string, a boolean or null.
    fn fits_scalar(&self, item: &crate::flat::Scalar<'_>) -> Option<bool> {
        let node = match self {
            Plain::Bool(fits) => return Some(*fits),
            Plain::Complex => return None,
            Plain::Node(node) => node,
        };
        let bits = match item {
            crate::flat::Scalar::Str(_) => type_bit("string"),
            crate::flat::Scalar::Bool(_) => type_bit("boolean"),
            crate::flat::Scalar::Null => type_bit("null"),
        };
        Some(
            !(node.constant.as_ref().is_some_and(|c| !item.is(c))
                || node
                    .options
                    .as_ref()
                    .is_some_and(|o| !o.iter().any(|v| item.is(v)))
                || node.types & bits == 0),
        )
    }

    /// What [`plain_fits`] answers for the schema this was compiled from.
    pub(crate) fn fits(&self, value: &Value) -> Option<bool> {
        let node = match self {
            Plain::Bool(fits) => return Some(*fits),
            Plain::Complex => return None,
            Plain::Node(node) => node,
        };
        if node.constant.as_ref().is_some_and(|c| c != value)
            || node.options.as_ref().is_some_and(|o| !o.contains(value))
            || node.types & value_bits(value) == 0
        {
            return Some(false);
        }
        match value {
            Value::Object(fields) => {
                let properties = node.properties.as_deref();
                if properties.is_none() && !node.has_additional && !node.has_required {
                    return Some(true);
                }
                if node.required.iter().any(|n| !fields.contains_key(n)) {
                    return Some(false);
                }
                for (key, item) in fields {
                    let Some(sub) = node.rule_for(key) else {
                        return Some(false);
                    };
                    if !sub.fits(item)? {
                        return Some(false);
                    }
                }
                Some(true)
            }
            Value::Array(items) => {
                if node.prefix_items {
                    return None;
                }
                let Some(sub) = &node.items else {
                    return Some(true);
                };
                for item in items {
                    if !sub.fits(item)? {
                        return Some(false);
                    }
                }
                Some(true)
            }
            _ => Some(true),
        }
    }
}

/// Checks `value` against every schema in `all` at once (they all apply: `allOf`, a
/// base with its chosen alternative). The flag says the item's alternatives are chosen.
fn check<'a>(
    root: &'a Value,
    mut all: Vec<(&'a Value, bool)>,
    value: &Value,
    path: &mut String,
    mode: Mode,
) -> Result<(), Miss> {
    // Resolve references and spread allOf.
    let mut i = 0;
    while let Some((schema, chosen)) = all.get(i).copied() {
        let schema = resolve(root, schema);
        if let Some(slot) = all.get_mut(i) {
            *slot = (schema, chosen);
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            all.extend(parts.iter().map(|p| (p, false)));
        }
        i += 1;
    }
    for (schema, _) in &all {
        if !fits_scalar(schema, value) {
            return Err(Miss::Mismatch(path.clone()));
        }
    }
    // Choose among alternatives (oneOf / anyOf) as serde does: the first, in declaration
    // order, whose types, constants and required fields fit (undeclared fields passed
    // over); then judge the arguments against that one alone.
    if let Some(at) = all
        .iter()
        .position(|(s, chosen)| !chosen && alternatives(s).is_some())
    {
        let alts = all
            .get(at)
            .map(|(s, _)| *s)
            .and_then(alternatives)
            .unwrap_or(&[]);
        for alt in alts {
            let mut next = all.clone();
            if let Some(slot) = next.get_mut(at) {
                slot.1 = true;
            }
            next.push((alt, false));
            let mut scratch = path.clone();
            if check(root, next.clone(), value, &mut scratch, Mode::Open).is_ok() {
                return check(root, next, value, path, mode);
            }
        }
        return Err(Miss::Mismatch(path.clone()));
    }
    match value {
        Value::Object(fields) => check_object(root, &all, fields, path, mode),
        Value::Array(items) => check_array(root, &all, items, path, mode),
        _ => Ok(()),
    }
}

fn check_object<'a>(
    root: &'a Value,
    all: &[(&'a Value, bool)],
    fields: &Map<String, Value>,
    path: &mut String,
    mode: Mode,
) -> Result<(), Miss> {
    let shaping = |s: &Value| {
        [
            "properties",
            "additionalProperties",
            "patternProperties",
            "required",
        ]
        .iter()
        .any(|k| s.get(k).is_some())
    };
    if !all.iter().any(|(s, _)| shaping(s)) {
        // Nothing here describes the object's fields (e.g. `serde_json::Value`).
        return Ok(());
    }
    for (schema, _) in all {
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if name.as_str().is_some_and(|n| !fields.contains_key(n)) {
                return Err(Miss::Mismatch(join(
                    path,
                    name.as_str().unwrap_or_default(),
                )));
            }
        }
    }
    for (key, item) in fields {
        let mut inner: Vec<(&Value, bool)> = all
            .iter()
            .filter_map(|(s, _)| s.get("properties")?.get(key))
            .map(|s| (s, false))
            .collect();
        if inner.is_empty() {
            inner = all
                .iter()
                .filter_map(|(s, _)| s.get("patternProperties")?.as_object())
                .flat_map(|patterns| patterns.iter())
                .filter(|(pattern, _)| key_fits(pattern, key))
                .map(|(_, s)| (s, false))
                .collect();
        }
        if inner.is_empty() {
            inner = all
                .iter()
                .filter_map(|(s, _)| s.get("additionalProperties"))
                .filter(|extra| **extra != Value::Bool(false))
                .map(|s| (s, false))
                .collect();
        }
        let len = path.len();
        *path = join(path, key);
        if inner.is_empty() {
            if mode == Mode::Closed {
                return Err(Miss::Undeclared(path.clone()));
            }
        } else {
            check(root, inner, item, path, mode)?;
        }
        path.truncate(len);
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Whether a key fits a `patternProperties` pattern. Only the patterns schemars writes
/// for integer-keyed maps are known; any other pattern fits nothing (fail closed).
fn key_fits(pattern: &str, key: &str) -> bool {
    let digits = |k: &str| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit());
    match pattern {
        "^\\d+$" | "^[0-9]+$" => digits(key),
        "^-?\\d+$" | "^-?[0-9]+$" => digits(key.strip_prefix('-').unwrap_or(key)),
        _ => false,
    }
}

fn check_array<'a>(
    root: &'a Value,
    all: &[(&'a Value, bool)],
    items: &[Value],
    path: &mut String,
    mode: Mode,
) -> Result<(), Miss> {
    for (index, item) in items.iter().enumerate() {
        let inner: Vec<(&Value, bool)> = all
            .iter()
            .filter_map(|(s, _)| {
                s.get("prefixItems")
                    .and_then(|p| p.get(index))
                    .or_else(|| s.get("items"))
            })
            .map(|s| (s, false))
            .collect();
        let len = path.len();
        path.push_str(&format!("[{index}]"));
        check(root, inner, item, path, mode)?;
        path.truncate(len);
    }
    Ok(())
}

fn alternatives(schema: &Value) -> Option<&[Value]> {
    schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
}

/// Follows a local `$ref` (`#/$defs/Name`); anything else is taken as it is.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..32 {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        else {
            break;
        };
        schema = target;
    }
    schema
}

/// The type, `const` and `enum` keywords: enough to tell a tagged variant from another.
fn fits_scalar(schema: &Value, value: &Value) -> bool {
    if *schema == Value::Bool(false) {
        return false;
    }
    if schema
        .get("const")
        .is_some_and(|expected| expected != value)
    {
        return false;
    }
    if schema
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|options| !options.contains(value))
    {
        return false;
    }
    let fits = |name: &str| match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    };
    match schema.get("type") {
        Some(Value::String(name)) => fits(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).any(fits),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn only_a_closed_object_of_fields_without_fields_below_is_flat() {
        let flat = |schema: Value| {
            Plain::compile(&schema)
                .flat_properties()
                .map(|names| names.join(","))
        };
        let closed = |properties: Value| json!({"type": "object", "properties": properties, "additionalProperties": false});
        assert_eq!(
            flat(closed(json!({
                "b": {"type": "string"},
                "a": {"type": ["integer", "null"]},
                "c": {"type": "array", "items": {"type": "boolean"}},
                "d": {"type": "string", "enum": ["x", "y"]},
            }))),
            Some("a,b,c,d".into())
        );
        assert_eq!(flat(closed(json!({}))), Some(String::new()));
        for not_flat in [
            // A field below a field, or a field that may hold one.
            closed(json!({"a": {"type": "object", "properties": {}}})),
            closed(json!({"a": {"type": ["string", "object"]}})),
            closed(json!({"a": {}})),
            closed(json!({"a": true})),
            closed(json!({"a": {"type": "array", "items": {"type": "object"}}})),
            closed(json!({"a": {"type": "array"}})),
            closed(json!({"a": {"type": "array", "prefixItems": [], "items": {"type": "string"}}})),
            closed(json!({"a": {"anyOf": [{"type": "string"}]}})),
            closed(json!({"a": {"$ref": "#/$defs/A"}})),
            // Other properties allowed, or none declared, or not only an object.
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            json!({"type": "object"}),
            json!({"type": ["object", "null"], "properties": {}}),
            json!({"properties": {}}),
            json!(true),
        ] {
            assert_eq!(flat(not_flat.clone()), None, "{not_flat}");
        }
    }

    fn object(entries: std::collections::BTreeMap<String, Value>) -> Value {
        Value::Object(entries.into_iter().collect())
    }

    /// Arguments: small, with keys a schema below may or may not declare.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(|n| json!(n)),
            Just(json!(1.5)),
            "[ab]{0,1}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..3).prop_map(Value::Array),
                btree_map("[a-c]", inner, 0..3).prop_map(object),
            ]
        })
    }

    /// Schemas built from the keywords both checks read, alternatives and all.
    fn schema() -> impl Strategy<Value = Value> {
        let types = prop_oneof![
            Just(json!("object")),
            Just(json!("array")),
            Just(json!("string")),
            Just(json!("boolean")),
            Just(json!("null")),
            Just(json!("integer")),
            Just(json!("number")),
            Just(json!("strange")),
            Just(json!(["string", "null"])),
            Just(json!([])),
            Just(json!([7])),
        ];
        let leaf = prop_oneof![
            Just(json!(true)),
            Just(json!(false)),
            Just(json!({})),
            Just(json!(3)),
            types.prop_map(|t| json!({ "type": t })),
            value().prop_map(|v| json!({ "const": v })),
            vec(value(), 0..3).prop_map(|o| json!({ "enum": o })),
            Just(json!({ "enum": "not an array" })),
            Just(json!({ "$ref": "#/$defs/x" })),
        ];
        leaf.prop_recursive(3, 32, 3, |inner| {
            prop_oneof![
                (
                    proptest::option::of(btree_map("[a-c]", inner.clone(), 0..3)),
                    proptest::option::of(prop_oneof![
                        vec("[a-c]", 0..3).prop_map(|r| json!(r)),
                        Just(json!("a")),
                        Just(json!([1])),
                    ]),
                    proptest::option::of(inner.clone()),
                    any::<bool>(),
                )
                    .prop_map(|(properties, required, extra, typed)| {
                        let mut s = serde_json::Map::new();
                        if typed {
                            s.insert("type".into(), json!("object"));
                        }
                        if let Some(p) = properties {
                            s.insert("properties".into(), object(p));
                        }
                        if let Some(r) = required {
                            s.insert("required".into(), r);
                        }
                        if let Some(e) = extra {
                            s.insert("additionalProperties".into(), e);
                        }
                        Value::Object(s)
                    }),
                (proptest::option::of(inner.clone()), any::<bool>()).prop_map(|(items, prefix)| {
                    let mut s = serde_json::Map::new();
                    if let Some(i) = items {
                        s.insert("items".into(), i);
                    }
                    if prefix {
                        s.insert("prefixItems".into(), json!([]));
                    }
                    Value::Object(s)
                }),
                vec(inner, 1..3).prop_map(|alts| json!({ "anyOf": alts })),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn a_compiled_schema_answers_as_the_schema_itself(schema in schema(), value in value()) {
            prop_assert_eq!(Plain::compile(&schema).fits(&value), plain_fits(&schema, &value));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4_000))]

        /// The fast path may say "ask the full check", never a different answer.
        #[test]
        fn a_fast_answer_agrees_with_the_full_check(schema in schema(), value in value()) {
            if let Some(fits) = plain_fits(&schema, &value) {
                prop_assert_eq!(fits, full_misfit(&schema, &value).is_none());
            }
        }
    }

    #[test]
    fn a_closed_object_without_properties_takes_no_fields() {
        let schema = json!({ "type": "object", "additionalProperties": false });
        for value in [json!({ "x": 1 }), json!({ "a": {} })] {
            assert_eq!(plain_fits(&schema, &value), Some(false), "{value}");
            assert_eq!(Plain::compile(&schema).fits(&value), Some(false), "{value}");
            assert!(full_misfit(&schema, &value).is_some(), "{value}");
        }
        assert_eq!(plain_fits(&schema, &json!({})), Some(true));
    }

    #[test]
    fn every_type_name_against_every_kind_of_value_answers_as_the_schema() {
        let names = [
            "object", "array", "string", "boolean", "null", "integer", "number", "strange",
        ];
        let values = [
            json!({}),
            json!([]),
            json!("s"),
            json!(true),
            json!(null),
            json!(2),
            json!(-2),
            json!(u64::MAX),
            json!(2.5),
        ];
        for name in names {
            for other in names {
                for types in [json!(name), json!([name, other])] {
                    let schema = json!({ "type": types });
                    for value in &values {
                        assert_eq!(
                            Plain::compile(&schema).fits(value),
                            plain_fits(&schema, value),
                            "{schema} {value}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_compiled_check_refuses_what_the_schema_refuses() {
        let schema = json!({
            "type": "object",
            "properties": { "key": { "type": "string" }, "n": { "type": "integer" } },
            "required": ["key"]
        });
        let plain = Plain::compile(&schema);
        for (value, fits) in [
            (json!({ "key": "k" }), true),
            (json!({ "key": "k", "n": 2 }), true),
            (json!({ "key": "k", "n": 2.5 }), false),
            (json!({ "key": "k", "confirmed": true }), false),
            (json!({ "n": 2 }), false),
            (json!(["k"]), false),
        ] {
            assert_eq!(plain.fits(&value), Some(fits), "{value}");
            assert_eq!(
                misfit_compiled(&plain, &schema, &value).is_none(),
                fits,
                "{value}"
            );
        }
    }
}
