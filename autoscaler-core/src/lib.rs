//! # autoscaler-core
//!
//! The deciding half of flink-autoscaler-rs: the FLIP-334 traits a platform implements
//! ([`JobAutoScalerContext`], [`ScalingRealizer`], [`AutoScalerEventHandler`],
//! [`AutoScalerStateStore`], [`MetricsCollector`]), the configuration and typed `job.autoscaler.*`
//! options ([`config`]), the per-vertex scaler, the scaling executor, memory autotuning ([`tuning`]),
//! `JobAutoScalerImpl` and the standalone control loop.

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
mod realizer;
#[cfg(feature = "standalone")]
mod standalone;
mod state;

// Grouping namespaces: their items are reached through them only.
pub mod config;
pub mod cycle;
pub mod model;
pub mod plugins;
pub mod record;
pub mod scaling;
pub mod secret;
pub mod tuning;

/// Re-exported so platforms (and the facade's simulator and examples) implement the traits without a direct dependency.
pub use async_trait::async_trait;
pub use autoscaler::{AutoscalerError, FetchError, JobAutoScaler, JobListFetcher};
pub use clock::{Clock, ManualClock, SystemClock};
pub use collection_check::{CollectionCheck, CollectionGap, GapEffect, GapProblem, check_collection};
pub use collector::{CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot};
pub use context::{
    AutoscalerMetricsReporter, BasicJobContext, GaugeKind, JobAutoScalerContext, JobStatus, NoopMetricsReporter,
};
pub use error::{BoxError, Error, Result};
pub use event::AutoScalerEventHandler;
pub use event_logging::LoggingEventHandler;
pub use job_autoscaler::{AUTOSCALER_ERROR_REASON, CycleOutcome, JobAutoScalerImpl, PIPELINE_PARALLELISM_OVERRIDES};
pub use model::event::{
    EventType, SCALING_REPORT_KEY, SCALING_REPORT_REASON, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED,
    SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED, ScalingReport, parallelism_hash_code, scaling_report,
};
pub use model::state::{
    ConfigChanges, DelayedScaleDown, JobState, ParallelismOverrides, RecommendedParallelism, ScalingHistory,
    ScalingRecord, ScalingSummary, ScalingTracking, StateChanges, VertexDelayedScaleDownInfo,
};
pub use realizer::{RealizeError, ScalingRealizer};
#[cfg(feature = "standalone")]
pub use standalone::{
    CONTROL_LOOP_INTERVAL_DEPRECATED_KEY, CONTROL_LOOP_INTERVAL_KEY, CONTROL_LOOP_PARALLELISM_KEY, ControlLoopOptions,
    CycleReport, OptionsValidator, SCALING_EVENT_INTERVAL_KEY, StandaloneAutoscaler, VALIDATION_REASON,
    ValidationRejection, ValidatorFn,
};
pub use state::{AutoScalerStateStore, StateError, StateResult};
