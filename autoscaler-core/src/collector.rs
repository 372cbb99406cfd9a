//! Where metrics come from ([`MetricsCollector`]): the REST collector, a simulator and test doubles
//! plug in here.

use crate::context::JobAutoScalerContext;
use async_trait::async_trait;
use autoscaler_metrics::{CollectedMetrics, JobTopology, MetricHistory};
use chrono::{DateTime, Utc};

/// What one collection returns: the current topology, when the job last became RUNNING, and the
/// metrics collected now (already converted to scaling metrics).
#[derive(Debug, Clone)]
pub struct CollectedJobMetrics {
    /// The job graph with current parallelism.
    pub topology: JobTopology,
    /// When the job last switched to RUNNING (the reference's `jobRunningTs`).
    pub job_running_since: DateTime<Utc>,
    /// Scaling metrics collected at `now`.
    pub metrics: CollectedMetrics,
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
}

/// Collects one snapshot of a job's metrics.
#[async_trait]
pub trait MetricsCollector<K, Ctx>: Send + Sync
where
    Ctx: JobAutoScalerContext<K>,
{
    /// Collects the job's topology and metrics at `now`. `history` is the stored window so far
    /// (some metrics, like the observed true processing rate, fall back to its averages).
    async fn collect(
        &self,
        ctx: &Ctx,
        history: &MetricHistory,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError>;

    /// Forgets cached per-job data (metric name caches). Default: nothing cached.
    async fn cleanup(&self, job_key: &K) {
        let _ = job_key;
    }
}
