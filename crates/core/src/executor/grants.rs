//! Session grants ("always allow this session"): made by a person's gesture, bound to one
//! registration, revoked with it, and restored from storage only by deriving them again.

use std::rc::Rc;

use crate::audit::{AuditEvent, Decider};
use crate::call::CallId;
use crate::grant_rule::GrantRule;
use crate::policy::ApprovalPolicy;
use crate::reason::{Hook, Reason};
use crate::ticket::{Grant, GrantBasis, GrantId, RestoreError};
use crate::time::Timestamp;

use super::decide::Decided;
use super::state::ExecutorState;

impl ExecutorState {
    /// A grant with the next id, not yet in force (see [`ExecutorState::put_in_force`]).
    pub(crate) fn new_grant(
        &mut self,
        decided: &Decided,
        rule: GrantRule,
        now: Timestamp,
        from_call: CallId,
    ) -> Grant {
        let meta = decided.action.meta();
        let id = GrantId(self.next_grant);
        self.next_grant += 1;
        Grant {
            id,
            action: meta.id.to_string(),
            title: meta.title.to_string(),
            granted_at: now,
            from_call,
            rule,
            basis: GrantBasis {
                action: meta.id.to_string(),
                registration: meta.declaration.clone(),
                role: self.config.session.role.clone(),
                arguments: decided.arguments.clone(),
                caller: decided.caller,
            },
            generation: decided.generation,
        }
    }

    /// Puts a grant in force once its record is written.
    pub(crate) fn put_in_force(&mut self, grant: Grant) {
        self.grants.push(grant);
    }

    pub(crate) fn revoke(&mut self, grant: GrantId) -> bool {
        let before = self.grants.len();
        self.grants.retain(|g| g.id != grant);
        self.grants.len() != before
    }

    /// INVARIANT: a grant dies with its registration; a later action under the same id
    /// starts with none.
    pub(crate) fn revoke_registration(&mut self, id: &str, generation: u64) {
        self.grants
            .retain(|g| !(g.action == id && g.generation == generation));
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
            || self.blocked_by_broken_file(meta).is_some()
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
        };
        let grant = self.new_grant(&decided, rule, now, CallId::default());
        let id = grant.id;
        // INVARIANT: a grant in force is on this session's trail: the records of the
        // calls it lets run cite its id, and this one says where it came from.
        let no_call: std::sync::Arc<str> = std::sync::Arc::from("");
        let mut trace = super::settle::Trace::without_call(&no_call, &meta.id, now);
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
        self.put_in_force(grant);
        Ok(id)
    }
}
