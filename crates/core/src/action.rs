//! Declaring an action: what the model may ask for, and how the gate treats it.

use std::fmt::Display;
use std::future::Future;
use std::rc::Rc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::handoff::Handoff;
use crate::policy::{ApprovalPolicy, Confirm, Kind};

pub use crate::countersignature::LocalBoxFuture;

/// An action's own judgement of one call's arguments. It can raise the bar, never lower it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The policy applies unchanged.
    Allow,
    /// A person must approve these arguments.
    Ask,
    /// Refused with `POLICY_DENIED`; the reason goes to the model.
    Deny(String),
}

type RunFn<P> = dyn Fn(P) -> LocalBoxFuture<Result<Value, String>>;
type SignedRunFn<P> =
    dyn Fn(P, crate::countersignature::Countersignature) -> LocalBoxFuture<Result<Value, String>>;
type CheckFn<P> = dyn Fn(&P) -> Result<(), String>;
type ClassifyFn<P> = dyn Fn(&P) -> Verdict;
type TextFn<P> = dyn Fn(&P) -> String;
type VerifyFn<P> = dyn Fn(&P, &Value) -> Result<(), String>;
type RememberFn<P> = dyn Fn(&P) -> crate::grant_rule::GrantRule;
type PreviewFn<P> = dyn Fn(&P) -> crate::preview::Preview;
type QuestionFn<P> = dyn Fn(&P) -> String;
type RewriteFn<P> = dyn Fn(&P) -> Rewrite;

/// What an action's rewrite hook does with a call before it is approved or run.
#[derive(Clone, Debug, PartialEq)]
pub enum Rewrite {
    /// Run it as asked.
    Keep,
    /// Run it with these arguments instead (normalised); the card shows them.
    Arguments(Value),
    /// Run another action instead (a downgrade: delete → move to trash).
    Action {
        /// The replacement action's id.
        action: String,
        /// Its arguments.
        arguments: Value,
        /// Why, for the audit.
        why: String,
    },
}

/// A declared action with typed params `P`.
///
/// The model's schema is derived from `P` and arguments are read into `P` with unknown
/// fields refused, so the two cannot drift. It `run`s or has a [`Handoff`]: one, not both.
/// Hooks (the closures below, `run` until it returns its future, a handoff's `expect`) must
/// not call back into the executor except [`Executor::mode`](crate::executor::Executor::mode):
/// such a call gets [`Blocked::Reentered`](crate::ticket::Blocked::Reentered), and the tool
/// call the hook was deciding is refused (`hook_reentered`).
/// `run`'s future may use the executor freely. A hook that panics poisons the executor.
pub struct Action<P> {
    /// What the gate knows of it; `into_erased` fills in the derived fields.
    pub(crate) meta: ActionMeta,
    pub(crate) available: Option<Rc<dyn Fn() -> bool>>,
    pub(crate) validator: Option<Rc<CheckFn<P>>>,
    pub(crate) classify: Option<Rc<ClassifyFn<P>>>,
    pub(crate) consequence: Option<Rc<TextFn<P>>>,
    pub(crate) run: Option<Rc<RunFn<P>>>,
    pub(crate) run_signed: Option<Rc<SignedRunFn<P>>>,
    pub(crate) verify: Option<Rc<VerifyFn<P>>>,
    pub(crate) remember: Option<Rc<RememberFn<P>>>,
    pub(crate) preview: Option<Rc<PreviewFn<P>>>,
    pub(crate) second_question: Option<Rc<QuestionFn<P>>>,
    pub(crate) rewrite: Option<Rc<RewriteFn<P>>>,
}

