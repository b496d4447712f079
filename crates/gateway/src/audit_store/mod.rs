//! The audit store: the page's audit records as chained lines, keyed, anchored by a
//! keyed head, durable before the request is acknowledged, and idempotent by record id.
//! Two backends keep the same lines: a JSON Lines file (the embedded default, one
//! gateway per file: [`FileStore`]) and PostgreSQL (several replicas on one database:
//! [`PgStore`]); [`AuditStore`] is either.
//!
//! Each line is `{"seq":N,"prev":"<mac of the previous line>","record":{..},"mac":"<hex>"}`:
//! `mac` is HMAC-SHA256 under the deployment's [`ChainKey`] over the line's bytes up to
//! `,"mac"` (closed with `}`); the first line's `prev` is 64 zeros. The head (the file's
//! `<file>.head`, the database's head row) holds the last acknowledged seq and mac,
//! keyed too, so a cut tail is detected. Without the key nobody can rewrite and re-chain
//! the trail, or cut its tail, unseen; with the key (the deployment's secret, never
//! written to the trail), `verify` checks everything.

mod completeness;
mod file;
mod postgres;

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use countersign::AuditRecord;
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub use completeness::{Completeness, Hole, MAX_HOLES_LISTED};
pub use file::{head_path, verify_file, FileStore};
pub use postgres::{read_postgres, verify_postgres, PgStore};

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a `countersigned` record's argument digest is keyed with, before the plain
/// digest: no line (which starts with `{`) nor head (`head`) is keyed so.
const COUNTERSIGNED_DIGEST: &[u8] = b"countersign/countersigned-args/v1\0";

/// The key that chains and anchors the trail (HMAC-SHA256). Never printed, never
/// written to the trail.
#[derive(Clone)]
pub struct ChainKey(pub(crate) [u8; 32]);

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey([redacted])")
    }
}

impl ChainKey {
    /// A key from 32 bytes.
    pub const fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A key from 64 hex digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self, StoreError> {
        let text = text.trim();
        let bad = || StoreError::Key("an audit key is 64 hex digits".into());
        if text.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (slot, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *slot = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }

    /// Reads the key file at `path`.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        Self::from_hex(&text)
            .map_err(|e| StoreError::Key(format!("the key file `{}`: {e}", path.display())))
    }

    /// Reads the key file at `path`, or creates it with a fresh random key (mode 0600).
    pub fn load_or_create(path: &Path) -> Result<Self, StoreError> {
        match std::fs::metadata(path) {
            Ok(_) => Self::load(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes)
                    .map_err(|e| StoreError::Key(format!("no randomness for a key: {e}")))?;
                let mut options = OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    options.mode(0o600);
                }
                let mut file = options.open(path).map_err(io(path))?;
                file.write_all(format!("{}\n", hex(&bytes)).as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(io(path))?;
                Ok(Self(bytes))
            }
            Err(e) => Err(io(path)(e)),
        }
    }

    /// The digest a `countersigned` record carries for the arguments: HMAC-SHA256 under
    /// this key of a label and `args_sha256` (the plain SHA-256, hex, that the token
    /// binds). The trail never holds the plain digest, which anyone could compute from a
    /// guessed argument; the key's holder checks a claimed argument with
    /// [`countersign::audit::ArgsDigest::of_value`] and this.
    pub fn countersigned_digest(&self, args_sha256: &str) -> String {
        self.mac(&[COUNTERSIGNED_DIGEST, args_sha256.as_bytes()])
    }

    fn mac(&self, parts: &[&[u8]]) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            // HMAC takes a key of any length; a 32-byte key cannot be refused.
            return String::new();
        };
        for part in parts {
            mac.update(part);
        }
        hex(&mac.finalize().into_bytes())
    }
}

/// One line of the store, as read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainedLine {
    /// The line's position, from 1.
    pub seq: u64,
    /// The previous line's `mac` (64 zeros for the first).
    pub prev: String,
    /// The audit record.
    pub record: AuditRecord,
    /// HMAC-SHA256 of this line's bytes before `,"mac"`.
    pub mac: String,
}

/// The part of a line its mac covers.
#[derive(Serialize)]
struct Unsealed<'a> {
    seq: u64,
    prev: &'a str,
    record: &'a AuditRecord,
}

/// The head: the last acknowledged line, keyed, kept apart from the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// The seq of the last acknowledged line.
    pub seq: u64,
    /// Its mac.
    pub last: String,
    /// The seq a batch being written will reach: written before the batch, so a crash
    /// mid-batch leaves lines up to here at most, and a head put back from earlier (with
    /// a smaller `pending`) is caught by the lines beyond it.
    #[serde(default)]
    pub pending: u64,
    /// HMAC-SHA256 of `head`, the seq, `last` and `pending`.
    pub mac: String,
}

