//! Calls that enter the pipeline again. A person's edit becomes a new call, linked to the
//! original. A call waiting when the page reloaded comes back only with the same
//! declaration, available and in time, always asked again; grants are derived again.

use std::rc::Rc;
use std::time::Duration;

use crate::audit::{AuditEvent, Decider};
use crate::call::{Call, CallId};
use crate::edit::EditDiff;
use crate::grant_rule::GrantRule;
use crate::policy::ApprovalPolicy;
use crate::reason::{Hook, Reason, RestoreMiss};
use crate::ticket::{EditError, GrantBasis, GrantId, RestoreError, TicketError};
use crate::time::Timestamp;

use super::card::Next;
use super::live::{Decided, LiveState};
use super::state::{ExecutorState, Stop};
use super::trail::{AuditContext, Origin};

/// A call that was waiting when the page went away, as the page stored it.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The model's call (its tool call id, the action, the arguments that were shown).
    pub call: Call,
    /// The digest of the action's declaration when it was waiting.
    pub declaration: String,
    /// Whether it waited as a handoff (else as an approval card).
    pub handoff: bool,
    /// How long it had left before its deadline, measured now. Never more than the
    /// action's own timeout is honoured.
    pub remaining: Duration,
    /// The person's edit it carried, if any (the card shows it again and the model is
    /// told). Taken only if it describes these arguments.
    pub edited: Option<crate::edit::EditDiff>,
    /// The untrusted content its caller's model had read (or that raised the call), if
    /// any. The page's reload keeps the model's context, so this comes back too, whether
    /// or not the call does: until the person speaks, changes are asked one level higher.
    pub untrusted: Option<String>,
}

