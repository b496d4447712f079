//! Pending approvals and handoffs that survive a reload, in `sessionStorage`.
//!
//! After every executor step the calls waiting for a person are written down (the
//! model's call, the action's declaration digest, the deadline in wall-clock time), with
//! the assistant's conversation beside them. After a reload each one is brought back
//! only through [`countersign::Executor::restore_pending`]: same declaration, available,
//! time left; always asked again on a new card. Everything else settles at once as
//! `APPROVAL_EXPIRED`.
//!
//! Two tabs: a tab claims each item it holds in `localStorage` and releases the claims
//! when it goes away (`pagehide`), so a reload brings its own items back while a
//! duplicated tab (which copies `sessionStorage`) finds them claimed and drops its copies.
//! A claim that is never released (a crash) lapses at the item's deadline: the safe way.

use std::time::Duration;

use countersign::{executor::Pending, Call, CallId};
use serde::{Deserialize, Serialize};

use crate::list_map::ListMap;

/// At most this many stored items are read back (hostile storage cannot flood the dock).
const MAX_ITEMS: usize = 64;
/// How many settled results are kept for a reload mid-turn.
const MAX_RESULTS: usize = 64;
/// Stored text longer than this is ignored whole.
const MAX_STORED_BYTES: usize = 512 * 1024;

/// One waiting call, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredPending {
    /// A random id for this wait (claims are per id).
    pub(crate) id: String,
    pub(crate) tool_call_id: String,
    pub(crate) action: String,
    /// The arguments the card showed, as JSON text.
    pub(crate) arguments: String,
    pub(crate) declaration: String,
    pub(crate) handoff: bool,
    /// The deadline in milliseconds since the Unix epoch.
    pub(crate) deadline_at_ms: f64,
    /// The person's edit the call carried (checked against the arguments on restore).
    #[serde(default)]
    pub(crate) edited: Option<countersign::edit::EditDiff>,
    /// The model turn it belonged to (restored items of one turn stay one batch).
    #[serde(default)]
    pub(crate) batch: Option<String>,
    /// Who asked: it comes back as that caller's call, never as the assistant's.
    #[serde(default, skip_serializing_if = "countersign::Caller::is_assistant")]
    pub(crate) caller: countersign::Caller,
    /// The untrusted content that raised it: it comes back raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) untrusted: Option<String>,
}

impl StoredPending {
    /// The call to bring back, with the time it has left at wall-clock `wall_ms`.
    pub(crate) fn pending(&self, wall_ms: f64) -> Pending {
        let left = (self.deadline_at_ms - wall_ms).max(0.0);
        Pending {
            call: Call::new(
                self.tool_call_id.clone(),
                self.action.clone(),
                self.arguments.clone(),
            )
            .by(self.caller),
            declaration: self.declaration.clone(),
            handoff: self.handoff,
            remaining: if left.is_finite() {
                Duration::from_millis(left as u64)
            } else {
                Duration::ZERO
            },
            edited: self.edited.clone(),
            untrusted: self.untrusted.clone(),
        }
    }
}

/// A tab's claim on an item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    load: String,
    until_ms: f64,
}

pub(crate) struct PendingStore {
    key: String,
    /// A stored key per live batch (model turn), so a reload keeps turns apart.
    batch_keys: ListMap<u64, String>,
    /// The results of calls that settled, newest last: a reload mid-turn tells the model
    /// what really happened to the calls that had already ended.
    results: Vec<(String, String)>,
    /// This page load's id.
    load: String,
    /// The stored id of each waiting call.
    ids: ListMap<CallId, String>,
    saved: Vec<StoredPending>,
    /// Set when the page goes away: the last write stands for the next load.
    frozen: bool,
}

fn session() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok().flatten()
}

fn local() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

fn read(storage: Option<web_sys::Storage>, key: &str) -> Option<String> {
    storage?
        .get_item(key)
        .ok()
        .flatten()
        .filter(|t| t.len() <= MAX_STORED_BYTES)
}

