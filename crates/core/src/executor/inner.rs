//! The executor's state and transitions. Everything here runs synchronously under one
//! borrow; futures (`run`) are driven outside it by the host.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::stages::{self, name, refusal, with_consequence, Decision};
use super::Config;
use crate::action::{ErasedAction, PreparedCall};
use crate::audit::{AuditEvent, AuditRecord, AuditSink, Decider};
use crate::call::{Call, CallId};
use crate::digest::ArgsDigest;
use crate::handoff::{HandoffMachine, HandoffState};
use crate::outcome::{quote, Code, DoneBy, Outcome, Receipt, Refusal, Settled, Stage};
use crate::policy::ApprovalPolicy;
use crate::ticket::{
    ApprovalRequest, Gesture, Grant, GrantId, Nonce, NotPending, Ticket, TicketError,
};
use crate::time::Timestamp;

mod respond;
mod settle;

/// How many times one call may be rewritten before it is refused.
const MAX_REWRITES: u8 = 3;

/// What an action's rewrite hook asks for, if it changes anything: the action to run,
/// its arguments, and why (for the audit).
fn rewritten(
    meta: &crate::action::ActionMeta,
    prepared: &dyn PreparedCall,
    arguments: &Value,
) -> Option<(String, Value, String)> {
    match prepared.rewrite()? {
        crate::Rewrite::Keep => None,
        crate::Rewrite::Arguments(new) => {
            (ArgsDigest::of_value(&new) != ArgsDigest::of_value(arguments)).then(|| {
                (
                    meta.id.clone(),
                    new,
                    "arguments normalised by the action".to_owned(),
                )
            })
        }
        crate::Rewrite::Action {
            action,
            arguments,
            why,
        } => {
            let why = format!("replaced by `{action}`: {why}");
            Some((action, arguments, why))
        }
    }
}

/// The longest tool call id accepted from the model.
pub(crate) const MAX_TOOL_CALL_ID_LEN: usize = 256;

pub(crate) struct Entry {
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
}

pub(crate) enum LiveState {
    Approval(Box<ApprovalRequest>),
    Performing,
    Handoff(HandoffMachine),
}

pub(crate) struct Live {
    pub(crate) tool_call_id: String,
    pub(crate) action: Rc<dyn ErasedAction>,
    pub(crate) generation: u64,
    pub(crate) prepared: Rc<dyn PreparedCall>,
    pub(crate) digest: ArgsDigest,
    pub(crate) started: Timestamp,
    /// Computed once, when the call was decided: the card shows it, the receipt repeats it.
    pub(crate) consequence: Option<String>,
    pub(crate) state: LiveState,
}

/// What `submit` / `approve` tell the public layer to do next.
pub(crate) enum Next {
    Settled(Settled),
    Approval(Box<ApprovalRequest>),
    Handoff(CallId),
    Perform(CallId, crate::action::LocalBoxFuture<Result<Value, String>>),
}

/// Identifies a call in audit records, whether or not it got far enough to be live.
struct Ctx<'a> {
    call: CallId,
    tool_call_id: &'a str,
    action_id: &'a str,
    meta: Option<&'a crate::action::ActionMeta>,
    digest: ArgsDigest,
    started: Timestamp,
}

/// Where the levels and scopes come from.
#[derive(Debug, Clone)]
pub(crate) enum PolicyState {
    /// No policy file: the declarations and the session's own scopes.
    Declared,
    /// A valid policy file.
    Loaded(crate::PolicyFile),
    /// A policy file that failed to load: every call is refused.
    Broken(crate::PolicyError),
}

pub(crate) struct Inner {
    pub(crate) executor: u64,
    pub(crate) policy: PolicyState,
    pub(crate) config: Config,
    pub(crate) actions: HashMap<String, Entry>,
    pub(crate) live: BTreeMap<CallId, Live>,
    pub(crate) grants: Vec<Grant>,
    next_generation: u64,
    next_grant: u64,
    next_call: u64,
    next_seq: u64,
    audit: Box<dyn AuditSink>,
    pub(crate) settled: VecDeque<Settled>,
    pub(crate) last_now: Timestamp,
    pub(crate) mode: crate::Mode,
}

impl Inner {
    pub(crate) fn new(config: Config, audit: Box<dyn AuditSink>) -> Self {
        let executor = u64::from_le_bytes(prefix(&Sha256::digest(
            [&config.secret[..], b"executor"].concat(),
        )));
        Self {
            executor,
            policy: PolicyState::Declared,
            config,
            actions: HashMap::new(),
            live: BTreeMap::new(),
            grants: Vec::new(),
            next_generation: 1,
            next_grant: 1,
            next_call: 1,
            next_seq: 1,
            audit,
            settled: VecDeque::new(),
            last_now: Timestamp::default(),
            mode: crate::Mode::Default,
        }
    }