impl<P> std::fmt::Debug for Action<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Action")
            .field("meta", &self.meta)
            .field("has_run", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

impl<P> Action<P>
where
    P: DeserializeOwned + JsonSchema + Clone + 'static,
{
    /// An action with `id` (what the model calls) and a description for the model.
    /// Defaults: kind `Read`, confirm unset, no scope, always available.
    pub fn new(id: impl Into<String>, description: impl Into<String>) -> Self {
        let id: std::sync::Arc<str> = id.into().into();
        Self {
            meta: ActionMeta {
                title: std::sync::Arc::clone(&id),
                id,
                declaration: String::new(),
                description: description.into(),
                kind: Kind::Read,
                confirm: Confirm::Unset,
                policy: ApprovalPolicy::resolve(Kind::Read, Confirm::Unset),
                scope: None,
                schema: Value::Null,
                handoff: None,
                reversal: false,
                returns_untrusted: false,
                confirm_twice: false,
                approval_timeout: None,
                question: None,
                countersigned: false,
                presence: crate::countersignature::Presence::Click,
                callers: crate::call::Caller::ALL.to_vec(),
            },
            available: None,
            validator: None,
            classify: None,
            consequence: None,
            run: None,
            run_signed: None,
            verify: None,
            remember: None,
            preview: None,
            second_question: None,
            rewrite: None,
        }
    }

    /// A question instead of a run: the validated answer is the result, or `QUESTION_DECLINED`.
    pub fn question(mut self, question: crate::question::Question) -> Self {
        self.meta.question = Some(question);
        self
    }

    /// The action's id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The title the person sees on an approval card. Defaults to the id.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.meta.title = title.into().into();
        self
    }

    /// The risk kind. Default `Read`.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.meta.kind = kind;
        self
    }

    /// The confirm override. Default unset (the kind decides).
    pub fn confirm(mut self, confirm: Confirm) -> Self {
        self.meta.confirm = confirm;
        self
    }

    /// The scope the session's role must hold. Default none.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.meta.scope = Some(scope.into());
        self
    }

    /// A check of live page state, run again on approval: `false` refuses the call
    /// (`UNAVAILABLE`) and hides the action from the model.
    pub fn available(mut self, check: impl Fn() -> bool + 'static) -> Self {
        self.available = Some(Rc::new(check));
        self
    }

    /// Extra checks of the typed params; an `Err` is `INVALID_ARGS`.
    pub fn validate(mut self, check: impl Fn(&P) -> Result<(), String> + 'static) -> Self {
        self.validator = Some(Rc::new(check));
        self
    }

    /// The action's allow / ask / deny judgement of each call; run again on approval.
    pub fn classify(mut self, classify: impl Fn(&P) -> Verdict + 'static) -> Self {
        self.classify = Some(Rc::new(classify));
        self
    }

    /// What the call will do, in the action's words: the card and the model's messages
    /// use it. Computed again on approval; if it changed, the card is shown again.
    pub fn consequence(mut self, text: impl Fn(&P) -> String + 'static) -> Self {
        self.consequence = Some(Rc::new(text));
        self
    }

    /// What the action does. Its output goes into the receipt; an `Err` is `EXECUTION_FAILED`.
    pub fn run<F, Fut, T, E>(mut self, run: F) -> Self
    where
        F: Fn(P) -> Fut + 'static,
        Fut: Future<Output = Result<T, E>> + 'static,
        T: Serialize + 'static,
        E: Display,
    {
        self.run_signed = None;
        self.run = Some(Rc::new(move |params: P| encode_output(run(params))));
        self
    }

    /// Replaces [`Action::run`] for a backend that checks a person approved this call: `run`
    /// also gets the call's [`Countersignature`](crate::countersignature::Countersignature),
    /// minted after approval, to send along. Always asked, never run by a mode, covered by a
    /// grant only with a token naming it. No token: `NOT_COUNTERSIGNED`, and `run` is not reached.
    pub fn run_countersigned<F, Fut, T, E>(mut self, run: F) -> Self
    where
        F: Fn(P, crate::countersignature::Countersignature) -> Fut + 'static,
        Fut: Future<Output = Result<T, E>> + 'static,
        T: Serialize + 'static,
        E: Display,
    {
        self.run = None;
        self.run_signed = Some(Rc::new(move |params: P, token| {
            encode_output(run(params, token))
        }));
        self
    }

    /// Mints the token only once the person also verifies the call with their passkey
    /// (WebAuthn, user verification, a challenge bound to the call): `presence: "passkey"`.
    /// Otherwise `NOT_COUNTERSIGNED`. Registration needs [`Action::run_countersigned`].
    pub fn needs_passkey(mut self) -> Self {
        self.meta.presence = crate::countersignature::Presence::Passkey;
        self
    }

    /// Approved only in the gateway's approval window (own origin, the approver's passkey, the
    /// card drawn from the server's declarations), which mints no other token for it: one that
    /// says `presence: "window"` and names the approver. Needs [`Action::run_countersigned`].
    pub fn needs_window(mut self) -> Self {
        self.meta.presence = crate::countersignature::Presence::Window;
        self
    }

    /// Only these callers may call it; to others it is unlisted and `UNKNOWN_ACTION`.
    pub fn only_for(mut self, callers: impl IntoIterator<Item = crate::call::Caller>) -> Self {
        let mut callers: Vec<crate::call::Caller> = callers.into_iter().collect();
        callers.sort_unstable();
        callers.dedup();
        self.meta.callers = callers;
        self
    }

    /// Reads real state after `run` to confirm the effect; an `Err` is `VERIFY_FAILED`.
    pub fn verify(mut self, verify: impl Fn(&P, &Value) -> Result<(), String> + 'static) -> Self {
        self.verify = Some(Rc::new(verify));
        self
    }

    /// What "always allow this session" covers, from the approved call's arguments (default: all).
    pub fn remember(mut self, rule: impl Fn(&P) -> crate::grant_rule::GrantRule + 'static) -> Self {
        self.remember = Some(Rc::new(rule));
        self
    }

    /// A dry run of what the call would change, shown on the card; computed again on approval.
    pub fn preview(mut self, dry_run: impl Fn(&P) -> crate::preview::Preview + 'static) -> Self {
        self.preview = Some(Rc::new(dry_run));
        self
    }

    /// A second question the person must also say yes to; no "always allow", no grant skips it.
    pub fn confirm_twice(mut self, question: impl Fn(&P) -> String + 'static) -> Self {
        self.second_question = Some(Rc::new(question));
        self
    }

    /// Rewrites a call before approval (normalised arguments, a safer action); the new call
    /// goes through the whole pipeline again.
    pub fn rewrite(mut self, hook: impl Fn(&P) -> Rewrite + 'static) -> Self {
        self.rewrite = Some(Rc::new(hook));
        self
    }

    /// Marks a reversal (undo, close, cancel), which a broken policy file does not block:
    /// it gets the last good file's scopes and levels, or "ask every time". No mode lowers
    /// its level; with nobody there it is refused.
    pub fn reversal(mut self) -> Self {
        self.meta.reversal = true;
        self
    }

    /// Marks what this action returns as untrusted: words others wrote (comments, documents,
    /// search results) may hold instructions. After it runs, until the person's next message,
    /// every `Write` or `Danger` call is asked one level higher, and no grant covers it.
    pub fn returns_untrusted(mut self) -> Self {
        self.meta.returns_untrusted = true;
        self
    }

    /// How long its cards wait before `APPROVAL_TIMEOUT` (a redrawn card gets a fresh deadline).
    /// Default: the executor's [`approval_timeout`](crate::executor::Config::approval_timeout).
    pub fn approval_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.meta.approval_timeout = Some(timeout);
        self
    }

    /// Makes the last step the person's: nothing runs; the executor waits for `expect`.
    pub fn handoff(mut self, handoff: Handoff) -> Self {
        self.meta.handoff = Some(handoff);
        self
    }

    pub(crate) fn into_erased(mut self) -> Rc<dyn ErasedAction> {
        let meta = &mut self.meta;
        meta.schema = crate::projection::schema_for::<P>();
        meta.policy = ApprovalPolicy::resolve(meta.kind, meta.confirm);
        meta.confirm_twice = self.second_question.is_some();
        meta.countersigned = self.run_signed.is_some();
        // Grants bind this: a changed declaration under the same id inherits none.
        meta.declaration = crate::digest::ArgsDigest::of_value(&serde_json::json!({
            "id": meta.id,
            "kind": meta.kind,
            "confirm": meta.confirm,
            "scope": meta.scope,
            "schema": meta.schema,
            "confirm_twice": meta.confirm_twice,
            "remember": self.remember.is_some(),
            "reversal": meta.reversal,
            "handoff": meta.handoff.is_some(),
            "question": meta.question.as_ref().map(|q| &q.schema),
            "countersigned": meta.countersigned,
            "presence": meta.presence,
            "callers": meta.callers,
        }))
        .to_hex();
        Rc::new(Typed {
            action: Rc::new(self),
        })
    }
}

