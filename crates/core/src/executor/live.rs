//! The calls not yet settled (each past decide, waiting for a person or running), and a
//! refusal on its way to becoming a settlement.

use std::rc::Rc;

use serde_json::Value;

use crate::action::{ErasedAction, PreparedCall};
use crate::audit::Decider;
use crate::call::CallId;
use crate::digest::ArgsDigest;
use crate::handoff::HandoffMachine;
use crate::policy::ApprovalPolicy;
use crate::reason::Reason;
use crate::ticket::ApprovalRequest;
use crate::time::Timestamp;

use super::trail::AuditContext;

/// Where a live call is.
pub(crate) enum LiveState {
    Approval(Box<ApprovalRequest>),
    Performing,
    Handoff(HandoffMachine),
    /// Waiting for the person's answer until this deadline.
    Question(Timestamp),
}

/// The calls not yet settled, by call id (oldest first).
pub(crate) type LiveCalls = std::collections::BTreeMap<CallId, Live>;

/// A call past the decide stage that has not settled.
pub(crate) struct Live {
    /// The id the model gave the call, as it sent it.
    pub(crate) tool_call_id: std::sync::Arc<str>,
    /// The call's `traceparent`, if traced.
    pub(crate) trace: Option<String>,
    /// The action, the arguments and what else decide settled.
    pub(crate) decided: Decided,
    /// The keyed digest the audit records.
    pub(crate) audit_digest: ArgsDigest,
    pub(crate) started: Timestamp,
    pub(crate) level: ApprovalPolicy,
    /// What the card showed last (or, without a card, what the decision computed); the
    /// receipt repeats it.
    pub(crate) consequence: Option<String>,
    pub(crate) state: LiveState,
}

impl Live {
    /// The call's audit context, borrowing its ids.
    pub(crate) fn context(&self, call: CallId) -> AuditContext<'_> {
        AuditContext::live(call, self)
    }
}

/// A call that passed decide, with what the next stages need.
#[derive(Clone)]
pub(crate) struct Decided {
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
    pub(crate) prepared: Rc<dyn PreparedCall>,
    pub(crate) arguments: Value,
    /// Who asked.
    pub(crate) caller: crate::call::Caller,
    /// The person's edit, when the call came from one.
    pub(crate) edited: Option<crate::edit::EditDiff>,
    /// A deadline the card or handoff keeps (a call restored after a reload).
    pub(crate) deadline: Option<Timestamp>,
    /// The untrusted content that raised this call's level (its card says so).
    pub(crate) untrusted: Option<std::sync::Arc<str>>,
}

/// A refusal on its way to becoming a settlement: why, who decided, and the detail the
/// model's sentence may quote.
#[derive(Debug)]
pub(crate) struct Stop {
    pub(crate) reason: Reason,
    pub(crate) by: Decider,
    pub(crate) detail: Option<String>,
}

impl Stop {
    pub(crate) fn new(reason: Reason, by: Decider) -> Self {
        Self {
            reason,
            by,
            detail: None,
        }
    }

    /// A refusal the decision made.
    pub(crate) fn refusing(reason: Reason, by: Decider, detail: Option<String>) -> Self {
        Self { reason, by, detail }
    }

    pub(crate) fn with(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}
