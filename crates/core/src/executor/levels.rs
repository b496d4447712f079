//! What the session may do: the levels and scopes in force (from the declarations, a
//! policy file, or the last good file while a new one is broken), and its grants.
//! A grant is made by a person's gesture, bound to one registration and revoked with it.

use serde_json::Value;

use crate::action::ActionMeta;
use crate::audit::Decider;
use crate::call::CallId;
use crate::grant_rule::GrantRule;
use crate::policy::{ApprovalPolicy, PolicyError, PolicyFile};
use crate::reason::{Level, LevelSource, Reason};
use crate::ticket::{Grant, GrantBasis, GrantId};
use crate::time::Timestamp;

use super::live::{Decided, Stop};

/// Where the levels and scopes come from.
#[derive(Debug, Clone)]
pub(crate) enum PolicyState {
    /// No policy file: the declarations and the session's own scopes.
    Declared,
    /// A valid policy file.
    Loaded(PolicyFile),
    /// A policy file that failed to load: only reversals run, under `last_good` (the
    /// last file that loaded), or asked every time if none did.
    Broken {
        error: PolicyError,
        last_good: Option<PolicyFile>,
    },
}

impl PolicyState {
    /// The level this session's calls of an action get now, and where it comes from.
    pub(crate) fn level(&self, meta: &ActionMeta, role: &str) -> Level {
        let from_file =
            |file: &crate::policy::PolicyFile| file.level(role, &meta.id, meta.kind, meta.confirm);
        match self {
            PolicyState::Declared => Level {
                policy: meta.policy,
                source: LevelSource::Declared,
            },
            PolicyState::Loaded(file) => {
                let (policy, over) = from_file(file);
                let source = over.map_or(LevelSource::Declared, |(role, line)| {
                    LevelSource::RoleOverride { role, line }
                });
                Level { policy, source }
            }
            PolicyState::Broken {
                last_good: Some(file),
                ..
            } => Level {
                policy: from_file(file).0,
                source: LevelSource::BrokenFileFallback { last_good: true },
            },
            PolicyState::Broken {
                last_good: None, ..
            } => Level {
                policy: ApprovalPolicy::AskAlways,
                source: LevelSource::BrokenFileFallback { last_good: false },
            },
        }
    }

    /// Whether the session holds `scope`: its role's scopes in the file in force (the
    /// last good one while broken), else the session's own.
    pub(crate) fn holds(&self, scope: &str, session: &crate::call::Session) -> bool {
        let role = &session.role;
        match self {
            PolicyState::Loaded(file)
            | PolicyState::Broken {
                last_good: Some(file),
                ..
            } => file
                .role_for(role)
                .is_some_and(|(_, r)| r.scopes.contains(scope)),
            PolicyState::Declared
            | PolicyState::Broken {
                last_good: None, ..
            } => session.holds(scope),
        }
    }

    /// Whether calls of this action are refused outright: a broken file stops all but
    /// reversals.
    pub(crate) fn blocked(&self, meta: &ActionMeta) -> Option<Stop> {
        match self {
            PolicyState::Broken { error, .. } if !meta.reversal => Some(
                Stop::new(
                    Reason::PolicyFileBroken { line: error.line },
                    Decider::Policy,
                )
                .with(error.to_string()),
            ),
            _ => None,
        }
    }

    /// Loads a policy file for `role`; a bad one breaks the policy (see
    /// [`PolicyState::break_with`]).
    pub(crate) fn load(&mut self, text: &str, role: &str) -> Result<(), PolicyError> {
        let checked = PolicyFile::from_json(text).and_then(|file| match file.role_for(role) {
            Some(_) => Ok(file),
            None => Err(PolicyError::whole(format!(
                "the session's role `{role}` is not in the file, and the file names no `default_role`"
            ))),
        });
        match checked {
            Ok(file) => {
                *self = PolicyState::Loaded(file);
                Ok(())
            }
            Err(error) => {
                self.break_with(error.clone());
                Err(error)
            }
        }
    }

    /// A policy file failed: keep the last good one for reversals.
    pub(crate) fn break_with(&mut self, error: PolicyError) {
        let last_good = match std::mem::replace(self, PolicyState::Declared) {
            PolicyState::Loaded(file) => Some(file),
            PolicyState::Broken { last_good, .. } => last_good,
            PolicyState::Declared => None,
        };
        *self = PolicyState::Broken { error, last_good };
    }

    /// The file in force (the last good one while broken).
    pub(crate) fn file(&self) -> Option<&PolicyFile> {
        match self {
            PolicyState::Loaded(file)
            | PolicyState::Broken {
                last_good: Some(file),
                ..
            } => Some(file),
            _ => None,
        }
    }
}

/// The session grants in force, and the last grant's id (ids start at 1).
#[derive(Default)]
pub(crate) struct Grants {
    list: Vec<Grant>,
    last: u64,
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
        self.last += 1;
        let id = GrantId(self.last);
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
