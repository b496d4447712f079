//! Bringing back what waited when the page reloaded: each stored call is claimed for
//! this tab, then restored through the gate (or settled as not restored), and the
//! results are handed to the assistant as one batch.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::{reason::RestoreMiss, CallId, Settled, Step};
use futures_channel::oneshot;
use gloo_timers::future::TimeoutFuture;
use leptos::prelude::*;

use crate::clock::now;
use crate::conversation::ChatMessage;
use crate::countersign::{Countersign, PageService};
use crate::pending_store::{PendingStore, StoredPending};

/// One stored call after the restore: live again as this call, or settled.
type Restored = Result<CallId, Settled>;

/// How long a tab waits after claiming before it looks again: of two tabs claiming
/// the same item at once, the last writer keeps it.
const CLAIM_SETTLE_MS: u32 = 60;

/// Pending approvals and handoffs kept across reloads, as a page service: the store,
/// and the results of the calls brought back, for the assistant.
pub(crate) struct KeptPending {
    store: RefCell<PendingStore>,
    restored: RefCell<Option<oneshot::Receiver<Vec<Settled>>>>,
}

impl PageService for KeptPending {
    /// Writes what waits, only when that changed: most steps change nothing stored.
    fn after_step(self: Rc<Self>, cs: &Countersign) {
        let dock = cs.0.dock;
        let mut waiting: Vec<CallId> = dock
            .approvals
            .with_untracked(|cards| cards.iter().map(|c| c.call).collect());
        dock.handoffs
            .with_untracked(|h| waiting.extend(h.iter().map(|v| v.call)));
        let mut store = self.store.borrow_mut();
        if !store.holds_exactly(&waiting) {
            let batches = cs.0.batches.borrow();
            let batch_of = |call| batches.iter().find(|b| b.holds(call)).map(|b| b.id);
            store.sync(cs.0.executor.waiting(now()), batch_of, js_sys::Date::now());
        }
    }

    /// The conversation, and the results kept for it, are the assistant's: an agent's
    /// outcomes must not push the assistant's results out.
    fn call_settled(self: Rc<Self>, _cs: &Countersign, settled: &Settled) {
        if settled.caller.is_assistant() {
            self.store
                .borrow_mut()
                .note_result(&settled.tool_call_id, settled.to_model_content());
        }
    }

    /// What waits now stays written for the next load of this tab.
    fn leaving(self: Rc<Self>, _cs: &Countersign) {
        self.store.borrow_mut().freeze();
    }

    /// Everything was settled on the way out: what is stored for the next load must say
    /// so (nothing waits), not the state before.
    fn reopen(self: Rc<Self>, _cs: &Countersign) {
        self.store.borrow_mut().thaw();
    }
}

/// Saves the assistant's conversation beside the pending calls (when kept).
pub(crate) fn save_history(cs: &Countersign, history: &[ChatMessage]) {
    if let Some(kept) = cs.service::<KeptPending>() {
        kept.store.borrow().save_history(&history);
    }
}

/// The conversation an earlier load of this tab saved, if it is kept and readable.
pub(crate) fn saved_history(cs: &Countersign) -> Option<Vec<ChatMessage>> {
    cs.service::<KeptPending>()?.store.borrow().history()
}

/// The result a call settled with in an earlier load of this tab, if kept.
pub(crate) fn saved_result(cs: &Countersign, tool_call_id: &str) -> Option<String> {
    cs.service::<KeptPending>()?
        .store
        .borrow()
        .result_of(tool_call_id)
}

/// The results of the calls brought back after a reload (once, for the assistant).
pub(crate) fn take_restored(cs: &Countersign) -> Option<oneshot::Receiver<Vec<Settled>>> {
    cs.service::<KeptPending>()?.restored.borrow_mut().take()
}

/// Starts keeping pending calls under `key`, and brings back what an earlier load of
/// this tab left there once the page has mounted (its actions registered).
pub(crate) fn keep_pending(cs: &Countersign, key: String) {
    let (store, stored) = PendingStore::open(key);
    let (tx, rx) = oneshot::channel();
    let kept = Rc::new(KeptPending {
        store: RefCell::new(store),
        restored: RefCell::new(Some(rx)),
    });
    cs.add_service(kept.clone());
    let weak = Rc::downgrade(&cs.0);
    leptos::task::spawn_local(async move {
        // Let the page mount first: its actions register while it does.
        TimeoutFuture::new(0).await;
        if weak.strong_count() == 0 {
            return;
        }
        let claims: Vec<(StoredPending, bool)> = {
            let store = kept.store.borrow();
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
        bring_back(&Countersign(shared), &kept, claims, tx);
    });
}

fn bring_back(
    cs: &Countersign,
    kept: &KeptPending,
    claims: Vec<(StoredPending, bool)>,
    done: oneshot::Sender<Vec<Settled>>,
) {
    let wall = js_sys::Date::now();
    // Each model turn's items come back as their own batch ("allow all" never spans
    // turns); an item stored without one is a batch of its own.
    let mut groups: Vec<(Option<String>, Vec<Restored>)> = Vec::new();
    for (item, elsewhere) in claims {
        let taken = elsewhere || kept.store.borrow().claimed_elsewhere(&item, wall);
        let pending = item.pending(wall);
        let batch_key = item.batch.clone();
        let exec = &cs.0.executor;
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
                    cs.handle(step);
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
        let id = cs.0.next_batch.get() + 1;
        cs.0.next_batch.set(id);
        cs.0.batches
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
    cs.pump();
}
