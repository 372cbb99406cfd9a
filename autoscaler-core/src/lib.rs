//! # autoscaler-core
//!
//! The deciding half of flink-autoscaler-rs: the FLIP-334 traits a platform implements
//! ([`JobAutoScalerContext`], [`ScalingRealizer`], [`AutoScalerEventHandler`],
//! [`AutoScalerStateStore`], [`MetricsCollector`]), the typed `job.autoscaler.*` options, the
//! per-vertex scaler, the scaling executor, memory autotuning ([`tuning`]), `JobAutoScalerImpl` and the
//! standalone control loop.

pub mod autoscaler;
mod clock;
pub mod collector;
pub mod config;
pub mod context;
pub mod cycle;
pub mod event;
pub mod event_logging;
pub mod job_autoscaler;
pub mod plugins;
pub mod realizer;
pub mod record;
pub mod scaling;
pub mod secret;
pub mod standalone;
pub mod state;
pub mod tuning;

/// Re-exported so platforms (and the facade's simulator and examples) implement the traits without a direct dependency.
pub use async_trait::async_trait;
pub use autoscaler::{AutoscalerError, FetchError, JobAutoScaler, JobListFetcher};
pub use clock::{Clock, ManualClock, SystemClock};
pub use collector::{CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot};
pub use config::{AlignmentMode, AutoScalerOptions, Configuration, OptionsError};
pub use context::{
    AutoscalerMetricsReporter, BasicJobContext, GaugeKind, JobAutoScalerContext, JobStatus, NoopMetricsReporter,
};
pub use event::{AutoScalerEventHandler, EventType};
pub use event_logging::LoggingEventHandler;
pub use job_autoscaler::{CycleOutcome, JobAutoScalerImpl};
pub use realizer::{RealizeError, ScalingRealizer};
pub use standalone::{ControlLoopOptions, CycleReport, OptionsValidator, StandaloneAutoscaler, ValidationRejection};
pub use state::{
    AutoScalerStateStore, ConfigChanges, DelayedScaleDown, ParallelismOverrides, RecommendedParallelism,
    ScalingHistory, ScalingRecord, ScalingSummary, ScalingTracking, StateError, StateResult,
    VertexDelayedScaleDownInfo,
};
