//! What the page exposes to the runtime besides actions: named elements (targets a
//! handoff or a card points at) and read-only page state, each entry owned by the
//! component that registered it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::list_map::ListMap;

pub(crate) type TargetFn = Rc<dyn Fn() -> Option<web_sys::Element>>;
pub(crate) type StateFn = Rc<dyn Fn() -> Value>;

/// Entries by name, each with the key of the registration that owns it: removing with
/// a stale key (an older component under the same name) removes nothing.
pub(crate) struct Keyed<T> {
    entries: RefCell<ListMap<String, (u64, T)>>,
}

impl<T: Clone> Keyed<T> {
    fn new() -> Self {
        Self {
            entries: RefCell::default(),
        }
    }

    fn insert(&self, name: &str, key: u64, value: T) {
        self.entries
            .borrow_mut()
            .insert(name.to_owned(), (key, value));
    }

    fn remove(&self, name: &str, key: u64) {
        let mut entries = self.entries.borrow_mut();
        if entries.get(name).is_some_and(|(k, _)| *k == key) {
            entries.remove(name);
        }
    }

    fn get(&self, name: &str) -> Option<T> {
        self.entries.borrow().get(name).map(|(_, v)| v.clone())
    }

    fn all(&self) -> Vec<(String, T)> {
        let entries = self.entries.borrow();
        entries
            .iter()
            .map(|(n, (_, v))| (n.clone(), v.clone()))
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
        self.action_targets.borrow_mut().remove(action);
    }

    pub(crate) fn action_target(&self, action: &str) -> Option<String> {
        self.action_targets.borrow().get(action).cloned()
    }
}
