//! Collected metric snapshots and the time-ordered metric history.

use crate::columns::Columns;
use crate::{MetricValues, MetricsError, VertexId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The metrics collected in one cycle: per-vertex scaling metrics and job-wide metrics, exactly what
/// the reference's `CollectedMetrics` holds. A metric missing for a vertex is "absent" (NaN when read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectedMetrics {
    /// Per-vertex collected metrics.
    pub vertex_metrics: BTreeMap<VertexId, MetricValues>,
    /// Job-wide metrics (GC pressure, heap, managed memory, metaspace, task slots).
    pub global_metrics: MetricValues,
}

impl CollectedMetrics {
    /// The collected metrics of vertex `id`, if any.
    pub fn vertex(&self, id: &str) -> Option<&MetricValues> {
        self.vertex_metrics.get(id)
    }
}

/// Collected snapshots ordered by collection time (the reference's `SortedMap<Instant, CollectedMetrics>`).
///
/// Each snapshot is shared behind an [`Arc`]: cloning a history (handing it to or from a state
/// store, keeping the previous cycle's window) copies one vector of instants and pointers, never
/// the metrics. Snapshots are immutable once added. Snapshots added to a history also share their
/// [`VertexId`] allocations with the snapshot before them, so that reading a vertex across the
/// window compares ids by address rather than by bytes.
///
/// Each snapshot also gets a dense digest of the few metrics the window statistics read when it
/// is added (once: the digest is shared as the snapshot is), so that evaluating a window reads
/// contiguous columns rather than every snapshot's map.
///
/// A clone is one reference count: clones share the list of samples until one of them changes
/// it, which then copies the list (the samples' pointers, not the snapshots). A store that keeps
/// the window and a cycle that reads it hold one list between them.
#[derive(Debug, Clone, Default)]
pub struct MetricHistory {
    /// Strictly increasing by instant.
    samples: Arc<Vec<Sample>>,
}

/// One snapshot of a history and its digest.
#[derive(Debug, Clone)]
struct Sample {
    at: DateTime<Utc>,
    entry: SharedSnapshot,
}

/// A snapshot of a [`MetricHistory`] as the history's clones share it (one allocation, with the
/// snapshot's column digest); it reads as the [`CollectedMetrics`] it holds.
#[derive(Debug, Clone)]
pub struct SharedSnapshot(Arc<Entry>);

#[derive(Debug)]
struct Entry {
    snapshot: CollectedMetrics,
    columns: Columns,
}

impl SharedSnapshot {
    /// Whether `a` and `b` are the same allocation: two histories hold the same snapshot.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for SharedSnapshot {
    type Target = CollectedMetrics;

    fn deref(&self) -> &CollectedMetrics {
        &self.0.snapshot
    }
}

impl Sample {
    /// `snapshot` at `at`, its ids and digest shared with `before` (the sample preceding it) where
    /// they are the same.
    fn new(at: DateTime<Utc>, snapshot: CollectedMetrics, before: Option<&Sample>) -> Self {
        let snapshot = share_vertex_ids(snapshot, before.map(|s| &s.entry.0.snapshot));
        let columns = Columns::of(&snapshot, before.map(|s| &s.entry.0.columns));
        Self {
            at,
            entry: SharedSnapshot(Arc::new(Entry { snapshot, columns })),
        }
    }
}

impl PartialEq for MetricHistory {
    /// Equal instants and equal snapshots (the digests follow from the snapshots).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.samples, &other.samples)
            || self.samples.len() == other.samples.len()
                && self
                    .samples
                    .iter()
                    .zip(other.samples.iter())
                    .all(|(a, b)| a.at == b.at && (SharedSnapshot::ptr_eq(&a.entry, &b.entry) || *a.entry == *b.entry))
    }
}

