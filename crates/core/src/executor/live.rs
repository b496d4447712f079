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

/// Where a live call is.
pub(crate) enum LiveState {
    Approval(Box<ApprovalRequest>),
    Performing,
    Handoff(HandoffMachine),
    /// Waiting for the person's answer until this deadline.
    Question(Timestamp),
}

/// The calls not yet settled, sorted by call id (oldest first). A list, not a map: a page
/// has a handful live, and a map's code would be copied into the page once more.
#[derive(Default)]
pub(crate) struct LiveCalls(Vec<(CallId, Live)>);

impl LiveCalls {
    fn find(&self, call: &CallId) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(call))
    }

    pub(crate) fn get(&self, call: &CallId) -> Option<&Live> {
        self.0.get(self.find(call).ok()?).map(|(_, live)| live)
    }

    pub(crate) fn get_mut(&mut self, call: &CallId) -> Option<&mut Live> {
        let at = self.find(call).ok()?;
        self.0.get_mut(at).map(|(_, live)| live)
    }

    pub(crate) fn contains_key(&self, call: &CallId) -> bool {
        self.find(call).is_ok()
    }

    /// Puts `call` live (a call is live once: it replaces nothing).
    pub(crate) fn insert(&mut self, call: CallId, live: Live) {
        match self.find(&call) {
            Ok(at) => {
                if let Some(slot) = self.0.get_mut(at) {
                    slot.1 = live;
                }
            }
            Err(at) => self.0.insert(at, (call, live)),
        }
    }

    pub(crate) fn remove(&mut self, call: &CallId) -> Option<Live> {
        let at = self.find(call).ok()?;
        Some(self.0.remove(at).1)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&CallId, &Live)> {
        self.0.iter().map(|(call, live)| (call, live))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &CallId> {
        self.0.iter().map(|(call, _)| call)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Live> {
        self.0.iter().map(|(_, live)| live)
    }
}

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

    pub(crate) fn with(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}
