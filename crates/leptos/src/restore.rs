//! Bringing back what waited when the page reloaded: each stored call is claimed for
//! this tab, then restored through the gate (or settled as not restored), and the
//! results are handed to the assistant as one batch.

use std::rc::Rc;

use countersign::{reason::RestoreMiss, CallId, Settled, Step};
use futures_channel::oneshot;
use gloo_timers::future::TimeoutFuture;

use crate::clock::now;
use crate::countersign::Countersign;
use crate::pending_store::{PendingStore, StoredPending};

/// One stored call after the restore: live again as this call, or settled.
type Restored = Result<CallId, Settled>;

/// How long a tab waits after claiming before it looks again: of two tabs claiming
/// the same item at once, the last writer keeps it.
const CLAIM_SETTLE_MS: u32 = 60;

impl Countersign {
    /// Starts keeping pending calls under `key`, and brings back what an earlier load of
    /// this tab left there once the page has mounted (its actions registered).
    pub(crate) fn keep_pending(&self, key: String) {
        let (store, stored) = PendingStore::open(key);
        *self.0.pending_store.borrow_mut() = Some(store);
        let (tx, rx) = oneshot::channel();
        *self.0.restored.borrow_mut() = Some(rx);
        let weak = Rc::downgrade(&self.0);
        leptos::task::spawn_local(async move {
            // Let the page mount first: its actions register while it does.
            TimeoutFuture::new(0).await;
            let Some(shared) = weak.upgrade() else { return };
            let claims: Vec<(StoredPending, bool)> = {
                let cs = Countersign(shared);
                let store = cs.0.pending_store.borrow();
                let Some(store) = store.as_ref() else { return };
                let wall = js_sys::Date::now();
                stored
                    .into_iter()
                    .map(|item| {
                        let elsewhere = store.claimed_elsewhere(&item, wall);
                        if !elsewhere {
                            store.claim(&item);
                        }
                        (item, elsewhere)
                    })
                    .collect()
            };
            if !claims.is_empty() {
                TimeoutFuture::new(CLAIM_SETTLE_MS).await;
            }
            let Some(shared) = weak.upgrade() else { return };
            Countersign(shared).bring_back(claims, tx);
        });
    }

    fn bring_back(&self, claims: Vec<(StoredPending, bool)>, done: oneshot::Sender<Vec<Settled>>) {
        let wall = js_sys::Date::now();
        // Each model turn's items come back as their own batch ("allow all" never spans
        // turns); an item stored without one is a batch of its own.
        let mut groups: Vec<(Option<String>, Vec<Restored>)> = Vec::new();
        for (item, elsewhere) in claims {
            let taken = elsewhere
                || self
                    .0
                    .pending_store
                    .borrow()
                    .as_ref()
                    .is_none_or(|s| s.claimed_elsewhere(&item, wall));
            let pending = item.pending(wall);
            let batch_key = item.batch.clone();
            let exec = &self.0.executor;
            // An MCP client's pairing ended with the page it asked (it was told): its
            // call is not brought back for a person to approve for nobody.
            let gone = item.caller == countersign::Caller::Mcp;
            let item_outcome = if taken || gone {
                let why = if gone {
                    RestoreMiss::CallerGone
                } else {
                    RestoreMiss::ElsewhereOrDone
                };
                exec.drop_pending(pending, why, now()).ok().map(Err)
            } else {
                match exec.restore_pending(pending, now()) {
                    Ok(Step::Settled(settled)) => Some(Err(settled)),
                    Ok(step) => {
                        let call = crate::countersign::step_call(&step);
                        self.handle(step);
                        Some(Ok(call))
                    }
                    Err(_) => None,
                }
            };
            let Some(outcome) = item_outcome else {
                continue;
            };
            // An agent's call comes back for the person to decide, but the agent that
            // asked is gone: the assistant neither waits for it nor hears of it.
            if !item.caller.is_assistant() {
                continue;
            }
            match groups
                .iter_mut()
                .find(|(key, _)| key.is_some() && *key == batch_key)
            {
                Some((_, items)) => items.push(outcome),
                None => groups.push((batch_key, vec![outcome])),
            }
        }
        // The assistant hears of every restored item at once, in stored order.
        let mut receivers = Vec::new();
        for (_, items) in groups {
            let (tx, rx) = oneshot::channel();
            let id = self.0.next_batch.get() + 1;
            self.0.next_batch.set(id);
            self.0
                .batches
                .borrow_mut()
                .push(crate::batch::Batch::adopted(id, items, tx));
            receivers.push(rx);
        }
        leptos::task::spawn_local(async move {
            let mut all = Vec::new();
            for rx in receivers {
                all.extend(rx.await.unwrap_or_default());
            }
            let _ = done.send(all);
        });
        self.pump();
    }
}
