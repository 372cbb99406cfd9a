//! [`VertexMap`]: a map from vertex ids to values, kept as one sorted vector.

use crate::VertexId;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

/// A map keyed by [`VertexId`], iterated in id order, with the parts of `BTreeMap`'s interface a
/// cycle uses.
///
/// The entries live in one vector sorted by id. A cycle builds its per-vertex maps (evaluated
/// metrics, decisions, scaling summaries, parallelism overrides) once, in id order, and then only
/// reads them: collecting such a map is one move of each value into the vector, cloning it is one
/// allocation, and a lookup is a binary search. Inserting out of order shifts the entries after
/// the new one, so a map filled in arbitrary order one entry at a time is better built by
/// collecting (which sorts once).
///
/// It serializes, compares and prints exactly as a `BTreeMap<VertexId, V>` with the same entries
/// does.
///
/// ```
/// use autoscaler_metrics::{VertexId, VertexMap};
///
/// let mut map: VertexMap<u32> = [(VertexId::new("b"), 2), (VertexId::new("a"), 1)].into_iter().collect();
/// map.insert(VertexId::new("c"), 3);
/// assert_eq!(map.get("a"), Some(&1));
/// assert_eq!(map.keys().map(VertexId::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
/// assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":1,"b":2,"c":3}"#);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct VertexMap<V> {
    /// Strictly ascending by id.
    entries: Vec<(VertexId, V)>,
}

impl<V> Default for VertexMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> VertexMap<V> {
    /// An empty map.
    pub const fn new() -> Self {
        Self { entries: Vec::new() }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Where `key` is, or where it would be inserted.
    fn search<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.binary_search_by(|(id, _)| id.borrow().cmp(key))
    }

    /// The value of `key`, if present.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.search(key).ok().map(|i| &self.entries[i].1)
    }

    /// The stored id and the value of `key`, if present.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&VertexId, &V)>
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.search(key).ok().map(|i| {
            let (id, value) = &self.entries[i];
            (id, value)
        })
    }

    /// The value of `key` for changing, if present.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self.search(key) {
            Ok(i) => Some(&mut self.entries[i].1),
            Err(_) => None,
        }
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.search(key).is_ok()
    }

    /// Sets the value of `id`, returning the value it replaced. Appending after the last id costs
    /// no search.
    pub fn insert(&mut self, id: VertexId, value: V) -> Option<V> {
        let at = match self.entries.last() {
            None => 0,
            Some((last, _)) if *last < id => self.entries.len(),
            Some(_) => match self.search(&id) {
                Ok(i) => return Some(std::mem::replace(&mut self.entries[i].1, value)),
                Err(i) => i,
            },
        };
        self.entries.insert(at, (id, value));
        None
    }

    /// Removes `key`, returning its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        VertexId: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.search(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&VertexId, &mut V) -> bool) {
        self.entries.retain_mut(|(id, value)| keep(id, value));
    }

    /// The entries in id order.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter(self.entries.iter())
    }

    /// The entries in id order, values changeable.
    pub fn iter_mut(&mut self) -> IterMut<'_, V> {
        IterMut(self.entries.iter_mut())
    }

    /// The ids in order.
    pub fn keys(&self) -> Keys<'_, V> {
        Keys(self.entries.iter())
    }

    /// The values in id order.
    pub fn values(&self) -> Values<'_, V> {
        Values(self.entries.iter())
    }

    /// The values in id order, changeable.
    pub fn values_mut(&mut self) -> ValuesMut<'_, V> {
        ValuesMut(self.entries.iter_mut())
    }

    /// The entry with the smallest id.
    pub fn first_key_value(&self) -> Option<(&VertexId, &V)> {
        self.entries.first().map(|(id, value)| (id, value))
    }

    /// The entry with the largest id.
    pub fn last_key_value(&self) -> Option<(&VertexId, &V)> {
        self.entries.last().map(|(id, value)| (id, value))
    }

    /// Builds the map from entries already strictly ascending by id, or sorts them (a stable sort,
    /// then the last of equal ids kept, as collecting a `BTreeMap` keeps it).
    fn from_entries(mut entries: Vec<(VertexId, V)>) -> Self {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            // `dedup_by` keeps the first of a run, so swap the later value into it first.
            entries.dedup_by(|later, kept| {
                if later.0 == kept.0 {
                    std::mem::swap(&mut later.1, &mut kept.1);
                    true
                } else {
                    false
                }
            });
        }
        Self { entries }
    }
}

