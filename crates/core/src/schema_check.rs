//! The second guard against unknown fields: the arguments checked against the JSON Schema
//! the model was shown, as if every object in it said `additionalProperties: false`.
//!
//! serde (with `serde_ignored`) refuses unknown fields in plain structs, but not inside
//! internally tagged or untagged enums, nor beside `#[serde(flatten)]`: those buffer the
//! object and drop what no variant wants. The schema knows every field each shape may
//! have, so a field it does not declare is refused whatever serde did with it.

use serde_json::{Map, Value};

/// Where the arguments left the schema.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    /// A field no schema in force declares, at this path.
    Undeclared(String),
    /// The value's type or constant does not fit (used to pick among alternatives).
    Mismatch,
}

/// The path of the first field in `value` that the schema does not declare, if any.
pub(crate) fn undeclared_field(schema: &Value, value: &Value) -> Option<String> {
    let mut path = String::new();
    match check(schema, vec![(schema, false)], value, &mut path) {
        Err(Miss::Undeclared(at)) => Some(at),
        // serde accepted the value, so a type the schema words differently is not ours
        // to refuse; only undeclared fields are.
        Ok(()) | Err(Miss::Mismatch) => None,
    }
}

/// Checks `value` against every schema in `all` at once (they all apply: `allOf`, a
/// base with its chosen alternative). The flag says the item's alternatives are chosen.
fn check<'a>(
    root: &'a Value,
    mut all: Vec<(&'a Value, bool)>,
    value: &Value,
    path: &mut String,
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
        fits_scalar(schema, value)?;
    }
    // Choose among alternatives (oneOf / anyOf) one item at a time.
    if let Some(at) = all
        .iter()
        .position(|(s, chosen)| !chosen && alternatives(s).is_some())
    {
        let alts = all
            .get(at)
            .map(|(s, _)| *s)
            .and_then(alternatives)
            .unwrap_or(&[]);
        let mut first: Option<Miss> = None;
        for alt in alts {
            let mut next = all.clone();
            if let Some(slot) = next.get_mut(at) {
                slot.1 = true;
            }
            next.push((alt, false));
            let mut here = path.clone();
            match check(root, next, value, &mut here) {
                Ok(()) => return Ok(()),
                Err(miss @ Miss::Undeclared(_)) if !matches!(first, Some(Miss::Undeclared(_))) => {
                    first = Some(miss)
                }
                Err(miss) => {
                    first.get_or_insert(miss);
                }
            }
        }
        return Err(first.unwrap_or(Miss::Mismatch));
    }
    match value {
        Value::Object(fields) => check_object(root, &all, fields, path),
        Value::Array(items) => check_array(root, &all, items, path),
        _ => Ok(()),
    }
}

fn check_object<'a>(
    root: &'a Value,
    all: &[(&'a Value, bool)],
    fields: &Map<String, Value>,
    path: &mut String,
) -> Result<(), Miss> {
    let shaping = |s: &Value| {
        ["properties", "additionalProperties", "patternProperties"]
            .iter()
            .any(|k| s.get(k).is_some())
    };
    if !all.iter().any(|(s, _)| shaping(s)) {
        // Nothing here describes the object's fields (e.g. `serde_json::Value`).
        return Ok(());
    }
    let open = all
        .iter()
        .any(|(s, _)| s.get("patternProperties").is_some());
    for (key, item) in fields {
        let mut inner: Vec<(&Value, bool)> = all
            .iter()
            .filter_map(|(s, _)| s.get("properties")?.get(key))
            .map(|s| (s, false))
            .collect();
        if inner.is_empty() {
            inner = all
                .iter()
                .filter_map(|(s, _)| s.get("additionalProperties"))
                .filter(|extra| **extra != Value::Bool(false))
                .map(|s| (s, false))
                .collect();
        }
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        if inner.is_empty() && !open {
            return Err(Miss::Undeclared(path.clone()));
        }
        check(root, inner, item, path)?;
        path.truncate(len);
    }
    Ok(())
}

fn check_array<'a>(
    root: &'a Value,
    all: &[(&'a Value, bool)],
    items: &[Value],
    path: &mut String,
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
        check(root, inner, item, path)?;
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
fn fits_scalar(schema: &Value, value: &Value) -> Result<(), Miss> {
    if *schema == Value::Bool(false) {
        return Err(Miss::Mismatch);
    }
    if let Some(expected) = schema.get("const") {
        if expected != value {
            return Err(Miss::Mismatch);
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            return Err(Miss::Mismatch);
        }
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
    let ok = match schema.get("type") {
        Some(Value::String(name)) => fits(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).any(fits),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(Miss::Mismatch)
    }
}
