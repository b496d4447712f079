//! Remembered rules across page loads: session grants saved in `localStorage` with an
//! expiry, restored when their action registers again, removed when revoked or expired.
//!
//! Only a grant's [`GrantBasis`] is stored (the action, its declaration digest, the role
//! and the approved call's arguments), under a key per role. On restore the executor
//! derives the rule again with the action's own `remember` hook; a matcher or a
//! description in storage is never taken on trust, and one role's grants never reach
//! another role on a shared browser. An MCP client's grants are not saved: its pairing
//! lasts one page load, and a client that pairs with a later one starts with none.

use std::time::Duration;

use countersign::{ticket::GrantBasis, Caller, Executor};
use serde::{Deserialize, Serialize};

use crate::clock::now;

/// One saved grant: what it derives from, and when it expires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredGrant {
    /// What the executor derives the grant from.
    pub basis: GrantBasis,
    /// When it expires, in milliseconds since the Unix epoch (`Date.now()`).
    pub expires_at_ms: f64,
}

pub(crate) struct GrantStore {
    key: String,
    ttl: Duration,
    /// Saved grants whose action has not registered yet.
    waiting: Vec<StoredGrant>,
    /// What was saved last (to write only on change).
    saved: Vec<StoredGrant>,
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// Reads saved grants, dropping expired and unreadable entries.
fn read_stored(key: &str, wall_now_ms: f64) -> Vec<StoredGrant> {
    let text = storage()
        .and_then(|s| s.get_item(key).ok().flatten())
        .unwrap_or_default();
    serde_json::from_str::<Vec<StoredGrant>>(&text)
        .unwrap_or_default()
        .into_iter()
        .filter(|g| g.expires_at_ms > wall_now_ms)
        .collect()
}

impl GrantStore {
    /// A store under `key` (already per role), keeping grants for `ttl`, with what the
    /// page saved earlier waiting for its actions to register.
    pub(crate) fn open(key: String, ttl: Duration) -> Self {
        let waiting = read_stored(&key, js_sys::Date::now());
        Self {
            key,
            ttl,
            waiting,
            saved: Vec::new(),
        }
    }
}

/// Restores what can be restored and saves what changed; `true` if a grant came back.
pub(crate) fn sync(store: &mut GrantStore, executor: &Executor) -> bool {
    let wall = js_sys::Date::now();
    // Only saved grants still waiting need the registry (most pumps have none).
    let (ready, later): (Vec<StoredGrant>, Vec<StoredGrant>) = if store.waiting.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let registered = executor.action_ids();
        store
            .waiting
            .drain(..)
            .partition(|g| registered.contains(&g.basis.action))
    };
    store.waiting = later
        .into_iter()
        .filter(|g| g.expires_at_ms > wall)
        .collect();
    let mut restored_expiry = Vec::new();
    // An MCP client's pairing lasts one page load: its grants are never brought back.
    for grant in ready.into_iter().filter(|g| g.basis.caller != Caller::Mcp) {
        // Refused where a fresh grant could not be made: such an entry is dropped.
        if executor.restore_grant(&grant.basis, now()).is_ok() {
            restored_expiry.push(grant);
        }
    }
    let live = executor.grants();
    // A saved grant whose action went away (unmounted, or the page is closing) was
    // revoked with its registration in this page, but stays saved for the next
    // registration of the same declaration; only a grant revoked while its action is
    // registered is forgotten.
    let gone: Vec<StoredGrant> = store
        .saved
        .iter()
        .filter(|s| !live.iter().any(|g| g.basis == s.basis))
        .cloned()
        .collect();
    if !gone.is_empty() {
        let registered = executor.action_ids();
        for saved in gone {
            let absent = !registered.contains(&saved.basis.action);
            let known = store.waiting.iter().any(|w| w.basis == saved.basis);
            if absent && !known {
                store.waiting.push(saved);
            }
        }
    }
    let current: Vec<StoredGrant> = live
        .into_iter()
        // Nor saved: a client that pairs with a later load must not find them.
        .filter(|g| g.basis.caller != Caller::Mcp)
        .map(|g| {
            let known = store
                .saved
                .iter()
                .chain(restored_expiry.iter())
                .find(|s| s.basis == g.basis)
                .map(|s| s.expires_at_ms);
            StoredGrant {
                expires_at_ms: known.unwrap_or(wall + store.ttl.as_millis() as f64),
                basis: g.basis,
            }
        })
        .filter(|g| g.expires_at_ms > wall)
        .chain(store.waiting.iter().cloned())
        .collect();
    if current != store.saved {
        if let (Some(storage), Ok(text)) = (storage(), serde_json::to_string(&current)) {
            let _ = storage.set_item(&store.key, &text);
        }
        store.saved = current;
    }
    !restored_expiry.is_empty()
}
