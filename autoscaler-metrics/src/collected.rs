//! Collected metric snapshots and the time-ordered metric history.

use crate::columns::{Columns, Starts, WINDOW_COLUMNS, column_of};
use crate::{MetricValues, MetricsError, ScalingMetric, VertexId};
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
/// Each snapshot is shared behind an [`Arc`] ([`SharedSnapshot`]): no clone of a history copies
/// the metrics. Snapshots are immutable once added. Snapshots added to a history also share their
/// [`VertexId`] allocations with the snapshot before them, so that reading a vertex across the
/// window compares ids by address rather than by bytes.
///
/// Each snapshot also gets a dense digest of the few metrics the window statistics read when it
/// is added (once: the digest is shared as the snapshot is), so that evaluating a window reads
/// whole columns rather than every snapshot's map. The digest is also how the snapshot is kept:
/// each column in the fewest bytes that give back its values bit for bit (whole counters and
/// Flink's whole milliseconds over 1000 in a few bytes each, other values in their 8), and its
/// maps built only when it is read as a [`CollectedMetrics`] ([`iter`](Self::iter),
/// [`latest`](Self::latest), `Deref` of a [`SharedSnapshot`]), which a cycle's own reads never
/// do. A 10-vertex snapshot as Flink reports it takes about 500 bytes so, against 4.8 KB as maps
/// (a full 15-minute window at a 10 s interval holds 90 of them per job).
///
/// A clone is two reference counts. The samples are kept in two parts, both shared by clones:
/// the older ones, which are never changed in place (trimming the oldest only skips them), and
/// the few newest, which a history that adds a snapshot copies first if a clone shares them
/// (their pointers, not the snapshots). Every [`RECENT_SAMPLES`](Self::RECENT_SAMPLES) additions
/// the newest join the older ones in one new list. So a store that keeps the window and a cycle
/// that adds its snapshot to it share nearly all of it, and a cycle copies a few pointers.
#[derive(Debug, Clone, Default)]
pub struct MetricHistory {
    /// The older samples, strictly increasing by instant; never changed in place.
    frozen: Arc<[Sample]>,
    /// How many of `frozen`'s first samples are trimmed off.
    skip: usize,
    /// The newer samples, strictly increasing and all after `frozen`'s.
    recent: Arc<Vec<Sample>>,
}

/// The samples of a history in time order: its two parts one after the other.
#[derive(Clone)]
struct Samples<'a> {
    older: std::slice::Iter<'a, Sample>,
    newer: std::slice::Iter<'a, Sample>,
}

impl<'a> Iterator for Samples<'a> {
    type Item = &'a Sample;

    fn next(&mut self) -> Option<&'a Sample> {
        self.older.next().or_else(|| self.newer.next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.older.len() + self.newer.len();
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Samples<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.newer.next_back().or_else(|| self.older.next_back())
    }
}

impl ExactSizeIterator for Samples<'_> {}

/// One snapshot of a history and its digest.
#[derive(Debug, Clone)]
struct Sample {
    at: DateTime<Utc>,
    entry: SharedSnapshot,
}

/// A snapshot of a [`MetricHistory`] as the history's clones share it (one allocation); it reads
/// as the [`CollectedMetrics`] it holds.
///
/// It is kept compact: the snapshot's column digest (its vertex ids, shared with its neighbour's
/// where they are the same, and the values of the window columns), which metrics each vertex has,
/// the few vertex values outside the columns and the job-wide metrics. The [`CollectedMetrics`]
/// itself is built the first time it is asked for (through `Deref`, [`MetricHistory::iter`] or
/// [`MetricHistory::latest`]) and kept from then on; a cycle's own reads (window statistics,
/// the latest values, the store's encoding) never ask for it, so a window of many snapshots costs
/// about a quarter of the memory the maps would.
#[derive(Debug, Clone)]
pub struct SharedSnapshot(Arc<Entry>);

#[derive(Debug)]
pub(crate) struct Entry {
    /// The vertex ids, the window columns and the job-wide metrics.
    columns: Columns,
    /// The vertex values outside the window columns: (position in the ids, metric, value), in
    /// position order and, for one position, in [`ScalingMetric::ALL`] order.
    outside: Box<[(u32, ScalingMetric, f64)]>,
    /// The snapshot as maps, once asked for.
    full: std::sync::OnceLock<Box<CollectedMetrics>>,
}

