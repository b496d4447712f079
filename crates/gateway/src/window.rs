//! The approval window: an approval surface on an origin of its own (for example
//! `http://approve.localhost:8787` beside the page's `http://localhost:8787`), which no
//! script of the app's page can reach into.
//!
//! - The card it shows is drawn from the server's own declarations (the app's actions,
//!   compiled natively into the server that embeds this gateway: [`Declare`]), from the
//!   call's action and arguments only. Nothing the page says about the card is shown.
//! - The person confirms with a passkey registered for the window's origin (user
//!   verification required), over a challenge that binds the call, the window's card
//!   digest and the decision. Only then is a `presence: "window"` token minted, naming
//!   the approver (`sub`, and the trail's `approver`).
//! - An action whose declaration needs the window ([`countersign::Action::needs_window`])
//!   gets no other token: `/v1/countersign` refuses it whatever presence the page says.
//!
//! People are enrolled per role, outside the page: a one-time code for `role/person`
//! ([`ApprovalWindow::issue_enrollment_code`]), typed into the window's own enrollment
//! form. Their passkeys are kept apart from the page's (another relying party, another
//! file).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use countersign::{Caller, Executor, Kind};
use countersign_verify::{ApprovedBy, Presence};
use serde::Serialize;
use serde_json::Value;

use crate::error::{ApiError, ErrorCode};
use crate::passkeys::{PasskeyConfig, PasskeyError, Passkeys};
use crate::routes::countersign::MintBody;

mod card;
pub mod inbox;

pub use card::Drawn;

/// The most approval requests kept at once (waiting, or decided and not yet collected).
const MAX_REQUESTS: usize = 1000;
/// The most requests one page session may have waiting at once.
const MAX_PER_SESSION: usize = 16;
/// How long a decided request's answer is kept for the page to collect.
const KEEP_DECIDED: Duration = Duration::from_secs(120);

/// Builds an executor for `role` with the app's actions registered: the trusted
/// declarations the window draws its cards from (the same Rust declarations the page
/// compiles to wasm, with consequences computed from the server's own data). An `Err`
/// says why in words.
///
/// Register the same actions for every role (a role changes the session's scopes, not
/// which actions exist): the gateway asks with the role the page names, and refuses every
/// page-minted token for that role when this fails.
pub type Declare = dyn Fn(&str) -> Result<Executor, String> + Send + Sync;

/// Where the window is and how long a request waits.
#[derive(Clone, Debug)]
pub struct WindowConfig {
    /// The window's exact origin (`http://approve.localhost:8787`): a host name the page's
    /// origin cannot script. Its host name is the relying party of the window's passkeys.
    pub origin: String,
    /// The file the window's passkeys are kept in; `None` keeps them in memory.
    pub passkeys_file: Option<PathBuf>,
    /// How long a request waits for the person. Default five minutes.
    pub timeout: Duration,
    /// How long a request stays open with no page waiting for it: then the page is
    /// gone (reloaded, closed), and so is the request. Default 40 s (the page waits 25 s
    /// at a time, and asks again at once).
    pub abandoned_after: Duration,
}

impl WindowConfig {
    /// The window at `origin`, its passkeys in memory, requests waiting five minutes.
    pub fn new(origin: impl Into<String>) -> Self {
        Self {
            origin: origin.into(),
            passkeys_file: None,
            timeout: Duration::from_secs(300),
            abandoned_after: Duration::from_secs(40),
        }
    }
}

/// The card the window shows: drawn by the server's declarations, never by the page.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Card {
    /// The action's id.
    pub action: String,
    /// Its title.
    pub title: String,
    /// Its declared risk.
    pub kind: Kind,
    /// What will happen, in the declaration's words.
    pub consequence: Option<String>,
    /// The declaration's preview of the effect (a diff, counts), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<countersign::text::Preview>,
    /// The exact arguments that will run.
    pub arguments: Value,
    /// The role the call runs for (approvers enrolled for it may approve).
    pub role: String,
}

