//! A map kept as a list of pairs, for the page's few entries: a hash or B-tree map's code
//! is copied into the page for each key and value type, a list's is a few lines.

/// Pairs with unique keys.
#[derive(Debug)]
pub(crate) struct ListMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for ListMap<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: PartialEq, V> ListMap<K, V> {
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => Some(std::mem::replace(slot, value)),
            None => {
                self.0.push((key, value));
                None
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.swap_remove(at).1)
    }

    /// The value of `key`, made by `make` (and kept) if it has none.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> V
    where
        V: Clone,
    {
        if let Some(value) = self.get(&key) {
            return value.clone();
        }
        let value = make();
        self.0.push((key, value.clone()));
        value
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        self.0.retain(|(k, v)| keep(k, v));
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}
