//! Collected metric snapshots and the time-ordered metric history.

use crate::{MetricValues, MetricsError, VertexId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MetricHistory {
    samples: BTreeMap<DateTime<Utc>, CollectedMetrics>,
}

impl MetricHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `snapshot` at `at`, replacing a snapshot at the same instant (as the reference's map put).
    pub fn insert(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) {
        self.samples.insert(at, snapshot);
    }

    /// Appends `snapshot`, rejecting one that is not strictly after the latest snapshot.
    pub fn push(&mut self, at: DateTime<Utc>, snapshot: CollectedMetrics) -> Result<(), MetricsError> {
        if let Some(latest) = self.latest_time()
            && at <= latest
        {
            return Err(MetricsError::OutOfOrderSnapshot { at, latest });
        }
        self.samples.insert(at, snapshot);
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
        self.samples.keys().next().copied()
    }

    /// Time of the newest snapshot.
    pub fn latest_time(&self) -> Option<DateTime<Utc>> {
        self.samples.keys().next_back().copied()
    }

    /// The newest snapshot.
    pub fn latest(&self) -> Option<&CollectedMetrics> {
        self.samples.values().next_back()
    }

    /// Snapshots in time order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&DateTime<Utc>, &CollectedMetrics)> + ExactSizeIterator {
        self.samples.iter()
    }

    /// Removes every snapshot.
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    /// Removes every snapshot taken strictly before `cutoff`.
    pub fn remove_before(&mut self, cutoff: DateTime<Utc>) {
        self.samples = self.samples.split_off(&cutoff);
    }
}

impl FromIterator<(DateTime<Utc>, CollectedMetrics)> for MetricHistory {
    fn from_iter<I: IntoIterator<Item = (DateTime<Utc>, CollectedMetrics)>>(iter: I) -> Self {
        Self {
            samples: iter.into_iter().collect(),
        }
    }
}