impl<V> FromIterator<(VertexId, V)> for VertexMap<V> {
    fn from_iter<I: IntoIterator<Item = (VertexId, V)>>(iter: I) -> Self {
        Self::from_entries(iter.into_iter().collect())
    }
}

impl<V, const N: usize> From<[(VertexId, V); N]> for VertexMap<V> {
    fn from(entries: [(VertexId, V); N]) -> Self {
        Self::from_entries(Vec::from(entries))
    }
}

impl<V> From<Vec<(VertexId, V)>> for VertexMap<V> {
    /// The map of `entries`, taken as they are when already strictly ascending by id (else sorted,
    /// the last of equal ids kept).
    fn from(entries: Vec<(VertexId, V)>) -> Self {
        Self::from_entries(entries)
    }
}

impl<V> From<std::collections::BTreeMap<VertexId, V>> for VertexMap<V> {
    fn from(map: std::collections::BTreeMap<VertexId, V>) -> Self {
        Self {
            entries: map.into_iter().collect(),
        }
    }
}

impl<V> Extend<(VertexId, V)> for VertexMap<V> {
    fn extend<I: IntoIterator<Item = (VertexId, V)>>(&mut self, iter: I) {
        for (id, value) in iter {
            self.insert(id, value);
        }
    }
}

impl<V, Q> std::ops::Index<&Q> for VertexMap<V>
where
    VertexId: Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    /// The value of `key`.
    ///
    /// # Panics
    /// When `key` is not in the map, as `BTreeMap`'s indexing does.
    fn index(&self, key: &Q) -> &V {
        match self.get(key) {
            Some(value) => value,
            None => panic!("no entry for the vertex id in the map"),
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for VertexMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for VertexMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (id, value) in self {
            map.serialize_entry(id, value)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for VertexMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = VertexMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from vertex ids")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                // No capacity from the input's size hint: a hostile length allocates nothing.
                let mut entries = Vec::new();
                while let Some(entry) = access.next_entry::<VertexId, V>()? {
                    entries.push(entry);
                }
                Ok(VertexMap::from_entries(entries))
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

/// The entries of a [`VertexMap`] in id order ([`VertexMap::iter`]).
#[derive(Debug, Clone)]
pub struct Iter<'a, V>(std::slice::Iter<'a, (VertexId, V)>);

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a VertexId, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(id, value)| (id, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(id, value)| (id, value))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

/// The entries of a [`VertexMap`] in id order, values changeable ([`VertexMap::iter_mut`]).
#[derive(Debug)]
pub struct IterMut<'a, V>(std::slice::IterMut<'a, (VertexId, V)>);

impl<'a, V> Iterator for IterMut<'a, V> {
    type Item = (&'a VertexId, &'a mut V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(id, value)| (&*id, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for IterMut<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(id, value)| (&*id, value))
    }
}

impl<V> ExactSizeIterator for IterMut<'_, V> {}

/// The ids of a [`VertexMap`] in order ([`VertexMap::keys`]).
#[derive(Debug, Clone)]
pub struct Keys<'a, V>(std::slice::Iter<'a, (VertexId, V)>);

impl<'a, V> Iterator for Keys<'a, V> {
    type Item = &'a VertexId;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(id, _)| id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for Keys<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(id, _)| id)
    }
}

impl<V> ExactSizeIterator for Keys<'_, V> {}

/// The values of a [`VertexMap`] in id order ([`VertexMap::values`]).
#[derive(Debug, Clone)]
pub struct Values<'a, V>(std::slice::Iter<'a, (VertexId, V)>);

impl<'a, V> Iterator for Values<'a, V> {
    type Item = &'a V;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for Values<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(_, value)| value)
    }
}

impl<V> ExactSizeIterator for Values<'_, V> {}

/// The values of a [`VertexMap`] in id order, changeable ([`VertexMap::values_mut`]).
#[derive(Debug)]
pub struct ValuesMut<'a, V>(std::slice::IterMut<'a, (VertexId, V)>);