impl Entry {
    fn new(snapshot: &CollectedMetrics, neighbour: Option<&Columns>) -> Self {
        let columns = Columns::of(snapshot, neighbour);
        let outside = snapshot
            .vertex_metrics
            .values()
            .enumerate()
            .flat_map(|(k, values)| {
                values
                    .iter()
                    .filter(|(metric, _)| column_of(*metric).is_none())
                    .map(move |(metric, value)| (k as u32, metric, value))
            })
            .collect();
        Self {
            columns,
            outside,
            full: std::sync::OnceLock::new(),
        }
    }

    /// The metrics of the vertex at position `k` of the ids, as the snapshot's map holds them;
    /// `starts` are the snapshot's [`Columns::starts`], found once for all the vertices read.
    pub(crate) fn vertex_values(&self, k: usize, starts: &Starts) -> MetricValues {
        let present = self.columns.present(k);
        let mut values = MetricValues::new();
        for (c, metric) in WINDOW_COLUMNS.iter().enumerate() {
            if present & (1 << metric.index()) != 0 {
                values.insert(*metric, self.columns.value_at(c, k, starts));
            }
        }
        for (_, metric, value) in self.outside_of(k) {
            values.insert(*metric, *value);
        }
        values
    }

    /// The value of `metric` (whose window column is `column`, if any) for the vertex at
    /// position `k`: NaN when absent, as [`MetricValues::get_or_absent`] of its map.
    pub(crate) fn vertex_value(&self, k: usize, metric: ScalingMetric, column: Option<usize>) -> f64 {
        match column {
            // An absent metric's column value is NaN.
            Some(c) => self.columns.value(c, k),
            None => self
                .outside_of(k)
                .iter()
                .find(|(_, m, _)| *m == metric)
                .map_or(f64::NAN, |(_, _, value)| *value),
        }
    }

    /// The values outside the window columns of the vertex at position `k`.
    fn outside_of(&self, k: usize) -> &[(u32, ScalingMetric, f64)] {
        let from = self.outside.partition_point(|(at, _, _)| (*at as usize) < k);
        let to = self.outside.partition_point(|(at, _, _)| (*at as usize) <= k);
        &self.outside[from..to]
    }

    /// Each vertex id with its metrics, in id order.
    fn vertices(&self) -> impl Iterator<Item = (&VertexId, MetricValues)> {
        let starts = self.columns.starts();
        self.columns
            .ids
            .iter()
            .enumerate()
            .map(move |(k, id)| (id, self.vertex_values(k, &starts)))
    }

    /// The job-wide metrics.
    pub(crate) fn global(&self) -> MetricValues {
        self.columns.global()
    }

    /// The job-wide value of `metric`, NaN when absent (as [`MetricValues::get_or_absent`]).
    pub(crate) fn global_value(&self, metric: ScalingMetric) -> f64 {
        self.columns.global_value(metric)
    }

    /// The column digest.
    pub(crate) fn columns(&self) -> &Columns {
        &self.columns
    }

    /// The snapshot as maps.
    fn build(&self) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: self.vertices().map(|(id, values)| (id.clone(), values)).collect(),
            global_metrics: self.global(),
        }
    }

    /// The same snapshot (as [`CollectedMetrics`]' equality), without building the maps.
    fn same_as(&self, other: &Entry) -> bool {
        let (a, b) = (&self.columns, &other.columns);
        self.global() == other.global()
            && a.ids == b.ids
            && self
                .vertices()
                .zip(other.vertices())
                .all(|((_, mine), (_, theirs))| mine == theirs)
    }
}

impl SharedSnapshot {
    /// Whether `a` and `b` are the same allocation: two histories hold the same snapshot.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Whether the snapshot's maps were built (it was read as a [`CollectedMetrics`]); a
    /// cycle's own reads never build them.
    pub fn is_expanded(&self) -> bool {
        self.0.full.get().is_some()
    }

