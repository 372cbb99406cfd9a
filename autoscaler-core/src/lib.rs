//! # autoscaler-core
//!
//! The deciding half of flink-autoscaler-rs: the FLIP-334 traits a platform implements
//! ([`JobAutoScalerContext`], [`ScalingRealizer`], [`AutoScalerEventHandler`],
//! [`AutoScalerStateStore`], [`MetricsCollector`]), the configuration and typed `job.autoscaler.*`
//! options ([`config`]), the per-vertex scaler, the scaling executor, memory autotuning ([`tuning`]),
//! `JobAutoScalerImpl`, the standalone control loop (feature `standalone`, on by default) and the
//! [`JobOwnership`] seam that lets several replicas share the jobs.
//! `use autoscaler_core::prelude::*` brings what adapters need; the types of the trait
//! signatures come re-exported ([`autoscaler_metrics`], [`chrono`]).
//!
//! ## From raw Flink metrics to what a decision reads
//!
//! A collector returns the job's topology and, per collection, Flink's aggregated metrics
//! ([`MetricsSnapshot::Flink`]; what each vertex must report is the contract on
//! [`MetricsCollector`]). Here a source feeds a map at 1000 records/s, and the map is busy 900 ms
//! of every second at parallelism 1: built by hand, checked with [`check_collection`], converted
//! and evaluated as every cycle of [`JobAutoScalerImpl`] does.
//!
//! ```
//! use autoscaler_core::config::AutoScalerOptions;
//! use autoscaler_core::prelude::*;
//! use std::time::Duration;
//!
//! let topology = JobTopology::new(
//!     vec![VertexSpec::new("source", 1, 128), VertexSpec::new("map", 1, 128)],
//!     vec![EdgeSpec::new("source", "map", ShipStrategy::Forward)],
//! )?;
//! // What a collector reads from Flink after `minute` minutes: per-second gauges aggregated over
//! // subtasks (min, max, avg, sum), and the job details' accumulated record counters.
//! let collection = |minute: u64| {
//!     let records = minute * 60_000; // 1000 records/s since the job started
//!     let busy = |ms: f64| AggregatedMetric { min: ms, max: ms, avg: ms, sum: ms, skew: 0.0 };
//!     let mut raw = RawJobMetrics::default();
//!     raw.vertex_metrics.insert(
//!         "source".into(),
//!         [
//!             (FlinkMetric::BusyTimePerSec, busy(100.0)),
//!             (FlinkMetric::PendingRecords, AggregatedMetric::of_sum(0.0)),
//!             (FlinkMetric::SourceTaskNumRecordsInPerSec, AggregatedMetric::of_sum(1000.0)),
//!             (FlinkMetric::BackpressureTimePerSec, AggregatedMetric::ZERO),
//!         ]
//!         .into(),
//!     );
//!     raw.vertex_metrics.insert(
//!         "map".into(),
//!         [
//!             (FlinkMetric::BusyTimePerSec, busy(900.0)),
//!             (FlinkMetric::NumRecordsInPerSec, AggregatedMetric::of_sum(1000.0)),
//!         ]
//!         .into(),
//!     );
//!     for vertex in ["source", "map"] {
//!         let io = IoMetrics { num_records_in: records, num_records_out: records, accumulated_busy_time: 0.0 };
//!         raw.io_metrics.insert(vertex.into(), io);
//!     }
//!     MetricsSnapshot::Flink(raw)
//! };
//!
//! // Nothing the cycle needs is missing (the task managers' memory metrics are, and are listed).
//! let check = check_collection(&topology, &collection(1));
//! assert!(check.gaps.iter().all(|gap| gap.vertex.is_none()), "{check}");
//!
//! // Two collections a minute apart, converted as the cycle converts them, make a window.
//! let options = AutoScalerOptions::default();
//! let mut history = MetricHistory::new();
//! let start = DateTime::from_timestamp(1_700_000_000, 0).ok_or("time")?;
//! for minute in [1, 2] {
//!     let snapshot = collection(minute).into_scaling_metrics(&topology, &options, &history);
//!     history.push(start + Duration::from_secs(60 * minute), snapshot)?;
//! }
//! let config = options.evaluation_config(Duration::ZERO);
//! let evaluated = autoscaler_metrics::evaluate(&topology, &history, &config, None)?;
//! let metric = |vertex: &str, metric| evaluated.vertex_metric(vertex, metric).map(|m| m.average);
//! // The map must take 1000 records/s and could take 1000 / 0.9 = 1111.1 at parallelism 1: at
//! // the default 70 % utilization target the scaler gives it 1000 / (1111.1 * 0.7) = 1.29,
//! // so parallelism 2.
//! assert_eq!(metric("map", ScalingMetric::TargetDataRate), Some(1000.0));
//! assert_eq!(metric("map", ScalingMetric::TrueProcessingRate), Some(1111.111));
//! assert_eq!(metric("map", ScalingMetric::Load), Some(0.9));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Running cycles: `JobAutoScalerImpl`
//!
//! [`JobAutoScalerImpl`] wires a collector, a state store, a realizer and an event handler into
//! a [`JobAutoScaler`]; each [`scale`](JobAutoScaler::scale) call runs one cycle for one job
//! (collect, evaluate, decide, store, realize). A platform calls it on its own schedule, or
//! hands it to the standalone loop with a [`JobListFetcher`].
//!
//! ```
//! use autoscaler_core::prelude::*;
//! use autoscaler_core::{AutoscalerError, LoggingEventHandler};
//! use std::sync::Arc;
//!
//! /// One cycle for `job` with the platform's adapters (a store from `autoscaler-state`, say).
//! async fn autoscale(
//!     collector: Arc<dyn MetricsCollector<String, BasicJobContext<String, ()>>>,
//!     store: Arc<dyn AutoScalerStateStore<String, BasicJobContext<String, ()>>>,
//!     realizer: Arc<dyn ScalingRealizer<String, BasicJobContext<String, ()>>>,
//!     job: &BasicJobContext<String, ()>,
//! ) -> Result<(), AutoscalerError> {
//!     let autoscaler = JobAutoScalerImpl::new(collector, store, realizer, Arc::new(LoggingEventHandler));
//!     autoscaler.scale(job).await
//! }
//! ```

