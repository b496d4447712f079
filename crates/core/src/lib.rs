#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), warn(clippy::print_stdout))]

mod action;
mod arguments;
mod audit;
mod call;
mod countersignature;
mod digest;
mod edit;
mod executor;
mod grant_rule;
mod handoff;
mod mode;
mod outcome;
mod policy;
mod policy_file;
mod preview;
mod projection;
mod question;
mod reason;
mod reveal;
mod schema_check;
mod ticket;
mod time;

pub use action::{Action, LocalBoxFuture, NoParams, Rewrite, Verdict};
pub use arguments::DEFAULT_MAX_ARGUMENT_BYTES;
pub use audit::{
    AuditEvent, AuditRecord, AuditSink, Decider, Dropped, MemoryAudit,
    DEFAULT_MEMORY_AUDIT_CAPACITY,
};
pub use call::{is_traceparent, Call, CallId, Caller, Session};
pub use countersignature::{ApprovedBy, Countersignature, Countersigner, MintRequest, Presence};
pub use digest::{ArgsDigest, AuditKey, BadDigest};
pub use edit::{EditDiff, EditError, FieldChange};
pub use executor::{
    Completion, Config, Executor, HandoffView, Job, Pending, RegisterError, Registration, Step,
    DEFAULT_APPROVAL_TIMEOUT, MAX_ACTION_ID_LEN,
};
pub use grant_rule::{has_dot_segment, GrantRule, Matcher};
pub use handoff::{
    Expect, Handoff, HandoffMachine, HandoffState, HandoffStep, DEFAULT_HANDOFF_TIMEOUT,
};
pub use mode::Mode;
pub use outcome::{Code, DoneBy, Outcome, Receipt, Refusal, RetryHint, Settled, Stage};
pub use policy::{ApprovalPolicy, Confirm, Kind};
pub use policy_file::{Override, PolicyError, PolicyFile, RolePolicy, MAX_POLICY_BYTES};
pub use preview::{line_diff, Preview};
pub use projection::{openai_tools, ToolAnnotations, ToolSpec};
pub use question::{AnswerError, Question, QuestionView, DEFAULT_QUESTION_TIMEOUT};
pub use reason::{CardChange, Control, Hook, Level, LevelSource, Reason, RestoreMiss};
pub use reveal::{is_bidi_control, is_format_char, reveal, reveal_name, Revealed};
pub use ticket::{
    ApprovalRequest, CardDigest, Gesture, Grant, GrantBasis, GrantId, Blocked, RestoreError,
    Ticket, TicketError,
};
pub use time::Timestamp;

// Re-exported so declarations need no direct dependency on these crates' versions.
pub use schemars;
pub use serde_json;

// The workspace README's examples are compiled and run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadme;