impl MetricHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The samples to change, copied first (with room for `extra` more) if another history
    /// shares them.
    fn samples_mut(&mut self, extra: usize) -> &mut Vec<Sample> {
        if Arc::get_mut(&mut self.samples).is_none() {
            let mut owned = Vec::with_capacity(self.samples.len() + extra);
            owned.extend(self.samples.iter().cloned());
            self.samples = Arc::new(owned);
        }
        // Unique now, so this does not copy again.
        Arc::make_mut(&mut self.samples)
    }

    /// Puts `snapshot` at `at`, replacing a snapshot at the same instant (as the reference's map put).
    pub fn insert(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) {
        let position = self.samples.partition_point(|s| s.at < at);
        let before = position.checked_sub(1).and_then(|p| self.samples.get(p));
        let sample = Sample::new(at, snapshot, before);
        let samples = self.samples_mut(1);
        match samples.get_mut(position) {
            Some(slot) if slot.at == at => *slot = sample,
            _ => samples.insert(position, sample),
        }
    }

    /// Appends `snapshot`, rejecting one that is not strictly after the latest snapshot.
    pub fn push(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) -> Result<(), MetricsError> {
        if let Some(latest) = self.latest_time()
            && at <= latest
        {
            return Err(MetricsError::OutOfOrderSnapshot { at, latest });
        }
        let sample = Sample::new(at, snapshot, self.samples.last());
        self.samples_mut(1).push(sample);
        Ok(())
    }

    /// Number of snapshots.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there is no snapshot.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Time of the oldest snapshot.
    pub fn first_time(&self) -> Option<DateTime<Utc>> {
        self.samples.first().map(|s| s.at)
    }

    /// Time of the newest snapshot.
    pub fn latest_time(&self) -> Option<DateTime<Utc>> {
        self.samples.last().map(|s| s.at)
    }

    /// The newest snapshot.
    pub fn latest(&self) -> Option<&CollectedMetrics> {
        self.samples.last().map(|s| &*s.entry)
    }

    /// Snapshots in time order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&DateTime<Utc>, &CollectedMetrics)> + ExactSizeIterator {
        self.samples.iter().map(|s| (&s.at, &*s.entry))
    }

    /// Snapshots in time order, each as its clones share it: two histories hold the same
    /// snapshot when [`SharedSnapshot::ptr_eq`] says so (a store can tell which snapshots it
    /// already has).
    pub fn shared(&self) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &SharedSnapshot)> + ExactSizeIterator {
        self.samples.iter().map(|s| (s.at, &s.entry))
    }

    /// Snapshots in time order with their digests.
    pub(crate) fn with_columns(
        &self,
    ) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &CollectedMetrics, &Columns)> + ExactSizeIterator {
        self.samples
            .iter()
            .map(|s| (s.at, &s.entry.0.snapshot, &s.entry.0.columns))
    }

    /// Removes every snapshot.
    pub fn clear(&mut self) {
        self.samples = Arc::default();
    }

    /// Removes every snapshot taken strictly before `cutoff`.
    pub fn remove_before(&mut self, cutoff: DateTime<Utc>) {
        let keep_from = self.samples.partition_point(|s| s.at < cutoff);
        if keep_from > 0 {
            self.samples_mut(0).drain(..keep_from);
        }
    }
}

impl FromIterator<(DateTime<Utc>, CollectedMetrics)> for MetricHistory {
    fn from_iter<I: IntoIterator<Item = (DateTime<Utc>, CollectedMetrics)>>(iter: I) -> Self {
        // The last of several snapshots at one instant wins, as in a map.
        let sorted: BTreeMap<DateTime<Utc>, CollectedMetrics> = iter.into_iter().collect();
        let mut samples: Vec<Sample> = Vec::with_capacity(sorted.len());
        for (at, snapshot) in sorted {
            let sample = Sample::new(at, snapshot, samples.last());
            samples.push(sample);
        }
        Self {
            samples: Arc::new(samples),
        }
    }
}

impl Serialize for MetricHistory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for MetricHistory {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let samples = BTreeMap::<DateTime<Utc>, CollectedMetrics>::deserialize(deserializer)?;
        Ok(samples.into_iter().collect())
    }
}

