//! The audit store: the page's audit records as JSON Lines, chained with a key, anchored
//! by a keyed head kept apart from the body, flushed durably before the request is
//! acknowledged, idempotent by record id, and written by one gateway at a time.
//!
//! Each line is `{"seq":N,"prev":"<mac of the previous line>","record":{..},"mac":"<hex>"}`:
//! `mac` is HMAC-SHA256 under the deployment's [`ChainKey`] over the line's bytes up to
//! `,"mac"` (closed with `}`); the first line's `prev` is 64 zeros. The head file
//! (`<file>.head`) holds the last acknowledged seq and mac, keyed too, so a cut tail is
//! detected. Without the key nobody can rewrite and re-chain the file, or cut its tail,
//! unseen; with the key (the deployment's secret, never written to the trail), `verify`
//! checks everything. A torn last line (a crash mid-write, never acknowledged) is cut
//! off when the store opens.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use countersign::AuditRecord;
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

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
    /// The existing file's chain is broken; the store refuses to extend it.
    #[error("audit file is broken at line {line}: {reason}")]
    Broken {
        /// The first bad line, from 1.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The head does not match the body: records were cut, or the head was forged.
    #[error("audit file does not match its head: {0}")]
    Unanchored(String),
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
    /// A writer panicked while holding the store.
    #[error("the audit store is unusable after an earlier failure")]
    Poisoned,
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

/// What verifying a file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Complete, chained lines.
    pub lines: u64,
    /// The mac of the last complete line.
    pub head: String,
    /// Bytes of an incomplete final line (an unacknowledged write), if any.
    pub torn_tail_bytes: usize,
    /// Whether every mac was checked with the key (`false`: structure only).
    pub keyed: bool,
    /// Lines after the head's seq: written but never acknowledged (checked with the key).
    pub unanchored_lines: u64,
}

struct Inner {
    path: PathBuf,
    head_path: PathBuf,
    /// Locked for the store's life: one writer per file.
    file: File,
    key: ChainKey,
    /// The file's length after the last acknowledged write.
    len: u64,
    seq: u64,
    head: String,
    ids: HashSet<String>,
    /// The lines moved past the head, which could not be written: written again next.
    head_dirty: bool,
}

/// A keyed, anchored, append-only audit file. Cheap to clone.
#[derive(Clone)]
pub struct AuditStore(Arc<Mutex<Inner>>);

impl std::fmt::Debug for AuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditStore(..)")
    }
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

/// The head file of an audit file: `<file>.head`.
pub fn head_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".head");
    PathBuf::from(name)
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

const MAC_FIELD: &[u8] = b",\"mac\":\"";