impl Head {
    fn sealed(key: &ChainKey, seq: u64, last: &str, pending: u64) -> Self {
        Self {
            seq,
            last: last.to_owned(),
            pending,
            mac: Self::mac_of(key, seq, last, pending),
        }
    }

    fn mac_of(key: &ChainKey, seq: u64, last: &str, pending: u64) -> String {
        key.mac(&[
            b"head",
            &seq.to_le_bytes(),
            last.as_bytes(),
            &pending.to_le_bytes(),
        ])
    }

    fn holds(&self, key: &ChainKey) -> bool {
        constant_time_eq(
            self.mac.as_bytes(),
            Self::mac_of(key, self.seq, &self.last, self.pending).as_bytes(),
        )
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the file failed.
    #[error("audit file `{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The trail's chain is broken; the store refuses to extend it.
    #[error("{trail} is broken at {} {line}: {reason}", trail.unit())]
    Broken {
        /// The file or the database.
        trail: Trail,
        /// The first bad line (a database's row), from 1.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The head does not match the body: records were cut, or the head was forged.
    #[error("{trail} does not match its head: {reason}")]
    Unanchored {
        /// The file or the database.
        trail: Trail,
        /// What does not match.
        reason: String,
    },
    /// Another process writes the file.
    #[error("audit file `{path}` is in use by another gateway ({holder}); one writer per file")]
    Locked {
        /// The file.
        path: PathBuf,
        /// Who holds the lock, as far as the lock file says.
        holder: String,
    },
    /// The key is missing or malformed.
    #[error("audit key: {0}")]
    Key(String),
    /// The database refused, failed or could not be reached. The message names no
    /// password: it never includes the connection URL.
    #[error("audit database: {0}")]
    Database(String),
    /// A record with this id is stored, and differs from the one sent under it.
    #[error("record `{0}` is stored already with other contents")]
    Conflict(String),
    /// A writer panicked while holding the store.
    #[error("the audit store is unusable after an earlier failure")]
    Poisoned,
}

/// Which trail an error is about: its message names it ("audit file", "audit
/// database"), so an operator looks in the right place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trail {
    /// A JSON Lines file and its head file.
    File,
    /// A PostgreSQL database: its rows and its head row.
    Database,
}

impl Trail {
    /// What one record of this trail is called: a line, or a row.
    fn unit(self) -> &'static str {
        match self {
            Self::File => "line",
            Self::Database => "row",
        }
    }
}

impl std::fmt::Display for Trail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::File => "audit file",
            Self::Database => "audit database",
        })
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Appended {
    /// Records written.
    pub appended: usize,
    /// Records skipped because their id was already stored.
    pub duplicates: usize,
    /// The seq of the last line in the file.
    pub last_seq: u64,
}

/// What verifying a trail found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Complete, chained lines.
    pub lines: u64,
    /// The mac of the last complete line.
    pub head: String,
    /// Bytes of an incomplete final line (an unacknowledged write to a file), if any.
    pub torn_tail_bytes: usize,
    /// Whether every mac was checked with the key (`false`: structure only).
    pub keyed: bool,
    /// Lines after the head's seq: written but never acknowledged (checked with the key).
    pub unanchored_lines: u64,
    /// Whether every page session's records are all there or named as lost.
    pub completeness: Completeness,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const MAC_FIELD: &[u8] = b",\"mac\":\"";

/// Seals a line of `trail`: its bytes up to `,"mac"` are what the mac covers.
fn seal(
    key: &ChainKey,
    trail: Trail,
    seq: u64,
    prev: &str,
    record: &AuditRecord,
) -> Result<(Vec<u8>, String), StoreError> {
    let body =
        serde_json::to_vec(&Unsealed { seq, prev, record }).map_err(|e| StoreError::Broken {
            trail,
            line: seq,
            reason: e.to_string(),
        })?;
    let mac = key.mac(&[&body]);
    let mut line = body;
    line.pop(); // the closing `}`
    line.extend_from_slice(MAC_FIELD);
    line.extend_from_slice(mac.as_bytes());
    line.extend_from_slice(b"\"}");
    Ok((line, mac))
}