/// A run's future with its output as JSON; a `Value` is taken as it is, not re-encoded.
fn encode_output<Fut, T, E>(fut: Fut) -> LocalBoxFuture<Result<Value, String>>
where
    Fut: Future<Output = Result<T, E>> + 'static,
    T: Serialize + 'static,
    E: Display,
{
    Box::pin(async move {
        match fut.await {
            Ok(output) => {
                let mut slot = Some(output);
                let any: &mut dyn std::any::Any = &mut slot;
                match any.downcast_mut::<Option<Value>>().and_then(Option::take) {
                    Some(value) => Ok(value),
                    None => serde_json::to_value(slot)
                        .map_err(|e| format!("its result could not be encoded ({e})")),
                }
            }
            Err(e) => Err(e.to_string()),
        }
    })
}

/// What the executor knows of a registered action without its param type.
#[derive(Debug, Clone)]
pub(crate) struct ActionMeta {
    /// Shared with every settlement and receipt of the action.
    pub(crate) id: std::sync::Arc<str>,
    /// The digest of the declaration's gate-relevant parts, hex (grants bind it).
    pub(crate) declaration: String,
    pub(crate) title: std::sync::Arc<str>,
    pub(crate) description: String,
    pub(crate) kind: Kind,
    pub(crate) confirm: Confirm,
    pub(crate) policy: ApprovalPolicy,
    pub(crate) scope: Option<String>,
    pub(crate) schema: Value,
    pub(crate) handoff: Option<Handoff>,
    pub(crate) reversal: bool,
    pub(crate) returns_untrusted: bool,
    pub(crate) confirm_twice: bool,
    pub(crate) approval_timeout: Option<std::time::Duration>,
    pub(crate) question: Option<crate::question::Question>,
    pub(crate) countersigned: bool,
    pub(crate) presence: crate::countersignature::Presence,
    pub(crate) callers: Vec<crate::call::Caller>,
}