/// Seals a line: its bytes up to `,"mac"` are what the mac covers.
fn seal(
    key: &ChainKey,
    seq: u64,
    prev: &str,
    record: &AuditRecord,
) -> Result<(Vec<u8>, String), StoreError> {
    let body =
        serde_json::to_vec(&Unsealed { seq, prev, record }).map_err(|e| StoreError::Broken {
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

/// Checks a whole body. Without a key: structure only (each line parses, seq runs on,
/// `prev` links to the previous line's mac, ids are unique). With the key: every mac
/// too. A final line without its newline is reported as a torn tail: it was never
/// acknowledged.
pub fn verify_bytes(
    bytes: &[u8],
    key: Option<&ChainKey>,
) -> Result<(Verified, HashSet<String>), StoreError> {
    let mut prev = GENESIS.to_owned();
    let mut ids = HashSet::new();
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
        if !ids.insert(parsed.record.id.clone()) {
            return Err(broken(format!(
                "record id `{}` appears twice",
                parsed.record.id
            )));
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
        },
        ids,
    ))
}

fn read_head(path: &Path) -> Result<Option<Head>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            StoreError::Unanchored(format!(
                "the head file `{}` is unreadable ({e})",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

/// Checks the body against its head with the key: the head must be genuine, and the
/// body must reach it (a cut tail leaves the body short of it).
fn anchor(
    verified: &mut Verified,
    bytes: &[u8],
    head: Option<&Head>,
    key: &ChainKey,
) -> Result<(), StoreError> {
    let Some(head) = head else {
        if verified.lines == 0 {
            return Ok(());
        }
        return Err(StoreError::Unanchored(
            "the file has records but no head: its end cannot be checked".into(),
        ));
    };
    if !head.holds(key) {
        return Err(StoreError::Unanchored(
            "the head's mac does not match: it was changed, or the key is wrong".into(),
        ));
    }
    if verified.lines < head.seq {
        return Err(StoreError::Unanchored(format!(
            "the head says {} records were acknowledged, but the file ends after {}: records were cut",
            head.seq, verified.lines
        )));
    }
    let mac_at_head = mac_of_line(bytes, head.seq);
    if head.seq > 0 && mac_at_head.as_deref() != Some(head.last.as_str()) {
        return Err(StoreError::Unanchored(format!(
            "line {} is not the line the head acknowledged: the file was rewritten",
            head.seq
        )));
    }
    if verified.lines > head.seq.max(head.pending) {
        return Err(StoreError::Unanchored(format!(
            "{} lines lie beyond what the head allows ({}): the head was put back from earlier",
            verified.lines - head.seq,
            head.seq.max(head.pending)
        )));
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

/// Verifies the file at `path`: with the key, every mac and the head (a cut tail, a
/// rewritten and re-chained file, or a wrong key are all reported); without it, the
/// structure only.
pub fn verify_file(path: &Path, key: Option<&ChainKey>) -> Result<Verified, StoreError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io(path))?;
    let (mut verified, _) = verify_bytes(&bytes, key)?;
    if let Some(key) = key {
        let head = read_head(&head_path(path))?;
        anchor(&mut verified, &bytes, head.as_ref(), key)?;
    }
    Ok(verified)
}

/// Takes an exclusive lock on the audit file itself, so every name for it (a symlink, a
/// hard link, a bind mount) meets the same lock; notes this process in `<file>.lock` for
/// the message another gateway gets.
fn lock(path: &Path) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io(path))?;
    let lock_file = lock_path(path);
    match file.try_lock() {
        Ok(()) => {
            // Best effort, and never through a link: the file is replaced, not followed.
            let _ = std::fs::remove_file(&lock_file);
            if let Ok(mut note) = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock_file)
            {
                let _ = note.write_all(format!("pid {}\n", std::process::id()).as_bytes());
            }
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::symlink_metadata(&lock_file)
                .ok()
                .filter(std::fs::Metadata::is_file)
                .and_then(|_| std::fs::read_to_string(&lock_file).ok())
                .map(|t| t.trim().chars().take(40).collect::<String>())
                .filter(|t| !t.is_empty())
                .map_or_else(
                    || "held by another process".to_owned(),
                    |who| format!("{who}, noted in `{}`", lock_file.display()),
                );
            Err(StoreError::Locked {
                path: path.to_owned(),
                holder,
            })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(path)(e)),
    }
}