    /// Each vertex id with its collected metrics, in id order, built one vertex at a time from
    /// the compact snapshot: what the snapshot's `vertex_metrics` map holds, without building
    /// (and keeping) the whole snapshot's maps as reading it through `Deref` does.
    pub fn vertices(&self) -> impl Iterator<Item = (&VertexId, MetricValues)> + '_ {
        self.0.vertices()
    }

    /// The job-wide metrics: what the snapshot's `global_metrics` map holds, without building
    /// the snapshot's maps.
    pub fn global(&self) -> MetricValues {
        self.0.global()
    }

    /// Appends the snapshot's packed form to `out`: the bytes a state store keeps for it, about
    /// a fifth of its JSON, written from the compact snapshot with its columns copied as they are
    /// (see [`PACKED_LAYOUT`](crate::PACKED_LAYOUT) for the layout).
    /// [`CollectedMetrics::unpack`] reads it back, bit for bit.
    ///
    /// ```
    /// use autoscaler_metrics::{CollectedMetrics, MetricHistory, ScalingMetric};
    /// let mut snapshot = CollectedMetrics::default();
    /// let mut values = autoscaler_metrics::MetricValues::new();
    /// values.insert(ScalingMetric::Load, 0.622);
    /// snapshot.vertex_metrics.insert("bc764cd8ddf7a0cff126f51c16239658".into(), values);
    /// let mut history = MetricHistory::new();
    /// history.insert(chrono::DateTime::UNIX_EPOCH, snapshot.clone());
    /// let (_, shared) = history.shared().next().unwrap();
    /// let mut packed = Vec::new();
    /// shared.pack(&mut packed);
    /// assert_eq!(CollectedMetrics::unpack(&packed).unwrap(), snapshot);
    /// ```
    pub fn pack(&self, out: &mut Vec<u8>) {
        let columns = &self.0.columns;
        let starts = columns.starts();
        crate::packed::pack(
            &columns.ids,
            columns.present_all(),
            &columns.global(),
            (0..WINDOW_COLUMNS.len()).map(|c| columns.kept_column(c, &starts)),
            &self.0.outside,
            out,
        );
    }
}

impl CollectedMetrics {
    /// The snapshot packed in `bytes` by [`SharedSnapshot::pack`], bit for bit.
    ///
    /// # Errors
    /// [`PackedSnapshotError`](crate::PackedSnapshotError) naming what is wrong and at which
    /// byte, for bytes that are not a packed snapshot of this layout version.
    pub fn unpack(bytes: &[u8]) -> Result<Self, crate::PackedSnapshotError> {
        crate::packed::unpack(bytes)
    }
}

impl std::ops::Deref for SharedSnapshot {
    type Target = CollectedMetrics;

    fn deref(&self) -> &CollectedMetrics {
        self.0.full.get_or_init(|| Box::new(self.0.build()))
    }
}

impl Serialize for SharedSnapshot {
    /// As the [`CollectedMetrics`] it holds, without building its maps.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        struct Vertices<'a>(&'a Entry);
        impl Serialize for Vertices<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.vertices())
            }
        }
        let mut out = serializer.serialize_struct("CollectedMetrics", 2)?;
        out.serialize_field("vertexMetrics", &Vertices(&self.0))?;
        out.serialize_field("globalMetrics", &self.0.global())?;
        out.end()
    }
}

impl Sample {
    /// `snapshot` at `at`, its ids and digest shared with `before` (the sample preceding it) where
    /// they are the same.
    fn new(at: DateTime<Utc>, snapshot: CollectedMetrics, before: Option<&Sample>) -> Self {
        let neighbour = before.map(|s| &s.entry.0.columns);
        let snapshot = share_vertex_ids(snapshot, neighbour.map(|c| &c.ids[..]));
        Self {
            at,
            entry: SharedSnapshot(Arc::new(Entry::new(&snapshot, neighbour))),
        }
    }
}

impl PartialEq for MetricHistory {
    /// Equal instants and equal snapshots (the digests follow from the snapshots).
    fn eq(&self, other: &Self) -> bool {
        let same_parts = Arc::ptr_eq(&self.frozen, &other.frozen)
            && self.skip == other.skip
            && Arc::ptr_eq(&self.recent, &other.recent);
        same_parts
            || self.len() == other.len()
                && self.samples().zip(other.samples()).all(|(a, b)| {
                    a.at == b.at && (SharedSnapshot::ptr_eq(&a.entry, &b.entry) || a.entry.0.same_as(&b.entry.0))
                })
    }
}

impl MetricHistory {
    /// Additions after which the newest samples join the older ones (see the type's docs).
    pub const RECENT_SAMPLES: usize = 16;

    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The older samples still in the window.
    fn older(&self) -> &[Sample] {
        self.frozen.get(self.skip..).unwrap_or_default()
    }