/// Where a request stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Waiting for a person.
    Waiting,
    /// A person's passkey is being checked, or the token minted.
    Deciding,
    /// Approved by `approver`; the token.
    Approved {
        /// The countersignature.
        token: String,
        /// Its id.
        jti: String,
        /// When it expires (seconds since the epoch).
        expires_at: u64,
        /// Who approved (the enrolled person's name).
        approver: String,
    },
    /// Denied in the window.
    Denied,
    /// Nobody decided before the deadline.
    Expired,
    /// The page that asked stopped waiting (it reloaded, closed, or went away).
    Abandoned,
}

impl Decision {
    /// The state's name, as the page reads it.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::Waiting => "waiting",
            Decision::Deciding => "being approved",
            Decision::Approved { .. } => "approved",
            Decision::Denied => "denied",
            Decision::Expired => "expired",
            Decision::Abandoned => "abandoned",
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Decision::Waiting | Decision::Deciding)
    }
}

/// What the page asks the window to show: the call, as the page's mint request writes
/// it, with its arguments. Nothing about the card: the window draws that itself.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opening {
    /// The page executor's call id.
    pub call: u64,
    /// The model's id for the tool call.
    pub tool_call_id: String,
    /// The action's id.
    pub action: String,
    /// The arguments that will run.
    pub arguments: Value,
    /// The page session.
    pub session: String,
    /// The session's role.
    pub role: String,
    /// Who asked (default the page's assistant).
    #[serde(default)]
    pub caller: Caller,
    /// The digest the page took of the arguments: when given, it must be theirs.
    #[serde(default)]
    pub args_sha256: Option<String>,
    /// The rest of the page's mint request (its card digest, its decision, its risk and
    /// presence): the window takes its own, and these are not read.
    #[serde(default, rename = "kind")]
    pub page_kind: Option<Value>,
    /// See `page_kind`.
    #[serde(default, rename = "card_sha256")]
    pub page_card_sha256: Option<Value>,
    /// See `page_kind`.
    #[serde(default, rename = "approved_by")]
    pub page_approved_by: Option<Value>,
    /// See `page_kind`.
    #[serde(default, rename = "grant")]
    pub page_grant: Option<Value>,
    /// See `page_kind`.
    #[serde(default, rename = "presence")]
    pub page_presence: Option<Value>,
}

/// A request as the window shows it.
#[derive(Clone, Debug)]
pub struct View {
    /// The card the server drew.
    pub card: Card,
    /// Its digest (what the person's passkey signs, in the token's entry).
    pub card_sha256: String,
    /// The page session that asked (the page's word).
    pub session: String,
    /// Who asked for the call (the page's word; the token's `act` binds it).
    pub caller: Caller,
    /// When the page asked, and until when it waits (ms since the epoch).
    pub opened_ms: u64,
    /// Until when it waits.
    pub deadline_ms: u64,
    /// Where it stands.
    pub decision: Decision,
}

struct Entry {
    card: Card,
    card_sha256: String,
    /// What the token will state (presence `window`, decided once, the window's card).
    body: MintBody,
    deadline: Instant,
    opened_ms: u64,
    deadline_ms: u64,
    decision: Decision,
    decided_at: Option<Instant>,
    /// The passkey ceremony in flight for it: one at a time.
    ceremony: Option<String>,
    /// The page's own key to it (to collect the token, or withdraw): never in the
    /// window's address, so whoever sees that (a QR code, a screen) cannot collect it.
    key: String,
    /// The page's waits in progress, and when the last one ended.
    waiters: usize,
    last_waited: Instant,
    abandoned_after: Duration,
}

