//! The column digest of a snapshot: the few metrics the window statistics read, laid out densely.
//!
//! A [`crate::MetricHistory`] builds one [`Columns`] per snapshot when the snapshot is added, and
//! never again. Reading a window then runs down a few contiguous columns per snapshot instead of
//! every snapshot's vertex map, and snapshots that list the same vertices share one id list, so
//! mapping a position to its topology vertex is resolved once per run of such snapshots rather
//! than once per sample. The columns hold the same values the maps hold (NaN where absent); no
//! statistic is precomputed, so every window statistic still sums its samples in time order as
//! the reference does.

use crate::history_stats::{AverageAccumulator, AverageColumn};
use crate::{CollectedMetrics, JobTopology, MetricHistory, ScalingMetric, VertexId};
use std::sync::Arc;

/// The metrics a [`Columns`] holds, column `c` being `WINDOW_COLUMNS[c]`; the ones window
/// averages read come first ([`AVERAGED_COLUMNS`]).
pub(crate) const WINDOW_COLUMNS: [ScalingMetric; 8] = [
    ScalingMetric::Load,
    ScalingMetric::NumRecordsInPerSecond,
    ScalingMetric::ObservedTpr,
    ScalingMetric::Backpressure,
    ScalingMetric::NumRecordsIn,
    ScalingMetric::NumRecordsOut,
    ScalingMetric::Lag,
    ScalingMetric::AccumulatedBusyTime,
];