// The FLIP-334 seams, the cycle and the standalone loop: private modules, their items at the root.
mod autoscaler;
mod clock;
mod collection_check;
mod collector;
mod context;
mod error;
mod event;
mod event_logging;
mod job_autoscaler;
// The replicas' ownership seam is the standalone loop's (its leases run on tokio's clock).
#[cfg(feature = "standalone")]
mod ownership;
mod realizer;
#[cfg(feature = "standalone")]
mod standalone;
mod state;

// Grouping namespaces: their items are reached through them only.
pub mod config;
pub mod cycle;
pub mod model;
pub mod plugins;
pub mod prelude;
pub mod record;
pub mod scaling;
pub mod secret;
pub mod tuning;

/// Re-exported so platforms (and the facade's simulator and examples) implement the traits without a direct dependency.
pub use async_trait::async_trait;
pub use autoscaler::{AutoscalerError, CycleStep, FetchError, JobAutoScaler, JobListFetcher};
/// The evaluation engine whose types the traits pass ([`JobTopology`](autoscaler_metrics::JobTopology),
/// [`MetricHistory`](autoscaler_metrics::MetricHistory), ...), re-exported so a platform names
/// the very version this crate uses.
pub use autoscaler_metrics;
/// The time library of the trait signatures (`DateTime<Utc>`), re-exported for the same reason.
pub use chrono;
pub use clock::{Clock, ManualClock, SystemClock};
pub use collection_check::{CollectionCheck, CollectionGap, GapEffect, GapProblem, check_collection};
pub use collector::{CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot};
pub use context::{
    AutoscalerMetricsReporter, BasicJobContext, GaugeKind, JobAutoScalerContext, JobStatus, NoopMetricsReporter,
};
pub use cycle::CycleOutcome;
pub use error::{BoxError, Error, Result};
pub use event::AutoScalerEventHandler;
pub use event_logging::LoggingEventHandler;
pub use job_autoscaler::{AUTOSCALER_ERROR_REASON, JobAutoScalerImpl, PIPELINE_PARALLELISM_OVERRIDES};
pub use model::event::{
    EventType, SCALING_REPORT_KEY, SCALING_REPORT_REASON, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED,
    SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED, ScalingReport, parallelism_hash_code, scaling_report,
};
pub use model::state::{
    ConfigChanges, DelayedScaleDown, JobState, ParallelismOverrides, RecommendedParallelism, ScalingHistory,
    ScalingRecord, ScalingSummary, ScalingTracking, StateChanges, VertexDelayedScaleDownInfo,
};
#[cfg(feature = "standalone")]
pub use ownership::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_INTERVAL, HA_LEASE_DURATION_KEY, HA_RENEW_INTERVAL_KEY, HA_REPLICA_ID_KEY,
    HaOptions, JobLease, JobOwnership, Ownership, OwnershipError, OwnershipStats, SoleOwner, default_replica_id,
    rendezvous_score, rendezvous_winner,
};
pub use realizer::{RealizeError, ScalingRealizer};
#[cfg(feature = "standalone")]
pub use standalone::{
    CONTROL_LOOP_INTERVAL_DEPRECATED_KEY, CONTROL_LOOP_INTERVAL_KEY, CONTROL_LOOP_PARALLELISM_KEY, ControlLoopOptions,
    CycleReport, OptionsValidator, SCALING_EVENT_INTERVAL_KEY, StandaloneAutoscaler, VALIDATION_REASON,
    ValidationRejection, ValidatorFn,
};
pub use state::{AutoScalerStateStore, StateError, StateResult};
