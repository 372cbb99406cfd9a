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
#[non_exhaustive]
pub struct CollectedJobMetrics {
    /// The job graph with current parallelism.
    pub topology: JobTopology,
    /// When the job last switched to RUNNING (the reference's `jobRunningTs`).
    pub job_running_since: DateTime<Utc>,
    /// The metrics collected at `now`.
    pub metrics: MetricsSnapshot,
}

impl CollectedJobMetrics {
    /// One collection: the job's `topology`, when it last became RUNNING, and its `metrics`.
    pub fn new(topology: JobTopology, job_running_since: DateTime<Utc>, metrics: MetricsSnapshot) -> Self {
        Self {
            topology,
            job_running_since,
            metrics,
        }
    }
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
///
/// # The collector contract
///
/// [`collect`](Self::collect) returns the job's current [`JobTopology`] (every vertex with its
/// parallelism, max parallelism, source partitions and whether it is FINISHED; the edges with
/// their ship strategy), when the job last became RUNNING, and one [`MetricsSnapshot`]. What the
/// snapshot must hold depends on its variant. [`check_collection`](crate::check_collection)
/// lists what a snapshot lacks by these tables, for a collector's tests and a platform's health
/// checks.
///
/// A vertex whose busy time (`LOAD`) is missing or not finite in the latest collection is
/// **unmeasured**: it is excluded from scaling this cycle (its own reason in the decision record)
/// and a `MetricsIncomplete` warning event names it; the other vertices are scaled as usual.
/// FINISHED vertices need nothing: the cycle gives them zero busy time, backlog and record counts
/// whatever was collected.
///
/// ## `MetricsSnapshot::Flink`: Flink's aggregated metrics ([`RawJobMetrics`])
///
/// Per-second gauges are aggregated over a vertex's subtasks as Flink's
/// `/jobs/<job>/vertices/<vertex>/subtasks/metrics` answers them (`min`, `max`, `avg`, `sum`);
/// counters come from the job details (`/jobs/<job>`, each vertex's `metrics`).
///
/// | metric (field) | vertices | aggregate read | when missing |
/// |---|---|---|---|
/// | `busyTimeMsPerSecond` (`vertex_metrics`, [`FlinkMetric::BusyTimePerSec`]) | every running vertex | the one `metrics.busy-time.aggregator` names (`max` by default, `min`, `avg`): `LOAD` = busy ms / 1000 | the vertex is **unmeasured** |
/// | `read-records`, `write-records` (`io_metrics`, [`IoMetrics`]) | every running vertex | the accumulated counts: `NUM_RECORDS_IN`, `NUM_RECORDS_OUT`, whose rate over the window is the vertex's input and output rate | read as 0: no input or output rate, so no target rate propagates through the vertex |
/// | `accumulated-busy-time` (`io_metrics`) | every running vertex, read with the `avg` aggregator only | the accumulated busy ms (`ACCUMULATED_BUSY_TIME`), whose rate divided by the parallelism is the busy time | NaN: with `avg` the busy time is NaN |
/// | `*.pendingRecords` ([`FlinkMetric::PendingRecords`], several per source summed) | sources | `sum`: `LAG`, whose growth counts as input and whose latest value must be caught up | `LAG` is 0 (a legacy or idle source, as the reference assumes) |
/// | `Source__<op>.numRecordsInPerSecond`, else `Source__<op>.numRecordsOutPerSecond` | sources | `sum`: the source's rate, for `OBSERVED_TPR` | no `OBSERVED_TPR`: the busy-time estimate of the processing rate alone |
/// | `backPressuredTimeMsPerSecond` ([`FlinkMetric::BackpressureTimePerSec`]) | sources; other vertices optional | `avg` corrects a catching-up source's `OBSERVED_TPR` (`rate / (1 - bp/1000)`); the busy-time aggregate gives `BACKPRESSURE` (root-cause analysis) | a catching-up source keeps its window's `OBSERVED_TPR`; no `BACKPRESSURE` |
/// | `Source__<op>.numRecordsIn`, else `Source__<op>.numRecordsOut` | sources whose `read-records` is 0 (Flink counts no input for a source) | `sum`: the source's `NUM_RECORDS_IN` | the source's input rate is 0, so its target rate is its backlog growth alone |
/// | `numRecordsInPerSecond` ([`FlinkMetric::NumRecordsInPerSec`]) | non-sources, optional | `sum`: `NUM_RECORDS_IN_PER_SECOND`, the input rate the `max`/`min` busy-time estimate divides | the counter rate of `NUM_RECORDS_IN` instead |
/// | `taskSlotsTotal`, `taskSlotsAvailable` (`task_slots`) | the job | total − available: `NUM_TASK_SLOTS_USED` | the resource check cannot count slots |
/// | `Status.JVM.Memory.Heap.Max`/`.Used`, `Status.Flink.Memory.Managed.Used`, `Status.JVM.Memory.Metaspace.Used`, `Status.JVM.GarbageCollector.All.TimeMsPerSecond` (`task_manager_metrics`) | the job (task managers) | `max` | the heap-usage and GC-pressure guards and memory tuning skip what is missing |
///
/// A source's target rate is the rate of `NUM_RECORDS_IN` plus the rate of `LAG`; with fewer
/// than two collections in the window it is unknown and the cycle waits.
///
/// ## `MetricsSnapshot::Scaling`: scaling metrics ([`CollectedMetrics`])
///
/// The platform converted the metrics itself (or replays recorded ones): they are used as they
/// are, per vertex in [`CollectedMetrics::vertex_metrics`] and job-wide in
/// [`CollectedMetrics::global_metrics`].
///
/// | metric | vertices | how it is read | when missing |
/// |---|---|---|---|
/// | `LOAD` (busy fraction, 0..1) | every running vertex | latest value and window average | the vertex is **unmeasured** |
/// | `NUM_RECORDS_IN`, `NUM_RECORDS_OUT` (accumulated counts) | every running vertex | their rate from the window's first to its last sample | no input or output rate |
/// | `LAG` (records) | sources | latest value, and its rate over the window | 0 |
/// | `OBSERVED_TPR` (records/s) | sources, optional | window average, with at least `observed-true-processing-rate.min-observations` samples | the busy-time estimate alone |
/// | `NUM_RECORDS_IN_PER_SECOND` | non-sources, optional | window average (the `max`/`min` busy-time estimate's input rate) | the counter rate of `NUM_RECORDS_IN` |
/// | `ACCUMULATED_BUSY_TIME` (ms) | every vertex, read with the `avg` aggregator only | rate over the window | with `avg` the busy time is NaN |
/// | `BACKPRESSURE` (0..1) | optional | root-cause analysis | not analysed |
/// | `NUM_TASK_SLOTS_USED`, `GC_PRESSURE`, `HEAP_MEMORY_USED`, `HEAP_MAX_USAGE_RATIO`, `MANAGED_MEMORY_USED`, `METASPACE_MEMORY_USED` | job-wide | latest value (memory also the window average) | the guard or tuning that reads it skips it |
///
/// # Example
///
/// A collector over a platform's own monitoring: a failure keeps the platform's error as the
/// cause ([`CollectError::platform`]); a job without metrics yet is [`CollectError::NotReady`].
///
/// ```
/// use autoscaler_core::prelude::*;
///
/// /// Reads the metrics our monitoring system scraped from Flink.
/// struct Monitoring;
///
/// impl Monitoring {
///     fn scrape(&self, job: &str) -> Result<Option<(JobTopology, RawJobMetrics)>, std::io::Error> {
///         let topology = JobTopology::new(vec![VertexSpec::new("map", 2, 128)], vec![])
///             .map_err(std::io::Error::other)?;
///         let _ = job;
///         Ok(Some((topology, RawJobMetrics::default())))
///     }
/// }
///
/// #[async_trait]
/// impl MetricsCollector<String, BasicJobContext<String, ()>> for Monitoring {
///     async fn collect(
///         &self,
///         ctx: &BasicJobContext<String, ()>,
///         _options: &AutoScalerOptions,
///         now: DateTime<Utc>,
///     ) -> Result<CollectedJobMetrics, CollectError> {
///         let Some((topology, raw)) = self.scrape(ctx.job_key()).map_err(CollectError::platform)? else {
///             return Err(CollectError::NotReady(format!("{} reported no metrics yet", ctx.job_key())));
///         };
///         Ok(CollectedJobMetrics::new(topology, now, MetricsSnapshot::Flink(raw)))
///     }
/// }
/// ```
///
/// [`RawJobMetrics`]: autoscaler_metrics::collection::RawJobMetrics
/// [`IoMetrics`]: autoscaler_metrics::collection::IoMetrics
/// [`FlinkMetric::BusyTimePerSec`]: autoscaler_metrics::collection::FlinkMetric::BusyTimePerSec
/// [`FlinkMetric::PendingRecords`]: autoscaler_metrics::collection::FlinkMetric::PendingRecords
/// [`FlinkMetric::BackpressureTimePerSec`]: autoscaler_metrics::collection::FlinkMetric::BackpressureTimePerSec
/// [`FlinkMetric::NumRecordsInPerSec`]: autoscaler_metrics::collection::FlinkMetric::NumRecordsInPerSec
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
