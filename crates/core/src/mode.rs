//! Modes: who is at the page, and so what "ask" can mean right now.

use serde::{Deserialize, Serialize};

named! {
    /// The session's mode. Every decision records the mode that made it.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Mode as "The mode's name as audit records write it." {
        /// A person is at the page: the resolved policy applies as declared.
        #[default]
        Default = "default",
        /// Nobody is there: what would ask or hand off is refused; the rest, grants included, runs.
        Away = "away",
        /// Evaluation runs: `Ask` is auto-approved (and recorded); `AskAlways` and handoffs refused.
        Unattended = "unattended",
        /// Development only: approvals are skipped (loudly, in the UI and the audit).
        /// Handoffs are never turned into automatic runs, and an action's own denials hold.
        Bypass = "bypass",
    }
}
