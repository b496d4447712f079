//! Session grants ("always allow this session"): made by a person's gesture, bound to one
//! registration, revoked with it, and restored from storage only by deriving them again.

use serde_json::Value;

use crate::action::ActionMeta;
use crate::call::CallId;
use crate::grant_rule::GrantRule;
use crate::ticket::{Grant, GrantBasis, GrantId};
use crate::time::Timestamp;

use super::live::Decided;

/// The session grants in force, and the next grant's id.
pub(crate) struct Grants {
    list: Vec<Grant>,
    next: u64,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            next: 1,
        }
    }
}

impl Grants {
    /// The grants in force.
    pub(crate) fn list(&self) -> &[Grant] {
        &self.list
    }

    /// A grant with the next id, not yet in force (see [`Grants::put_in_force`]).
    pub(crate) fn new_grant(
        &mut self,
        decided: &Decided,
        role: &str,
        rule: GrantRule,
        now: Timestamp,
        from_call: CallId,
    ) -> Grant {
        let meta = decided.action.meta();
        let id = GrantId(self.next);
        self.next += 1;
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
                role: role.to_owned(),
                arguments: decided.arguments.clone(),
                caller: decided.caller,
            },
            generation: decided.generation,
        }
    }

    /// Puts a grant in force once its record is written.
    pub(crate) fn put_in_force(&mut self, grant: Grant) {
        self.list.push(grant);
    }

    pub(crate) fn revoke(&mut self, grant: GrantId) -> bool {
        let before = self.list.len();
        self.list.retain(|g| g.id != grant);
        self.list.len() != before
    }

    /// INVARIANT: a grant dies with its registration; a later action under the same id
    /// starts with none.
    pub(crate) fn revoke_registration(&mut self, id: &str, generation: u64) {
        self.list
            .retain(|g| !(g.action == id && g.generation == generation));
    }

    /// The grant covering this call, if any: the same registration and caller, and a
    /// rule that matches the arguments.
    pub(crate) fn covering(
        &self,
        meta: &ActionMeta,
        generation: u64,
        arguments: &Value,
        caller: crate::call::Caller,
    ) -> Option<GrantId> {
        self.list
            .iter()
            .find(|g| {
                *g.action == *meta.id
                    && g.generation == generation
                    && g.basis.registration == meta.declaration
                    && g.basis.caller == caller
                    && g.rule.matcher.matches(arguments)
            })
            .map(|g| g.id)
    }
}
