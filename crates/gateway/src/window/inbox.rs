//! The approval window's inbox: a person signs in with their window passkey and sees,
//! live, every approval that waits for their role, on this device or another (a phone
//! left on the desk, a tab left open on a laptop).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::{expire, lock, random_id, refused, ApprovalWindow, Decision, View};
use crate::error::{ApiError, ErrorCode};

/// The cookie that holds an inbox session (HttpOnly, SameSite=Strict, the window's origin
/// only).
pub const COOKIE: &str = "cs-window";
/// How long a sign-in lasts.
pub const SESSION: Duration = Duration::from_secs(12 * 60 * 60);
/// The most inbox sessions kept at once; the oldest go first.
const MAX_SESSIONS: usize = 1000;

/// A signed-in inbox session.
pub(crate) struct Session {
    /// Who: `role/person`.
    who: String,
    /// The credential they signed in with: revoked (or the name enrolled again by
    /// someone else), the session ends.
    credential: String,
    until: Instant,
}

/// What a sign-in ceremony binds: nothing but that it is a sign-in (its challenge is
/// fresh each time, and the ceremony is used once), so no approval's assertion signs in
/// and no sign-in approves.
fn signin_binding() -> [u8; 32] {
    Sha256::digest(b"countersign/window-signin/v1").into()
}

impl ApprovalWindow {
    /// Starts a sign-in to the inbox: the ceremony's id and the options for
    /// `navigator.credentials.get`, over every enrolled approver's passkey.
    pub fn start_signin(&self) -> Result<Value, ApiError> {
        let (ceremony, options) = self
            .passkeys
            .start_approval_among("", signin_binding())
            .map_err(|e| crate::routes::passkeys::refusal(&e))?;
        Ok(json!({ "ceremony": ceremony, "options": options }))
    }

    /// Finishes a sign-in: a new session (the cookie's value) and who signed in
    /// (`role/person`).
    pub fn finish_signin(
        &self,
        ceremony: &str,
        credential: &Value,
    ) -> Result<(String, String), ApiError> {
        let (who, verified) = self
            .passkeys
            .finish_approval_among("", signin_binding(), ceremony, credential)
            .map_err(|e| crate::routes::passkeys::refusal(&e))?;
        let session = format!("{}{}", random_id()?, random_id()?);
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.until > Instant::now());
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.until)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            session.clone(),
            Session {
                who: who.clone(),
                credential: verified.credential,
                until: Instant::now() + SESSION,
            },
        );
        Ok((session, who))
    }

    /// Ends inbox session `session` (signing out).
    pub fn sign_out(&self, session: &str) {
        lock(&self.sessions).remove(session);
    }

    /// Who holds inbox session `session` (`role/person`), while it lasts and while the
    /// passkey they signed in with is still enrolled for them.
    pub fn signed_in(&self, session: &str) -> Result<String, ApiError> {
        let held = lock(&self.sessions)
            .get(session)
            .filter(|s| s.until > Instant::now())
            .map(|s| (s.who.clone(), s.credential.clone()));
        let enrolled = held.as_ref().is_some_and(|(who, credential)| {
            self.passkeys
                .list(who)
                .iter()
                .any(|(name, keys)| name == who && keys.contains(credential))
        });
        match held {
            Some((who, _)) if enrolled => Ok(who),
            _ => Err(refused(
                ErrorCode::Unauthorized,
                "sign in to the approval window with your passkey",
            )),
        }
    }

    /// The approvals waiting for `role`, oldest first: each id with what the window
    /// shows.
    pub fn waiting_for(&self, role: &str) -> Vec<(String, View)> {
        let mut requests = lock(&self.requests);
        let mut waiting: Vec<(String, View)> = requests
            .iter_mut()
            .filter_map(|(id, entry)| {
                expire(entry);
                (entry.body.role == role && entry.decision == Decision::Waiting).then(|| {
                    let view = View {
                        card: entry.card.clone(),
                        card_sha256: entry.card_sha256.clone(),
                        session: super::revealed(&entry.body.session),
                        caller: entry.body.caller,
                        opened_ms: entry.opened_ms,
                        deadline_ms: entry.deadline_ms,
                        decision: entry.decision.clone(),
                    };
                    (id.clone(), view)
                })
            })
            .collect();
        waiting.sort_by_key(|(_, view)| view.opened_ms);
        waiting
    }

    /// A receiver that changes whenever a request is opened or decided.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }
}