/// The approval window's state: its passkeys, the app's declarations and the requests.
pub struct ApprovalWindow {
    origin: String,
    host: String,
    passkeys: Passkeys,
    declare: Box<Declare>,
    timeout: Duration,
    abandoned_after: Duration,
    requests: Mutex<HashMap<String, Entry>>,
    changed: tokio::sync::Notify,
    /// Counts changes (a request opened or decided), for the inbox's live view.
    version: tokio::sync::watch::Sender<u64>,
    /// Signed-in inbox sessions: cookie → who (`role/person`), with which credential, and
    /// until when.
    sessions: Mutex<HashMap<String, inbox::Session>>,
    /// Held for the window's life: one process at a time changes its passkey file.
    _lock: Option<std::fs::File>,
}

impl std::fmt::Debug for ApprovalWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalWindow")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn refused(code: ErrorCode, why: impl Into<String>) -> ApiError {
    ApiError::new(code, why.into())
}

/// A person's or a role's name: 1 to 64 ASCII letters, digits, `_`, `-`, `.`.
pub fn valid_name(name: &str) -> bool {
    crate::routes::passkeys::valid_user(name)
}

impl ApprovalWindow {
    /// The window of `config`, drawing cards with `declare`.
    pub fn new(
        config: &WindowConfig,
        declare: impl Fn(&str) -> Result<Executor, String> + Send + Sync + 'static,
    ) -> Result<Self, PasskeyError> {
        let url = url::Url::parse(&config.origin)
            .map_err(|e| PasskeyError::Config(format!("the window's origin: {e}")))?;
        let name = url
            .host_str()
            .ok_or_else(|| PasskeyError::Config("the window's origin has no host".into()))?;
        let host = match url.port() {
            Some(port) => format!("{name}:{port}"),
            None => name.to_owned(),
        };
        let origin = url.origin().ascii_serialization();
        // One process at a time: a second (the `approvers` command while a gateway
        // serves) would revoke in its copy only, and the two saves would undo each other.
        let lock = match &config.passkeys_file {
            Some(file) => {
                let path = file.with_extension("lock");
                let lock = std::fs::File::create(&path)
                    .map_err(|e| PasskeyError::Store(format!("{}: {e}", path.display())))?;
                lock.try_lock().map_err(|_| {
                    PasskeyError::Store(format!(
                        "{} is in use by another process (a gateway serving the window?): stop it first",
                        file.display()
                    ))
                })?;
                Some(lock)
            }
            None => None,
        };
        let passkeys = Passkeys::open(&PasskeyConfig {
            rp_id: name.to_owned(),
            rp_origin: origin.clone(),
            file: config.passkeys_file.clone(),
        })?;
        Ok(Self {
            origin,
            host: host.to_ascii_lowercase(),
            passkeys,
            declare: Box::new(declare),
            timeout: config.timeout,
            abandoned_after: config.abandoned_after,
            requests: Mutex::default(),
            changed: tokio::sync::Notify::new(),
            version: tokio::sync::watch::Sender::new(0),
            sessions: Mutex::default(),
            _lock: lock,
        })
    }

    /// The window's origin (`http://approve.localhost:8787`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether a request's `Host` is the window's.
    pub fn is_window_host(&self, host: &str) -> bool {
        host.trim().eq_ignore_ascii_case(&self.host)
    }

    /// The presence the server's declaration of `action` asks for `role`, if declared.
    /// Fails closed: a role the declarations refuse (or an invalid name) asks the window
    /// for everything.
    pub fn presence(&self, role: &str, action: &str) -> Option<Presence> {
        let Some(executor) = valid_name(role)
            .then(|| (self.declare)(role).ok())
            .flatten()
        else {
            return Some(Presence::Window);
        };
        executor.presence_of(action).map(|p| match p {
            countersign::countersignature::Presence::Click => Presence::Click,
            countersign::countersignature::Presence::Passkey => Presence::Passkey,
            countersign::countersignature::Presence::Window => Presence::Window,
        })
    }

