//! Policy: risk kinds, confirm overrides, the fixed table, the policy file, the pure decision.

mod decide;
mod file;

use serde::{Deserialize, Serialize};

pub(crate) use decide::floor;
pub use decide::{decide, Decision, Facts};
pub use file::{Override, PolicyError, PolicyFile, RolePolicy, MAX_POLICY_BYTES};

/// An action's risk, as its declaration states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Reads state; changes nothing.
    Read,
    /// Changes state in a way that can be changed back.
    Write,
    /// Changes state in a way that is costly or impossible to undo.
    Danger,
}

/// The declaration's override of the kind's default approval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirm {
    /// No override: the kind decides.
    #[default]
    Unset,
    /// `confirm: true`: ask the person; "always allow this session" is offered.
    Ask,
    /// `confirm: "always"`: ask the person every time; nothing is remembered.
    Always,
    /// `confirm: false`: no approval gate. The declaration asserts that the action
    /// is authorised independently; audit records carry `confirm: off`.
    Off,
}

named! {
    /// What the executor requires before an action may run, resolved from kind and confirm.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ApprovalPolicy as "The policy's name as audit records write it." {
        /// Runs without asking.
        None = "none",
        /// Asks the person; "always allow this session" may be granted.
        Ask = "ask",
        /// Asks the person every time; no grant ever covers it.
        AskAlways = "ask_always",
    }
}

impl ApprovalPolicy {
    /// Resolves the policy from the fixed table (the workspace README's "The gate").
    pub const fn resolve(kind: Kind, confirm: Confirm) -> Self {
        match (kind, confirm) {
            (_, Confirm::Off) => Self::None,
            (_, Confirm::Always) => Self::AskAlways,
            (Kind::Danger, Confirm::Unset | Confirm::Ask) => Self::AskAlways,
            (Kind::Read | Kind::Write, Confirm::Ask) => Self::Ask,
            (Kind::Read | Kind::Write, Confirm::Unset) => Self::None,
        }
    }

    /// Whether the person may be offered "always allow this session" (only for `Ask`).
    pub const fn offers_session_grant(self) -> bool {
        matches!(self, Self::Ask)
    }
}