/// Writes the head atomically: a fresh temporary file (a stale one, or a link planted
/// there, is removed first, never followed), synced, renamed over the old head.
fn write_head(path: &Path, head: &Head) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    match std::fs::remove_file(&temp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    file.write_all(&serde_json::to_vec(head).unwrap_or_default())?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

impl AuditStore {
    /// Opens (or creates) the store at `path` under `key`: takes the file's lock,
    /// verifies every mac and the head, and cuts off a torn final line. A broken chain, a
    /// wrong key, a cut tail or a second writer is refused: the store never extends it.
    pub fn open(path: impl Into<PathBuf>, key: ChainKey) -> Result<Self, StoreError> {
        let path = path.into();
        let mut file = lock(&path)?;
        let head_path = head_path(&path);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let (mut verified, ids) = verify_bytes(&bytes, Some(&key))?;
        anchor(&mut verified, &bytes, read_head(&head_path)?.as_ref(), &key)?;
        if verified.torn_tail_bytes > 0 {
            let keep = (bytes.len() - verified.torn_tail_bytes) as u64;
            tracing::warn!(
                bytes = verified.torn_tail_bytes,
                "cutting an unacknowledged torn line off the audit file"
            );
            file.set_len(keep).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        if verified.unanchored_lines > 0 {
            // Genuine (keyed) lines written before a crash, never acknowledged: the head
            // catches up with them.
            tracing::warn!(
                lines = verified.unanchored_lines,
                "anchoring audit lines written but never acknowledged"
            );
        }
        write_head(
            &head_path,
            &Head::sealed(&key, verified.lines, &verified.head, verified.lines),
        )
        .map_err(io(&head_path))?;
        let len = (bytes.len() - verified.torn_tail_bytes) as u64;
        Ok(Self(Arc::new(Mutex::new(Inner {
            path,
            head_path,
            file,
            key,
            len,
            seq: verified.lines,
            head: verified.head,
            ids,
            head_dirty: false,
        }))))
    }

    /// Appends records not stored yet, in order, chained, flushes them to disk
    /// (`fdatasync`) and moves the head, before returning. Blocking: call it from a
    /// blocking thread.
    pub fn append_blocking(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        let mut inner = self.0.lock().map_err(|_| StoreError::Poisoned)?;
        let mut out = Vec::new();
        let (mut seq, mut head) = (inner.seq, inner.head.clone());
        let mut fresh = HashSet::new();
        let mut duplicates = 0;
        for record in records {
            if inner.ids.contains(&record.id) || !fresh.insert(record.id.clone()) {
                duplicates += 1;
                continue;
            }
            seq += 1;
            let (line, mac) = seal(&inner.key, seq, &head, &record)?;
            head = mac;
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        let appended = fresh.len();
        if appended > 0 {
            // The intent first: the head allows lines up to `seq` before they exist.
            let intent = Head::sealed(&inner.key, inner.seq, &inner.head, seq);
            write_head(&inner.head_path, &intent).map_err(io(&inner.head_path))?;
            let path = inner.path.clone();
            // INVARIANT: one write, fdatasync, then the head; state advances (and the
            // batch is acknowledged) only after all succeed.
            let written = inner
                .file
                .write_all(&out)
                .and_then(|()| inner.file.sync_data());
            if let Err(e) = written {
                // Cut a partial write back off so the chain stays whole.
                let _ = inner.file.set_len(inner.len);
                return Err(io(&path)(e));
            }
            // The lines are durable: the state follows them whatever happens to the head,
            // so a retry finds its records stored (duplicates) instead of forking the
            // chain. The batch is acknowledged only once the head moved too.
            inner.len += out.len() as u64;
            inner.seq = seq;
            inner.head = head;
            inner.ids.extend(fresh);
            inner.head_dirty = true;
        }
        if inner.head_dirty {
            let sealed = Head::sealed(&inner.key, inner.seq, &inner.head, inner.seq);
            write_head(&inner.head_path, &sealed).map_err(io(&inner.head_path))?;
            inner.head_dirty = false;
        }
        Ok(Appended {
            appended,
            duplicates,
            last_seq: inner.seq,
        })
    }

    /// [`AuditStore::append_blocking`] on a blocking thread.
    pub async fn append(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.append_blocking(records))
            .await
            .map_err(|_| StoreError::Poisoned)?
    }

    /// The whole file as acknowledged, for export: read under the store's lock and cut
    /// at the last acknowledged line, so an append in progress never shows half a line.
    pub async fn export(&self) -> Result<Vec<u8>, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let inner = store.0.lock().map_err(|_| StoreError::Poisoned)?;
            let mut bytes = std::fs::read(&inner.path).map_err(io(&inner.path))?;
            bytes.truncate(usize::try_from(inner.len).unwrap_or(usize::MAX));
            Ok(bytes)
        })
        .await
        .map_err(|_| StoreError::Poisoned)?
    }

    /// How many records are stored.
    pub fn len(&self) -> u64 {
        self.0.lock().map(|i| i.seq).unwrap_or(0)
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
