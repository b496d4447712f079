//! What the dock renders: read-only signals for components, and the crate's writer
//! behind them (only the runtime changes them, after each executor step).

use countersign::{
    executor::HandoffView, ticket::GrantId, ApprovalRequest, Code, Grant, Mode, Reason,
};
use leptos::prelude::*;

/// One entry in the dock's conversation log.
#[derive(Clone, Debug, PartialEq)]
pub enum LogEntry {
    /// What the person typed.
    User(String),
    /// What the assistant answered.
    Assistant(String),
    /// How an action call ended.
    Outcome {
        /// The action id.
        action: String,
        /// The action's title, if it is registered.
        title: String,
        /// `None` for done, else the refusal code.
        code: Option<Code>,
    },
    /// An error (model unreachable, bad reply, a gateway refusal), shown as an error.
    Error(String),
    /// Something the dock tells the person that is not an error: a retry under way,
    /// older messages left out, the offline assistant taking over.
    Notice(String),
}

/// A call the gate let through without a card, and why (the decision's reason).
#[derive(Clone, Debug, PartialEq)]
pub struct Activity {
    /// The executor's call number (as audit records write it).
    pub call: u64,
    /// The action id.
    pub action: String,
    /// The action's title.
    pub title: String,
    /// Why no card was needed: the level, a grant or remembered rule, or the mode.
    pub reason: Reason,
    /// The grant that allowed it, if one did (it can be revoked from the list).
    pub grant: Option<GrantId>,
    /// Who asked for it.
    pub caller: countersign::Caller,
}

/// The dock's reactive state, read-only: the runtime updates it after every executor
/// step. Render your own dock from it, or observe it in tests.
#[derive(Clone, Copy, Debug)]
pub struct DockState {
    /// Pending approval cards, oldest first.
    pub approvals: ReadSignal<Vec<ApprovalRequest>>,
    /// Handoffs waiting for the person.
    pub handoffs: ReadSignal<Vec<HandoffView>>,
    /// Questions waiting for the person's answer.
    pub questions: ReadSignal<Vec<countersign::question::QuestionView>>,
    /// Session grants in force.
    pub grants: ReadSignal<Vec<Grant>>,
    /// The conversation and action log.
    pub log: ReadSignal<Vec<LogEntry>>,
    /// Whether the assistant is working on a turn.
    pub working: ReadSignal<bool>,
    /// Whether the offline assistant is the one answering.
    pub offline: ReadSignal<bool>,
    /// The clock, ticking once a second while something waits (for countdowns).
    pub now_ms: ReadSignal<u64>,
    /// The session's mode (the dock shows a banner outside `Default`).
    pub mode: ReadSignal<Mode>,
    /// The policy file's error while it is broken (the dock shows it).
    pub policy_error: ReadSignal<Option<String>>,
    /// Calls allowed without a card, newest last (at most the last 50).
    pub activity: ReadSignal<Vec<Activity>>,
    /// The model turns whose calls have not all settled ("n of m", "allow all").
    pub batches: ReadSignal<Vec<crate::BatchView>>,
    /// The model's answer while it streams in: text so far, tool calls being prepared
    /// (none of which can be approved or run yet).
    pub streaming: ReadSignal<Option<crate::conversation::Streaming>>,
    /// Whether the person turned system notifications on (from the dock, never on load).
    pub notify: ReadSignal<bool>,
    /// What the browser answered when asked for notification permission, once asked.
    pub notify_permission: ReadSignal<Option<bool>>,
    /// The code an MCP client sends to act in this page, while the gateway relays for it.
    pub pairing: ReadSignal<Option<String>>,
}

/// The writable side of [`DockState`], for the runtime only.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DockSignals {
    pub(crate) approvals: RwSignal<Vec<ApprovalRequest>>,
    pub(crate) handoffs: RwSignal<Vec<HandoffView>>,
    pub(crate) questions: RwSignal<Vec<countersign::question::QuestionView>>,
    pub(crate) grants: RwSignal<Vec<Grant>>,
    pub(crate) log: RwSignal<Vec<LogEntry>>,
    pub(crate) working: RwSignal<bool>,
    pub(crate) offline: RwSignal<bool>,
    pub(crate) now_ms: RwSignal<u64>,
    pub(crate) mode: RwSignal<Mode>,
    pub(crate) policy_error: RwSignal<Option<String>>,
    pub(crate) activity: RwSignal<Vec<Activity>>,
    pub(crate) batches: RwSignal<Vec<crate::BatchView>>,
    pub(crate) streaming: RwSignal<Option<crate::conversation::Streaming>>,
    pub(crate) notify: RwSignal<bool>,
    pub(crate) notify_permission: RwSignal<Option<bool>>,
    pub(crate) pairing: RwSignal<Option<String>>,
}

impl DockSignals {
    pub(crate) fn new(now_ms: u64) -> Self {
        Self {
            approvals: RwSignal::new(Vec::new()),
            handoffs: RwSignal::new(Vec::new()),
            questions: RwSignal::new(Vec::new()),
            grants: RwSignal::new(Vec::new()),
            log: RwSignal::new(Vec::new()),
            working: RwSignal::new(false),
            offline: RwSignal::new(false),
            now_ms: RwSignal::new(now_ms),
            mode: RwSignal::new(Mode::Default),
            policy_error: RwSignal::new(None),
            activity: RwSignal::new(Vec::new()),
            batches: RwSignal::new(Vec::new()),
            streaming: RwSignal::new(None),
            notify: RwSignal::new(false),
            notify_permission: RwSignal::new(None),
            pairing: RwSignal::new(None),
        }
    }

    pub(crate) fn read_only(&self) -> DockState {
        DockState {
            approvals: self.approvals.read_only(),
            handoffs: self.handoffs.read_only(),
            questions: self.questions.read_only(),
            grants: self.grants.read_only(),
            log: self.log.read_only(),
            working: self.working.read_only(),
            offline: self.offline.read_only(),
            now_ms: self.now_ms.read_only(),
            mode: self.mode.read_only(),
            policy_error: self.policy_error.read_only(),
            activity: self.activity.read_only(),
            batches: self.batches.read_only(),
            streaming: self.streaming.read_only(),
            notify: self.notify.read_only(),
            notify_permission: self.notify_permission.read_only(),
            pairing: self.pairing.read_only(),
        }
    }
}
