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
        let executor = u64::from_le_bytes(first8(&Sha256::digest(
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

    pub(crate) fn approve(&mut self, ticket: Ticket, now: Timestamp) -> Result<Next, TicketError> {
        self.tick(now);
        if ticket.executor != self.executor {
            return Err(TicketError::ForeignExecutor);
        }
        let Some(live) = self.live.get(&ticket.call) else {
            return Err(TicketError::NotPending);
        };
        let LiveState::Approval(request) = &live.state else {
            return Err(TicketError::NotPending);
        };
        if now >= request.deadline {
            self.expire_approval(ticket.call, now);
            return Err(TicketError::Expired);
        }
        // INVARIANT: the ticket is bound to this card's action, exact arguments and nonce.
        if ticket.action != request.action
            || ticket.args_sha256 != request.args_sha256
            || ticket.nonce != request.nonce
            || ticket.args_sha256 != live.digest
        {
            return Err(TicketError::Mismatch);
        }
        if ticket.gesture == Gesture::AllowForSession && !request.offers_session_grant {
            return Err(TicketError::GrantNotOffered);
        }
        let call = ticket.call;
        let action = Rc::clone(&live.action);
        let generation = live.generation;
        let title = request.title.clone();
        let card = (**request).clone();
        let still_registered = self
            .actions
            .get(&action.meta().id)
            .is_some_and(|e| e.generation == generation);
        if !still_registered || !action.is_available() {
            let r = stages::unavailable(
                &action.meta().id,
                "stopped being available before it could run",
            );
            self.settle(
                call,
                Outcome::Refused(r),
                Stage::Availability,
                Decider::Pipeline,
                now,
            );
            return Ok(Next::Settled(self.last_settled_for(call)?));
        }
        let (event, reason) = match ticket.gesture {
            Gesture::AllowOnce => (
                AuditEvent::Approved,
                "the person allowed it once".to_owned(),
            ),
            Gesture::AllowForSession => {
                let rule = request
                    .grant_rule
                    .clone()
                    .unwrap_or_else(|| crate::GrantRule::any(format!("every call of {title}")));
                let id = self.add_grant(&action.meta().id, &title, rule, now, call);
                let reason = format!("the person allowed it for the session (grant {})", id.0);
                (AuditEvent::Granted, reason)
            }
        };
        self.record_live(
            call,
            Stage::Approve,
            event,
            Decider::Person,
            None,
            reason,
            now,
        );
        if action.meta().confirm_twice && card.round == 1 {
            // INVARIANT: a double-confirmed action runs only after a second ticket, minted
            // from a second card with its own nonce.
            let mut second = card;
            second.round = 2;
            second.question = self
                .live
                .get(&call)
                .and_then(|l| l.prepared.second_question());
            second.asked_at = now;
            second.deadline = now.saturating_add(self.config.approval_timeout);
            second.nonce = self.nonce(call, 2);
            if let Some(live) = self.live.get_mut(&call) {
                live.state = LiveState::Approval(Box::new(second.clone()));
            }
            let reason = "the action asks a second, differently worded question".to_owned();
            self.record_live(
                call,
                Stage::Approve,
                AuditEvent::Asked,
                Decider::Policy,
                None,
                reason,
                now,
            );
            return Ok(Next::Approval(Box::new(second)));
        }
        let fut = self.live.get(&call).and_then(|l| l.prepared.run());
        match fut {
            Some(fut) => {
                if let Some(live) = self.live.get_mut(&call) {
                    live.state = LiveState::Performing;
                }
                Ok(Next::Perform(call, fut))
            }
            None => {
                let r = nothing_to_run(&action.meta().id);
                self.settle(
                    call,
                    Outcome::Refused(r),
                    Stage::Perform,
                    Decider::Action,
                    now,
                );
                Ok(Next::Settled(self.last_settled_for(call)?))
            }
        }
    }

    pub(crate) fn deny(
        &mut self,
        call: CallId,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<Settled, NotPending> {
        self.tick(now);
        let live = self.live.get(&call).ok_or(NotPending)?;
        let LiveState::Approval(request) = &live.state else {
            return Err(NotPending);
        };
        let mut message = format!(
            "the person declined {}; it was not done",
            with_consequence(&request.action, request.consequence.as_deref())
        );
        if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
            message.push_str(&format!(". their reason: {}", quote(reason, 500)));
        }
        message.push_str(". do not retry without asking the user");
        let r = refusal(Code::PermissionDenied, Stage::Approve, message);
        self.settle(
            call,
            Outcome::Refused(r),
            Stage::Approve,
            Decider::Person,
            now,
        );
        self.last_settled_for(call).map_err(|_| NotPending)
    }

    /// Settles a finished `run`: `EXECUTION_FAILED`, `VERIFY_FAILED` or a receipt.
    pub(crate) fn complete(
        &mut self,
        call: CallId,
        result: Result<Value, String>,
        now: Timestamp,
    ) -> Option<Settled> {
        self.tick(now);
        let live = self.live.get(&call)?;
        if !matches!(live.state, LiveState::Performing) {
            return None;
        }
        let id = live.action.meta().id.clone();
        let (outcome, stage, by) = match result {
            Err(e) => (
                Outcome::Refused(refusal(
                    Code::ExecutionFailed,
                    Stage::Perform,
                    format!("{} failed: {}", name(&id), quote(&e, 500)),
                )),
                Stage::Perform,
                Decider::Action,
            ),
            Ok(output) => match live.prepared.verify(&output) {
                Err(e) => (
                    Outcome::Refused(refusal(
                        Code::VerifyFailed,
                        Stage::Verify,
                        format!(
                            "{} ran, but the check found it did not take effect: {}. tell the user; do not claim it was done",
                            name(&id),
                            quote(&e, 500)
                        ),
                    )),
                    Stage::Verify,
                    Decider::Action,
                ),
                Ok(()) => (
                    Outcome::Done(Receipt {
                        title: live.action.meta().title.clone(),
                        action: id,
                        consequence: live.consequence.clone(),
                        done_by: DoneBy::Assistant,
                        result: output,
                    }),
                    Stage::Verify,
                    Decider::Action,
                ),
            },
        };
        self.settle(call, outcome, stage, by, now);
        self.last_settled_for(call).ok()
    }

    pub(crate) fn abandon(&mut self, call: CallId) {
        if self
            .live
            .get(&call)
            .is_some_and(|l| matches!(l.state, LiveState::Performing))
        {
            let id = self
                .live
                .get(&call)
                .map(|l| l.action.meta().id.clone())
                .unwrap_or_default();
            let r = refusal(
                Code::ExecutionFailed,
                Stage::Perform,
                format!("{} was interrupted before it finished; whether it took effect is unknown. ask the user", name(&id)),
            );
            let now = self.last_now;
            self.settle(
                call,
                Outcome::Refused(r),
                Stage::Perform,
                Decider::Host,
                now,
            );
        }
    }

    /// The person says the handoff is done, or cancels it.
    pub(crate) fn handoff_event(
        &mut self,
        call: CallId,
        done: bool,
        now: Timestamp,
    ) -> Result<Settled, NotPending> {
        self.tick(now);
        let live = self.live.get_mut(&call).ok_or(NotPending)?;
        let LiveState::Handoff(machine) = &mut live.state else {
            return Err(NotPending);
        };
        let state = if done {
            let holds = live
                .action
                .meta()
                .handoff
                .as_ref()
                .is_some_and(|h| h.expect.holds());
            machine.done(now, holds)
        } else {
            machine.cancel(now)
        };
        self.settle_handoff(call, state, now);
        self.last_settled_for(call).map_err(|_| NotPending)
    }

    pub(crate) fn show_step(&mut self, call: CallId, index: usize) -> Result<(), NotPending> {
        match self.live.get_mut(&call).map(|l| &mut l.state) {
            Some(LiveState::Handoff(machine)) if !machine.state().is_terminal() => {
                machine.show_step(index);
                Ok(())
            }
            _ => Err(NotPending),
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

    fn expire_approval(&mut self, call: CallId, now: Timestamp) {
        let Some(LiveState::Approval(request)) = self.live.get(&call).map(|l| &l.state) else {
            return;
        };
        let r = refusal(
            Code::ApprovalTimeout,
            Stage::Approve,
            format!(
                "nobody approved {} in time; it was not done. ask the user before trying again",
                with_consequence(&request.action, request.consequence.as_deref())
            ),
        );
        self.settle(
            call,
            Outcome::Refused(r),
            Stage::Approve,
            Decider::Timer,
            now,
        );
    }

    fn settle_handoff(&mut self, call: CallId, state: HandoffState, now: Timestamp) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let meta = live.action.meta();
        let id = meta.id.clone();
        let expect = meta
            .handoff
            .as_ref()
            .map(|h| h.expect.description.clone())
            .unwrap_or_default();
        let timeout_s = meta.handoff.as_ref().map_or(0, |h| h.timeout.as_secs());
        let (outcome, by) = match state {
            HandoffState::Waiting => return,
            HandoffState::Completed => (
                Outcome::Done(Receipt {
                    title: meta.title.clone(),
                    action: id,
                    consequence: live.consequence.clone(),
                    done_by: DoneBy::Person,
                    result: json!({ "handoff": "completed", "expect": expect }),
                }),
                Decider::Person,
            ),
            HandoffState::Cancelled => (
                Outcome::Refused(refusal(
                    Code::HandoffCancelled,
                    Stage::Perform,
                    format!("the person cancelled the handoff for {}; the step was not done. ask the user what to do next", name(&id)),
                )),
                Decider::Person,
            ),
            HandoffState::TimedOut => (
                Outcome::Refused(refusal(
                    Code::HandoffTimeout,
                    Stage::Perform,
                    format!("the handoff for {} timed out after {timeout_s} s; the step was not done. ask the user what to do next", name(&id)),
                )),
                Decider::Timer,
            ),
            HandoffState::Failed => (
                Outcome::Refused(refusal(
                    Code::HandoffFailed,
                    Stage::Verify,
                    format!(
                        "the person said the step for {} was done, but {} does not hold; it did not happen. ask the user what to do next",
                        name(&id),
                        quote(&expect, 200)
                    ),
                )),
                Decider::Action,
            ),
        };
        let stage = match &outcome {
            Outcome::Refused(r) => r.stage,
            Outcome::Done(_) => Stage::Verify,
        };
        self.settle(call, outcome, stage, by, now);
    }

    fn last_settled_for(&self, call: CallId) -> Result<Settled, TicketError> {
        self.settled
            .iter()
            .rev()
            .find(|s| s.call == call)
            .cloned()
            .ok_or(TicketError::NotPending)
    }

    /// Ends a live call: removes it, writes its one terminal record, queues the result.
    pub(crate) fn settle(
        &mut self,
        call: CallId,
        outcome: Outcome,
        stage: Stage,
        by: Decider,
        now: Timestamp,
    ) {
        // INVARIANT: a call leaves `live` exactly once, so it settles exactly once.
        let Some(live) = self.live.remove(&call) else {
            return;
        };
        let ctx = Ctx {
            call,
            tool_call_id: &live.tool_call_id,
            action_id: &live.action.meta().id,
            meta: Some(live.action.meta()),
            digest: live.digest,
            started: live.started,
        };
        let reason = reason_of(&outcome);
        self.record(
            &ctx,
            stage,
            AuditEvent::Settled,
            by,
            Some(&outcome),
            reason,
            now,
        );
        self.settled.push_back(Settled {
            call,
            tool_call_id: live.tool_call_id.clone(),
            action: live.action.meta().id.clone(),
            outcome,
        });
    }

    /// Ends a call refused before it became live.
    fn refuse_early(&mut self, ctx: &Ctx<'_>, r: Refusal, by: Decider, now: Timestamp) -> Settled {
        let outcome = Outcome::Refused(r);
        let stage = match &outcome {
            Outcome::Refused(r) => r.stage,
            Outcome::Done(_) => Stage::Verify,
        };
        self.record(
            ctx,
            stage,
            AuditEvent::Settled,
            by,
            Some(&outcome),
            reason_of(&outcome),
            now,
        );
        let settled = Settled {
            call: ctx.call,
            tool_call_id: ctx.tool_call_id.to_owned(),
            action: ctx
                .action_id
                .chars()
                .take(crate::registry::MAX_ACTION_ID_LEN)
                .collect(),
            outcome,
        };
        self.settled.push_back(settled.clone());
        settled
    }

    #[allow(clippy::too_many_arguments)]
    fn record_live(
        &mut self,
        call: CallId,
        stage: Stage,
        event: AuditEvent,
        by: Decider,
        outcome: Option<&Outcome>,
        reason: String,
        now: Timestamp,
    ) {
        let Some(live) = self.live.get(&call) else {
            return;
        };
        let action = Rc::clone(&live.action);
        let tool_call_id = live.tool_call_id.clone();
        let ctx = Ctx {
            call,
            tool_call_id: &tool_call_id,
            action_id: &action.meta().id,
            meta: Some(action.meta()),
            digest: live.digest,
            started: live.started,
        };
        self.record(&ctx, stage, event, by, outcome, reason, now);
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        ctx: &Ctx<'_>,
        stage: Stage,
        event: AuditEvent,
        by: Decider,
        outcome: Option<&Outcome>,
        reason: String,
        now: Timestamp,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let duration = now.saturating_since(ctx.started);
        self.audit.record(AuditRecord {
            id: format!("{}-{seq}", self.config.session_id),
            seq,
            session: self.config.session_id.clone(),
            role: self.config.session.role.clone(),
            at_ms: now.as_millis(),
            call: ctx.call.get(),
            tool_call_id: ctx.tool_call_id.chars().take(128).collect(),
            action: truncate_escaped(ctx.action_id, crate::registry::MAX_ACTION_ID_LEN),
            kind: ctx.meta.map(|m| m.kind),
            confirm: ctx.meta.map(|m| m.confirm),
            policy: ctx.meta.map(|m| self.effective_policy(m)),
            mode: self.mode,
            stage,
            event,
            decided_by: by,
            outcome: outcome.map(|o| o.code_str().to_owned()),
            reason,
            args_sha256: ctx.digest.to_hex(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        });
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
        let mut out = [0u8; 16];
        for (slot, byte) in out.iter_mut().zip(digest.iter()) {
            *slot = *byte;
        }
        Nonce(out)
    }
}

fn first8(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    for (slot, byte) in out.iter_mut().zip(bytes.iter()) {
        *slot = *byte;
    }
    out
}

fn truncate_escaped(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .flat_map(char::escape_default)
        .collect()
}

fn reason_of(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Done(_) => "done and verified".to_owned(),
        // The message may quote arguments (a consequence, a serde error); the audit
        // keeps only the digest, so it gets the code's fixed sentence.
        Outcome::Refused(r) => r.code.summary().to_owned(),
    }
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