    /// Every sample in time order.
    fn samples(&self) -> Samples<'_> {
        Samples {
            older: self.older().iter(),
            newer: self.recent.iter(),
        }
    }

    /// The sample at `index` in time order.
    fn get(&self, index: usize) -> Option<&Sample> {
        let older = self.older();
        match index.checked_sub(older.len()) {
            None => older.get(index),
            Some(i) => self.recent.get(i),
        }
    }

    /// The number of samples before the first for which `pred` is false (`pred` must be true
    /// for a prefix of the samples in time order, as for `slice::partition_point`).
    fn partition_point(&self, pred: impl Fn(&Sample) -> bool) -> usize {
        let older = self.older();
        let p = older.partition_point(&pred);
        if p < older.len() {
            p
        } else {
            p + self.recent.partition_point(pred)
        }
    }

    /// The newest samples to change, copied first (with room for one more) if a clone shares them.
    fn recent_mut(&mut self) -> &mut Vec<Sample> {
        if Arc::get_mut(&mut self.recent).is_none() {
            let mut owned = Vec::with_capacity(self.recent.len() + 1);
            owned.extend(self.recent.iter().cloned());
            self.recent = Arc::new(owned);
        }
        // Unique now, so this does not copy again.
        Arc::make_mut(&mut self.recent)
    }

    /// Every sample as one list to change anywhere (the older part joins the newest).
    fn all_mut(&mut self) -> &mut Vec<Sample> {
        if !self.older().is_empty() {
            let mut all = Vec::with_capacity(self.len() + 1);
            all.extend(self.samples().cloned());
            self.recent = Arc::new(all);
        }
        self.drop_older();
        self.recent_mut()
    }

    /// Forgets the older part (its samples are gone or already in `recent`).
    fn drop_older(&mut self) {
        self.frozen = Arc::default();
        self.skip = 0;
    }

    /// The one rule of when the parts are rebuilt: once the newest part has
    /// [`RECENT_SAMPLES`](Self::RECENT_SAMPLES) samples, or as many older ones are skipped,
    /// every sample held becomes the older part (dropping the skipped ones).
    fn settle(&mut self) {
        if self.recent.len() >= Self::RECENT_SAMPLES || self.skip >= Self::RECENT_SAMPLES {
            self.frozen = self.samples().cloned().collect();
            self.skip = 0;
            self.recent = Arc::default();
        }
    }

    /// Puts `snapshot` at `at`, replacing a snapshot at the same instant (as the reference's map put).
    pub fn insert(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) {
        let position = self.partition_point(|s| s.at < at);
        let before = position.checked_sub(1).and_then(|p| self.get(p));
        let sample = Sample::new(at, snapshot, before);
        if position == self.len() {
            self.recent_mut().push(sample);
        } else {
            let samples = self.all_mut();
            match samples.get_mut(position) {
                Some(slot) if slot.at == at => *slot = sample,
                _ => samples.insert(position, sample),
            }
        }
        self.settle();
    }

    /// Appends `snapshot`, rejecting one that is not strictly after the latest snapshot.
    pub fn push(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) -> Result<(), MetricsError> {
        if let Some(latest) = self.latest_time()
            && at <= latest
        {
            return Err(MetricsError::OutOfOrderSnapshot { at, latest });
        }
        let sample = Sample::new(at, snapshot, self.samples().next_back());
        self.recent_mut().push(sample);
        self.settle();
        Ok(())
    }

    /// Number of snapshots.
    pub fn len(&self) -> usize {
        self.older().len() + self.recent.len()
    }

    /// Whether there is no snapshot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the oldest snapshot.
    pub fn first_time(&self) -> Option<DateTime<Utc>> {
        self.samples().next().map(|s| s.at)
    }

    /// Time of the newest snapshot.
    pub fn latest_time(&self) -> Option<DateTime<Utc>> {
        self.samples().next_back().map(|s| s.at)
    }

    /// The newest snapshot.
    pub fn latest(&self) -> Option<&CollectedMetrics> {
        self.samples().next_back().map(|s| &*s.entry)
    }

    /// Snapshots in time order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&DateTime<Utc>, &CollectedMetrics)> + ExactSizeIterator {
        self.samples().map(|s| (&s.at, &*s.entry))
    }

    /// Snapshots in time order, each as its clones share it: two histories hold the same
    /// snapshot when [`SharedSnapshot::ptr_eq`] says so (a store can tell which snapshots it
    /// already has).
    pub fn shared(&self) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &SharedSnapshot)> + ExactSizeIterator {
        self.samples().map(|s| (s.at, &s.entry))
    }

    /// The instants of the snapshots, in time order.
    pub fn times(&self) -> impl DoubleEndedIterator<Item = DateTime<Utc>> + ExactSizeIterator + '_ {
        self.samples().map(|s| s.at)
    }

    /// Snapshots in time order with their digests.
    pub(crate) fn with_columns(
        &self,
    ) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &Columns)> + ExactSizeIterator {
        self.samples().map(|s| (s.at, &s.entry.0.columns))
    }

    /// Snapshots in time order, compact (see [`SharedSnapshot`]).
    pub(crate) fn entries(&self) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &Entry)> + ExactSizeIterator {
        self.samples().map(|s| (s.at, &*s.entry.0))
    }

    /// Removes every snapshot.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Removes every snapshot taken strictly before `cutoff`.
    pub fn remove_before(&mut self, cutoff: DateTime<Utc>) {
        let keep_from = self.partition_point(|s| s.at < cutoff);
        let older = self.older().len();
        if keep_from <= older {
            // Only older samples go: skipped, not copied (a later rebuild drops them).
            self.skip += keep_from;
        } else {
            self.drop_older();
            self.recent_mut().drain(..keep_from - older);
        }
        self.settle();
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
            frozen: samples.into(),
            skip: 0,
            recent: Arc::default(),
        }
    }
}