/// The bytes a line's mac covers: the line up to its last `,"mac":"`, closed with `}`.
/// `None` unless the line ends exactly in 64 hex digits and `"}` (no byte may follow the
/// mac unseen: no spaces, no CR).
fn sealed_part(line: &[u8]) -> Option<Vec<u8>> {
    let at = line
        .windows(MAC_FIELD.len())
        .rposition(|w| w == MAC_FIELD)?;
    let rest = line.get(at + MAC_FIELD.len()..)?;
    let exact = rest.len() == 66
        && rest.ends_with(b"\"}")
        && rest
            .iter()
            .take(64)
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    if !exact {
        return None;
    }
    let mut body = line.get(..at)?.to_vec();
    body.push(b'}');
    Some(body)
}

/// What a record holds, as a digest: a record sent again under a stored id is a
/// duplicate only if its digest is the stored one's.
pub type RecordDigest = [u8; 32];

/// The [`RecordDigest`] of `record`: SHA-256 of its JSON.
pub fn record_digest(record: &AuditRecord) -> RecordDigest {
    use sha2::Digest as _;
    Sha256::digest(serde_json::to_vec(record).unwrap_or_default()).into()
}

/// Stored ids and what each record holds.
pub type StoredIds = HashMap<String, RecordDigest>;

/// Checks a whole body. Without a key: structure only (each line parses, seq runs on,
/// `prev` links to the previous line's mac, ids are unique). With the key: every mac
/// too. A final line without its newline is reported as a torn tail: it was never
/// acknowledged.
pub fn verify_bytes(
    bytes: &[u8],
    key: Option<&ChainKey>,
) -> Result<(Verified, StoredIds), StoreError> {
    verify_trail(bytes, key, Trail::File)
}

/// [`verify_bytes`] of the lines of `trail`, whose errors name it.
pub(crate) fn verify_trail(
    bytes: &[u8],
    key: Option<&ChainKey>,
    trail: Trail,
) -> Result<(Verified, StoredIds), StoreError> {
    let mut tally = completeness::Tally::default();
    let (mut verified, ids) = check_chain(bytes, key, trail, Some(&mut tally))?;
    verified.completeness = tally.finish();
    Ok((verified, ids))
}

/// [`verify_bytes`]' chain check, with the completeness tally only where it is read: a
/// store opening its file needs the chain and the ids, not the account of each page
/// session (its `completeness` is left empty).
pub(crate) fn check_chain(
    bytes: &[u8],
    key: Option<&ChainKey>,
    trail: Trail,
    mut tally: Option<&mut completeness::Tally>,
) -> Result<(Verified, StoredIds), StoreError> {
    let mut prev = GENESIS.to_owned();
    let mut ids = HashMap::new();
    let mut lines = 0u64;
    let mut rest = bytes;
    let mut torn = 0;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            torn = rest.len();
            break;
        };
        let (line, after) = rest.split_at(end);
        rest = after.get(1..).unwrap_or_default();
        let number = lines + 1;
        let broken = |reason: String| StoreError::Broken {
            trail,
            line: number,
            reason,
        };
        let parsed: ChainedLine = serde_json::from_slice(line)
            .map_err(|e| broken(format!("not a chained record ({e})")))?;
        if parsed.seq != number {
            return Err(broken(format!("seq is {}, expected {number}", parsed.seq)));
        }
        if parsed.prev != prev {
            return Err(broken(format!(
                "prev is {}, but the previous line's mac is {prev}",
                parsed.prev
            )));
        }
        if let Some(key) = key {
            let sealed = sealed_part(line).ok_or_else(|| {
                broken("the line does not end in its mac (`,\"mac\":\"<64 hex>\"}`)".into())
            })?;
            if !constant_time_eq(key.mac(&[&sealed]).as_bytes(), parsed.mac.as_bytes()) {
                return Err(broken(
                    "its mac does not match: the line was changed, or the key is wrong".into(),
                ));
            }
        }
        if ids
            .insert(parsed.record.id.to_string(), record_digest(&parsed.record))
            .is_some()
        {
            return Err(broken(format!(
                "record id `{}` appears twice",
                parsed.record.id
            )));
        }
        if let Some(tally) = tally.as_deref_mut() {
            tally.add(&parsed.record);
        }
        prev = parsed.mac;
        lines = number;
    }
    Ok((
        Verified {
            lines,
            head: prev,
            torn_tail_bytes: torn,
            keyed: key.is_some(),
            unanchored_lines: 0,
            completeness: Completeness::default(),
        },
        ids,
    ))
}

