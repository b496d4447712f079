//! edit: a person's edit of a waiting call becomes a new call, linked to the original,
//! that enters the pipeline again from resolve with the edited arguments.

use crate::audit::{AuditEvent, Decider};
use crate::call::{Call, CallId};
use crate::edit::EditDiff;
use crate::reason::Reason;
use crate::ticket::EditError;
use crate::ticket::TicketError;
use crate::time::Timestamp;

use super::live::LiveState;
use super::state::ExecutorState;
use super::step::Next;
use super::trail::AuditContext;

impl ExecutorState {
    pub(crate) fn edit(
        &mut self,
        call: CallId,
        arguments: &str,
        now: Timestamp,
    ) -> Result<Next, EditError> {
        let now = self.tick(now);
        let live = self.live.get(&call).ok_or(TicketError::NotPending)?;
        let LiveState::Approval(card) = &live.state else {
            return Err(TicketError::NotPending.into());
        };
        if now >= card.deadline {
            self.expire_approval(call, now);
            return Err(TicketError::Expired.into());
        }
        let edited = Call {
            tool_call_id: std::sync::Arc::clone(&live.tool_call_id),
            action: live.decided.action.meta().id.to_string(),
            arguments: arguments.to_owned(),
            caller: live.decided.caller,
            trace: live.trace.clone(),
        };
        // Checked before anything changes: an edit that does not validate leaves the
        // original card waiting, and the form says why.
        let value = self
            .validate(live.decided.action.as_ref(), &edited)
            .map(|validated| validated.arguments)
            .map_err(|stop| EditError::Invalid(stop.detail.unwrap_or_default()))?;
        if value == live.decided.arguments {
            return Err(EditError::Unchanged);
        }
        // The step's own change, for the trail; the diff the card and the model see is
        // always against what the model sent, however many edits it took.
        let changed = EditDiff::between(call, &live.decided.arguments, &value)
            .declared_fields(&live.decided.action.meta().schema);
        let model = live.decided.edited.as_ref().map_or_else(
            || live.decided.arguments.clone(),
            |d| d.model_arguments(&live.decided.arguments),
        );
        let diff = EditDiff::between(call, &model, &value);
        let diff = (!diff.changes.is_empty()).then_some(diff);
        let started = live.started;
        let into = self.new_call_id();
        // The original ends here, once: superseded, with no outcome of its own. The
        // model's tool call is answered by the new call.
        let Some(original) = self.live.remove(&call) else {
            return Err(TicketError::NotPending.into());
        };
        self.trail.record(
            &original.context(call),
            AuditEvent::Superseded,
            Decider::Person,
            Reason::EditedInto { call: into },
            None,
            now,
        );
        let mut trace = AuditContext::arriving(into, &edited, started);
        trace.resolved(&original.decided.action, original.level);
        let deadline = original.decided.deadline;
        trace.validated(&value, &self.config.audit_key);
        let reason = Reason::EditedFrom { call, changed };
        self.trail.record(
            &trace,
            AuditEvent::Edited,
            Decider::Person,
            reason.clone(),
            None,
            now,
        );
        let origin = super::pipeline::Origin {
            edited: diff,
            restored: deadline,
            forced: Some(reason),
            // INVARIANT: the person's edit of a raised call is still that call: raised.
            untrusted: original.decided.untrusted.clone(),
        };
        Ok(self.pipeline(into, edited, started, now, 0, origin))
    }
}