impl<'a, V> Iterator for ValuesMut<'a, V> {
    type Item = &'a mut V;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> ExactSizeIterator for ValuesMut<'_, V> {}

/// The entries of a [`VertexMap`] by value, in id order.
#[derive(Debug)]
pub struct IntoIter<V>(std::vec::IntoIter<(VertexId, V)>);

impl<V> Iterator for IntoIter<V> {
    type Item = (VertexId, V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for IntoIter<V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl<V> ExactSizeIterator for IntoIter<V> {}

impl<V> IntoIterator for VertexMap<V> {
    type Item = (VertexId, V);
    type IntoIter = IntoIter<V>;

    fn into_iter(self) -> IntoIter<V> {
        IntoIter(self.entries.into_iter())
    }
}

impl<'a, V> IntoIterator for &'a VertexMap<V> {
    type Item = (&'a VertexId, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<'a, V> IntoIterator for &'a mut VertexMap<V> {
    type Item = (&'a VertexId, &'a mut V);
    type IntoIter = IterMut<'a, V>;

    fn into_iter(self) -> IterMut<'a, V> {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn id(s: &str) -> VertexId {
        VertexId::new(s)
    }

    #[test]
    fn collecting_sorts_and_keeps_the_last_of_equal_ids() {
        let map: VertexMap<u32> = [(id("b"), 1), (id("a"), 2), (id("b"), 3), (id("c"), 4), (id("a"), 5)]
            .into_iter()
            .collect();
        assert_eq!(
            map.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(),
            [("a", 5), ("b", 3), ("c", 4)]
        );
    }

    #[test]
    fn insert_replaces_and_remove_returns() {
        let mut map = VertexMap::new();
        assert_eq!(map.insert(id("m"), 1), None);
        assert_eq!(map.insert(id("z"), 2), None);
        assert_eq!(map.insert(id("a"), 3), None);
        assert_eq!(map.insert(id("m"), 4), Some(1));
        assert_eq!(map.keys().map(VertexId::as_str).collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(map["m"], 4);
        assert_eq!(map.remove("a"), Some(3));
        assert_eq!(map.remove("a"), None);
        assert_eq!(map.first_key_value().map(|(k, _)| k.as_str()), Some("m"));
        map.retain(|_, v| *v > 2);
        assert_eq!(map.len(), 1);
        assert!(map.contains_key(&id("m")));
    }

    #[test]
    fn deserializing_an_unsorted_map_sorts_it() {
        let map: VertexMap<u32> = serde_json::from_str(r#"{"b":1,"a":2,"b":3}"#).expect("valid map");
        assert_eq!(serde_json::to_string(&map).expect("serializes"), r#"{"a":2,"b":3}"#);
        assert!(serde_json::from_str::<VertexMap<u32>>("[1]").is_err());
    }

    proptest! {
        /// Whatever is inserted, removed and collected, the map holds what a `BTreeMap` does, and
        /// iterates, serializes and prints as it.
        #[test]
        fn behaves_as_a_btree_map(
            collected in proptest::collection::vec(("[a-d]{0,3}", 0u32..100), 0..20),
            ops in proptest::collection::vec((any::<bool>(), "[a-d]{0,3}", 0u32..100), 0..40),
        ) {
            let mut ours: VertexMap<u32> = collected.iter().map(|(k, v)| (id(k), *v)).collect();
            let mut reference: BTreeMap<VertexId, u32> = collected.iter().map(|(k, v)| (id(k), *v)).collect();
            for (insert, k, v) in ops {
                if insert {
                    prop_assert_eq!(ours.insert(id(&k), v), reference.insert(id(&k), v));
                } else {
                    prop_assert_eq!(ours.remove(k.as_str()), reference.remove(k.as_str()));
                }
                prop_assert_eq!(ours.get(k.as_str()), reference.get(k.as_str()));
            }
            prop_assert!(ours.iter().eq(reference.iter()));
            prop_assert!(ours.iter().rev().eq(reference.iter().rev()));
            prop_assert_eq!(ours.len(), reference.len());
            prop_assert_eq!(format!("{ours:?}"), format!("{reference:?}"));
            let json = serde_json::to_string(&ours).expect("serializes");
            prop_assert_eq!(&json, &serde_json::to_string(&reference).expect("serializes"));
            let back: VertexMap<u32> = serde_json::from_str(&json).expect("deserializes");
            prop_assert_eq!(&back, &ours);
            prop_assert_eq!(VertexMap::from(reference), ours);
        }
    }
}
