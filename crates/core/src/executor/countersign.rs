//! perform, for an action whose run takes a countersignature: the host mints a token for
//! exactly this approval, then the run gets it. Without a token the run is never reached
//! (`NOT_COUNTERSIGNED`).

use std::rc::Rc;

use serde_json::Value;

use crate::action::{LocalBoxFuture, PreparedCall};
use crate::audit::Decider;
use crate::call::CallId;
use crate::countersignature::{ApprovedBy, Countersignature, MintRequest};
use crate::digest::ArgsDigest;
use crate::reason::{Hook, Reason};
use crate::ticket::{CardDigest, GrantId};

use super::live::Decided;
use super::state::{ExecutorState, Stop};

/// Why a job ended without a result.
#[derive(Debug)]
pub(crate) enum RunError {
    /// `run` reported failure (`EXECUTION_FAILED`).
    Failed(String),
    /// No token could be minted; `run` was not reached (`NOT_COUNTERSIGNED`).
    NotCountersigned(String),
}

/// What a job awaits.
pub(crate) enum Task {
    /// The action's `run`.
    Run(LocalBoxFuture<Result<Value, String>>),
    /// A mint, then (if the call is still wanted) the action's `run` with the token.
    Countersigned {
        mint: LocalBoxFuture<Result<Countersignature, String>>,
        prepared: Rc<dyn PreparedCall>,
    },
}

impl Task {
    /// Runs the task; `still_wanted` is asked before the run (and the mint's run), so a
    /// call settled meanwhile (the page shut down) or a poisoned executor never runs it.
    pub(crate) async fn finish(self, still_wanted: impl Fn() -> bool) -> Result<Value, RunError> {
        // INVARIANT: nothing is minted or run for a call that has ended, or once the
        // executor is poisoned.
        if !still_wanted() {
            let ended = "the call ended before it could run".to_owned();
            return Err(match self {
                Task::Run(_) => RunError::Failed(ended),
                Task::Countersigned { .. } => RunError::NotCountersigned(ended),
            });
        }
        match self {
            Task::Run(run) => run.await.map_err(RunError::Failed),
            Task::Countersigned { mint, prepared } => {
                let token = mint.await.map_err(RunError::NotCountersigned)?;
                if !still_wanted() {
                    return Err(RunError::NotCountersigned(
                        "the call ended while its countersignature was minted".into(),
                    ));
                }
                match prepared.run_countersigned(token) {
                    Some(run) => run.await.map_err(RunError::Failed),
                    None => Err(RunError::Failed("the action has nothing to run".into())),
                }
            }
        }
    }
}

/// A person's approval, as a token states it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Approval {
    pub(crate) by: ApprovedBy,
    pub(crate) card: Option<CardDigest>,
    pub(crate) grant: Option<GrantId>,
}

impl ExecutorState {
    /// The task of a call allowed to run. `approval` is the person's decision (a card's
    /// gesture, or the grant that covered it); an action that takes a countersignature
    /// runs only with one, and never without a person's approval.
    pub(crate) fn task(
        &self,
        call: CallId,
        tool_call_id: &str,
        decided: &Decided,
        approval: Option<Approval>,
    ) -> Result<Task, Stop> {
        let meta = decided.action.meta();
        // The declaration's presence, raised (never lowered) by the policy file.
        let presence = match self.policy.file() {
            Some(file) => meta
                .presence
                .max(file.presence(&self.config.session.role, &meta.id)),
            None => meta.presence,
        };
        // An agent outside the page may drive the browser itself (its clicks are then
        // trusted events): where the page says so, only the person's passkey approves
        // what an agent asked for.
        let presence = if self.config.agents_need_passkey
            && !decided.caller.is_assistant()
            && meta.countersigned
        {
            presence.max(crate::countersignature::Presence::Passkey)
        } else {
            presence
        };
        if !meta.countersigned {
            if presence != crate::countersignature::Presence::Click {
                return Err(Stop::new(Reason::NotCountersigned, Decider::Policy).with(
                    "the policy file asks a passkey or the approval window for this action, but its run takes no countersignature",
                ));
            }
            return match self.hook(Hook::Run, || decided.prepared.run())? {
                Some(run) => Ok(Task::Run(run)),
                None => Err(Stop::new(Reason::NothingToRun, Decider::Action)),
            };
        }
        let unsigned = |why: &str| Stop::new(Reason::NotCountersigned, Decider::Host).with(why);
        // INVARIANT: a token states a person's approval; nothing else asks for one.
        let Some(approval) = approval else {
            return Err(unsigned("no person approved this call"));
        };
        let Some(signer) = self.countersigner.clone() else {
            return Err(unsigned(
                "this page has no countersigner: it is not served through a gateway that mints them",
            ));
        };
        let request = MintRequest {
            call,
            tool_call_id: tool_call_id.to_owned(),
            action: decided.action.meta().id.to_string(),
            kind: decided.action.meta().kind,
            args_sha256: ArgsDigest::of_value(&decided.arguments),
            card_sha256: approval.card,
            approved_by: approval.by,
            grant: approval.grant,
            session: self.config.session_id.clone(),
            role: self.config.session.role.clone(),
            presence,
            caller: decided.caller,
            arguments: decided.arguments.clone(),
        };
        let arguments = decided.arguments.clone();
        let mint = Box::pin(async move {
            let token = signer.mint(request).await?;
            Ok(Countersignature { arguments, ..token })
        });
        Ok(Task::Countersigned {
            mint,
            prepared: Rc::clone(&decided.prepared),
        })
    }
}