impl ExecutorState {
    /// A person's edit of a waiting call: the original ends (`superseded`), and a new,
    /// linked call enters the pipeline from resolve with the edited arguments.
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
            .map(|(_, value)| value)
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
            &AuditContext::live(call, &original),
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
        let origin = Origin {
            edited: diff,
            restored: deadline,
            forced: Some(reason),
            // INVARIANT: the person's edit of a raised call is still that call: raised.
            untrusted: original.decided.untrusted.clone(),
        };
        Ok(self.pipeline(into, edited, started, now, 0, origin))
    }

    pub(crate) fn restore(&mut self, pending: Pending, now: Timestamp) -> Next {
        let now = self.tick(now);
        let id = self.new_call_id();
        let untrusted = self.bring_back_untrusted(&pending);
        match self.restorable(&pending) {
            Err(why) => Next::Settled(Box::new(self.not_restored(id, &pending, why, now))),
            Ok(remaining) => {
                self.restored_ids.push(pending.call.tool_call_id.clone());
                let mut trace = AuditContext::arriving(id, &pending.call, now);
                // The record names what is brought back: the arguments' keyed digest,
                // as every later record of the call will (not the placeholder).
                self.unvalidated(&mut trace, &pending.call.arguments);
                self.trail.record(
                    &trace,
                    AuditEvent::Restored,
                    Decider::Host,
                    Reason::Restored,
                    None,
                    now,
                );
                let origin = Origin {
                    edited: pending.edited.clone(),
                    restored: Some(now.saturating_add(remaining)),
                    forced: Some(Reason::Restored),
                    untrusted,
                };
                self.pipeline(id, pending.call, now, now, 0, origin)
            }
        }
    }

    /// Settles a stored call that will not be brought back (another tab has it, say).
    pub(crate) fn drop_pending(
        &mut self,
        pending: Pending,
        why: RestoreMiss,
        now: Timestamp,
    ) -> crate::outcome::Settled {
        let now = self.tick(now);
        let id = self.new_call_id();
        self.bring_back_untrusted(&pending);
        self.not_restored(id, &pending, why, now)
    }

    /// Whether the stored call may come back, and with how much time: never more than
    /// the action's own timeout, whatever storage says.
    fn restorable(&self, pending: &Pending) -> Result<Duration, RestoreMiss> {
        if pending.remaining.is_zero() {
            return Err(RestoreMiss::Expired);
        }
        // INVARIANT: a stored call comes back at most once per page session, and never
        // beside a live call answering the same tool call.
        let id = &pending.call.tool_call_id;
        if self.restored_ids.contains(id) || self.live.values().any(|l| *l.tool_call_id == **id) {
            return Err(RestoreMiss::ElsewhereOrDone);
        }
        let entry = self
            .registry
            .get(&pending.call.action)
            .ok_or(RestoreMiss::Changed)?;
        let meta = entry.action.meta();
        if meta.declaration != pending.declaration {
            return Err(RestoreMiss::Changed);
        }
        // A stored edit must describe the stored arguments, or nothing comes back.
        if let Some(edit) = &pending.edited {
            let arguments = crate::canonical::read(&pending.call.arguments)
                .map_err(|_| RestoreMiss::Changed)?;
            if !edit.describes(&arguments) {
                return Err(RestoreMiss::Changed);
            }
        }
        match self.hook(Hook::Available, || entry.action.is_available()) {
            Ok(true) => {}
            _ => return Err(RestoreMiss::Unavailable),
        }
        let longest = match (&meta.handoff, &meta.question) {
            (Some(handoff), _) => handoff.timeout,
            (_, Some(question)) => question.timeout,
            _ => meta
                .approval_timeout
                .unwrap_or(self.config.approval_timeout),
        };
        Ok(pending.remaining.min(longest))
    }

    fn not_restored(
        &mut self,
        id: CallId,
        pending: &Pending,
        why: RestoreMiss,
        now: Timestamp,
    ) -> crate::outcome::Settled {
        let mut trace = AuditContext::arriving(id, &pending.call, now);
        if let Some(entry) = self.registry.get(&pending.call.action) {
            let action = std::rc::Rc::clone(&entry.action);
            trace.resolved(&action, self.level(action.meta()).policy);
        }
        self.unvalidated(&mut trace, &pending.call.arguments);
        let stop = Stop::new(
            Reason::NotRestored {
                handoff: pending.handoff,
                why,
            },
            Decider::Host,
        );
        self.refuse_early(&trace, stop, now)
    }

    pub(crate) fn new_call_id(&mut self) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        id
    }

    /// Derives a grant again from what a page stored: only where a person could make the
    /// same grant now, for the same declaration and role, with the rule the action's own
    /// `remember` hook derives from the stored arguments.
    pub(crate) fn restore_grant(
        &mut self,
        basis: &GrantBasis,
        now: Timestamp,
    ) -> Result<GrantId, RestoreError> {
        let now = self.tick(now);
        let entry = self
            .registry
            .get(&basis.action)
            .ok_or_else(|| RestoreError::UnknownAction(basis.action.clone()))?;
        let (action, generation) = (Rc::clone(&entry.action), entry.generation);
        let meta = action.meta();
        if basis.registration != meta.declaration {
            return Err(RestoreError::RegistrationChanged(meta.id.to_string()));
        }
        if basis.role != self.config.session.role {
            return Err(RestoreError::OtherRole);
        }
        // INVARIANT: a countersignature states a person's approval in this session; a
        // grant read back from storage is not one.
        if self.level(meta).policy != ApprovalPolicy::Ask
            || meta.countersigned
            || meta.confirm_twice
            || meta.handoff.is_some()
            || self.policy.blocked(meta).is_some()
        {
            return Err(RestoreError::NotOffered(meta.id.to_string()));
        }
        let reentered = |_| RestoreError::Blocked(crate::ticket::Blocked::Reentered);
        let invalid = || RestoreError::InvalidArguments(meta.id.to_string());
        let prepared = self
            .hook(Hook::Validate, || action.prepare(&basis.arguments))
            .map_err(reentered)?
            .map_err(|_| invalid())?;
        let rule = self
            .hook(Hook::Remember, || prepared.grant_rule())
            .map_err(reentered)?
            .unwrap_or_else(GrantRule::every_call);
        let decided = Decided {
            action: Rc::clone(&action),
            generation,
            prepared,
            arguments: basis.arguments.clone(),
            caller: basis.caller,
            edited: None,
            deadline: None,
            untrusted: None,
        };
        let role = &self.config.session.role;
        let grant = self
            .grants
            .new_grant(&decided, role, rule, now, CallId::default());
        let id = grant.id;
        // INVARIANT: a grant in force is on this session's trail: the records of the
        // calls it lets run cite its id, and this one says where it came from.
        let no_call: std::sync::Arc<str> = std::sync::Arc::from("");
        let mut trace = super::trail::AuditContext::without_call(&no_call, &meta.id, now);
        trace.caller = basis.caller;
        trace.resolved(&action, ApprovalPolicy::Ask);
        trace.validated(&basis.arguments, &self.config.audit_key);
        self.trail.record(
            &trace,
            AuditEvent::Restored,
            Decider::Host,
            Reason::Granted { grant: id },
            None,
            now,
        );
        self.grants.put_in_force(grant);
        Ok(id)
    }

    /// The caller's context held untrusted content when the page went away, and still
    /// does (the chat comes back with it), whether or not the call comes back.
    fn bring_back_untrusted(&mut self, pending: &Pending) -> Option<std::sync::Arc<str>> {
        // Storage is the page's (a page script can write there): no control characters,
        // at most 80 characters.
        let stored = pending.untrusted.as_deref()?;
        let clean: String = stored
            .chars()
            .filter(|c| !c.is_control())
            .take(80)
            .collect();
        let source: std::sync::Arc<str> = clean.into();
        self.taint(pending.call.caller, &source);
        Some(source)
    }
}
