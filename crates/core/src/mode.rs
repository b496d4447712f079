//! Modes: who is at the page, and so what "ask" can mean right now.

use serde::{Deserialize, Serialize};

/// The session's mode. Every decision records the mode that made it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A person is at the page: the resolved policy applies as declared.
    #[default]
    Default,
    /// Nobody is there: what would ask or hand off is refused; the rest, grants included, runs.
    Away,
    /// Evaluation runs: `Ask` is auto-approved (and recorded); `AskAlways` and handoffs refused.
    Unattended,
    /// Development only: approvals are skipped (loudly, in the UI and the audit).
    /// Handoffs are never turned into automatic runs, and an action's own denials hold.
    Bypass,
}

impl Mode {
    /// The mode's name as audit records write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Away => "away",
            Mode::Unattended => "unattended",
            Mode::Bypass => "bypass",
        }
    }
}
