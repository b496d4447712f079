//! The deployment's policy file: roles, the scopes each holds, and per-role overrides
//! of an action's kind and confirm. The level belongs to the deployment, not the code.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::policy::{ApprovalPolicy, Confirm, Kind};

/// The largest policy file accepted, in bytes.
pub const MAX_POLICY_BYTES: usize = 256 * 1024;

/// A parsed policy file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Role name → what the role holds. A name given twice is refused.
    #[serde(deserialize_with = "unique_keys")]
    pub roles: BTreeMap<String, RolePolicy>,
    /// The role for a session whose role the file does not name. Without it such a
    /// session is refused, never given the code's declared levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_role: Option<String>,
    /// What the gate does after the assistant reads untrusted content.
    #[serde(default, skip_serializing_if = "Untrusted::is_default")]
    pub untrusted: Untrusted,
    /// (role, action) → the line of that override, for decisions' reasons.
    #[serde(skip)]
    lines: BTreeMap<(String, String), usize>,
}

/// What one role holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolePolicy {
    /// The scopes the role holds.
    #[serde(default)]
    pub scopes: BTreeSet<String>,
    /// Action id → how this role's calls of it are gated. An action given twice is refused.
    #[serde(default, deserialize_with = "unique_keys")]
    pub overrides: BTreeMap<String, Override>,
}

/// Deserialises a map, refusing a key given twice (serde's maps keep the last silently).
fn unique_keys<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Unique<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Unique<V> {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if out.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!("`{key}` is given twice")));
                }
                let value = map.next_value()?;
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Unique(std::marker::PhantomData))
}

/// The deployment's word on what [`returns_untrusted`](crate::Action::returns_untrusted)
/// actions return: `{"trust": ["read_team_notes"], "ask_always": true}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Untrusted {
    /// Actions whose results it trusts (its own people's words): reading them raises nothing.
    #[serde(default)]
    pub trust: BTreeSet<String>,
    /// After untrusted content, ask each `Write` or `Danger` call every time, not one level higher.
    #[serde(default)]
    pub ask_always: bool,
}

impl Untrusted {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A per-role override of an action's declaration. Unset fields keep the declaration's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// The kind to use instead of the declared one.
    #[serde(default)]
    pub kind: Option<Kind>,
    /// The confirm to use instead of the declared one.
    #[serde(default)]
    pub confirm: Option<Confirm>,
    /// `"passkey"`: this role's calls are countersigned only with the person's passkey.
    /// An action whose run takes no countersignature is then refused (`NOT_COUNTERSIGNED`).
    #[serde(default)]
    pub presence: Option<crate::countersignature::Presence>,
}

/// Why a policy file was refused: the line and column (from 1) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy file, line {line}, column {column}: {message}")]
pub struct PolicyError {
    /// The line, from 1 (0 when the problem is not at one place).
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl PolicyError {
    pub(crate) fn whole(message: String) -> Self {
        Self {
            line: 0,
            column: 0,
            message,
        }
    }
}

impl PolicyFile {
    /// Parses a policy file written in JSON. Unknown fields, unknown kinds or confirms,
    /// empty role names and oversized files are refused, naming the line.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(PolicyError::whole(format!(
                "the file is {} bytes, over the limit of {MAX_POLICY_BYTES}",
                text.len()
            )));
        }
        let mut file: PolicyFile = serde_json::from_str(text).map_err(|e| PolicyError {
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        })?;
        if let Some(bad) = file.roles.keys().find(|r| r.trim().is_empty()) {
            return Err(PolicyError::whole(format!("role name `{bad}` is empty")));
        }
        if let Some(default) = &file.default_role {
            if !file.roles.contains_key(default) {
                let message =
                    format!("`default_role` names `{default}`, which is not a role of the file");
                return Err(PolicyError {
                    line: key_lines(text)
                        .into_iter()
                        .find(|(path, _)| *path == ["default_role"])
                        .map_or(0, |(_, line)| line),
                    ..PolicyError::whole(message)
                });
            }
        }
        // Inserted one by one: `collect` into a map brings a sort routine into the page.
        for (path, line) in key_lines(text) {
            if let [roles, role, overrides, action] = path.as_slice() {
                if roles == "roles" && overrides == "overrides" {
                    file.lines.insert((role.clone(), action.clone()), line);
                }
            }
        }
        Ok(file)
    }

    /// The file's role for a session of `role`: its own, else `default_role`, else none.
    pub fn role_for<'a>(&'a self, role: &'a str) -> Option<(&'a str, &'a RolePolicy)> {
        if let Some(policy) = self.roles.get(role) {
            return Some((role, policy));
        }
        let default = self.default_role.as_deref()?;
        self.roles.get(default).map(|policy| (default, policy))
    }

    /// The presence asked of `role`'s calls of `action`: `Click` unless overridden.
    pub fn presence(&self, role: &str, action: &str) -> crate::countersignature::Presence {
        self.role_for(role)
            .and_then(|(_, r)| r.overrides.get(action))
            .and_then(|o| o.presence)
            .unwrap_or_default()
    }

    /// The level `role`'s calls of `action` get, and the override (role, line) that set it.
    pub fn level(
        &self,
        role: &str,
        action: &str,
        kind: Kind,
        confirm: Confirm,
    ) -> (ApprovalPolicy, Option<(String, usize)>) {
        let found = self
            .role_for(role)
            .and_then(|(name, r)| r.overrides.get(action).map(|o| (name, *o)));
        match found {
            Some((name, o)) => {
                let line = self
                    .lines
                    .get(&(name.to_owned(), action.to_owned()))
                    .copied()
                    .unwrap_or(0);
                (
                    ApprovalPolicy::resolve(o.kind.unwrap_or(kind), o.confirm.unwrap_or(confirm)),
                    Some((name.to_owned(), line)),
                )
            }
            None => (ApprovalPolicy::resolve(kind, confirm), None),
        }
    }
}

/// Every object key of a (valid) JSON text with its path and line, in order.
fn key_lines(text: &str) -> Vec<(Vec<String>, usize)> {
    // Each open container: whether it is an object, and its current key.
    let mut stack: Vec<(bool, Option<String>)> = Vec::new();
    let mut out = Vec::new();
    let mut line = 1;
    let mut expect_key = false;
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            '{' => {
                stack.push((true, None));
                expect_key = true;
            }
            '[' => {
                stack.push((false, None));
                expect_key = false;
            }
            '}' | ']' => {
                stack.pop();
                expect_key = false;
            }
            ',' => expect_key = stack.last().is_some_and(|(object, _)| *object),
            ':' => expect_key = false,
            '"' => {
                let mut end = start + 1;
                let mut escaped = false;
                for (i, c) in chars.by_ref() {
                    end = i;
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => {}
                    }
                }
                if expect_key {
                    let key: String = text
                        .get(start..=end)
                        .and_then(|raw| serde_json::from_str(raw).ok())
                        .unwrap_or_default();
                    if let Some(top) = stack.last_mut() {
                        top.1 = Some(key);
                    }
                    let path = stack.iter().filter_map(|(_, k)| k.clone()).collect();
                    out.push((path, line));
                }
            }
            _ => {}
        }
    }
    out
}
