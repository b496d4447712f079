//! Passkey presence: the person registers a passkey for approvals, and a countersignature
//! that needs presence is minted only after a user-verified WebAuthn assertion over a
//! challenge derived from the call's binding (`webauthn-rs`).
//!
//! One passkey per user (the session's role name), kept in a JSON file (0600, replaced
//! atomically). Registering one takes an **enrollment code** issued outside the page
//! ([`Passkeys::issue_enrollment_code`]; `serve --enroll-user NAME` prints one at start):
//! a script in the page, which can call every route the page can, cannot enroll its own
//! key without it. A user who has a passkey cannot add another through the API (remove
//! the file's entry to reset). Ceremony state lives in memory for two minutes; the
//! challenge of an approval is `SHA-256("countersign/presence/v1" ‖ SHA-256(binding) ‖
//! 16 random bytes)`, and the gateway mints only for the binding its ceremony was
//! started for.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use webauthn_rs::prelude::{
    Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Uuid, Webauthn, WebauthnBuilder,
};

/// How long a ceremony may take.
const CEREMONY: Duration = Duration::from_secs(120);
/// The most ceremonies in flight at once; more are refused (503) rather than queued.
const MAX_CEREMONIES: usize = 1000;
/// The most ceremonies in flight for one user.
const MAX_CEREMONIES_PER_USER: usize = 8;
/// The most users with a passkey.
const MAX_USERS: usize = 10_000;
/// How long an enrollment code is good for.
const ENROLLMENT: Duration = Duration::from_secs(15 * 60);
/// Wrong enrollment codes before a user's code is burnt.
const MAX_CODE_TRIES: u8 = 5;

/// Where passkeys are checked and kept.
#[derive(Clone, Debug)]
pub struct PasskeyConfig {
    /// The WebAuthn relying party id: the page's host name (`localhost`, `app.example`).
    pub rp_id: String,
    /// The page's exact origin, port included: an assertion made on another port of the
    /// same host is refused.
    pub rp_origin: String,
    /// The file the registered passkeys are kept in; `None` keeps them in memory.
    pub file: Option<PathBuf>,
}

/// A passkey approval that verified: who, and with which credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The credential's id, base64url.
    pub credential: String,
}

/// Why a passkey step was refused.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyError {
    /// The settings do not make a relying party.
    #[error("passkeys are misconfigured: {0}")]
    Config(String),
    /// The user already has a passkey.
    #[error("a passkey is already registered for this user")]
    Exists,
    /// No enrollment code, a wrong one, or an expired one.
    #[error("registering a passkey needs the enrollment code the gateway issued for this user")]
    Enrollment,
    /// The user has none.
    #[error("no passkey is registered for approvals; set one up in the dock first")]
    NoPasskey,
    /// No such ceremony (unknown, used, or expired).
    #[error("the passkey request is unknown or has expired; approve again")]
    UnknownCeremony,
    /// The ceremony was for another call.
    #[error("the passkey assertion was made for another call")]
    OtherCall,
    /// The browser's answer did not verify.
    #[error("the passkey did not verify: {0}")]
    Rejected(String),
    /// Verified, but without user verification.
    #[error("the authenticator did not verify the person (user verification is required)")]
    NotVerified,
    /// Too many ceremonies in flight.
    #[error("too many passkey requests in flight; try again shortly")]
    Busy,
    /// The passkey file could not be read or written.
    #[error("the passkey file: {0}")]
    Store(String),
}

struct Ceremony<S> {
    user: String,
    binding: Option<[u8; 32]>,
    state: S,
    started: Instant,
}

/// An enrollment code issued for a user: its digest, until when, and wrong tries so far.
type Enrollment = ([u8; 32], Instant, u8);

/// The registered passkeys and the ceremonies in flight.
pub struct Passkeys {
    webauthn: Webauthn,
    file: Option<PathBuf>,
    users: Mutex<HashMap<String, Vec<Passkey>>>,
    /// user → their enrollment code.
    codes: Mutex<HashMap<String, Enrollment>>,
    /// Held across a whole save (snapshot, write, rename), so saves never interleave.
    saving: Mutex<()>,
    registrations: Mutex<HashMap<String, Ceremony<PasskeyRegistration>>>,
    approvals: Mutex<HashMap<String, Ceremony<PasskeyAuthentication>>>,
}

