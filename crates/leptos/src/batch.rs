//! Batches: the tool calls of one model turn, decided item by item.
//!
//! Every item gets its own card and its own decision; a denial of one does not touch
//! the others. Items that depend on an earlier one (the same action, or an action bound
//! to the same page target) are submitted only once everything they depend on has
//! settled, so they run in call order and their cards are drawn from the page as the
//! earlier items left it. The batch resolves once every item has settled, with the
//! results in call order.

use countersign::{Call, CallId, Settled};
use futures_channel::oneshot;

/// Where one item of a batch is.
#[derive(Clone, Debug)]
enum ItemState {
    /// Not submitted yet: an item it depends on has not settled.
    Waiting(Call),
    /// In the executor as this call (a person's edit moves it to the new call).
    Live(CallId),
    /// Ended.
    Settled(Box<Settled>),
}

#[derive(Debug)]
struct Item {
    /// The earlier items it must wait for (indices into the batch).
    after: Vec<usize>,
    state: ItemState,
}

/// One model turn's calls.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) id: u64,
    items: Vec<Item>,
    done: Option<oneshot::Sender<Vec<Settled>>>,
}

/// One batch as the dock shows it: which call each item is now, and whether it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchView {
    /// The batch's id, unique in the page.
    pub id: u64,
    /// Per item, in call order: its current call (`None` until it is submitted) and
    /// whether it has settled.
    pub items: Vec<(Option<CallId>, bool)>,
}

impl BatchView {
    /// The 1-based position of `call` in the batch, if it is one of its items.
    pub fn position(&self, call: CallId) -> Option<usize> {
        self.items
            .iter()
            .position(|(c, _)| *c == Some(call))
            .map(|i| i + 1)
    }

    /// The calls of the items that have not settled (`None` for those not submitted).
    pub fn remaining(&self) -> impl Iterator<Item = Option<CallId>> + '_ {
        self.items.iter().filter(|(_, done)| !done).map(|(c, _)| *c)
    }
}

impl Batch {
    /// A batch of `calls`; `touches(call)` names what a call's action touches (its id,
    /// and its page target if it has one): a later call touching the same thing waits
    /// for the last earlier one that did (linear in the batch, whatever its size).
    pub(crate) fn new(
        id: u64,
        calls: Vec<Call>,
        touches: impl Fn(&Call) -> Vec<String>,
        done: oneshot::Sender<Vec<Settled>>,
    ) -> Self {
        let mut last = crate::list_map::ListMap::<String, usize>::default();
        let items = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| {
                let mut after: Vec<usize> = Vec::new();
                for key in touches(&call) {
                    if let Some(j) = last.insert(key, i) {
                        if !after.contains(&j) {
                            after.push(j);
                        }
                    }
                }
                Item {
                    after,
                    state: ItemState::Waiting(call),
                }
            })
            .collect();
        Self {
            id,
            items,
            done: Some(done),
        }
    }

    /// A batch of calls already in the executor or already settled (the calls brought
    /// back after a reload), resolved like any other once all have settled.
    pub(crate) fn adopted(
        id: u64,
        items: Vec<Result<CallId, Settled>>,
        done: oneshot::Sender<Vec<Settled>>,
    ) -> Self {
        let items = items
            .into_iter()
            .map(|item| Item {
                after: Vec::new(),
                state: match item {
                    Ok(call) => ItemState::Live(call),
                    Err(settled) => ItemState::Settled(Box::new(settled)),
                },
            })
            .collect();
        Self {
            id,
            items,
            done: Some(done),
        }
    }

    /// The calls that may be submitted now (their dependencies all settled), taken out
    /// of the waiting state; the caller submits them and reports each with [`Batch::started`].
    pub(crate) fn ready(&mut self) -> Vec<(usize, Call)> {
        let settled: Vec<bool> = self
            .items
            .iter()
            .map(|i| matches!(i.state, ItemState::Settled(_)))
            .collect();
        let mut out = Vec::new();
        for (index, item) in self.items.iter_mut().enumerate() {
            if let ItemState::Waiting(call) = &item.state {
                if item
                    .after
                    .iter()
                    .all(|&j| settled.get(j).copied().unwrap_or(true))
                {
                    out.push((index, call.clone()));
                }
            }
        }
        out
    }

    /// Item `index` is in the executor as `call`.
    pub(crate) fn started(&mut self, index: usize, call: CallId) {
        if let Some(item) = self.items.get_mut(index) {
            item.state = ItemState::Live(call);
        }
    }

    /// Whether `call` is one of this batch's items now.
    pub(crate) fn holds(&self, call: CallId) -> bool {
        self.items.iter().any(|item| match &item.state {
            ItemState::Live(c) => *c == call,
            ItemState::Settled(s) => s.call == call,
            ItemState::Waiting(_) => false,
        })
    }

    /// A person's edit moved an item from call `from` to call `to`.
    pub(crate) fn moved(&mut self, from: CallId, to: CallId) -> bool {
        self.items.iter_mut().any(|item| match item.state {
            ItemState::Live(call) if call == from => {
                item.state = ItemState::Live(to);
                true
            }
            _ => false,
        })
    }

    /// Takes a settlement if it belongs to this batch; `false` if it does not.
    pub(crate) fn take(&mut self, settled: &Settled) -> bool {
        for item in &mut self.items {
            if matches!(item.state, ItemState::Live(call) if call == settled.call) {
                item.state = ItemState::Settled(Box::new(settled.clone()));
                return true;
            }
        }
        false
    }

    /// When every item has settled: sends the results in call order; `true` then.
    pub(crate) fn finish_if_done(&mut self) -> bool {
        let all: Option<Vec<Settled>> = self
            .items
            .iter()
            .map(|i| match &i.state {
                ItemState::Settled(s) => Some((**s).clone()),
                _ => None,
            })
            .collect();
        match all {
            Some(results) => {
                if let Some(done) = self.done.take() {
                    let _ = done.send(results);
                }
                true
            }
            None => false,
        }
    }

    /// The dock's view of it.
    pub(crate) fn view(&self) -> BatchView {
        BatchView {
            id: self.id,
            items: self
                .items
                .iter()
                .map(|i| match &i.state {
                    ItemState::Waiting(_) => (None, false),
                    ItemState::Live(call) => (Some(*call), false),
                    ItemState::Settled(s) => (Some(s.call), true),
                })
                .collect(),
        }
    }
}
