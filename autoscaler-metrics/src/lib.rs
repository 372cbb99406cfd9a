//! # autoscaler-metrics
//!
//! The pure evaluation engine of flink-autoscaler-rs: the metric vocabulary ([`ScalingMetric`]),
//! the job topology ([`JobTopology`]), the windowed metric history and the evaluation of true
//! processing rate, target and catch-up data rates and scaling thresholds, computed exactly as the
//! Flink Kubernetes Operator's autoscaler does.
//!
//! No I/O, no async and no clocks live here: time comes in as data.

mod collected;
mod columns;
mod custom_evaluation;
mod error;
mod evaluate;
mod evaluated;
mod history_stats;
mod metric;
mod packed;
mod topology;
mod vertex_map;
mod window;

pub mod collection;
pub mod java;
pub mod json_number;
pub mod root_cause;
pub mod time;

pub use collected::{CollectedMetrics, MetricHistory, SharedSnapshot};
pub use custom_evaluation::{CustomEvaluator, CustomVertexEvaluation, merge_custom_metrics};
pub use error::MetricsError;
pub use evaluate::{
    Evaluation, EvaluationConfig, TprEstimate, TprSource, compute_processing_rate_thresholds, evaluate,
    evaluate_with_estimates, target_processing_capacity, true_processing_rate_estimates,
};
pub use evaluated::EvaluatedMetrics;
pub use history_stats::{metric_average, metric_rate};
pub use metric::{
    BusyTimeAggregator, EvaluatedScalingMetric, EvaluatedVertexMetrics, METRIC_COUNT, MetricMap, MetricSlot,
    MetricValues, ScalingMetric, round_metric,
};
pub use packed::{PACKED_LAYOUT, PackedSnapshotError};
pub use topology::{EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexInfo, VertexSpec};
pub use vertex_map::VertexMap;
pub use window::{WindowStatus, apply_window, discard_before_restart, voids_history, window_and_trim, window_status};

/// The iterators of a [`VertexMap`].
pub mod vertex_map_iter {
    pub use crate::vertex_map::{IntoIter, Iter, IterMut, Keys, Values, ValuesMut};
}

/// Result alias of this crate.
pub type Result<T, E = MetricsError> = std::result::Result<T, E>;