    /// Issues a one-time enrollment code (15 minutes) for `person` to approve for `role`
    /// in the window; hand it over outside the page.
    pub fn issue_enrollment_code(&self, role: &str, person: &str) -> Result<String, PasskeyError> {
        if !valid_name(role) || !valid_name(person) {
            return Err(PasskeyError::Config(
                "a role or person name is 1 to 64 letters, digits, `_`, `-` or `.`".into(),
            ));
        }
        self.passkeys
            .issue_enrollment_code(&format!("{role}/{person}"))
    }

    /// The people enrolled, as `role/person`, with their passkeys' ids.
    pub fn approvers(&self) -> Vec<(String, Vec<String>)> {
        self.passkeys.list("")
    }

    /// Removes `role/person`'s passkeys; whether there were any.
    pub fn revoke(&self, role: &str, person: &str) -> Result<bool, PasskeyError> {
        self.passkeys.revoke(&format!("{role}/{person}"))
    }

    pub(crate) fn passkeys(&self) -> &Passkeys {
        &self.passkeys
    }

    /// Draws the card for `opening` from the declarations and keeps the request: its id
    /// (in the window's address), the page's own key to it (see [`ApprovalWindow::wait`]),
    /// the card, its digest and the deadline (ms since the epoch).
    pub fn open(&self, opening: Opening) -> Result<Opened, ApiError> {
        let bad = |why: &str| refused(ErrorCode::InvalidRequest, why);
        if !valid_name(&opening.role) {
            return Err(bad("`role` is invalid"));
        }
        let now = now_ms();
        let drawn = self.draw(
            &opening.role,
            &opening.action,
            &opening.arguments,
            opening.caller,
            &opening.tool_call_id,
        )?;
        if opening
            .args_sha256
            .as_deref()
            .is_some_and(|given| given != drawn.args_sha256)
        {
            return Err(bad(
                "`args_sha256` is not the digest of `arguments`: the page's call disagrees with itself",
            ));
        }
        let (card, card_sha256) = (drawn.card, drawn.card_sha256);
        let body = MintBody {
            call: opening.call,
            tool_call_id: opening.tool_call_id,
            action: card.action.clone(),
            kind: card.kind,
            args_sha256: drawn.args_sha256,
            card_sha256: Some(card_sha256.clone()),
            approved_by: ApprovedBy::Once,
            grant: None,
            session: opening.session,
            role: opening.role,
            presence: Presence::Window,
            caller: opening.caller,
            assertion: None,
        };
        crate::routes::countersign::check(&body)?;
        let id = random_id()?;
        let key = random_id()?;
        let deadline_ms =
            now.saturating_add(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX));
        let mut requests = lock(&self.requests);
        requests.retain(|_, e| {
            e.decided_at.is_none_or(|at| at.elapsed() < KEEP_DECIDED)
                && e.deadline + KEEP_DECIDED > Instant::now()
        });
        let session = &body.session;
        let mine = requests
            .values()
            .filter(|e| e.body.session == *session && e.decision.is_open())
            .count();
        if requests.len() >= MAX_REQUESTS || mine >= MAX_PER_SESSION {
            return Err(refused(
                ErrorCode::WindowBusy,
                "too many approvals wait in the window; decide some, or try again shortly",
            ));
        }
        requests.insert(
            id.clone(),
            Entry {
                card: card.clone(),
                card_sha256: card_sha256.clone(),
                body,
                deadline: Instant::now() + self.timeout,
                opened_ms: now,
                deadline_ms,
                decision: Decision::Waiting,
                decided_at: None,
                ceremony: None,
                key: key.clone(),
                waiters: 0,
                last_waited: Instant::now(),
                abandoned_after: self.abandoned_after,
            },
        );
        drop(requests);
        self.version.send_modify(|v| *v += 1);
        Ok(Opened {
            id,
            key,
            card,
            card_sha256,
            deadline_ms,
        })
    }

    /// The id of the request the page's `key` opens.
    fn by_key(&self, key: &str) -> Result<String, ApiError> {
        lock(&self.requests)
            .iter()
            .find(|(_, entry)| !key.is_empty() && entry.key == key)
            .map(|(id, _)| id.clone())
            .ok_or_else(gone)
    }

    /// A request as the window shows it (expiring it if its time is up).
    pub fn view(&self, id: &str) -> Result<View, ApiError> {
        let mut requests = lock(&self.requests);
        let entry = requests.get_mut(id).ok_or_else(gone)?;
        expire(entry);
        Ok(View {
            card: entry.card.clone(),
            card_sha256: entry.card_sha256.clone(),
            session: revealed(&entry.body.session),
            caller: entry.body.caller,
            opened_ms: entry.opened_ms,
            deadline_ms: entry.deadline_ms,
            decision: entry.decision.clone(),
        })
    }

    /// Waits up to `max` for the request the page's `key` opens to be decided; its
    /// decision then. While no page waits for it (for [`WindowConfig::abandoned_after`]),
    /// the request ends.
    pub async fn wait(&self, key: &str, max: Duration) -> Result<Decision, ApiError> {
        let id = self.by_key(key)?;
        let _waiting = Waiting::new(self, &id);
        let until = Instant::now() + max;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let decision = self.view(&id)?.decision;
            let left = until.saturating_duration_since(Instant::now());
            if !decision.is_open() || left.is_zero() {
                return Ok(decision);
            }
            // Wake at the deadline too, to answer `expired`.
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), notified).await;
        }
    }

    /// Starts the passkey ceremony for request `id`: any person enrolled for its role may
    /// approve. The challenge binds the token's whole entry (card digest, decision, call).
    pub fn challenge(&self, id: &str) -> Result<Value, ApiError> {
        let (role, binding) = {
            let mut requests = lock(&self.requests);
            let entry = waiting(&mut requests, id)?;
            (entry.body.role.clone(), entry.body.binding())
        };
        let (ceremony, options) = self
            .passkeys
            .start_approval_among(&format!("{role}/"), binding)
            .map_err(|e| crate::routes::passkeys::refusal(&e))?;
        // A new ceremony for the request ends the one before (a prompt cancelled and
        // tried again), so retries do not use up the role's ceremonies.
        let earlier = lock(&self.requests)
            .get_mut(id)
            .and_then(|entry| entry.ceremony.replace(ceremony.clone()));
        if let Some(earlier) = earlier {
            self.passkeys.forget_approval(&earlier);
        }
        Ok(serde_json::json!({ "ceremony": ceremony, "options": options }))
    }

    /// Checks the person's assertion for request `id` and takes the request to
    /// [`Decision::Deciding`]: the token's body, who approved and their credential. Call
    /// [`ApprovalWindow::settle`] with the outcome of minting.
    pub(crate) fn verify(
        &self,
        id: &str,
        ceremony: &str,
        credential: &Value,
    ) -> Result<(MintBody, String, String), ApiError> {
        let (role, binding) = {
            let mut requests = lock(&self.requests);
            let entry = waiting(&mut requests, id)?;
            // Only this request's own ceremony: two requests with the same call share a
            // binding, so a ceremony started for one must not finish the other.
            if entry.ceremony.as_deref() != Some(ceremony) {
                return Err(refused(
                    ErrorCode::PasskeyRejected,
                    "the passkey request was for another approval; approve again",
                ));
            }
            (entry.body.role.clone(), entry.body.binding())
        };
        let prefix = format!("{role}/");
        let (user, verified) = self
            .passkeys
            .finish_approval_among(&prefix, binding, ceremony, credential)
            .map_err(|e| crate::routes::passkeys::refusal(&e))?;
        let person = user.strip_prefix(&prefix).unwrap_or(&user).to_owned();
        let mut requests = lock(&self.requests);
        // INVARIANT: one decision per request; a second approval (or one racing a denial)
        // finds it taken and mints nothing.
        let entry = waiting(&mut requests, id)?;
        entry.decision = Decision::Deciding;
        Ok((entry.body.clone(), person, verified.credential))
    }

    /// Ends request `id` with `decision` (after [`ApprovalWindow::verify`]; or
    /// [`Decision::Waiting`] again if minting failed).
    pub(crate) fn settle(&self, id: &str, decision: Decision) {
        if let Some(entry) = lock(&self.requests).get_mut(id) {
            entry.decided_at = (!decision.is_open()).then(Instant::now);
            entry.decision = decision;
        }
        self.changed.notify_waiters();
        self.version.send_modify(|v| *v += 1);
    }

    /// Denies request `id` (if it still waits).
    pub fn deny(&self, id: &str) -> Result<(), ApiError> {
        {
            let mut requests = lock(&self.requests);
            let entry = waiting(&mut requests, id)?;
            entry.decision = Decision::Denied;
            entry.decided_at = Some(Instant::now());
        }
        self.changed.notify_waiters();
        self.version.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Withdraws the request the page's `key` opens (the call settled there): the window
    /// then says so, and nothing can approve it.
    pub fn withdraw(&self, key: &str) -> Result<(), ApiError> {
        self.deny(&self.by_key(key)?)
    }
}

