//! Alternatives the JSON alone cannot tell apart: the card could show one variant of an
//! untagged enum while `run` receives another, so such params are refused at registration.

use serde_json::Value;

use crate::schema_check::{alternatives, resolve};

const OBJECT: u8 = 1;
const ALL: u8 = 0x7f;

/// Why `root` (an action's params schema) offers alternatives that overlap, if it does.
pub(crate) fn ambiguity(root: &Value) -> Option<String> {
    walk(root, root, &mut Vec::new())
}

fn walk<'a>(root: &'a Value, schema: &'a Value, seen: &mut Vec<usize>) -> Option<String> {
    let schema = resolve(root, schema);
    // Each schema once: recursive types refer back to their own definitions.
    let at = std::ptr::from_ref(schema) as usize;
    if seen.contains(&at) {
        return None;
    }
    seen.push(at);
    if let Some(alts) = alternatives(schema) {
        for (i, a) in alts.iter().enumerate() {
            for b in alts.iter().skip(i + 1) {
                if !apart(root, a, b) {
                    return Some(format!(
                        "two alternatives accept the same arguments ({} and {}); tag the enum, or give each variant a field of its own and `#[serde(deny_unknown_fields)]`",
                        name(root, a),
                        name(root, b)
                    ));
                }
            }
        }
    }
    let object = schema.as_object()?;
    let nested = ["properties", "patternProperties", "$defs"]
        .iter()
        .filter_map(|k| object.get(*k)?.as_object())
        .flat_map(|m| m.values());
    let listed = ["allOf", "anyOf", "oneOf", "prefixItems"]
        .iter()
        .filter_map(|k| object.get(*k)?.as_array())
        .flatten();
    let single = ["items", "additionalProperties"]
        .iter()
        .filter_map(|k| object.get(*k));
    nested
        .chain(listed)
        .chain(single)
        .find_map(|sub| walk(root, sub, seen))
}

/// A short name for an alternative in the error: its title, its `$ref`, or its types.
fn name(root: &Value, schema: &Value) -> String {
    let resolved = resolve(root, schema);
    let titled = resolved.get("title").and_then(Value::as_str);
    let referred = schema.get("$ref").and_then(Value::as_str);
    match titled.or(referred) {
        Some(text) => format!("`{}`", text.trim_start_matches("#/$defs/")),
        None => {
            let bits = types(root, schema, 0);
            let names = [
                "object", "array", "string", "boolean", "null", "integer", "number",
            ];
            let named: Vec<&str> = names
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, n)| *n)
                .collect();
            format!("a `{}`", named.join(" or "))
        }
    }
}

/// Whether no JSON value is accepted by both alternatives.
fn apart(root: &Value, a: &Value, b: &Value) -> bool {
    let (a, b) = (own(root, a), own(root, b));
    let shared = types(root, a, 0) & types(root, b, 0);
    if shared == 0 {
        return true;
    }
    if let (Some(x), Some(y)) = (constants(a), constants(b)) {
        if x.iter().all(|v| !y.contains(v)) {
            return true;
        }
    }
    if shared != OBJECT {
        return false;
    }
    // A field both require, whose values tell them apart.
    let tagged = required(a).any(|key| {
        if !required(b).any(|k| k == key) {
            return false;
        }
        let tag = |s: &Value| s.get("properties")?.get(key).and_then(constants);
        matches!((tag(a), tag(b)), (Some(x), Some(y)) if x.iter().all(|v| !y.contains(v)))
    });
    tagged || shuts_out(a, b) || shuts_out(b, a)
}

/// The schema itself, or what its `$ref` names when it says nothing else of its own
/// (schemars puts a tag's `properties` beside a newtype variant's `$ref`).
fn own<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let words = [
        "type",
        "properties",
        "required",
        "const",
        "enum",
        "anyOf",
        "oneOf",
    ];
    if words.iter().any(|k| schema.get(*k).is_some()) {
        schema
    } else {
        resolve(root, schema)
    }
}

/// Whether `closed` declares no other fields and `other` requires one it does not declare.
fn shuts_out(closed: &Value, other: &Value) -> bool {
    let declared = |key: &str| closed.get("properties").and_then(|p| p.get(key)).is_some();
    // Fields it takes from elsewhere (`allOf`, `$ref`) are not read here: not closed then.
    let elsewhere = ["patternProperties", "allOf", "$ref"];
    closed.get("additionalProperties") == Some(&Value::Bool(false))
        && elsewhere.iter().all(|k| closed.get(*k).is_none())
        && required(other).any(|key| !declared(key))
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    let names = schema.get("required").and_then(Value::as_array);
    names.into_iter().flatten().filter_map(Value::as_str)
}

/// The values a schema allows, when it names them (`const`, `enum`).
fn constants(schema: &Value) -> Option<Vec<Value>> {
    if let Some(value) = schema.get("const") {
        return Some(vec![value.clone()]);
    }
    schema.get("enum").and_then(Value::as_array).cloned()
}

/// The JSON types a schema may accept, as bits (an integer is a number too).
fn types(root: &Value, schema: &Value, depth: u8) -> u8 {
    let schema = resolve(root, schema);
    let bit = |name: &str| match name {
        "object" => OBJECT,
        "array" => 2,
        "string" => 4,
        "boolean" => 8,
        "null" => 16,
        "integer" => 32,
        "number" => 64 | 32,
        _ => ALL,
    };
    let value_bits = |v: &Value| match v {
        Value::Object(_) => OBJECT,
        Value::Array(_) => 2,
        Value::String(_) => 4,
        Value::Bool(_) => 8,
        Value::Null => 16,
        Value::Number(_) => 64 | 32,
    };
    if depth > 16 {
        return ALL;
    }
    match schema {
        Value::Bool(false) => return 0,
        Value::Object(_) => {}
        _ => return ALL,
    }
    if let Some(named) = schema.get("type") {
        return match named {
            Value::String(name) => bit(name),
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .map(bit)
                .fold(0, |a, b| a | b),
            _ => ALL,
        };
    }
    if let Some(values) = constants(schema) {
        return values.iter().map(value_bits).fold(0, |a, b| a | b);
    }
    if let Some(alts) = alternatives(schema) {
        return alts
            .iter()
            .map(|s| types(root, s, depth + 1))
            .fold(0, |a, b| a | b);
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        return parts
            .iter()
            .map(|s| types(root, s, depth + 1))
            .fold(ALL, |a, b| a & b);
    }
    let object_words = [
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
    ];
    if object_words.iter().any(|k| schema.get(*k).is_some()) {
        return OBJECT;
    }
    if schema.get("items").is_some() || schema.get("prefixItems").is_some() {
        return 2;
    }
    ALL
}