/// Re-keys `snapshot` so that every vertex id also present in `neighbour` reuses its allocation
/// (ids are `Arc<str>`). A snapshot that already shares all of its ids is returned as is.
fn share_vertex_ids(mut snapshot: CollectedMetrics, neighbour: Option<&CollectedMetrics>) -> CollectedMetrics {
    let Some(neighbour) = neighbour else {
        return snapshot;
    };
    let same_allocation = |a: &VertexId, b: &VertexId| std::ptr::eq(a.as_str(), b.as_str());
    // Both maps iterate in id order: walk them together.
    let mut known = neighbour.vertex_metrics.keys().peekable();
    let mut shared_ids = Vec::with_capacity(snapshot.vertex_metrics.len());
    let mut all_shared = true;
    for id in snapshot.vertex_metrics.keys() {
        while known.next_if(|k| *k < id).is_some() {}
        match known.next_if(|k| *k == id) {
            Some(k) => {
                all_shared &= same_allocation(k, id);
                shared_ids.push(Some(k.clone()));
            }
            None => shared_ids.push(None),
        }
    }
    if all_shared {
        return snapshot;
    }
    snapshot.vertex_metrics = std::mem::take(&mut snapshot.vertex_metrics)
        .into_iter()
        .zip(shared_ids)
        .map(|((id, values), shared)| (shared.unwrap_or(id), values))
        .collect();
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScalingMetric;
    use chrono::TimeZone;

    fn snapshot(ids: &[&str]) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: ids
                .iter()
                .map(|id| (VertexId::new(id), MetricValues::from_iter([(ScalingMetric::Load, 0.5)])))
                .collect(),
            global_metrics: MetricValues::new(),
        }
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().expect("valid instant")
    }

    fn id_ptrs(history: &MetricHistory) -> Vec<Vec<*const u8>> {
        history
            .iter()
            .map(|(_, s)| s.vertex_metrics.keys().map(|k| k.as_str().as_ptr()).collect())
            .collect()
    }

    #[test]
    fn snapshots_share_vertex_id_allocations_with_their_predecessor() {
        let history: MetricHistory = [(at(2), snapshot(&["a", "b", "c"])), (at(1), snapshot(&["a", "c"]))]
            .into_iter()
            .collect();
        let ptrs = id_ptrs(&history);
        // Time order: [a, c] then [a, b, c]; a and c are shared, b is new.
        assert_eq!(ptrs[1][0], ptrs[0][0]);
        assert_eq!(ptrs[1][2], ptrs[0][1]);
        let mut pushed = history.clone();
        pushed.push(at(3), snapshot(&["b", "c", "d"])).expect("in order");
        let ptrs = id_ptrs(&pushed);
        assert_eq!(ptrs[2][0], ptrs[1][1]);
        assert_eq!(ptrs[2][1], ptrs[1][2]);
        // Sharing changes no content.
        let keys: Vec<&str> = pushed
            .latest()
            .map(|s| s.vertex_metrics.keys().map(|k| k.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(keys, ["b", "c", "d"]);
        assert_eq!(pushed.latest(), Some(&snapshot(&["b", "c", "d"])));
    }

    #[test]
    fn clones_share_samples_until_one_changes() {
        let history: MetricHistory = [(at(1), snapshot(&["a"])), (at(2), snapshot(&["a", "b"]))]
            .into_iter()
            .collect();
        let mut changed = history.clone();
        assert!(Arc::ptr_eq(&history.samples, &changed.samples));
        changed.insert(at(3), snapshot(&["b"]));
        changed.remove_before(at(2));
        // The original is untouched; the changed one still shares the snapshot it kept.
        assert_eq!(history.len(), 2);
        assert_eq!(history.first_time(), Some(at(1)));
        assert_eq!(history.latest(), Some(&snapshot(&["a", "b"])));
        let times: Vec<DateTime<Utc>> = changed.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [at(2), at(3)]);
        let kept = history.shared().nth(1).map(|(_, s)| s.clone());
        let kept_in_changed = changed.shared().next().map(|(_, s)| s.clone());
        assert!(matches!((kept, kept_in_changed), (Some(a), Some(b)) if SharedSnapshot::ptr_eq(&a, &b)));
        // Clearing a shared history leaves its clones as they were.
        let mut cleared = history.clone();
        cleared.clear();
        assert!(cleared.is_empty());
        assert_eq!(history.len(), 2);
        // A history that trims nothing does not copy.
        let mut untouched = history.clone();
        untouched.remove_before(at(0));
        assert!(Arc::ptr_eq(&history.samples, &untouched.samples));
    }

    #[test]
    fn deserialized_history_shares_ids() {
        let json = r#"{"1970-01-01T00:00:01Z": {"vertexMetrics": {"v": {"LOAD": 0.5}}, "globalMetrics": {}},
                       "1970-01-01T00:00:02Z": {"vertexMetrics": {"v": {"LOAD": 0.5}}, "globalMetrics": {}}}"#;
        let history: MetricHistory = serde_json::from_str(json).expect("valid history");
        let ptrs = id_ptrs(&history);
        assert_eq!(ptrs[0][0], ptrs[1][0]);
        assert_eq!(history.len(), 2);
    }
}
