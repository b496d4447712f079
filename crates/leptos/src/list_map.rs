//! A map kept as a list of pairs, for the page's few entries: a hash or B-tree map's code
//! is copied into the page for each key and value type, a list's is a few lines.

use std::borrow::Borrow;

/// Pairs with unique keys, in no particular order.
#[derive(Debug)]
pub(crate) struct ListMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for ListMap<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: PartialEq, V> ListMap<K, V> {
    fn at<Q: PartialEq + ?Sized>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        self.0.iter().position(|(k, _)| k.borrow() == key)
    }

    pub(crate) fn get<Q: PartialEq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.0.get(self.at(key)?).map(|(_, v)| v)
    }

    pub(crate) fn contains_key<Q: PartialEq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.at(key).is_some()
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

    pub(crate) fn remove<Q: PartialEq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let at = self.at(key)?;
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

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.0.iter()
    }
}