impl Serialize for MetricHistory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.shared())
    }
}

impl<'de> Deserialize<'de> for MetricHistory {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let samples = BTreeMap::<DateTime<Utc>, CollectedMetrics>::deserialize(deserializer)?;
        Ok(samples.into_iter().collect())
    }
}

/// Re-keys `snapshot` so that every vertex id also in `neighbour` (a snapshot's ids, sorted)
/// reuses its allocation (ids are `Arc<str>`). A snapshot that already shares all of its ids is
/// returned as is.
fn share_vertex_ids(mut snapshot: CollectedMetrics, neighbour: Option<&[VertexId]>) -> CollectedMetrics {
    let Some(neighbour) = neighbour else {
        return snapshot;
    };
    let same_allocation = |a: &VertexId, b: &VertexId| std::ptr::eq(a.as_str(), b.as_str());
    // Both lists are in id order: walk them together.
    let mut known = neighbour.iter().peekable();
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

    fn same_parts(a: &MetricHistory, b: &MetricHistory) -> bool {
        Arc::ptr_eq(&a.frozen, &b.frozen) && a.skip == b.skip && Arc::ptr_eq(&a.recent, &b.recent)
    }

    /// One step of the model test: what is done to the history.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(i64),
        Push(i64),
        RemoveBefore(i64),
        Clear,
        /// Keeps a clone, checked against the model as it was, at the end.
        Keep,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0i64..400).prop_map(Op::Insert),
            8 => (0i64..400).prop_map(Op::Push),
            4 => (0i64..400).prop_map(Op::RemoveBefore),
            1 => Just(Op::Clear),
            3 => Just(Op::Keep),
        ]
    }

    /// A snapshot that tells which instant and which operation put it there.
    fn marked(secs: i64, step: usize) -> CollectedMetrics {
        let mut snapshot = snapshot(&["a"]);
        snapshot.global_metrics =
            MetricValues::from_iter([(ScalingMetric::HeapMemoryUsed, (secs * 1000 + step as i64) as f64)]);
        snapshot
    }

    /// A history's snapshots with their instants, in time order.
    type Contents = Vec<(DateTime<Utc>, CollectedMetrics)>;

    fn contents(history: &MetricHistory) -> Contents {
        history.iter().map(|(t, s)| (*t, s.clone())).collect()
    }

    /// A snapshot with any metrics (window columns and others) on up to five vertices, values
    /// finite, NaN or infinite, and some job-wide metrics.
    fn any_snapshot() -> impl proptest::strategy::Strategy<Value = CollectedMetrics> {
        use proptest::prelude::*;
        let value = prop_oneof![
            6 => -1e9..1e9f64,
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
            1 => Just(f64::NEG_INFINITY),
        ];
        let values = proptest::collection::vec((0..ScalingMetric::ALL.len(), value), 0..10).prop_map(|entries| {
            entries
                .into_iter()
                .map(|(m, v)| (ScalingMetric::ALL[m], v))
                .collect::<MetricValues>()
        });
        (
            proptest::collection::btree_map("[a-f0-9]{1,20}", values.clone(), 0..5),
            values,
        )
            .prop_map(|(vertices, global_metrics)| CollectedMetrics {
                vertex_metrics: vertices.into_iter().map(|(id, v)| (VertexId::new(id), v)).collect(),
                global_metrics,
            })
    }

    proptest::proptest! {
        /// A snapshot kept compact reads back as the snapshot put in, serializes to the same JSON
        /// as it, and compares as it does; only reading it as maps builds them.
        #[test]
        fn compact_snapshots_read_and_serialize_as_the_maps(
            snapshots in proptest::collection::vec(any_snapshot(), 1..5),
        ) {
            let history: MetricHistory =
                snapshots.iter().enumerate().map(|(i, s)| (at(i as i64), s.clone())).collect();
            for ((_, shared), original) in history.shared().zip(&snapshots) {
                proptest::prop_assert!(!shared.is_expanded());
                let json = serde_json::to_string(shared).expect("serializes");
                proptest::prop_assert_eq!(&json, &serde_json::to_string(original).expect("serializes"));
                proptest::prop_assert!(!shared.is_expanded());
                proptest::prop_assert_eq!(&**shared, original);
                proptest::prop_assert!(shared.is_expanded());
            }
            let again: MetricHistory =
                snapshots.iter().enumerate().map(|(i, s)| (at(i as i64), s.clone())).collect();
            proptest::prop_assert!(again == history);
            proptest::prop_assert!(again.shared().all(|(_, s)| !s.is_expanded()));
        }
    }

    proptest::proptest! {
        /// Whatever is done to a history and its clones, it holds what a sorted map would, each
        /// clone keeps what it held when taken, and every view (length, ends, both iteration
        /// directions, the shared snapshots) agrees.
        #[test]
        fn a_history_and_its_clones_behave_as_sorted_maps(ops in proptest::collection::vec(op(), 0..120)) {
            let mut history = MetricHistory::new();
            let mut model: BTreeMap<DateTime<Utc>, CollectedMetrics> = BTreeMap::new();
            let mut kept: Vec<(MetricHistory, Contents)> = Vec::new();
            for (step, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert(t) => {
                        history.insert(at(t), marked(t, step));
                        model.insert(at(t), marked(t, step));
                    }
                    Op::Push(t) => {
                        let accepted = history.push(at(t), marked(t, step)).is_ok();
                        let expected = model.keys().next_back().is_none_or(|&latest| at(t) > latest);
                        proptest::prop_assert_eq!(accepted, expected);
                        if expected {
                            model.insert(at(t), marked(t, step));
                        }
                    }
                    Op::RemoveBefore(t) => {
                        history.remove_before(at(t));
                        model = model.split_off(&at(t));
                    }
                    Op::Clear => {
                        history.clear();
                        model.clear();
                    }
                    Op::Keep => kept.push((history.clone(), model.clone().into_iter().collect())),
                }
                let expected: Contents = model.clone().into_iter().collect();
                proptest::prop_assert_eq!(contents(&history), expected.clone());
                proptest::prop_assert_eq!(history.len(), model.len());
                proptest::prop_assert_eq!(history.is_empty(), model.is_empty());
                proptest::prop_assert_eq!(history.first_time(), model.keys().next().copied());
                proptest::prop_assert_eq!(history.latest_time(), model.keys().next_back().copied());
                proptest::prop_assert_eq!(history.latest(), model.values().next_back());
                let backwards: Vec<DateTime<Utc>> = history.shared().rev().map(|(t, _)| t).collect();
                proptest::prop_assert_eq!(backwards, model.keys().rev().copied().collect::<Vec<_>>());
                proptest::prop_assert_eq!(history.iter().len(), model.len());
                proptest::prop_assert!(history.older().len() <= history.frozen.len());
                proptest::prop_assert!(history.recent.len() < MetricHistory::RECENT_SAMPLES);
            }
            for (clone, expected) in &kept {
                proptest::prop_assert_eq!(&contents(clone), expected);
                let rebuilt: MetricHistory = expected.iter().cloned().collect();
                proptest::prop_assert!(*clone == rebuilt);
            }
        }
    }

    #[test]
    fn clones_share_samples_until_one_changes() {
        let history: MetricHistory = [(at(1), snapshot(&["a"])), (at(2), snapshot(&["a", "b"]))]
            .into_iter()
            .collect();
        let mut changed = history.clone();
        assert!(same_parts(&history, &changed));
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
        assert!(same_parts(&history, &untouched));
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
