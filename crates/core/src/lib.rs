#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), warn(clippy::print_stdout))]

#[macro_use]
mod named;

pub mod action;
mod alternatives;
mod arguments;
pub mod audit;
pub mod call;
mod canonical;
mod codes;
pub mod countersignature;
mod digest;
pub mod edit;
pub mod executor;
mod grant_rule;
pub mod handoff;
mod mode;
pub mod outcome;
pub mod policy;
mod preview;
mod projection;
pub mod question;
pub mod reason;
pub mod relay;
mod reveal;
mod schema_check;
pub mod ticket;
mod time;

/// Text as a person reads it: characters that hide or mislead shown, and diffs.
pub mod text {
    pub use crate::codes::quote;
    pub use crate::grant_rule::has_dot_segment;
    pub use crate::preview::{line_diff, Preview};
    pub use crate::reveal::{is_bidi_control, is_format_char, reveal, reveal_name, Revealed};
}

/// What the model is shown: tools as JSON Schema, in the OpenAI wire format.
pub mod wire {
    pub use crate::projection::{openai_tools, ToolAnnotations, ToolSpec};
}

pub use action::{Action, Verdict};
pub use audit::{AuditRecord, AuditSink, MemoryAudit};
pub use call::{Call, CallId, Caller, Session};
pub use executor::{Config, Executor, Step};
pub use handoff::{Expect, Handoff};
pub use mode::Mode;
pub use outcome::{Code, Outcome, Settled};
pub use policy::{Confirm, Kind};
pub use question::Question;
pub use reason::Reason;
pub use ticket::{ApprovalRequest, Blocked, Gesture, Grant, Ticket};
pub use time::Timestamp;

// Re-exported so declarations need no direct dependency on these crates' versions.
pub use schemars;
pub use serde_json;

// The workspace README's examples are compiled and run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadme;