    /// The policy this session's calls of an action get: the policy file's override for
    /// the session's role if any, else the declaration's.
    pub(crate) fn effective_policy(&self, meta: &crate::action::ActionMeta) -> ApprovalPolicy {
        match &self.policy {
            PolicyState::Loaded(file) => {
                file.resolve(&self.config.session.role, &meta.id, meta.kind, meta.confirm)
            }
            PolicyState::Declared | PolicyState::Broken(_) => meta.policy,
        }
    }

    /// The scopes the session holds: its role's in the policy file, else its own.
    pub(crate) fn scopes(&self) -> std::collections::BTreeSet<String> {
        match &self.policy {
            PolicyState::Loaded(file) => file.scopes(&self.config.session.role),
            PolicyState::Declared => self.config.session.scopes.clone(),
            PolicyState::Broken(_) => std::collections::BTreeSet::new(),
        }
    }

    pub(crate) fn tick(&mut self, now: Timestamp) {
        self.last_now = self.last_now.max(now);
    }

    pub(crate) fn insert_action(
        &mut self,
        action: Rc<dyn ErasedAction>,
    ) -> Result<u64, crate::RegisterError> {
        let id = action.meta().id.clone();
        if self.actions.contains_key(&id) {
            return Err(crate::RegisterError::Duplicate(id));
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        self.actions.insert(id, Entry { action, generation });
        Ok(generation)
    }

    /// Removes one registration (if still the same generation) and settles its calls
    /// that wait for a person: the page no longer offers them.
    pub(crate) fn unregister(&mut self, id: &str, generation: u64) {
        if self
            .actions
            .get(id)
            .is_some_and(|e| e.generation == generation)
        {
            self.actions.remove(id);
        }
        let waiting: Vec<CallId> = self
            .live
            .iter()
            .filter(|(_, l)| {
                l.generation == generation
                    && l.action.meta().id == id
                    && !matches!(l.state, LiveState::Performing)
            })
            .map(|(c, _)| *c)
            .collect();
        let now = self.last_now;
        for call in waiting {
            let why = stages::unavailable(id, "was removed from the page before it was done");
            self.settle(
                call,
                Outcome::Refused(why),
                Stage::Availability,
                Decider::Host,
                now,
            );
        }
    }

    pub(crate) fn submit(&mut self, call: Call, now: Timestamp) -> Next {
        self.tick(now);
        let id = CallId(self.next_call);
        self.next_call += 1;
        self.pipeline(id, call, now, now, 0)
    }

    /// resolve → validate → scope → availability → decide (→ rewrite, which re-enters
    /// here with the new arguments or action) for one call.
    fn pipeline(
        &mut self,
        id: CallId,
        call: Call,
        started: Timestamp,
        now: Timestamp,
        depth: u8,
    ) -> Next {
        // Refusals before validation record the digest of the raw text; an oversized
        // text is hashed as bytes, never parsed.
        let raw_digest = || {
            if call.arguments.len() > self.config.max_argument_bytes {
                ArgsDigest::of_bytes(call.arguments.as_bytes())
            } else {
                ArgsDigest::of_raw(&call.arguments)
            }
        };
        let mut ctx = Ctx {
            call: id,
            tool_call_id: &call.tool_call_id,
            action_id: &call.action,
            meta: None,
            digest: ArgsDigest::of_bytes(&[]),
            started,
        };

        if call.tool_call_id.len() > MAX_TOOL_CALL_ID_LEN {
            ctx.digest = raw_digest();
            let r = refusal(
                Code::InvalidArgs,
                Stage::Validate,
                format!(
                    "the tool call id is {} bytes, over the limit of {MAX_TOOL_CALL_ID_LEN}; nothing was done",
                    call.tool_call_id.len()
                ),
            );
            return Next::Settled(self.refuse_early(&ctx, r, Decider::Pipeline, now));
        }

        // resolve
        let entry = match stages::resolve(self.actions.get(&call.action), &call.action) {
            Ok(entry) => (Rc::clone(&entry.action), entry.generation),
            Err(r) => {
                ctx.digest = raw_digest();
                return Next::Settled(self.refuse_early(&ctx, r, Decider::Pipeline, now));
            }
        };
        let (action, generation) = entry;
        let meta = action.meta();
        ctx.meta = Some(meta);

        // validate
        let (prepared, arguments) = match stages::validate(
            action.as_ref(),
            &call.arguments,
            self.config.max_argument_bytes,
        ) {
            Ok(ok) => ok,
            Err(r) => return Next::Settled(self.refuse_early(&ctx, r, Decider::Pipeline, now)),
        };
        ctx.digest = ArgsDigest::of_value(&arguments);

        // scope, availability
        if let (PolicyState::Broken(e), false) = (&self.policy, meta.reversal) {
            let r = stages::policy_broken(&meta.id, e);
            return Next::Settled(self.refuse_early(&ctx, r, Decider::Policy, now));
        }
        let holds = |scope: &str| match (&self.policy, meta.reversal) {
            (PolicyState::Loaded(file), _) => file
                .roles
                .get(&self.config.session.role)
                .is_some_and(|r| r.scopes.contains(scope)),
            // A reversal stays possible under a broken file, with the session's own scopes.
            (PolicyState::Declared, _) | (PolicyState::Broken(_), true) => {
                self.config.session.holds(scope)
            }
            (PolicyState::Broken(_), false) => false,
        };
        if let Err(r) = stages::scope(meta, &self.config.session, holds)
            .and_then(|()| stages::availability(action.as_ref()))
        {
            return Next::Settled(self.refuse_early(&ctx, r, Decider::Pipeline, now));
        }

        // decide
        let granted = self
            .grants
            .iter()
            .any(|g| g.action == meta.id && g.rule.matcher.matches(&arguments));
        let decision = stages::apply_mode(
            stages::decide(
                meta,
                self.effective_policy(meta),
                prepared.as_ref(),
                granted,
            ),
            self.mode,
            &meta.id,
            meta.reversal,
        );
        if !matches!(decision, Decision::Deny(..)) {
            if let Some((action_id, new_arguments, why)) =
                rewritten(meta, prepared.as_ref(), &arguments)
            {
                if depth >= MAX_REWRITES {
                    let r = refusal(
                        Code::InvalidArgs,
                        Stage::Decide,
                        format!("{} kept rewriting itself; nothing was done", name(&meta.id)),
                    );
                    return Next::Settled(self.refuse_early(&ctx, r, Decider::Action, now));
                }
                // INVARIANT: a rewritten call re-enters the pipeline from resolve, so the
                // new arguments (or the replacement action) pass every stage again, and
                // the card and the ticket are for what will actually run.
                self.record(
                    &ctx,
                    Stage::Decide,
                    AuditEvent::Rewritten,
                    Decider::Action,
                    None,
                    why,
                    now,
                );
                let next = Call {
                    tool_call_id: call.tool_call_id.clone(),
                    action: action_id,
                    arguments: new_arguments.to_string(),
                };
                return self.pipeline(id, next, started, now, depth + 1);
            }
        }
        let consequence = match decision {
            Decision::Deny(..) => None,
            _ => prepared.consequence(),
        };
        let live = |state| Live {
            tool_call_id: call.tool_call_id.clone(),
            action: Rc::clone(&action),
            generation,
            prepared: Rc::clone(&prepared),
            digest: ctx.digest,
            started,
            consequence: consequence.clone(),
            state,
        };
        match decision {
            Decision::Deny(r, by) => Next::Settled(self.refuse_early(&ctx, r, by, now)),
            Decision::Run(by) => {
                let reason = match by {
                    Decider::SessionGrant => "allowed by a session grant".to_owned(),
                    Decider::Mode => format!(
                        "allowed without asking: the session is in `{}` mode",
                        self.mode.as_str()
                    ),
                    _ => format!(
                        "policy `{}` needs no approval",
                        policy_name(self.effective_policy(meta))
                    ),
                };
                self.record(
                    &ctx,
                    Stage::Decide,
                    AuditEvent::Allowed,
                    by,
                    None,
                    reason,
                    now,
                );
                let Some(fut) = prepared.run() else {
                    let r = nothing_to_run(&meta.id);
                    return Next::Settled(self.refuse_early(&ctx, r, Decider::Action, now));
                };
                self.live.insert(id, live(LiveState::Performing));
                Next::Perform(id, fut)
            }
            Decision::Ask(policy, by) => {
                let request = ApprovalRequest {
                    call: id,
                    action: meta.id.clone(),
                    title: meta.title.clone(),
                    kind: meta.kind,
                    policy,
                    consequence: consequence.clone(),
                    arguments,
                    args_sha256: ctx.digest,
                    offers_session_grant: policy.offers_session_grant() && !meta.confirm_twice,
                    grant_rule: (policy.offers_session_grant() && !meta.confirm_twice).then(|| {
                        prepared.grant_rule().unwrap_or_else(|| {
                            crate::GrantRule::any(format!("every call of {}", meta.title))
                        })
                    }),
                    preview: prepared.preview(),
                    round: 1,
                    question: None,
                    asked_at: now,
                    deadline: now.saturating_add(self.config.approval_timeout),
                    nonce: self.nonce(id, 1),
                    executor: self.executor,
                };
                let reason = format!("policy `{}` asks a person", policy_name(policy));
                self.record(
                    &ctx,
                    Stage::Decide,
                    AuditEvent::Asked,
                    by,
                    None,
                    reason,
                    now,
                );
                self.live
                    .insert(id, live(LiveState::Approval(Box::new(request.clone()))));
                Next::Approval(Box::new(request))
            }
            Decision::Handoff => {
                let timeout = meta.handoff.as_ref().map(|h| h.timeout).unwrap_or_default();
                let steps = meta.handoff.as_ref().map_or(0, |h| h.steps.len());
                let reason = "the last step is the person's".to_owned();
                self.record(
                    &ctx,
                    Stage::Decide,
                    AuditEvent::HandedOff,
                    Decider::Policy,
                    None,
                    reason,
                    now,
                );
                let machine = HandoffMachine::new(steps, now, timeout);
                self.live.insert(id, live(LiveState::Handoff(machine)));
                Next::Handoff(id)
            }
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Timestamp> {
        self.live
            .values()
            .filter_map(|l| match &l.state {
                LiveState::Approval(r) => Some(r.deadline),
                LiveState::Handoff(m) => m.poll_timeout(),
                LiveState::Performing => None,
            })
            .min()
    }

    pub(crate) fn handle_timeout(&mut self, now: Timestamp) {
        self.tick(now);
        let due: Vec<(CallId, bool)> = self
            .live
            .iter()
            .filter_map(|(c, l)| match &l.state {
                LiveState::Approval(r) if now >= r.deadline => Some((*c, true)),
                LiveState::Handoff(m) if m.poll_timeout().is_some_and(|d| now >= d) => {
                    Some((*c, false))
                }
                _ => None,
            })
            .collect();
        for (call, approval) in due {
            if approval {
                self.expire_approval(call, now);
            } else if let Some(LiveState::Handoff(m)) =
                self.live.get_mut(&call).map(|l| &mut l.state)
            {
                let state = m.handle_timeout(now);
                self.settle_handoff(call, state, now);
            }
        }
    }

    /// Settles every live call: the page is going away.
    pub(crate) fn shutdown(&mut self, now: Timestamp) {
        self.tick(now);
        let calls: Vec<CallId> = self.live.keys().copied().collect();
        for call in calls {
            let id = self
                .live
                .get(&call)
                .map(|l| l.action.meta().id.clone())
                .unwrap_or_default();
            let r = stages::unavailable(&id, "could not finish: the page was closed");
            self.settle(
                call,
                Outcome::Refused(r),
                Stage::Availability,
                Decider::Host,
                now,
            );
        }
    }

    pub(crate) fn add_grant(
        &mut self,
        action: &str,
        title: &str,
        rule: crate::GrantRule,
        now: Timestamp,
        from_call: CallId,
    ) -> GrantId {
        let id = GrantId(self.next_grant);
        self.next_grant += 1;
        self.grants.push(Grant {
            id,
            action: action.to_owned(),
            title: title.to_owned(),
            granted_at: now,
            from_call,
            rule,
        });
        id
    }

    pub(crate) fn revoke(&mut self, grant: GrantId) -> bool {
        let before = self.grants.len();
        self.grants.retain(|g| g.id != grant);
        self.grants.len() != before
    }

    fn nonce(&self, call: CallId, round: u8) -> Nonce {
        let digest = Sha256::digest(
            [
                &self.config.secret[..],
                b"nonce",
                &call.0.to_le_bytes(),
                &[round],
            ]
            .concat(),
        );
        Nonce(prefix(&digest))
    }
}

/// The first `N` bytes of `bytes` (zero-padded if shorter).
fn prefix<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (slot, byte) in out.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    out
}

fn nothing_to_run(id: &str) -> Refusal {
    refusal(
        Code::ExecutionFailed,
        Stage::Perform,
        format!("{} has nothing to run; nothing was done", name(id)),
    )
}

pub(crate) fn policy_name(policy: ApprovalPolicy) -> &'static str {
    match policy {
        ApprovalPolicy::None => "none",
        ApprovalPolicy::Ask => "ask",
        ApprovalPolicy::AskAlways => "ask_always",
    }
}