impl std::fmt::Debug for Passkeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passkeys")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn random_id() -> Result<String, PasskeyError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| PasskeyError::Store(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Drops expired ceremonies; refuses a new one when still full, overall or for `user`.
fn admit<S>(map: &mut HashMap<String, Ceremony<S>>, user: &str) -> Result<(), PasskeyError> {
    map.retain(|_, c| c.started.elapsed() < CEREMONY);
    let mine = map.values().filter(|c| c.user == user).count();
    // Sign-ins to the approval window's inbox (`""`) are nobody's yet: only the overall
    // cap holds them, so a stranger's few requests cannot lock every approver out.
    let capped = !user.is_empty() && mine >= MAX_CEREMONIES_PER_USER;
    if map.len() >= MAX_CEREMONIES || capped {
        return Err(PasskeyError::Busy);
    }
    Ok(())
}

/// Compares two digests in time independent of where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Passkeys {
    /// Opens the store for `config` (reading the file if it exists).
    pub fn open(config: &PasskeyConfig) -> Result<Self, PasskeyError> {
        let origin = Url::parse(&config.rp_origin)
            .map_err(|e| PasskeyError::Config(format!("the origin {}: {e}", config.rp_origin)))?;
        let webauthn = WebauthnBuilder::new(&config.rp_id, &origin)
            .map_err(|e| PasskeyError::Config(e.to_string()))?
            .rp_name("Countersign approvals")
            .build()
            .map_err(|e| PasskeyError::Config(e.to_string()))?;
        let users = match &config.file {
            Some(path) if path.exists() => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| PasskeyError::Store(format!("{}: {e}", path.display())))?;
                serde_json::from_str(&text)
                    .map_err(|e| PasskeyError::Store(format!("{}: {e}", path.display())))?
            }
            _ => HashMap::new(),
        };
        Ok(Self {
            webauthn,
            file: config.file.clone(),
            users: Mutex::new(users),
            codes: Mutex::default(),
            saving: Mutex::default(),
            registrations: Mutex::default(),
            approvals: Mutex::default(),
        })
    }

    /// Whether `user` has a passkey.
    pub fn registered(&self, user: &str) -> bool {
        lock(&self.users)
            .get(user)
            .is_some_and(|keys| !keys.is_empty())
    }

    /// Issues a one-time enrollment code for `user` (replacing an earlier one), good for
    /// 15 minutes: hand it to the person outside the page (a console, an admin screen,
    /// your own login). Registering a passkey needs it.
    pub fn issue_enrollment_code(&self, user: &str) -> Result<String, PasskeyError> {
        let mut bytes = [0u8; 10];
        getrandom::fill(&mut bytes)
            .map_err(|e| PasskeyError::Store(format!("no randomness: {e}")))?;
        // 50 bits as 10 characters of an unambiguous alphabet, shown as XXXXX-XXXXX.
        const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let chars: String = bytes
            .iter()
            .map(|b| char::from(ALPHABET.get(usize::from(b % 32)).copied().unwrap_or(b'A')))
            .collect();
        let code = format!(
            "{}-{}",
            chars.get(..5).unwrap_or(""),
            chars.get(5..).unwrap_or("")
        );
        let digest: [u8; 32] = Sha256::digest(code.as_bytes()).into();
        lock(&self.codes).insert(user.to_owned(), (digest, Instant::now() + ENROLLMENT, 0));
        Ok(code)
    }

    /// Spends `user`'s enrollment code if `code` is it; a wrong code counts against it.
    fn spend_code(&self, user: &str, code: &str) -> Result<(), PasskeyError> {
        let mut codes = lock(&self.codes);
        let Some((digest, until, tries)) = codes.get_mut(user) else {
            return Err(PasskeyError::Enrollment);
        };
        let given: [u8; 32] = Sha256::digest(code.trim().to_ascii_uppercase().as_bytes()).into();
        if Instant::now() >= *until {
            codes.remove(user);
            return Err(PasskeyError::Enrollment);
        }
        if !same(digest, &given) {
            *tries += 1;
            if *tries >= MAX_CODE_TRIES {
                codes.remove(user);
            }
            return Err(PasskeyError::Enrollment);
        }
        codes.remove(user);
        Ok(())
    }

    /// Starts registering a passkey for `user` with its enrollment code: the ceremony's
    /// id and the options for `navigator.credentials.create` (user verification
    /// required). The code is spent whether or not the ceremony finishes.
    pub fn start_registration(
        &self,
        user: &str,
        code: &str,
    ) -> Result<(String, Value), PasskeyError> {
        if self.registered(user) {
            return Err(PasskeyError::Exists);
        }
        self.spend_code(user, code)?;
        let digest = Sha256::digest(user.as_bytes());
        let mut id = [0u8; 16];
        id.copy_from_slice(digest.get(..16).unwrap_or(&[0; 16]));
        let (options, state) = self
            .webauthn
            .start_passkey_registration(Uuid::from_bytes(id), user, user, None)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let ceremony = random_id()?;
        let mut map = lock(&self.registrations);
        admit(&mut map, user)?;
        map.insert(
            ceremony.clone(),
            Ceremony {
                user: user.to_owned(),
                binding: None,
                state,
                started: Instant::now(),
            },
        );
        let options =
            serde_json::to_value(options).map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        Ok((ceremony, options))
    }

    /// Finishes a registration with the browser's credential (`toJSON()` form).
    pub fn finish_registration(
        &self,
        ceremony: &str,
        credential: &Value,
    ) -> Result<String, PasskeyError> {
        let started = lock(&self.registrations)
            .remove(ceremony)
            .filter(|c| c.started.elapsed() < CEREMONY)
            .ok_or(PasskeyError::UnknownCeremony)?;
        let credential: RegisterPublicKeyCredential = serde_json::from_value(credential.clone())
            .map_err(|e| PasskeyError::Rejected(format!("not a credential ({e})")))?;
        let passkey = self
            .webauthn
            .finish_passkey_registration(&credential, &started.state)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        {
            let mut users = lock(&self.users);
            if users.get(&started.user).is_some_and(|k| !k.is_empty()) {
                return Err(PasskeyError::Exists);
            }
            // A credential id is public (it is in every challenge): one already stored,
            // for anyone, would make whose approval it was ambiguous.
            let taken = users
                .values()
                .flatten()
                .any(|k| k.cred_id() == passkey.cred_id());
            if taken {
                return Err(PasskeyError::Rejected(
                    "this credential is already registered".into(),
                ));
            }
            if users.len() >= MAX_USERS {
                return Err(PasskeyError::Busy);
            }
            users.insert(started.user.clone(), vec![passkey]);
        }
        self.save()?;
        Ok(started.user)
    }

    /// Starts an approval's assertion for `user`, bound to `binding` (the canonical
    /// digest of the mint request): the ceremony's id and the options for
    /// `navigator.credentials.get`, whose challenge is derived from the binding.
    pub fn start_approval(
        &self,
        user: &str,
        binding: [u8; 32],
    ) -> Result<(String, Value), PasskeyError> {
        let keys = lock(&self.users).get(user).cloned().unwrap_or_default();
        self.start_with(user, keys, binding)
    }

    /// Starts an approval's assertion that any user whose name begins with `prefix` (which
    /// ends with `/`) may give: the approval window's people of one role, named
    /// `role/person`. Bound to `binding` as [`Passkeys::start_approval`] is.
    pub fn start_approval_among(
        &self,
        prefix: &str,
        binding: [u8; 32],
    ) -> Result<(String, Value), PasskeyError> {
        let keys: Vec<Passkey> = lock(&self.users)
            .iter()
            .filter(|(user, _)| user.starts_with(prefix))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        self.start_with(prefix, keys, binding)
    }

    /// Drops an approval ceremony in flight (one started again for the same request).
    pub fn forget_approval(&self, ceremony: &str) {
        lock(&self.approvals).remove(ceremony);
    }

    /// The users whose names begin with `prefix`, each with their passkeys' ids
    /// (base64url), sorted.
    pub fn list(&self, prefix: &str) -> Vec<(String, Vec<String>)> {
        let mut users: Vec<(String, Vec<String>)> = lock(&self.users)
            .iter()
            .filter(|(user, _)| user.starts_with(prefix))
            .map(|(user, keys)| {
                let ids = keys
                    .iter()
                    .map(|k| URL_SAFE_NO_PAD.encode(k.cred_id().as_ref()))
                    .collect();
                (user.clone(), ids)
            })
            .collect();
        users.sort();
        users
    }

    /// Removes `user` and their passkeys; whether they had any. Their ceremonies in
    /// flight fail when finished.
    pub fn revoke(&self, user: &str) -> Result<bool, PasskeyError> {
        let had = lock(&self.users).remove(user).is_some();
        if had {
            self.save()?;
        }
        Ok(had)
    }

    fn start_with(
        &self,
        user: &str,
        keys: Vec<Passkey>,
        binding: [u8; 32],
    ) -> Result<(String, Value), PasskeyError> {
        if keys.is_empty() {
            return Err(PasskeyError::NoPasskey);
        }
        let (options, state) = self
            .webauthn
            .start_passkey_authentication(&keys)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce)
            .map_err(|e| PasskeyError::Store(format!("no randomness: {e}")))?;
        let mut hash = Sha256::new();
        hash.update(b"countersign/presence/v1");
        hash.update(binding);
        hash.update(nonce);
        let challenge = URL_SAFE_NO_PAD.encode(hash.finalize());
        // The challenge webauthn-rs drew at random is replaced by the derived one, in the
        // options sent and in the state it checks the answer against.
        let mut options =
            serde_json::to_value(options).map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let mut state =
            serde_json::to_value(state).map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        match (
            options.pointer_mut("/publicKey/challenge"),
            state.pointer_mut("/ast/challenge"),
        ) {
            (Some(o), Some(s)) => {
                *o = json!(challenge);
                *s = json!(challenge);
            }
            _ => return Err(PasskeyError::Rejected("unexpected ceremony shape".into())),
        }
        let state: PasskeyAuthentication =
            serde_json::from_value(state).map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let ceremony = random_id()?;
        let mut map = lock(&self.approvals);
        admit(&mut map, user)?;
        map.insert(
            ceremony.clone(),
            Ceremony {
                user: user.to_owned(),
                binding: Some(binding),
                state,
                started: Instant::now(),
            },
        );
        Ok((ceremony, options))
    }

    /// Checks an approval's assertion: the ceremony (used once) was for `user` and this
    /// binding, the signature verifies under the user's passkey, and the authenticator
    /// verified the person.
    pub fn finish_approval(
        &self,
        user: &str,
        binding: [u8; 32],
        ceremony: &str,
        credential: &Value,
    ) -> Result<Verified, PasskeyError> {
        self.finish_among(user, binding, ceremony, credential)
            .map(|(_, verified)| verified)
    }

    /// Checks an assertion started by [`Passkeys::start_approval_among`]: as
    /// [`Passkeys::finish_approval`] does, and says whose passkey it was (a user named
    /// with `prefix`).
    pub fn finish_approval_among(
        &self,
        prefix: &str,
        binding: [u8; 32],
        ceremony: &str,
        credential: &Value,
    ) -> Result<(String, Verified), PasskeyError> {
        self.finish_among(prefix, binding, ceremony, credential)
    }

    /// Finishes a ceremony started for `who` (a user, or a prefix of users): the user
    /// whose passkey verified, and the credential.
    fn finish_among(
        &self,
        who: &str,
        binding: [u8; 32],
        ceremony: &str,
        credential: &Value,
    ) -> Result<(String, Verified), PasskeyError> {
        let user = who;
        let started = lock(&self.approvals)
            .remove(ceremony)
            .filter(|c| c.started.elapsed() < CEREMONY)
            .ok_or(PasskeyError::UnknownCeremony)?;
        if started.user != user || started.binding != Some(binding) {
            return Err(PasskeyError::OtherCall);
        }
        let credential: PublicKeyCredential = serde_json::from_value(credential.clone())
            .map_err(|e| PasskeyError::Rejected(format!("not an assertion ({e})")))?;
        let result = self
            .webauthn
            .finish_passkey_authentication(&credential, &started.state)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        if !result.user_verified() {
            return Err(PasskeyError::NotVerified);
        }
        // Whose it is: the user (of those the ceremony was for) holding the credential.
        let (owner, changed) = {
            let mut users = lock(&self.users);
            let owner = users.iter_mut().find(|(name, keys)| {
                // `who` is a user, a prefix ending in `/`, or "" (anyone enrolled).
                let ours = user.is_empty()
                    || name.as_str() == user
                    || (user.ends_with('/') && name.starts_with(user));
                ours && keys.iter().any(|k| k.cred_id() == result.cred_id())
            });
            match owner {
                Some((name, keys)) => {
                    let changed = keys
                        .iter_mut()
                        .any(|k| k.update_credential(&result).unwrap_or(false));
                    (name.clone(), changed)
                }
                // Revoked while the ceremony ran.
                None => return Err(PasskeyError::NoPasskey),
            }
        };
        if changed {
            self.save()?;
        }
        Ok((
            owner,
            Verified {
                credential: URL_SAFE_NO_PAD.encode(result.cred_id().as_ref()),
            },
        ))
    }

    /// Writes the passkeys file: a temp file (0600), synced, renamed over the old one.
    fn save(&self) -> Result<(), PasskeyError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        // One save at a time, from snapshot to rename: a later snapshot is never
        // overwritten by an earlier one.
        let _saving = lock(&self.saving);
        let text = serde_json::to_vec_pretty(&*lock(&self.users))
            .map_err(|e| PasskeyError::Store(e.to_string()))?;
        let tmp = path.with_extension(format!("{}.tmp", random_id()?));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let write = || -> std::io::Result<()> {
            let mut file = options.open(&tmp)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| PasskeyError::Store(format!("{}: {e}", path.display())))
    }
}