/// A random hex id from Web Crypto.
pub(crate) fn random_id() -> String {
    let bytes = crate::clock::random_secret().unwrap_or_default();
    bytes.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

impl PendingStore {
    /// Opens the store under `key` and takes what an earlier load left there (each item
    /// read on its own: a garbled one is dropped, the rest still come back).
    pub(crate) fn open(key: String) -> (Self, Vec<StoredPending>) {
        let stored: Vec<StoredPending> = read(session(), &format!("{key}:pending"))
            .and_then(|text| serde_json::from_str::<Vec<serde_json::Value>>(&text).ok())
            .unwrap_or_default()
            .into_iter()
            .take(MAX_ITEMS)
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        if let Some(s) = session() {
            let _ = s.remove_item(&format!("{key}:pending"));
        }
        let results = read(session(), &format!("{key}:results"))
            .and_then(|text| serde_json::from_str::<Vec<(String, String)>>(&text).ok())
            .unwrap_or_default()
            .into_iter()
            .take(MAX_RESULTS)
            .collect();
        let store = Self {
            batch_keys: ListMap::default(),
            results,
            key,
            load: random_id(),
            ids: ListMap::default(),
            saved: Vec::new(),
            frozen: false,
        };
        (store, stored)
    }

    fn claim_key(&self, id: &str) -> String {
        format!("{}:claim:{id}", self.key)
    }

    /// Whether another live tab holds `item`.
    pub(crate) fn claimed_elsewhere(&self, item: &StoredPending, wall_ms: f64) -> bool {
        read(local(), &self.claim_key(&item.id))
            .and_then(|t| serde_json::from_str::<Claim>(&t).ok())
            .is_some_and(|c| c.load != self.load && c.until_ms > wall_ms)
    }

    /// Claims `item` for this load.
    pub(crate) fn claim(&self, item: &StoredPending) {
        let claim = Claim {
            load: self.load.clone(),
            until_ms: item.deadline_at_ms,
        };
        if let (Some(storage), Ok(text)) = (local(), serde_json::to_string(&claim)) {
            let _ = storage.set_item(&self.claim_key(&item.id), &text);
        }
    }

    fn release(&self, id: &str) {
        if let Some(storage) = local() {
            let _ = storage.remove_item(&self.claim_key(id));
        }
    }

    /// The page is going away: release every claim and stop writing, so what was last
    /// written is what the next load of this tab finds.
    pub(crate) fn freeze(&mut self) {
        for item in &self.saved {
            self.release(&item.id);
        }
        self.frozen = true;
    }

    /// Whether the stored items are exactly these waiting calls (then there is nothing
    /// to write; a frozen store writes nothing anyway).
    pub(crate) fn holds_exactly(&self, calls: &[CallId]) -> bool {
        self.frozen
            || (self.ids.len() == calls.len() && calls.iter().all(|c| self.ids.contains_key(c)))
    }

    /// Writes the calls waiting now (with their claims), if they changed.
    pub(crate) fn sync(
        &mut self,
        waiting: Vec<(CallId, Pending)>,
        batch_of: impl Fn(CallId) -> Option<u64>,
        wall_ms: f64,
    ) {
        if self.frozen {
            return;
        }
        self.ids
            .retain(|call, _| waiting.iter().any(|(c, _)| c == call));
        let current: Vec<StoredPending> = waiting
            .into_iter()
            .map(|(call, p)| StoredPending {
                id: self.ids.get_or_insert_with(call, random_id),
                tool_call_id: p.call.tool_call_id.to_string(),
                caller: p.call.caller,
                action: p.call.action,
                arguments: p.call.arguments,
                declaration: p.declaration,
                handoff: p.handoff,
                deadline_at_ms: wall_ms + p.remaining.as_millis() as f64,
                edited: p.edited,
                untrusted: p.untrusted,
                batch: batch_of(call).map(|b| self.batch_keys.get_or_insert_with(b, random_id)),
            })
            .collect();
        if current
            .iter()
            .map(|i| &i.id)
            .eq(self.saved.iter().map(|i| &i.id))
        {
            return;
        }
        for gone in self
            .saved
            .iter()
            .filter(|s| !current.iter().any(|c| c.id == s.id))
        {
            self.release(&gone.id);
        }
        for new in current
            .iter()
            .filter(|c| !self.saved.iter().any(|s| s.id == c.id))
        {
            self.claim(new);
        }
        if let (Some(storage), Ok(text)) = (session(), serde_json::to_string(&current)) {
            let _ = storage.set_item(&format!("{}:pending", self.key), &text);
        }
        self.saved = current;
    }

    /// A call settled: its result is kept for a reload that interrupts its turn.
    pub(crate) fn note_result(&mut self, tool_call_id: &str, content: String) {
        if self.frozen || content.len() > MAX_STORED_BYTES / MAX_RESULTS {
            return;
        }
        self.results.retain(|(id, _)| id != tool_call_id);
        self.results.push((tool_call_id.to_owned(), content));
        let excess = self.results.len().saturating_sub(MAX_RESULTS);
        self.results.drain(..excess);
        if let (Some(storage), Ok(text)) = (session(), serde_json::to_string(&self.results)) {
            let _ = storage.set_item(&format!("{}:results", self.key), &text);
        }
    }

    /// The result a call of an earlier load of this tab settled with, if kept.
    pub(crate) fn result_of(&self, tool_call_id: &str) -> Option<String> {
        self.results
            .iter()
            .rev()
            .find(|(id, _)| id == tool_call_id)
            .map(|(_, content)| content.clone())
    }

    /// The page came back from the back/forward cache: write what waits now again.
    pub(crate) fn thaw(&mut self) {
        self.frozen = false;
        // Everything was settled on the way out: nothing stored may come back.
        self.saved.clear();
        if let Some(storage) = session() {
            let _ = storage.remove_item(&format!("{}:pending", self.key));
        }
    }

    /// The conversation saved beside the items, if any (garbage reads as none).
    pub(crate) fn history<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        read(session(), &format!("{}:history", self.key))
            .and_then(|text| serde_json::from_str(&text).ok())
    }

    /// Saves the conversation beside the items.
    pub(crate) fn save_history(&self, history: &impl Serialize) {
        if self.frozen {
            return;
        }
        if let (Some(storage), Ok(text)) = (session(), serde_json::to_string(history)) {
            if text.len() <= MAX_STORED_BYTES {
                let _ = storage.set_item(&format!("{}:history", self.key), &text);
            }
        }
    }
}
