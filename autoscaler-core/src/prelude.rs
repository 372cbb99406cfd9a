//! What a platform's adapters need, in one import: `use autoscaler_core::prelude::*;`.
//!
//! The FLIP-334 traits and `async_trait` to implement them, their errors, the data they pass
//! (topology, metrics snapshots, overrides, events), the options and the time types of their
//! signatures. Names that could clash with a platform's own (`Error`, `Result`) are left out.

pub use crate::async_trait;
pub use crate::config::{AutoScalerOptions, Configuration};
pub use crate::{
    AutoScalerEventHandler, AutoScalerStateStore, BasicJobContext, CollectError, CollectedJobMetrics, ConfigChanges,
    EventType, FetchError, JobAutoScaler, JobAutoScalerContext, JobAutoScalerImpl, JobListFetcher, JobStatus,
    MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError, ScalingRealizer, StateError, StateResult,
    check_collection,
};
pub use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, FlinkMetrics, IoMetrics, RawJobMetrics};
pub use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluatedMetrics, JobTopology, MetricHistory, ScalingMetric, ShipStrategy, VertexId,
    VertexSpec,
};
pub use chrono::{DateTime, Utc};