/// A page's wait on a request, counted while it lasts (a dropped connection ends it).
struct Waiting<'a> {
    window: &'a ApprovalWindow,
    id: String,
}

impl<'a> Waiting<'a> {
    fn new(window: &'a ApprovalWindow, id: &str) -> Self {
        if let Some(entry) = lock(&window.requests).get_mut(id) {
            entry.waiters += 1;
        }
        Self {
            window,
            id: id.to_owned(),
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(entry) = lock(&self.window.requests).get_mut(&self.id) {
            entry.waiters = entry.waiters.saturating_sub(1);
            entry.last_waited = Instant::now();
        }
    }
}

/// A request just opened.
#[derive(Clone, Debug)]
pub struct Opened {
    /// Its id, in the window's address.
    pub id: String,
    /// The page's own key to it: collect the decision, or withdraw.
    pub key: String,
    /// The card the server drew.
    pub card: Card,
    /// Its digest.
    pub card_sha256: String,
    /// Until when it waits (ms since the epoch).
    pub deadline_ms: u64,
}

fn revealed(text: &str) -> String {
    countersign::text::reveal(text).text
}

/// `value` with every key and string revealed.
fn revealed_json(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(revealed(s)),
        Value::Array(items) => Value::Array(items.iter().map(revealed_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (revealed(k), revealed_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Request `id`, if it still waits for a decision.
fn waiting<'a>(
    requests: &'a mut HashMap<String, Entry>,
    id: &str,
) -> Result<&'a mut Entry, ApiError> {
    let entry = requests.get_mut(id).ok_or_else(gone)?;
    expire(entry);
    if entry.decision != Decision::Waiting {
        return Err(decided(&entry.decision));
    }
    Ok(entry)
}

fn expire(entry: &mut Entry) {
    if entry.decision != Decision::Waiting {
        return;
    }
    let ended = if Instant::now() >= entry.deadline {
        Decision::Expired
    } else if entry.waiters == 0 && entry.last_waited.elapsed() >= entry.abandoned_after {
        Decision::Abandoned
    } else {
        return;
    };
    entry.decision = ended;
    entry.decided_at = Some(Instant::now());
}

fn gone() -> ApiError {
    refused(
        ErrorCode::WindowGone,
        "no such approval waits in the window (it may have ended long ago)",
    )
}

fn decided(decision: &Decision) -> ApiError {
    refused(
        ErrorCode::WindowDecided,
        format!("this approval is {} already", decision.name()),
    )
}

/// 128 random bits, as hex: a request's id, which only the page and the window know.
pub(crate) fn random_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|_| refused(ErrorCode::PasskeyUnavailable, "no randomness for an id"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