/// The position of `metric` in [`WINDOW_COLUMNS`], if it is a window column.
pub(crate) const fn column_of(metric: ScalingMetric) -> Option<usize> {
    let mut i = 0;
    while i < WINDOW_COLUMNS.len() {
        if WINDOW_COLUMNS[i] as usize == metric as usize {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The position of `metric` in [`WINDOW_COLUMNS`]; a metric not there is a compile-time error
/// where the position is a constant.
pub(crate) const fn column(metric: ScalingMetric) -> usize {
    match column_of(metric) {
        Some(c) => c,
        None => panic!("not a window column"),
    }
}

/// The digest of one snapshot: its vertex ids in map order and, column by column, the values of
/// [`WINDOW_COLUMNS`] for each id in that order (NaN where absent).
#[derive(Debug)]
pub(crate) struct Columns {
    /// The snapshot's vertex ids in its map's (sorted) order; the same allocation as the
    /// neighbouring snapshot's when both list the same vertices.
    pub(crate) ids: Arc<[VertexId]>,
    /// Column `c` of [`WINDOW_COLUMNS`] is `values[c * n..(c + 1) * n]`, `n` the number of ids.
    values: Box<[f64]>,
    /// Which metrics each vertex has and where the averaged columns are NaN: the same allocation
    /// as the neighbouring snapshot's when both are alike, as they nearly always are.
    shape: Arc<Shape>,
    /// Bit `c` is set when no value of column `c` is infinite.
    no_infinite: u32,
}

/// The part of a [`Columns`] that neighbouring snapshots usually have alike.
#[derive(Debug)]
struct Shape {
    /// Every metric present in each id's map (bit `metric.index()`), not only the columns.
    present: Box<[u32]>,
    /// The union of `present`.
    union: u32,
    /// For each of the first [`AVERAGED_COLUMNS`] columns, the positions whose value is NaN
    /// (absent, mostly), ascending; the same allocation as the neighbouring snapshot's where they
    /// are the same positions.
    nan_positions: [Arc<[u32]>; AVERAGED_COLUMNS],
}

/// How many of [`WINDOW_COLUMNS`], from the first, window averages read (the others are
/// counters, read at the ends of the window only): only these get their NaN positions.
const AVERAGED_COLUMNS: usize = 4;

impl Columns {
    /// The digest of `snapshot`, sharing `neighbour`'s id list when it lists the same vertices.
    pub(crate) fn of(snapshot: &CollectedMetrics, neighbour: Option<&Columns>) -> Self {
        let vertices = &snapshot.vertex_metrics;
        let n = vertices.len();
        let mut values = vec![f64::NAN; n * WINDOW_COLUMNS.len()].into_boxed_slice();
        for (k, metrics) in vertices.values().enumerate() {
            for (c, metric) in WINDOW_COLUMNS.iter().enumerate() {
                values[c * n + k] = metrics.get_or_absent(*metric);
            }
        }
        let present: Box<[u32]> = vertices.values().map(|m| m.present_bits()).collect();
        let union = present.iter().fold(0, |bits, p| bits | p);
        let no_infinite = (0..WINDOW_COLUMNS.len())
            .filter(|&c| !values[c * n..(c + 1) * n].iter().any(|x| x.is_infinite()))
            .fold(0, |bits, c| bits | 1 << c);
        let nan_positions = std::array::from_fn(|c| {
            let column = &values[c * n..(c + 1) * n];
            let nan = column
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_nan())
                .map(|(k, _)| k as u32);
            match neighbour {
                Some(other) if other.shape.nan_positions[c].iter().copied().eq(nan.clone()) => {
                    Arc::clone(&other.shape.nan_positions[c])
                }
                _ => nan.collect(),
            }
        });
        let shape = match neighbour {
            Some(other)
                if other.shape.present == present
                    && (0..AVERAGED_COLUMNS).all(|c| Arc::ptr_eq(&other.shape.nan_positions[c], &nan_positions[c])) =>
            {
                Arc::clone(&other.shape)
            }
            _ => Arc::new(Shape {
                present,
                union,
                nan_positions,
            }),
        };
        let ids = match neighbour {
            Some(other) if other.ids.len() == n && other.ids.iter().zip(vertices.keys()).all(|(a, b)| a == b) => {
                Arc::clone(&other.ids)
            }
            _ => vertices.keys().cloned().collect(),
        };
        Self {
            ids,
            values,
            shape,
            no_infinite,
        }
    }

    /// The values of column `c` ([`column`]), one per id.
    #[inline]
    pub(crate) fn column(&self, c: usize) -> &[f64] {
        let n = self.ids.len();
        &self.values[c * n..(c + 1) * n]
    }

    /// Whether no value of column `c` is infinite.
    #[inline]
    pub(crate) fn no_infinite(&self, c: usize) -> bool {
        self.no_infinite & (1 << c) != 0
    }

    /// The positions where column `c` is NaN, ascending; `None` for a column window averages do
    /// not read ([`AVERAGED_COLUMNS`]).
    #[inline]
    pub(crate) fn nan_positions(&self, c: usize) -> Option<&Arc<[u32]>> {
        self.shape.nan_positions.get(c)
    }

    /// Every metric present in the map of some id (bit `metric.index()`).
    #[inline]
    pub(crate) fn union(&self) -> u32 {
        self.shape.union
    }

    /// The position of vertex `id` in the ids, if the snapshot lists it.
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        // The ids are in the snapshot map's (sorted) order.
        self.ids.binary_search_by(|v| v.as_str().cmp(id)).ok()
    }

    /// Every metric present in the map of the id at position `k` (bit `metric.index()`).
    #[inline]
    pub(crate) fn present(&self, k: usize) -> u32 {
        self.shape.present[k]
    }

    /// The value of column `c` for the id at position `k`.
    #[inline]
    pub(crate) fn value(&self, c: usize, k: usize) -> f64 {
        self.values[c * self.ids.len() + k]
    }
}

/// Where a vertex's entry sits: (sample index in the window, position in that sample's ids).
pub(crate) type RowAt = (usize, usize);

/// Per-vertex statistics of some window columns, in topology vertex order.
pub(crate) struct WindowScan<const N: usize> {
    /// The reference's `getAverage` state of each requested column.
    pub(crate) averages: Vec<[AverageAccumulator; N]>,
    /// The metrics present in some snapshot of the vertex (bit `metric.index()`).
    pub(crate) seen: Vec<u32>,
    /// The earliest and the latest entry of the vertex, `None` when no snapshot lists it.
    pub(crate) ends: Vec<Option<(RowAt, RowAt)>>,
    /// The topology index of each id of the latest snapshot (`None` for an id the topology lacks).
    pub(crate) latest: Vec<Option<usize>>,
}

/// Reads `history` once for the averages of the columns `averaged` ([`column`] positions) of
/// every vertex of `topology`, with each vertex's present metrics and first and last entries.
///
/// Every vertex's accumulators take its samples in time order, so each average is the
/// reference's sequential sum. Consecutive snapshots listing the same vertices (the same id list)
/// are accumulated column by column over their positions; where the id list changes, each
/// vertex's running state moves to its new position (or waits, while a snapshot lacks it). Ids
/// unknown to the topology are ignored; a vertex missing from a snapshot has no sample there.
pub(crate) fn scan<const N: usize>(
    topology: &JobTopology,
    history: &MetricHistory,
    averaged: [usize; N],
) -> WindowScan<N> {
    let mut out = WindowScan {
        averages: vec![[AverageAccumulator::default(); N]; topology.len()],
        seen: vec![0; topology.len()],
        ends: vec![None; topology.len()],
        latest: Vec::new(),
    };
    let samples: Vec<&Columns> = history.with_columns().map(|(_, columns)| columns).collect();
    let mut slot = AverageColumn::default();
    let mut run_columns: Vec<&[f64]> = Vec::with_capacity(samples.len());
    let mut seen: Vec<u32> = Vec::new();
    let mut start = 0;
    while let Some(first) = samples.get(start) {
        let len = samples[start..]
            .iter()
            .position(|c| !Arc::ptr_eq(&c.ids, &first.ids))
            .unwrap_or(samples.len() - start);
        let run = &samples[start..start + len];
        let vertices: Vec<Option<usize>> = first.ids.iter().map(|id| topology.index_of(id.as_str())).collect();
        for (c, &column) in averaged.iter().enumerate() {
            slot.reset(
                vertices
                    .iter()
                    .map(|v| v.map_or_else(Default::default, |v| out.averages[v][c])),
            );
            run_columns.clear();
            run_columns.extend(run.iter().map(|columns| columns.column(column)));
            // Where the run's columns are NaN at the same positions throughout and infinite
            // nowhere, those positions take no sample and every other one a finite sample.
            let nan_only_at = first.nan_positions(column).filter(|nan| {
                run.iter().all(|columns| {
                    columns.no_infinite(column) && columns.nan_positions(column).is_some_and(|n| Arc::ptr_eq(n, nan))
                })
            });
            let nan_only_at = nan_only_at.map(|nan| &**nan);
            slot.push_columns(&run_columns, nan_only_at);
            for (k, vertex) in vertices.iter().enumerate() {
                if let Some(v) = *vertex {
                    out.averages[v][c] = slot.get(k);
                }
            }
        }
        seen.clear();
        seen.resize(vertices.len(), 0);
        for columns in run {
            for (bits, present) in seen.iter_mut().zip(&columns.shape.present) {
                *bits |= present;
            }
        }
        let last = start + len - 1;
        for (k, vertex) in vertices.iter().enumerate() {
            let Some(v) = *vertex else { continue };
            out.seen[v] |= seen[k];
            let earliest = out.ends[v].map_or((start, k), |(earliest, _)| earliest);
            out.ends[v] = Some((earliest, (last, k)));
        }
        out.latest = vertices;
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MetricValues, ScalingMetric::*};
    use chrono::{TimeZone, Utc};

    fn snapshot(ids: &[&str], load: f64) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: ids
                .iter()
                .map(|id| {
                    (
                        VertexId::new(id),
                        MetricValues::from_iter([(Load, load), (Parallelism, 2.0)]),
                    )
                })
                .collect(),
            global_metrics: MetricValues::new(),
        }
    }

    #[test]
    fn columns_hold_the_values_and_every_present_bit() {
        let c = Columns::of(&snapshot(&["b", "a"], 0.5), None);
        assert_eq!(&*c.ids, [VertexId::new("a"), VertexId::new("b")]);
        assert_eq!(c.column(column(Load)), [0.5, 0.5]);
        assert!(c.value(column(NumRecordsIn), 1).is_nan(), "absent reads NaN");
        assert_eq!(c.union(), (1 << Load.index()) | (1 << Parallelism.index()));
    }

    #[test]
    fn same_vertices_share_the_id_list() {
        let first = Columns::of(&snapshot(&["a", "b"], 0.5), None);
        let same = Columns::of(&snapshot(&["a", "b"], 0.5), Some(&first));
        assert!(Arc::ptr_eq(&first.ids, &same.ids));
        let other = Columns::of(&snapshot(&["a", "c"], 0.5), Some(&first));
        assert!(!Arc::ptr_eq(&first.ids, &other.ids));
        let fewer = Columns::of(&snapshot(&["a"], 0.5), Some(&first));
        assert_eq!(fewer.ids.len(), 1);
    }

    #[test]
    fn alike_neighbours_share_their_shape() {
        let first = Columns::of(&snapshot(&["a", "b"], 0.5), None);
        // Other values, the same metrics and NaN positions: one shape.
        let next = Columns::of(&snapshot(&["a", "b"], 0.7), Some(&first));
        assert!(Arc::ptr_eq(&first.shape, &next.shape));
        assert_eq!(next.column(column(Load)), [0.7, 0.7]);
        // A NaN where there was a value: a shape of its own, the unchanged columns' NaN
        // positions still shared.
        let nan = Columns::of(&snapshot(&["a", "b"], f64::NAN), Some(&next));
        assert!(!Arc::ptr_eq(&next.shape, &nan.shape));
        assert_eq!(nan.nan_positions(column(Load)).expect("averaged")[..], [0, 1]);
        let c = column(NumRecordsInPerSecond);
        assert!(Arc::ptr_eq(
            next.nan_positions(c).expect("averaged"),
            nan.nan_positions(c).expect("averaged")
        ));
        // A metric more on one vertex: a shape of its own.
        let mut more = snapshot(&["a", "b"], 0.7);
        more.vertex_metrics.values_mut().next().expect("a").insert(Lag, 3.0);
        let more = Columns::of(&more, Some(&next));
        assert!(!Arc::ptr_eq(&next.shape, &more.shape));
        assert_ne!(more.present(0), next.present(0));
        assert_eq!(more.present(1), next.present(1));
    }

    #[test]
    fn a_scan_follows_vertices_across_changing_id_lists() {
        let topology = JobTopology::new(
            vec![
                crate::VertexSpec::new("a", 1, 1),
                crate::VertexSpec::new("b", 1, 1),
                crate::VertexSpec::new("c", 1, 1),
            ],
            vec![],
        )
        .expect("valid topology");
        let at = |s: i64| Utc.timestamp_opt(s, 0).single().expect("valid instant");
        // "b" appears in the second run only; "x" is unknown; "c" never appears.
        let history: MetricHistory = [
            (at(1), snapshot(&["a", "x"], 0.1)),
            (at(2), snapshot(&["a", "x"], 0.2)),
            (at(3), snapshot(&["a", "b"], 0.4)),
            (at(4), snapshot(&["a", "x"], 0.8)),
        ]
        .into_iter()
        .collect();
        let scan = scan(&topology, &history, [column(Load)]);
        // a: ((0.1 + 0.2) + 0.4) + 0.8 in that order, 4 samples.
        assert_eq!(scan.averages[0][0].average(1), (((0.1 + 0.2) + 0.4) + 0.8) / 4.0);
        assert_eq!(scan.averages[1][0].average(1), 0.4);
        assert!(scan.averages[2][0].average(1).is_nan());
        assert_eq!(scan.ends[0], Some(((0, 0), (3, 0))));
        assert_eq!(scan.ends[1], Some(((2, 1), (2, 1))));
        assert_eq!(scan.ends[2], None);
        assert_eq!(scan.seen[1], (1 << Load.index()) | (1 << Parallelism.index()));
        assert_eq!(scan.latest, [Some(0), None]);
    }
}
