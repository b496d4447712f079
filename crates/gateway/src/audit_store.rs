//! The audit store: the page's audit records as JSON Lines, hash-chained, flushed
//! durably before the request is acknowledged, idempotent by record id.
//!
//! Each line is `{"seq":N,"prev":"<sha256 of the previous line>","record":{..}}`; the
//! first line's `prev` is 64 zeros. A torn last line (a crash mid-write, never
//! acknowledged) is cut off when the store opens.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use countersign::AuditRecord;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainedLine {
    /// The line's position, from 1.
    pub seq: u64,
    /// SHA-256 (hex) of the previous line's bytes.
    pub prev: String,
    /// The audit record.
    pub record: AuditRecord,
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
    /// The hash of the last complete line.
    pub head: String,
    /// Bytes of an incomplete final line (an unacknowledged write), if any.
    pub torn_tail_bytes: usize,
}

struct Inner {
    path: PathBuf,
    file: File,
    /// The file's length after the last acknowledged write.
    len: u64,
    seq: u64,
    head: String,
    ids: HashSet<String>,
}

/// A hash-chained, append-only audit file. Cheap to clone.
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of one line's bytes.
pub fn line_hash(line: &[u8]) -> String {
    hex(&Sha256::digest(line))
}

/// Checks a whole file's chain. A final line without its newline is reported as a torn
/// tail, not a break: it was never acknowledged.
pub fn verify_bytes(bytes: &[u8]) -> Result<(Verified, HashSet<String>), StoreError> {
    let mut prev = GENESIS.to_owned();
    let mut ids = HashSet::new();
    let mut lines = 0u64;
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            return Ok((
                Verified {
                    lines,
                    head: prev,
                    torn_tail_bytes: rest.len(),
                },
                ids,
            ));
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
                "prev is {}, but the previous line hashes to {prev}",
                parsed.prev
            )));
        }
        if !ids.insert(parsed.record.id.clone()) {
            return Err(broken(format!(
                "record id `{}` appears twice",
                parsed.record.id
            )));
        }
        prev = line_hash(line);
        lines = number;
    }
    Ok((
        Verified {
            lines,
            head: prev,
            torn_tail_bytes: 0,
        },
        ids,
    ))
}

/// Verifies the file at `path`.
pub fn verify_file(path: &Path) -> Result<Verified, StoreError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io(path))?;
    verify_bytes(&bytes).map(|(v, _)| v)
}

impl AuditStore {
    /// Opens (or creates) the store at `path`, verifying the existing chain and cutting
    /// off a torn final line. A broken chain is refused: the store never extends it.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let path = path.into();
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(io(&path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
        let (verified, ids) = verify_bytes(&bytes)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        if verified.torn_tail_bytes > 0 {
            let keep = (bytes.len() - verified.torn_tail_bytes) as u64;
            tracing::warn!(
                bytes = verified.torn_tail_bytes,
                "cutting an unacknowledged torn line off the audit file"
            );
            file.set_len(keep).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        let len = (bytes.len() - verified.torn_tail_bytes) as u64;
        Ok(Self(Arc::new(Mutex::new(Inner {
            path,
            file,
            len,
            seq: verified.lines,
            head: verified.head,
            ids,
        }))))
    }

    /// Appends records not stored yet, in order, chained, and flushes them to disk
    /// (`fdatasync`) before returning. Blocking: call it from a blocking thread.
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
            let line = ChainedLine {
                seq,
                prev: head,
                record,
            };
            let text = serde_json::to_vec(&line).map_err(|e| StoreError::Broken {
                line: seq,
                reason: e.to_string(),
            })?;
            head = line_hash(&text);
            out.extend_from_slice(&text);
            out.push(b'\n');
        }
        let appended = fresh.len();
        if appended > 0 {
            let path = inner.path.clone();
            // INVARIANT: one write then fdatasync; state advances only after both succeed,
            // so an acknowledged record is on disk and a failed write is never acknowledged.
            let written = inner
                .file
                .write_all(&out)
                .and_then(|()| inner.file.sync_data());
            if let Err(e) = written {
                // Cut a partial write back off so the chain stays whole.
                let _ = inner.file.set_len(inner.len);
                return Err(io(&path)(e));
            }
            inner.len += out.len() as u64;
            inner.seq = seq;
            inner.head = head;
            inner.ids.extend(fresh);
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

    /// The whole file, for export.
    pub async fn export(&self) -> Result<Vec<u8>, StoreError> {
        let path = self
            .0
            .lock()
            .map_err(|_| StoreError::Poisoned)?
            .path
            .clone();
        tokio::fs::read(&path).await.map_err(io(&path))
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
