//! Remembered rules across page loads: session grants saved in `localStorage` with an
//! expiry, restored when their action registers again, removed when revoked or expired.

use std::rc::Rc;
use std::time::Duration;

use countersign::GrantRule;
use serde::{Deserialize, Serialize};

use crate::clock::now;
use crate::context::{Countersign, Shared};

/// One saved grant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredGrant {
    /// The action it covers.
    pub action: String,
    /// What it covers.
    pub rule: GrantRule,
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
pub fn read_stored(key: &str, wall_now_ms: f64) -> Vec<StoredGrant> {
    let text = storage()
        .and_then(|s| s.get_item(key).ok().flatten())
        .unwrap_or_default();
    serde_json::from_str::<Vec<StoredGrant>>(&text)
        .unwrap_or_default()
        .into_iter()
        .filter(|g| g.expires_at_ms > wall_now_ms)
        .collect()
}

impl Countersign {
    /// Keeps "always allow" grants for `ttl` across page loads, in `localStorage` under
    /// `key`. A saved grant is restored only when its action registers again and only
    /// where a person could grant it now (`Ask`, not asked twice); expired ones are dropped.
    /// Storage is trusted like the page's own script: use it only on origins you control.
    pub fn persist_grants(&self, key: impl Into<String>, ttl: Duration) {
        let key = key.into();
        let waiting = read_stored(&key, js_sys::Date::now());
        *self.0.grant_store.borrow_mut() = Some(GrantStore {
            key,
            ttl,
            waiting,
            saved: Vec::new(),
        });
        self.pump();
    }
}

/// Called from `pump`: restore what can be restored, save what changed.
pub(crate) fn sync(shared: &Rc<Shared>) {
    let mut slot = shared.grant_store.borrow_mut();
    let Some(store) = slot.as_mut() else { return };
    let wall = js_sys::Date::now();
    // Only saved grants still waiting need the registry (most pumps have none).
    let (ready, later): (Vec<StoredGrant>, Vec<StoredGrant>) = if store.waiting.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let registered = shared.executor.action_ids();
        store
            .waiting
            .drain(..)
            .partition(|g| registered.contains(&g.action))
    };
    store.waiting = later
        .into_iter()
        .filter(|g| g.expires_at_ms > wall)
        .collect();
    let mut restored_expiry = Vec::new();
    for grant in ready {
        // Refused where a fresh grant could not be made: such an entry is dropped.
        if shared
            .executor
            .restore_grant(&grant.action, grant.rule.clone(), now())
            .is_ok()
        {
            restored_expiry.push(grant);
        }
    }
    let current: Vec<StoredGrant> = shared
        .executor
        .grants()
        .into_iter()
        .map(|g| {
            let known = store
                .saved
                .iter()
                .chain(restored_expiry.iter())
                .find(|s| s.action == g.action && s.rule == g.rule)
                .map(|s| s.expires_at_ms);
            StoredGrant {
                expires_at_ms: known.unwrap_or(wall + store.ttl.as_millis() as f64),
                action: g.action,
                rule: g.rule,
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
}

pub(crate) type GrantStoreSlot = std::cell::RefCell<Option<GrantStore>>;
