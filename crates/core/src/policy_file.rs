//! The deployment's policy file: roles, the scopes each holds, and per-role overrides
//! of an action's kind and confirm. The level belongs to the deployment, not the code.
//!
//! ```json
//! {
//!   "roles": {
//!     "viewer": { "scopes": ["workspace.read"],
//!                 "overrides": { "save_workspace_name": { "confirm": "always" } } },
//!     "admin":  { "scopes": ["workspace.read", "workspace.write", "workspace.admin"],
//!                 "overrides": { "save_workspace_name": { "confirm": "off" } } }
//!   }
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::policy::{ApprovalPolicy, Confirm, Kind};

/// The largest policy file accepted, in bytes.
pub const MAX_POLICY_BYTES: usize = 256 * 1024;

/// A parsed policy file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Role name → what the role holds.
    pub roles: BTreeMap<String, RolePolicy>,
}

/// What one role holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolePolicy {
    /// The scopes the role holds.
    #[serde(default)]
    pub scopes: BTreeSet<String>,
    /// Action id → how this role's calls of it are gated.
    #[serde(default)]
    pub overrides: BTreeMap<String, Override>,
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

impl PolicyFile {
    /// Parses a policy file written in JSON. Unknown fields, unknown kinds or confirms,
    /// empty role names and oversized files are refused, naming the line.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(PolicyError {
                line: 0,
                column: 0,
                message: format!(
                    "the file is {} bytes, over the limit of {MAX_POLICY_BYTES}",
                    text.len()
                ),
            });
        }
        let file: PolicyFile = serde_json::from_str(text).map_err(|e| PolicyError {
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
            return Err(PolicyError {
                line: 0,
                column: 0,
                message: format!("role name `{bad}` is empty"),
            });
        }
        Ok(file)
    }

    /// The scopes `role` holds (none for a role the file does not name).
    pub fn scopes(&self, role: &str) -> BTreeSet<String> {
        self.roles
            .get(role)
            .map(|r| r.scopes.clone())
            .unwrap_or_default()
    }

    /// The policy `role`'s calls of `action` get, given the declaration.
    pub fn resolve(
        &self,
        role: &str,
        action: &str,
        kind: Kind,
        confirm: Confirm,
    ) -> ApprovalPolicy {
        let o = self
            .roles
            .get(role)
            .and_then(|r| r.overrides.get(action))
            .copied()
            .unwrap_or_default();
        ApprovalPolicy::resolve(o.kind.unwrap_or(kind), o.confirm.unwrap_or(confirm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{
  "roles": {
    "viewer": { "scopes": ["workspace.read"],
                "overrides": { "save_workspace_name": { "confirm": "always" } } },
    "admin":  { "scopes": ["workspace.read", "workspace.write"],
                "overrides": { "save_workspace_name": { "confirm": "off" } } }
  }
}"#;

    #[test]
    fn the_same_action_gets_a_different_level_per_role() {
        let file = PolicyFile::from_json(EXAMPLE).unwrap();
        let resolve = |role| file.resolve(role, "save_workspace_name", Kind::Write, Confirm::Ask);
        assert_eq!(resolve("viewer"), ApprovalPolicy::AskAlways);
        assert_eq!(resolve("admin"), ApprovalPolicy::None);
        assert_eq!(
            resolve("guest"),
            ApprovalPolicy::Ask,
            "no override: the declaration"
        );
        assert!(file.scopes("viewer").contains("workspace.read"));
        assert!(file.scopes("guest").is_empty());
    }

    #[test]
    fn a_malformed_file_is_refused_naming_the_line() {
        let cases = [
            ("{\n  \"roles\": {\n    \"viewer\": { \"scope\": [] }\n  }\n}", 3, "unknown field `scope`"),
            ("{\n  \"roles\": {\n    \"viewer\": { \"overrides\": { \"x\": { \"confirm\": \"maybe\" } } }\n  }\n}", 3, "unknown variant `maybe`"),
            ("{\n  \"roles\": [\n", 2, "invalid type"),
            ("{\"roles\": {\"a\": {}},}", 1, "trailing comma"),
        ];
        for (text, line, needle) in cases {
            let e = PolicyFile::from_json(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(needle), "{e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("policy file, line {line}")),
                "{e}"
            );
        }
        assert!(PolicyFile::from_json(r#"{"roles":{" ":{}}}"#).is_err());
        assert!(PolicyFile::from_json(&" ".repeat(MAX_POLICY_BYTES + 1)).is_err());
    }
}