/// Checks the body of `trail` against its head with the key: the head must be
/// genuine, and the body must reach it (a cut tail leaves the body short of it).
fn anchor(
    verified: &mut Verified,
    bytes: &[u8],
    head: Option<&Head>,
    key: &ChainKey,
    trail: Trail,
) -> Result<(), StoreError> {
    let unanchored = |reason: String| Err(StoreError::Unanchored { trail, reason });
    let unit = trail.unit();
    let Some(head) = head else {
        if verified.lines == 0 {
            return Ok(());
        }
        return unanchored("there are records but no head: the end cannot be checked".into());
    };
    if !head.holds(key) {
        return unanchored(
            "the head's mac does not match: it was changed, or the key is wrong".into(),
        );
    }
    if verified.lines < head.seq {
        return unanchored(format!(
            "the head says {} records were acknowledged, but the trail ends after {}: records were cut",
            head.seq, verified.lines
        ));
    }
    let mac_at_head = mac_of_line(bytes, head.seq);
    if head.seq > 0 && mac_at_head.as_deref() != Some(head.last.as_str()) {
        return unanchored(format!(
            "{unit} {} is not the {unit} the head acknowledged: the trail was rewritten",
            head.seq
        ));
    }
    if verified.lines > head.seq.max(head.pending) {
        return unanchored(format!(
            "{} {unit}s lie beyond what the head allows ({}): the head was put back from earlier",
            verified.lines - head.seq,
            head.seq.max(head.pending)
        ));
    }
    verified.unanchored_lines = verified.lines - head.seq;
    Ok(())
}

fn mac_of_line(bytes: &[u8], seq: u64) -> Option<String> {
    let line = bytes
        .split(|b| *b == b'\n')
        .nth(usize::try_from(seq).ok()?.checked_sub(1)?)?;
    serde_json::from_slice::<ChainedLine>(line)
        .ok()
        .map(|l| l.mac)
}

/// The trail the gateway writes: a file or a PostgreSQL database. Cheap to clone.
#[derive(Clone, Debug)]
pub enum AuditStore {
    /// A JSON Lines file, one gateway per file.
    File(FileStore),
    /// A PostgreSQL database, shared by replicas.
    Postgres(PgStore),
}

impl From<FileStore> for AuditStore {
    fn from(store: FileStore) -> Self {
        Self::File(store)
    }
}

impl From<PgStore> for AuditStore {
    fn from(store: PgStore) -> Self {
        Self::Postgres(store)
    }
}

impl AuditStore {
    /// Opens the file store at `path` (see [`FileStore::open`]).
    pub fn open(path: impl Into<PathBuf>, key: ChainKey) -> Result<Self, StoreError> {
        FileStore::open(path, key).map(Self::File)
    }

    /// Connects to the PostgreSQL store at `url` (see [`PgStore::connect`]).
    pub async fn connect(url: &str, key: ChainKey) -> Result<Self, StoreError> {
        PgStore::connect(url, key).await.map(Self::Postgres)
    }

    /// Appends the records not stored yet, in order, chained; durable before it returns.
    pub async fn append(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        match self {
            Self::File(store) => store.append(records).await,
            Self::Postgres(store) => store.append(records).await,
        }
    }

    /// The whole trail as acknowledged, as JSON Lines.
    pub async fn export(&self) -> Result<Vec<u8>, StoreError> {
        match self {
            Self::File(store) => store.export().await,
            Self::Postgres(store) => store.export().await,
        }
    }

    /// `file` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::File(_) => "file",
            Self::Postgres(_) => "postgres",
        }
    }

    /// The trail as [`AuditStore::export`] gives it, once every line's mac checks under
    /// the key: what the gateway signs a log head over must be what it sealed itself, not
    /// lines someone without the key put in its file or database.
    pub(crate) async fn export_checked(&self) -> Result<Vec<u8>, StoreError> {
        let bytes = self.export().await?;
        let key = self.key().clone();
        let trail = match self {
            Self::File(_) => Trail::File,
            Self::Postgres(_) => Trail::Database,
        };
        tokio::task::spawn_blocking(move || {
            check_chain(&bytes, Some(&key), trail, None).map(|_| bytes)
        })
        .await
        .map_err(|_| StoreError::Poisoned)?
    }

    /// The key the trail is chained under.
    pub(crate) fn key(&self) -> &ChainKey {
        match self {
            Self::File(store) => store.key(),
            Self::Postgres(store) => store.key(),
        }
    }

    /// How many records are stored.
    pub async fn count(&self) -> Result<u64, StoreError> {
        match self {
            Self::File(store) => Ok(store.len()),
            Self::Postgres(store) => store.count().await,
        }
    }
}
