//! The autoscaler's persistent per-job state: its parts (scaling history and tracking, delayed
//! scale-downs, parallelism overrides, configuration changes), the whole [`JobState`] a cycle
//! reads and writes, and [`StateChanges`], which parts a cycle changed.

use autoscaler_metrics::{EvaluatedMetrics, EvaluatedVertexMetrics, MetricHistory, VertexId, VertexMap};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// One past scaling decision of a vertex (the reference's `ScalingSummary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingSummary {
    /// Parallelism before the decision.
    pub current_parallelism: u32,
    /// Parallelism the decision chose.
    pub new_parallelism: u32,
    /// The vertex's evaluated metrics at decision time (with `EXPECTED_PROCESSING_RATE`).
    pub metrics: EvaluatedVertexMetrics,
}

impl ScalingSummary {
    /// Whether the decision increased the parallelism.
    pub fn is_scaled_up(&self) -> bool {
        self.new_parallelism > self.current_parallelism
    }
}

/// Scaling history per vertex, each ordered by decision time.
pub type ScalingHistory = BTreeMap<VertexId, BTreeMap<DateTime<Utc>, ScalingSummary>>;

/// One executed rescale (the reference's `ScalingRecord`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRecord {
    /// How long the job took to come back RUNNING at the new parallelism; `None` = not yet measured.
    pub restart_duration: Option<Duration>,
}

/// Executed rescales ordered by start time (the reference's `ScalingTracking`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingTracking {
    /// Rescale start time -> record.
    pub scaling_records: BTreeMap<DateTime<Utc>, ScalingRecord>,
}

/// A scale-down recommendation remembered while the scale-down interval runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedParallelism {
    /// When the recommendation was made.
    pub trigger_time: DateTime<Utc>,
    /// The recommended parallelism.
    pub parallelism: u32,
    /// Whether the vertex was outside its utilization bound then.
    pub outside_utilization_bound: bool,
}

/// Pending scale-down state of one vertex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VertexDelayedScaleDownInfo {
    /// When the first scale-down of this run was recommended.
    pub first_trigger_time: DateTime<Utc>,
    /// Recommendations inside the interval, monotonically decreasing in parallelism (head = window max).
    pub recommended_parallelisms: VecDeque<RecommendedParallelism>,
}

/// Delayed scale-down state of a job (the reference's `DelayedScaleDown`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayedScaleDown {
    /// Pending scale-downs per vertex.
    pub delayed_vertices: BTreeMap<VertexId, VertexDelayedScaleDownInfo>,
    /// Whether the state changed since it was loaded (not persisted).
    #[serde(skip)]
    pub updated: bool,
}

/// Configuration changes the autoscaler wants applied (memory tuning), the reference's `ConfigChanges`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChanges {
    /// Keys to set.
    pub overrides: BTreeMap<String, String>,
    /// Keys to remove.
    pub removals: BTreeSet<String>,
}

/// Parallelism overrides: vertex id -> parallelism.
pub type ParallelismOverrides = VertexMap<u32>;

/// The stored state of one job that a cycle reads and writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobState {
    /// The collected metric window.
    pub metric_history: MetricHistory,
    /// Past scaling decisions per vertex.
    pub scaling_history: ScalingHistory,
    /// Executed rescales and their restart durations.
    pub scaling_tracking: ScalingTracking,
    /// Pending scale-downs.
    pub delayed_scale_down: DelayedScaleDown,
    /// The parallelism the autoscaler wants per vertex.
    pub parallelism_overrides: ParallelismOverrides,
    /// The configuration changes (memory tuning) the autoscaler wants applied.
    pub config_changes: ConfigChanges,
    /// The metrics the latest evaluation produced, shared with whoever keeps them (a store, an
    /// exporter) without a copy. A cycle writes them whenever it evaluates and never reads them:
    /// a store's `get_job_state` may leave them `None`.
    pub evaluated_metrics: Option<Arc<EvaluatedMetrics>>,
}

/// Which parts of a [`JobState`] a cycle changed (and so must be written back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateChanges {
    /// [`JobState::metric_history`].
    pub metric_history: bool,
    /// [`JobState::scaling_history`].
    pub scaling_history: bool,
    /// [`JobState::scaling_tracking`].
    pub scaling_tracking: bool,
    /// [`JobState::delayed_scale_down`].
    pub delayed_scale_down: bool,
    /// [`JobState::parallelism_overrides`].
    pub parallelism_overrides: bool,
    /// [`JobState::config_changes`]: replaced when a scaling is executed (by memory tuning's
    /// changes, empty when it did not run), as the reference stores them with new parallelisms.
    pub config_changes: bool,
    /// [`JobState::evaluated_metrics`]: set whenever the cycle evaluated.
    pub evaluated_metrics: bool,
}

impl StateChanges {
    /// Every part changed (a cleared state, say).
    pub fn all() -> Self {
        Self {
            metric_history: true,
            scaling_history: true,
            scaling_tracking: true,
            delayed_scale_down: true,
            parallelism_overrides: true,
            config_changes: true,
            evaluated_metrics: true,
        }
    }
}
