//! Where metrics come from ([`MetricsCollector`]): the REST collector, a simulator and test doubles
//! plug in here.

use crate::config::AutoScalerOptions;
use crate::context::JobAutoScalerContext;
use crate::error::BoxError;
use async_trait::async_trait;
use autoscaler_metrics::collection::{RawJobMetrics, convert_to_scaling_metrics};
use autoscaler_metrics::{CollectedMetrics, JobTopology, MetricHistory};
use chrono::{DateTime, Utc};

/// What one collection returns: the current topology, when the job last became RUNNING, and the
/// metrics collected now.
#[derive(Debug, Clone)]
pub struct CollectedJobMetrics {
    /// The job graph with current parallelism.
    pub topology: JobTopology,
    /// When the job last switched to RUNNING (the reference's `jobRunningTs`).
    pub job_running_since: DateTime<Utc>,
    /// The metrics collected at `now`.
    pub metrics: MetricsSnapshot,
}

/// The metrics of one collection, in the form the collector has them.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricsSnapshot {
    /// Aggregated Flink metrics (what the REST API and the simulator report). The cycle converts
    /// them ([`autoscaler_metrics::collection::convert_to_scaling_metrics`]) against the stored
    /// window of the current job run, which sources that are not catching up need for their
    /// `OBSERVED_TPR`; a vertex whose busy time is not finite is excluded from scaling for the
    /// cycle, as the reference's `ScalingMetrics.computeLoadMetrics` does.
    Flink(RawJobMetrics),
    /// Scaling metrics the platform already converted itself (or recorded): used as they are,
    /// nothing is excluded on their account.
    Scaling(CollectedMetrics),
}

impl MetricsSnapshot {
    /// The snapshot as scaling metrics: a [`MetricsSnapshot::Flink`] one converted for `topology`
    /// with `options`' conversion settings against `history`, the stored window of the current job
    /// run (its `OBSERVED_TPR` average feeds sources that are not catching up); a
    /// [`MetricsSnapshot::Scaling`] one as it is.
    pub fn into_scaling_metrics(
        self,
        topology: &JobTopology,
        options: &AutoScalerOptions,
        history: &MetricHistory,
    ) -> CollectedMetrics {
        match self {
            Self::Flink(raw) => convert_to_scaling_metrics(topology, &raw, &options.collection_config(), history),
            Self::Scaling(snapshot) => snapshot,
        }
    }
}

/// Why a collection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// The job is not ready to be measured (just started, metrics not yet reported); not an error
    /// worth an event, as the reference's `NotReadyException`.
    #[error("job not ready: {0}")]
    NotReady(String),
    /// A required metric is missing.
    #[error("Could not find required metric {metric} for {vertex}")]
    MetricNotFound {
        /// The metric name.
        metric: String,
        /// The vertex.
        vertex: String,
    },
    /// The platform failed or answered something unusable.
    #[error("metric collection failed: {0}")]
    Failed(String),
    /// The platform's own error (a client's, a parser's), kept as the cause:
    /// [`source`](std::error::Error::source) returns it. Build it with [`CollectError::platform`].
    #[error("metric collection failed: {0}")]
    Platform(#[source] BoxError),
}

impl CollectError {
    /// A collection that failed with the platform's own `error`, kept as the cause.
    pub fn platform(error: impl Into<BoxError>) -> Self {
        Self::Platform(error.into())
    }
}

/// Collects one snapshot of a job's metrics.
#[async_trait]
pub trait MetricsCollector<K, Ctx>: Send + Sync
where
    Ctx: JobAutoScalerContext<K>,
{
    /// Collects the job's topology and metrics at `now`. `options` are the job's options, parsed
    /// once by the cycle from `ctx.configuration()`. The stored window is the cycle's business:
    /// return [`MetricsSnapshot::Flink`] when a conversion needs it.
    async fn collect(
        &self,
        ctx: &Ctx,
        options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError>;

    /// Forgets cached per-job data (metric name caches). Default: nothing cached.
    async fn cleanup(&self, job_key: &K) {
        let _ = job_key;
    }
}
