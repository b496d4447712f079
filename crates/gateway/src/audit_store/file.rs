//! The file backend: one JSON Lines file, its keyed head beside it (`<file>.head`),
//! flushed (`fdatasync`) before the request is acknowledged, and written by one gateway
//! at a time (an exclusive lock on the file). A torn last line (a crash mid-write, never
//! acknowledged) is cut off when the store opens.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use countersign::AuditRecord;

use super::{
    anchor, check_chain, io, seal, verify_bytes, Appended, ChainKey, Head, StoreError, Trail,
    Verified,
};

struct Inner {
    path: PathBuf,
    head_path: PathBuf,
    /// Locked for the store's life: one writer per file.
    file: File,
    /// The file's length after the last acknowledged write.
    len: u64,
    seq: u64,
    head: String,
    ids: super::StoredIds,
    /// The lines moved past the head, which could not be written: written again next.
    head_dirty: bool,
}

/// A keyed, anchored, append-only audit file, and its key. Cheap to clone.
#[derive(Clone)]
pub struct FileStore(Arc<Mutex<Inner>>, ChainKey);

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileStore(..)")
    }
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

fn read_head(path: &Path) -> Result<Option<Head>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Unanchored {
                trail: Trail::File,
                reason: format!("the head file `{}` is unreadable ({e})", path.display()),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
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
        anchor(&mut verified, &bytes, head.as_ref(), key, Trail::File)?;
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

impl FileStore {
    /// Opens (or creates) the store at `path` under `key`: takes the file's lock,
    /// verifies every mac and the head, and cuts off a torn final line. A broken chain, a
    /// wrong key, a cut tail or a second writer is refused: the store never extends it.
    pub fn open(path: impl Into<PathBuf>, key: ChainKey) -> Result<Self, StoreError> {
        let path = path.into();
        let mut file = lock(&path)?;
        let head_path = head_path(&path);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let (mut verified, ids) = check_chain(&bytes, Some(&key), Trail::File, None)?;
        let head = read_head(&head_path)?;
        anchor(&mut verified, &bytes, head.as_ref(), &key, Trail::File)?;
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
        let inner = Inner {
            path,
            head_path,
            file,
            len,
            seq: verified.lines,
            head: verified.head,
            ids,
            head_dirty: false,
        };
        Ok(Self(Arc::new(Mutex::new(inner)), key))
    }

    /// Appends records not stored yet, in order, chained, flushes them to disk
    /// (`fdatasync`) and moves the head, before returning. Blocking: call it from a
    /// blocking thread.
    pub fn append_blocking(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        let mut inner = self.0.lock().map_err(|_| StoreError::Poisoned)?;
        let mut out = Vec::new();
        let (mut seq, mut head) = (inner.seq, inner.head.clone());
        let mut fresh = super::StoredIds::new();
        let mut duplicates = 0;
        for record in records {
            let digest = super::record_digest(&record);
            // Sent again under its id: a duplicate if it is the same record, a conflict
            // (the whole batch refused, nothing written) if it is not.
            let id = record.id.as_str();
            match inner.ids.get(id).or_else(|| fresh.get(id)) {
                Some(stored) if *stored == digest => {
                    duplicates += 1;
                    continue;
                }
                Some(_) => return Err(StoreError::Conflict(id.to_owned())),
                None => {}
            }
            fresh.insert(id.to_owned(), digest);
            seq += 1;
            let (line, mac) = seal(&self.1, Trail::File, seq, &head, &record)?;
            head = mac;
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        let appended = fresh.len();
        if appended > 0 {
            // The intent first: the head allows lines up to `seq` before they exist.
            let intent = Head::sealed(&self.1, inner.seq, &inner.head, seq);
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
            let sealed = Head::sealed(&self.1, inner.seq, &inner.head, inner.seq);
            write_head(&inner.head_path, &sealed).map_err(io(&inner.head_path))?;
            inner.head_dirty = false;
        }
        Ok(Appended {
            appended,
            duplicates,
            last_seq: inner.seq,
        })
    }

    /// [`FileStore::append_blocking`] on a blocking thread.
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

    /// The key the file is chained under.
    pub(crate) fn key(&self) -> &ChainKey {
        &self.1
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
