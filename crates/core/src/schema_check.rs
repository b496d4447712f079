//! The second guard against unknown fields: arguments checked against the model's schema as if
//! every object said `additionalProperties: false` (serde misses some in enums, beside `flatten`).

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

/// Why the arguments do not fit the schema the model was shown, if they do not.
pub(crate) fn misfit(schema: &Value, value: &Value) -> Option<String> {
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
            crate::codes::quote(&at, 64)
        )),
        Err(Miss::Mismatch(at)) if at.is_empty() => {
            Some("the arguments do not match the declared params".to_owned())
        }
        Err(Miss::Mismatch(at)) => Some(format!(
            "{} does not match the declared params",
            crate::codes::quote(&at, 64)
        )),
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
    // Choose among alternatives (oneOf / anyOf) as serde does: the first whose types,
    // constants and required fields fit; then judge the arguments against it alone.
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
    // schemars writes a struct without fields as a bare `"type": "object"`: it declares
    // no field. Only a schema that says nothing of objects takes any (`serde_json::Value`).
    let an_object = |s: &Value| match s.get("type") {
        Some(Value::String(name)) => name == "object",
        Some(Value::Array(names)) => names.iter().any(|n| n == "object"),
        _ => false,
    };
    if !all.iter().any(|(s, _)| shaping(s) || an_object(s)) {
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
        // `deny_unknown_fields` refuses an undeclared field even while an alternative is chosen.
        let closed = mode == Mode::Closed
            || all
                .iter()
                .any(|(s, _)| s.get("additionalProperties") == Some(&Value::Bool(false)));
        if inner.is_empty() {
            if closed {
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

pub(crate) fn alternatives(schema: &Value) -> Option<&[Value]> {
    schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
}

/// Follows a local `$ref` (`#/$defs/Name`); anything else is taken as it is.
pub(crate) fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
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
    let typed = match schema.get("type") {
        Some(Value::String(name)) => fits(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).any(fits),
        _ => true,
    };
    typed && within_limits(schema, value)
}

/// Whether a number or string is within the limits schemars writes for serde's own (an
/// integer's `format`, `minimum`, `maximum`; a `char`'s length). INVARIANT: serde refuses a
/// value outside them, going on to an untagged enum's next alternative; so must this check.
fn within_limits(schema: &Value, value: &Value) -> bool {
    let limit = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(n) = value.as_f64() {
        let below = |key| limit(key).is_some_and(|m| n < m);
        let above = |key| limit(key).is_some_and(|m| n > m);
        let at = |key| limit(key).is_some_and(|m| n == m);
        if below("minimum") || above("maximum") {
            return false;
        }
        if below("exclusiveMinimum") || at("exclusiveMinimum") {
            return false;
        }
        if above("exclusiveMaximum") || at("exclusiveMaximum") {
            return false;
        }
        let whole = value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from));
        let range = match schema.get("format").and_then(Value::as_str) {
            Some("int8") => Some((i128::from(i8::MIN), i128::from(i8::MAX))),
            Some("int16") => Some((i128::from(i16::MIN), i128::from(i16::MAX))),
            Some("int32") => Some((i128::from(i32::MIN), i128::from(i32::MAX))),
            Some("int64") => Some((i128::from(i64::MIN), i128::from(i64::MAX))),
            Some("int") => Some((isize::MIN as i128, isize::MAX as i128)),
            Some("uint8") => Some((0, i128::from(u8::MAX))),
            Some("uint16") => Some((0, i128::from(u16::MAX))),
            Some("uint32") => Some((0, i128::from(u32::MAX))),
            Some("uint64") => Some((0, i128::from(u64::MAX))),
            Some("uint") => Some((0, usize::MAX as i128)),
            _ => None,
        };
        if let Some((low, high)) = range {
            return whole.is_some_and(|w| (low..=high).contains(&w));
        }
        // INVARIANT: a float field holds exactly the number the card shows: no integer
        // it would round, no value it would overflow to infinity.
        match schema.get("format").and_then(Value::as_str) {
            Some("float") if n.abs() > f64::from(f32::MAX) => return false,
            Some("float") => return whole.is_none_or(|w| (w as f32) as i128 == w),
            Some("double") => return whole.is_none_or(|w| (w as f64) as i128 == w),
            _ => {}
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as f64;
        if limit("minLength").is_some_and(|m| length < m)
            || limit("maxLength").is_some_and(|m| length > m)
        {
            return false;
        }
    }
    true
}
