//! What the page exposes to the runtime besides actions: named elements (targets a
//! handoff or a card points at) and read-only page state, each entry owned by the
//! component that registered it.

use crate::list_map::ListMap;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Map, Value};

pub(crate) type TargetFn = Rc<dyn Fn() -> Option<web_sys::Element>>;
pub(crate) type StateFn = Rc<dyn Fn() -> Value>;

/// Entries by name, each with the key of the registration that owns it: removing with
/// a stale key (an older component under the same name) removes nothing.
pub(crate) struct Keyed<T> {
    /// Sorted by name, each with the key of the component that registered it. A list, not
    /// a map: a page names a handful, and a map's code is copied into the page per type.
    entries: RefCell<Vec<(String, u64, T)>>,
}

impl<T: Clone> Keyed<T> {
    fn new() -> Self {
        Self {
            entries: RefCell::new(Vec::new()),
        }
    }

    fn insert(&self, name: &str, key: u64, value: T) {
        let mut entries = self.entries.borrow_mut();
        let entry = (name.to_owned(), key, value);
        match entries.binary_search_by(|(n, _, _)| n.as_str().cmp(name)) {
            Ok(i) => {
                if let Some(slot) = entries.get_mut(i) {
                    *slot = entry;
                }
            }
            Err(i) => entries.insert(i, entry),
        }
    }

    fn remove(&self, name: &str, key: u64) {
        self.entries
            .borrow_mut()
            .retain(|(n, k, _)| n != name || *k != key);
    }

    fn get(&self, name: &str) -> Option<T> {
        let entries = self.entries.borrow();
        entries
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| v.clone())
    }

    fn all(&self) -> Vec<(String, T)> {
        let entries = self.entries.borrow();
        entries
            .iter()
            .map(|(n, _, v)| (n.clone(), v.clone()))
            .collect()
    }
}

pub(crate) struct PageRegistry {
    targets: Keyed<TargetFn>,
    state: Keyed<StateFn>,
    action_targets: RefCell<ListMap<String, String>>,
    next_key: Cell<u64>,
}

impl PageRegistry {
    pub(crate) fn new() -> Self {
        Self {
            targets: Keyed::new(),
            state: Keyed::new(),
            action_targets: RefCell::default(),
            next_key: Cell::new(1),
        }
    }

    fn next_key(&self) -> u64 {
        let key = self.next_key.get();
        self.next_key.set(key + 1);
        key
    }

    pub(crate) fn add_target(&self, name: &str, f: TargetFn) -> u64 {
        let key = self.next_key();
        self.targets.insert(name, key, f);
        key
    }

    pub(crate) fn remove_target(&self, name: &str, key: u64) {
        self.targets.remove(name, key);
    }

    /// The element registered under `name`, if it is mounted.
    pub(crate) fn target(&self, name: &str) -> Option<web_sys::Element> {
        self.targets.get(name).and_then(|f| f())
    }

    pub(crate) fn add_state(&self, name: &str, f: StateFn) -> u64 {
        let key = self.next_key();
        self.state.insert(name, key, f);
        key
    }

    pub(crate) fn remove_state(&self, name: &str, key: u64) {
        self.state.remove(name, key);
    }

    /// Every page-state entry, read now.
    pub(crate) fn state(&self) -> Map<String, Value> {
        // Read outside the borrow: a state function may touch the registry. Inserted one
        // by one: `collect` into a map brings a sort routine into the page.
        let mut state = Map::new();
        for (key, read) in self.state.all() {
            state.insert(key, read());
        }
        state
    }

    pub(crate) fn bind_action_target(&self, action: &str, target: &str) {
        self.action_targets
            .borrow_mut()
            .insert(action.to_owned(), target.to_owned());
    }

    pub(crate) fn unbind_action_target(&self, action: &str) {
        self.action_targets.borrow_mut().remove(&action.to_owned());
    }

    pub(crate) fn action_target(&self, action: &str) -> Option<String> {
        self.action_targets
            .borrow()
            .get(&action.to_owned())
            .cloned()
    }
}