pub(crate) trait ErasedAction {
    fn meta(&self) -> &ActionMeta;
    fn is_available(&self) -> bool;
    /// Deserialises and validates `args` into a call bound to these params.
    fn prepare(&self, args: &Value) -> Result<Rc<dyn PreparedCall>, String>;
}

/// One call's typed params together with the action's hooks.
pub(crate) trait PreparedCall {
    fn consequence(&self) -> Option<String>;
    fn classify(&self) -> Verdict;
    fn run(&self) -> Option<LocalBoxFuture<Result<Value, String>>>;
    fn run_countersigned(
        &self,
        token: crate::countersignature::Countersignature,
    ) -> Option<LocalBoxFuture<Result<Value, String>>>;
    fn verify(&self, output: &Value) -> Result<(), String>;
    fn grant_rule(&self) -> Option<crate::grant_rule::GrantRule>;
    fn preview(&self) -> Option<crate::preview::Preview>;
    fn second_question(&self) -> Option<String>;
    fn rewrite(&self) -> Option<Rewrite>;
}

struct Typed<P> {
    action: Rc<Action<P>>,
}

struct Bound<P> {
    params: P,
    action: Rc<Action<P>>,
}

impl<P> ErasedAction for Typed<P>
where
    P: DeserializeOwned + JsonSchema + Clone + 'static,
{
    fn meta(&self) -> &ActionMeta {
        &self.action.meta
    }

    fn is_available(&self) -> bool {
        self.action.available.as_ref().is_none_or(|check| check())
    }

    fn prepare(&self, args: &Value) -> Result<Rc<dyn PreparedCall>, String> {
        let params: P = crate::arguments::into_params(args)?;
        // INVARIANT: a field the model was not shown is refused in every serde shape
        // (tagged and untagged enums, flatten), not only where serde notices it.
        if let Some(why) = crate::schema_check::misfit(&self.action.meta.schema, args) {
            return Err(why);
        }
        if let Some(check) = &self.action.validator {
            check(&params)?;
        }
        Ok(Rc::new(Bound {
            params,
            action: Rc::clone(&self.action),
        }))
    }
}

impl<P: Clone + 'static> PreparedCall for Bound<P> {
    fn consequence(&self) -> Option<String> {
        Some(self.action.consequence.as_ref()?(&self.params))
    }

    fn classify(&self) -> Verdict {
        self.action
            .classify
            .as_ref()
            .map_or(Verdict::Allow, |classify| classify(&self.params))
    }

    fn run(&self) -> Option<LocalBoxFuture<Result<Value, String>>> {
        Some(self.action.run.as_ref()?(self.params.clone()))
    }

    fn run_countersigned(
        &self,
        token: crate::countersignature::Countersignature,
    ) -> Option<LocalBoxFuture<Result<Value, String>>> {
        Some(self.action.run_signed.as_ref()?(self.params.clone(), token))
    }

    fn verify(&self, output: &Value) -> Result<(), String> {
        self.action
            .verify
            .as_ref()
            .map_or(Ok(()), |verify| verify(&self.params, output))
    }

    fn grant_rule(&self) -> Option<crate::grant_rule::GrantRule> {
        Some(self.action.remember.as_ref()?(&self.params))
    }

    fn preview(&self) -> Option<crate::preview::Preview> {
        Some(self.action.preview.as_ref()?(&self.params))
    }

    fn second_question(&self) -> Option<String> {
        Some(self.action.second_question.as_ref()?(&self.params))
    }

    fn rewrite(&self) -> Option<Rewrite> {
        Some(self.action.rewrite.as_ref()?(&self.params))
    }
}

/// Params for an action that takes none: `{}` (or empty text) and nothing else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}
