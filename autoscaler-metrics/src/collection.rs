//! From aggregated Flink metrics to scaling metrics: the pure half of metric collection.
//!
//! A collector (the REST collector in `autoscaler-realizer`, or a simulator) gathers, per vertex, the
//! aggregated subtask metrics Flink reports ([`AggregatedMetric`] keyed by [`FlinkMetric`]), the IO
//! counters of the job details ([`IoMetrics`]) and the cluster's task-manager and slot metrics. The
//! functions here turn those into the [`CollectedMetrics`] snapshot the evaluation works on, exactly
//! as the reference's `ScalingMetrics` and `ScalingMetricCollector.convertToScalingMetrics` do.
//! No I/O, no clock.
//!
//! ```
//! use autoscaler_metrics::collection::compute_observed_tpr_with_backpressure;
//! // 250 records/s while backpressured 750 ms of every second: the source could do 1000/s.
//! assert_eq!(compute_observed_tpr_with_backpressure(250.0, 750.0), 1000.0);
//! ```

use crate::java;
use crate::{
    BusyTimeAggregator, CollectedMetrics, JobTopology, MetricHistory, MetricValues, ScalingMetric, VertexId,
    metric_average, round_metric,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// A Flink metric the autoscaler reads, recognised by its name (the reference's `FlinkMetric`).
/// Serialized by the reference's constant names (`BUSY_TIME_PER_SEC`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FlinkMetric {
    /// `busyTimeMsPerSecond` (task).
    BusyTimePerSec,
    /// `Source__<op>.numRecordsInPerSecond` (source operator).
    SourceTaskNumRecordsInPerSec,
    /// `Source__<op>.numRecordsOut` (source operator).
    SourceTaskNumRecordsOut,
    /// `Source__<op>.numRecordsOutPerSecond` (source operator).
    SourceTaskNumRecordsOutPerSec,
    /// `Source__<op>.numRecordsIn` (source operator).
    SourceTaskNumRecordsIn,
    /// `<anything>.pendingRecords` (FLIP-33 source backlog; several per source are summed).
    PendingRecords,
    /// `backPressuredTimeMsPerSecond` (task).
    BackpressureTimePerSec,
    /// `numRecordsInPerSecond` (task).
    NumRecordsInPerSec,
    /// `Status.JVM.Memory.Heap.Max` (task manager).
    HeapMemoryMax,
    /// `Status.JVM.Memory.Heap.Used` (task manager).
    HeapMemoryUsed,
    /// `Status.Flink.Memory.Managed.Used` (task manager).
    ManagedMemoryUsed,
    /// `Status.JVM.Memory.Metaspace.Used` (task manager).
    MetaspaceMemoryUsed,
    /// `Status.JVM.GarbageCollector.All.TimeMsPerSecond` (task manager).
    TotalGcTimePerSec,
    /// `taskSlotsTotal` (job manager).
    NumTaskSlotsTotal,
    /// `taskSlotsAvailable` (job manager).
    NumTaskSlotsAvailable,
}

impl FlinkMetric {
    /// Every Flink metric, in the reference's declaration order.
    pub const ALL: [FlinkMetric; 15] = [
        Self::BusyTimePerSec,
        Self::SourceTaskNumRecordsInPerSec,
        Self::SourceTaskNumRecordsOut,
        Self::SourceTaskNumRecordsOutPerSec,
        Self::SourceTaskNumRecordsIn,
        Self::PendingRecords,
        Self::BackpressureTimePerSec,
        Self::NumRecordsInPerSec,
        Self::HeapMemoryMax,
        Self::HeapMemoryUsed,
        Self::ManagedMemoryUsed,
        Self::MetaspaceMemoryUsed,
        Self::TotalGcTimePerSec,
        Self::NumTaskSlotsTotal,
        Self::NumTaskSlotsAvailable,
    ];

    /// Whether the Flink metric called `name` is this metric.
    ///
    /// ```
    /// use autoscaler_metrics::collection::FlinkMetric;
    /// assert!(FlinkMetric::SourceTaskNumRecordsIn.matches("Source__datagen.numRecordsIn"));
    /// assert!(!FlinkMetric::SourceTaskNumRecordsIn.matches("numRecordsIn"));
    /// assert!(FlinkMetric::PendingRecords.matches("KafkaSourceReader.pendingRecords"));
    /// ```
    pub fn matches(self, name: &str) -> bool {
        let source_operator = |suffix: &str| name.starts_with("Source__") && name.ends_with(suffix);
        match self {
            Self::BusyTimePerSec => name == "busyTimeMsPerSecond",
            Self::SourceTaskNumRecordsInPerSec => source_operator(".numRecordsInPerSecond"),
            Self::SourceTaskNumRecordsOut => source_operator(".numRecordsOut"),
            Self::SourceTaskNumRecordsOutPerSec => source_operator(".numRecordsOutPerSecond"),
            Self::SourceTaskNumRecordsIn => source_operator(".numRecordsIn"),
            Self::PendingRecords => name.ends_with(".pendingRecords"),
            Self::BackpressureTimePerSec => name == "backPressuredTimeMsPerSecond",
            Self::NumRecordsInPerSec => name == "numRecordsInPerSecond",
            Self::HeapMemoryMax => name == "Status.JVM.Memory.Heap.Max",
            Self::HeapMemoryUsed => name == "Status.JVM.Memory.Heap.Used",
            Self::ManagedMemoryUsed => name == "Status.Flink.Memory.Managed.Used",
            Self::MetaspaceMemoryUsed => name == "Status.JVM.Memory.Metaspace.Used",
            Self::TotalGcTimePerSec => name == "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
            Self::NumTaskSlotsTotal => name == "taskSlotsTotal",
            Self::NumTaskSlotsAvailable => name == "taskSlotsAvailable",
        }
    }

    /// The first of `names` that is this metric. Pass the names sorted to get a deterministic pick
    /// where the reference takes "any" match.
    pub fn find_any<'a, I>(self, names: I) -> Option<&'a str>
    where
        I: IntoIterator<Item = &'a str>,
    {
        names.into_iter().find(|n| self.matches(n))
    }

    /// Every one of `names` that is this metric.
    pub fn find_all<'a, I>(self, names: I) -> Vec<&'a str>
    where
        I: IntoIterator<Item = &'a str>,
    {
        names.into_iter().filter(|n| self.matches(n)).collect()
    }
}

/// One metric aggregated over subtasks (or task managers), as Flink's aggregated metrics endpoints
/// answer it. NaN marks an aggregate Flink did not report (serialized as `"NaN"`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AggregatedMetric {
    /// Smallest value.
    #[serde(with = "crate::json_number")]
    pub min: f64,
    /// Largest value.
    #[serde(with = "crate::json_number")]
    pub max: f64,
    /// Mean value.
    #[serde(with = "crate::json_number")]
    pub avg: f64,
    /// Sum of the values.
    #[serde(with = "crate::json_number")]
    pub sum: f64,
    /// Skew of the values.
    #[serde(with = "crate::json_number")]
    pub skew: f64,
}

impl AggregatedMetric {
    /// Every aggregate zero: what the reference substitutes for a FINISHED vertex.
    pub const ZERO: Self = Self {
        min: 0.0,
        max: 0.0,
        avg: 0.0,
        sum: 0.0,
        skew: 0.0,
    };

    /// Nothing reported.
    pub const NAN: Self = Self {
        min: f64::NAN,
        max: f64::NAN,
        avg: f64::NAN,
        sum: f64::NAN,
        skew: f64::NAN,
    };

    /// Only the sum reported.
    pub const fn of_sum(sum: f64) -> Self {
        Self { sum, ..Self::NAN }
    }

    /// Combines two Flink metrics that map to the same [`FlinkMetric`] (e.g. two `*.pendingRecords`
    /// of one source), as the reference's `aggregateByFlinkMetric`: min of the mins, max of the maxes,
    /// sum of the sums, max of the skews; the average cannot be recombined and becomes NaN. NaN in
    /// either side propagates, as Java's `Math.min`/`Math.max` do.
    ///
    /// ```
    /// use autoscaler_metrics::collection::AggregatedMetric;
    /// let a = AggregatedMetric { min: 1.0, max: 5.0, avg: 3.0, sum: 6.0, skew: 0.1 };
    /// let b = AggregatedMetric { min: 2.0, max: 4.0, avg: 3.0, sum: 10.0, skew: 0.3 };
    /// let m = a.merge(&b);
    /// assert_eq!((m.min, m.max, m.sum, m.skew), (1.0, 5.0, 16.0, 0.3));
    /// assert!(m.avg.is_nan());
    /// ```
    pub fn merge(&self, other: &Self) -> Self {
        Self {
            min: java::min(self.min, other.min),
            max: java::max(self.max, other.max),
            avg: f64::NAN,
            sum: self.sum + other.sum,
            skew: java::max(self.skew, other.skew),
        }
    }

    /// The aggregate the busy-time aggregator selects (`max`, `min` or `avg`).
    pub fn get(&self, aggregator: BusyTimeAggregator) -> f64 {
        match aggregator {
            BusyTimeAggregator::Max => self.max,
            BusyTimeAggregator::Min => self.min,
            BusyTimeAggregator::Avg => self.avg,
        }
    }
}

/// The aggregated Flink metrics of one vertex (or of the task managers).
pub type FlinkMetrics = BTreeMap<FlinkMetric, AggregatedMetric>;

/// The metrics a FINISHED vertex is given instead of querying Flink (reference:
/// `FlinkMetric.FINISHED_METRICS`): busy time, pending records and source record counters all zero.
pub fn finished_vertex_metrics() -> FlinkMetrics {
    [
        FlinkMetric::BusyTimePerSec,
        FlinkMetric::PendingRecords,
        FlinkMetric::SourceTaskNumRecordsInPerSec,
        FlinkMetric::SourceTaskNumRecordsIn,
        FlinkMetric::SourceTaskNumRecordsOut,
    ]
    .into_iter()
    .map(|m| (m, AggregatedMetric::ZERO))
    .collect()
}

/// The IO counters of a vertex from the job details (`read-records`, `write-records`,
/// `accumulated-busy-time`), accumulated over all its subtasks since the job (re)started.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct IoMetrics {
    /// Records read.
    pub num_records_in: u64,
    /// Records written.
    pub num_records_out: u64,
    /// Busy milliseconds summed over subtasks (NaN when Flink does not measure it).
    #[serde(with = "crate::json_number")]
    pub accumulated_busy_time: f64,
}

impl IoMetrics {
    /// All zero: what a FINISHED vertex reports (reference: `IOMetrics.FINISHED_METRICS`).
    pub const FINISHED: Self = Self {
        num_records_in: 0,
        num_records_out: 0,
        accumulated_busy_time: 0.0,
    };
}

/// The slot metrics of the job manager (`taskSlotsTotal`, `taskSlotsAvailable`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskSlotMetrics {
    /// Slots registered in the cluster.
    #[serde(with = "crate::json_number")]
    pub total: f64,
    /// Slots free.
    #[serde(with = "crate::json_number")]
    pub available: f64,
}

/// The options the conversion reads (a subset of `job.autoscaler.*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectionConfig {
    /// `metrics.busy-time.aggregator` (MAX).
    pub busy_time_aggregator: BusyTimeAggregator,
    /// `observed-true-processing-rate.lag-threshold` (30 s); only whole seconds count.
    pub observed_tpr_lag_threshold: Duration,
    /// `observed-true-processing-rate.min-observations` (2).
    pub observed_tpr_min_observations: usize,
}

impl Default for CollectionConfig {
    fn default() -> Self {
        Self {
            busy_time_aggregator: BusyTimeAggregator::Max,
            observed_tpr_lag_threshold: Duration::from_secs(30),
            observed_tpr_min_observations: 2,
        }
    }
}

/// `LAG` of a source: the summed `pendingRecords`, or 0 when the source has none (legacy or idle
/// sources; reference `ScalingMetrics.computeLagMetrics`).
pub fn lag(flink: &FlinkMetrics) -> f64 {
    flink.get(&FlinkMetric::PendingRecords).map_or(0.0, |m| m.sum)
}

/// `LOAD`: busy milliseconds per second of the aggregated subtask, divided by 1000, never negative;
/// NaN when the busy time is not finite (the vertex cannot be measured and must not be scaled).
/// Reference: `ScalingMetrics.computeLoadMetrics` / `getBusyTimeMsPerSecond`.
pub fn load(flink: &FlinkMetrics, aggregator: BusyTimeAggregator) -> f64 {
    let busy = flink
        .get(&FlinkMetric::BusyTimePerSec)
        .map_or(f64::NAN, |m| m.get(aggregator));
    if busy.is_finite() {
        busy.max(0.0) / 1000.0
    } else {
        f64::NAN
    }
}

/// `BACKPRESSURE`: backpressured milliseconds per second of the aggregated subtask, divided by 1000,
/// never negative, aggregated over subtasks with the busy-time aggregator exactly as [`load`] is;
/// NaN when the backpressured time is not finite, `None` when it was not collected at all. This
/// project's addition (the reference reads backpressure only to correct a source's observed rate).
///
/// ```
/// use autoscaler_metrics::BusyTimeAggregator;
/// use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, FlinkMetrics, backpressure};
/// let bp = AggregatedMetric { min: 100.0, max: 800.0, avg: 450.0, sum: 900.0, skew: 0.0 };
/// let flink: FlinkMetrics = [(FlinkMetric::BackpressureTimePerSec, bp)].into();
/// assert_eq!(backpressure(&flink, BusyTimeAggregator::Max), Some(0.8));
/// assert_eq!(backpressure(&FlinkMetrics::new(), BusyTimeAggregator::Max), None);
/// ```
pub fn backpressure(flink: &FlinkMetrics, aggregator: BusyTimeAggregator) -> Option<f64> {
    let backpressured = flink.get(&FlinkMetric::BackpressureTimePerSec)?.get(aggregator);
    Some(if backpressured.is_finite() {
        backpressured.max(0.0) / 1000.0
    } else {
        f64::NAN
    })
}

/// The accumulated input record count, by the reference's fallback chain
/// (`ScalingMetrics.getNumRecordsInInternal`, accumulated variant): the job details' `read-records`;
/// for a source that reads 0 there, the source operator's `numRecordsIn` sum; if that is still 0 or
/// absent, its `numRecordsOut` sum. Never negative.
pub fn num_records_in(flink: &FlinkMetrics, io: &IoMetrics, is_source: bool) -> f64 {
    let io_records = AggregatedMetric::of_sum(io.num_records_in as f64);
    records_by_fallback(
        flink,
        Some(io_records),
        is_source,
        FlinkMetric::SourceTaskNumRecordsIn,
        FlinkMetric::SourceTaskNumRecordsOut,
    )
}

/// The input rate of a source (records per second over all subtasks), by the reference's chain
/// (per-second variant): the source operator's `numRecordsInPerSecond` sum, else (0 or absent) its
/// `numRecordsOutPerSecond` sum; NaN when neither was collected.
pub fn source_num_records_in_per_second(flink: &FlinkMetrics) -> f64 {
    records_by_fallback(
        flink,
        None,
        true,
        FlinkMetric::SourceTaskNumRecordsInPerSec,
        FlinkMetric::SourceTaskNumRecordsOutPerSec,
    )
}

fn records_by_fallback(
    flink: &FlinkMetrics,
    start: Option<AggregatedMetric>,
    is_source: bool,
    source_in: FlinkMetric,
    source_out: FlinkMetric,
) -> f64 {
    let mut records = start;
    // A sum of exactly 0 (or nothing) means "this counter is not maintained here", so try the next.
    for fallback in [source_in, source_out] {
        if is_source && records.is_none_or(|m| m.sum == 0.0) {
            records = flink.get(&fallback).copied().or(records);
        }
    }
    match records {
        // Math.max(0, sum): a NaN sum stays NaN (f64::max would drop it).
        Some(m) => java::max(0.0, m.sum),
        None => f64::NAN,
    }
}

/// What a source could process if it were never backpressured: `rate / (1 - backpressure/1000)`,
/// NaN when it was backpressured the whole second (reference
/// `ScalingMetrics.computeObservedTprWithBackpressure`).
///
/// ```
/// use autoscaler_metrics::collection::compute_observed_tpr_with_backpressure;
/// assert!(compute_observed_tpr_with_backpressure(100.0, 1000.0).is_nan());
/// assert_eq!(compute_observed_tpr_with_backpressure(500.0, 0.0), 500.0);
/// ```
pub fn compute_observed_tpr_with_backpressure(records_in_per_second: f64, backpressure_ms_per_second: f64) -> f64 {
    if backpressure_ms_per_second >= 1000.0 {
        return f64::NAN;
    }
    records_in_per_second / (1.0 - backpressure_ms_per_second / 1000.0)
}

/// `OBSERVED_TPR` of a source this cycle, `None` when the input rate is unknown (the metric is then
/// not set). Reference `ScalingMetrics.computeDataRateMetrics` / `getObservedTpr`:
/// - no input at all gives +Inf (lets the source scale down);
/// - while catching up (`lag >= whole seconds of lag_threshold * rate`) the backpressure-corrected
///   rate, using the *average* backpressure over subtasks;
/// - otherwise, or when that is NaN, `history_average()` (the stored window's average, which may be
///   NaN itself).
pub fn observed_tpr(
    flink: &FlinkMetrics,
    lag: f64,
    records_in_per_second: f64,
    lag_threshold: Duration,
    history_average: impl FnOnce() -> f64,
) -> Option<f64> {
    if records_in_per_second.is_nan() {
        return None;
    }
    if records_in_per_second == 0.0 {
        return Some(f64::INFINITY);
    }
    let catching_up = lag >= lag_threshold.as_secs() as f64 * records_in_per_second;
    if catching_up {
        let backpressure = flink
            .get(&FlinkMetric::BackpressureTimePerSec)
            .map_or(f64::NAN, |m| m.avg);
        let observed = compute_observed_tpr_with_backpressure(records_in_per_second, backpressure);
        if !observed.is_nan() {
            return Some(observed);
        }
    }
    Some(history_average())
}

/// The scaling metrics of one vertex, every value rounded with [`round_metric`] (reference
/// `convertToScalingMetrics`): `LAG` (sources), `LOAD`, `ACCUMULATED_BUSY_TIME`, `NUM_RECORDS_IN`,
/// `NUM_RECORDS_OUT`, then `OBSERVED_TPR` for sources or `NUM_RECORDS_IN_PER_SECOND` (when
/// `numRecordsInPerSecond` was collected) for the others; plus this project's `BACKPRESSURE` (see
/// [`backpressure`]) for every vertex whose `backPressuredTimeMsPerSecond` was collected.
/// `history_average` gives the stored window's `OBSERVED_TPR` average; it is only called when needed.
pub fn vertex_scaling_metrics(
    flink: &FlinkMetrics,
    io: &IoMetrics,
    is_source: bool,
    config: &CollectionConfig,
    history_average: impl FnOnce() -> f64,
) -> MetricValues {
    let mut out = MetricValues::new();
    let lag = if is_source { lag(flink) } else { 0.0 };
    if is_source {
        out.insert(ScalingMetric::Lag, lag);
    }
    out.insert(ScalingMetric::Load, load(flink, config.busy_time_aggregator));
    if let Some(backpressure) = backpressure(flink, config.busy_time_aggregator) {
        out.insert(ScalingMetric::Backpressure, backpressure);
    }
    out.insert(ScalingMetric::AccumulatedBusyTime, io.accumulated_busy_time);
    out.insert(ScalingMetric::NumRecordsIn, num_records_in(flink, io, is_source));
    out.insert(ScalingMetric::NumRecordsOut, io.num_records_out as f64);
    if is_source {
        let rate = source_num_records_in_per_second(flink);
        if let Some(tpr) = observed_tpr(flink, lag, rate, config.observed_tpr_lag_threshold, history_average) {
            out.insert(ScalingMetric::ObservedTpr, tpr);
        }
    } else if let Some(in_per_second) = flink.get(&FlinkMetric::NumRecordsInPerSec) {
        out.insert(ScalingMetric::NumRecordsInPerSecond, in_per_second.sum);
    }
    out.iter().map(|(m, v)| (m, round_metric(v))).collect()
}

/// The job-wide metrics (reference `ScalingMetrics.computeGlobalMetrics`): `NUM_TASK_SLOTS_USED`
/// (when the slot metrics are known), `GC_PRESSURE` (max GC ms/s / 1000, when GC metrics exist),
/// `HEAP_MEMORY_USED` and `HEAP_MAX_USAGE_RATIO` (max used, max used / max heap; only with both),
/// `MANAGED_MEMORY_USED` and `METASPACE_MEMORY_USED` (max). Not rounded, as in the reference.
pub fn global_metrics(task_slots: Option<TaskSlotMetrics>, task_managers: &FlinkMetrics) -> MetricValues {
    let mut out = MetricValues::new();
    if let Some(slots) = task_slots {
        out.insert(ScalingMetric::NumTaskSlotsUsed, slots.total - slots.available);
    }
    let tm = |m: FlinkMetric| task_managers.get(&m);
    if let Some(gc) = tm(FlinkMetric::TotalGcTimePerSec) {
        out.insert(ScalingMetric::GcPressure, gc.max / 1000.0);
    }
    if let (Some(heap_max), Some(heap_used)) = (tm(FlinkMetric::HeapMemoryMax), tm(FlinkMetric::HeapMemoryUsed)) {
        out.insert(ScalingMetric::HeapMemoryUsed, heap_used.max);
        out.insert(ScalingMetric::HeapMaxUsageRatio, heap_used.max / heap_max.max);
    }
    if let Some(managed) = tm(FlinkMetric::ManagedMemoryUsed) {
        out.insert(ScalingMetric::ManagedMemoryUsed, managed.max);
    }
    if let Some(metaspace) = tm(FlinkMetric::MetaspaceMemoryUsed) {
        out.insert(ScalingMetric::MetaspaceMemoryUsed, metaspace.max);
    }
    out
}

/// Everything one collection gathered from Flink, before conversion (serde: the recording format).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RawJobMetrics {
    /// Aggregated subtask metrics per (non-finished) vertex.
    pub vertex_metrics: BTreeMap<VertexId, FlinkMetrics>,
    /// IO counters per vertex from the job details.
    pub io_metrics: BTreeMap<VertexId, IoMetrics>,
    /// The job manager's slot metrics, if it reported them.
    pub task_slots: Option<TaskSlotMetrics>,
    /// The task managers' aggregated memory and GC metrics.
    pub task_manager_metrics: FlinkMetrics,
}

/// Converts one collection into a [`CollectedMetrics`] snapshot (reference
/// `ScalingMetricCollector.convertToScalingMetrics`). Every vertex of `topology` gets metrics;
/// FINISHED vertices get [`finished_vertex_metrics`] and [`IoMetrics::FINISHED`] whatever was
/// collected, and a `BACKPRESSURE` of 0. `history` is the stored window *of the current job run* (the caller drops samples taken
/// before the job last started): sources that are not catching up carry its `OBSERVED_TPR` average
/// forward.
pub fn convert_to_scaling_metrics(
    topology: &JobTopology,
    raw: &RawJobMetrics,
    config: &CollectionConfig,
    history: &MetricHistory,
) -> CollectedMetrics {
    let finished = finished_vertex_metrics();
    let empty = FlinkMetrics::new();
    let mut vertex_metrics = BTreeMap::new();
    for vertex in topology.vertices() {
        let (flink, io) = if vertex.finished {
            (&finished, IoMetrics::FINISHED)
        } else {
            (
                raw.vertex_metrics.get(&vertex.id).unwrap_or(&empty),
                raw.io_metrics.get(&vertex.id).copied().unwrap_or_default(),
            )
        };
        let id = vertex.id.as_str();
        let history_average = || {
            metric_average(
                history,
                Some(id),
                ScalingMetric::ObservedTpr,
                config.observed_tpr_min_observations,
            )
        };
        let mut metrics = vertex_scaling_metrics(flink, &io, vertex.is_source(), config, history_average);
        if vertex.finished {
            // A finished vertex sends nothing, so nothing holds it back.
            metrics.insert(ScalingMetric::Backpressure, 0.0);
        }
        vertex_metrics.insert(vertex.id.clone(), metrics);
    }
    CollectedMetrics {
        vertex_metrics,
        global_metrics: global_metrics(raw.task_slots, &raw.task_manager_metrics),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EdgeSpec, ShipStrategy, VertexSpec};
    use chrono::{TimeZone, Utc};

    const PREV_TPR: f64 = 123.0;

    fn agg(min: f64, max: f64, avg: f64, sum: f64) -> AggregatedMetric {
        AggregatedMetric {
            min,
            max,
            avg,
            sum,
            skew: f64::NAN,
        }
    }

    fn flink(entries: &[(FlinkMetric, AggregatedMetric)]) -> FlinkMetrics {
        entries.iter().copied().collect()
    }

    fn io(records_in: u64, records_out: u64, busy: f64) -> IoMetrics {
        IoMetrics {
            num_records_in: records_in,
            num_records_out: records_out,
            accumulated_busy_time: busy,
        }
    }

    /// Observed TPR of a source with `lag`, input `rate`, average backpressure `bp`, default config.
    fn source_tpr(lag: f64, rate: f64, bp: f64) -> Option<f64> {
        let f = flink(&[
            (
                FlinkMetric::BackpressureTimePerSec,
                agg(f64::NAN, f64::NAN, bp, f64::NAN),
            ),
            (
                FlinkMetric::SourceTaskNumRecordsOutPerSec,
                AggregatedMetric::of_sum(rate),
            ),
        ]);
        let r = source_num_records_in_per_second(&f);
        observed_tpr(&f, lag, r, Duration::from_secs(30), || PREV_TPR)
    }

    #[test]
    fn observed_tpr_with_backpressure_matches_hand_computed_values() {
        assert!(compute_observed_tpr_with_backpressure(100.0, 1000.0).is_nan());
        assert_eq!(compute_observed_tpr_with_backpressure(500.0, 0.0), 500.0);
        // 250 / (1 - 0.75) = 1000
        assert_eq!(compute_observed_tpr_with_backpressure(250.0, 750.0), 1000.0);
    }

    #[test]
    fn observed_tpr_is_measured_only_while_catching_up() {
        // lag 500 < 30 s * 1000/s: not catching up, the history's average is carried forward.
        assert_eq!(source_tpr(500.0, 1000.0, 500.0), Some(PREV_TPR));
        assert_eq!(source_tpr(0.0, 1000.0, 500.0), Some(PREV_TPR));
        // lag 1e7 >= 30 * 900: 900 / (1 - 0.1) = 1000.
        assert_eq!(source_tpr(1e7, 900.0, 100.0), Some(900.0 / 0.9));
        assert_eq!(source_tpr(1e7, 1000.0, 200.0), Some(1000.0 / 0.8));
        // Exactly at the threshold counts as catching up: 30 * 100 = 3000.
        assert_eq!(source_tpr(3000.0, 100.0, 500.0), Some(200.0));
        assert_eq!(source_tpr(2999.0, 100.0, 500.0), Some(PREV_TPR));
        // Fully backpressured while catching up: NaN falls back to the history.
        assert_eq!(source_tpr(1e7, 1000.0, 1000.0), Some(PREV_TPR));
        // No input: infinite capacity (allows scaling down).
        assert_eq!(source_tpr(500.0, 0.0, 100.0), Some(f64::INFINITY));
    }

    #[test]
    fn observed_tpr_is_absent_without_any_input_rate() {
        let f = flink(&[(FlinkMetric::BusyTimePerSec, agg(0.0, 10.0, 5.0, 10.0))]);
        assert!(source_num_records_in_per_second(&f).is_nan());
        let m = vertex_scaling_metrics(&f, &io(0, 0, 0.0), true, &CollectionConfig::default(), || PREV_TPR);
        assert!(!m.contains(ScalingMetric::ObservedTpr));
    }

    #[test]
    fn observed_tpr_uses_whole_seconds_of_the_lag_threshold() {
        let f = flink(&[
            (FlinkMetric::BackpressureTimePerSec, agg(0.0, 0.0, 500.0, 0.0)),
            (
                FlinkMetric::SourceTaskNumRecordsInPerSec,
                AggregatedMetric::of_sum(100.0),
            ),
        ]);
        // 1.9 s counts as 1 s: lag 100 >= 1 * 100 -> catching up, 100 / 0.5 = 200.
        let tpr = observed_tpr(&f, 100.0, 100.0, Duration::from_millis(1900), || PREV_TPR);
        assert_eq!(tpr, Some(200.0));
    }

    #[test]
    fn load_follows_the_busy_time_aggregator() {
        let f = flink(&[(FlinkMetric::BusyTimePerSec, agg(100.0, 200.0, 150.0, f64::NAN))]);
        assert_eq!(load(&f, BusyTimeAggregator::Max), 0.2);
        assert_eq!(load(&f, BusyTimeAggregator::Min), 0.1);
        assert_eq!(load(&f, BusyTimeAggregator::Avg), 0.15);
        let negative = flink(&[(FlinkMetric::BusyTimePerSec, agg(-5.0, -5.0, -5.0, -5.0))]);
        assert_eq!(load(&negative, BusyTimeAggregator::Max), 0.0);
        let legacy = flink(&[(FlinkMetric::BusyTimePerSec, AggregatedMetric::of_sum(f64::NAN))]);
        assert!(load(&legacy, BusyTimeAggregator::Max).is_nan());
        assert!(load(&FlinkMetrics::new(), BusyTimeAggregator::Avg).is_nan());
    }

    #[test]
    fn num_records_in_falls_back_from_io_to_source_in_to_source_out() {
        let with_both = flink(&[
            (FlinkMetric::SourceTaskNumRecordsIn, AggregatedMetric::of_sum(70.0)),
            (FlinkMetric::SourceTaskNumRecordsOut, AggregatedMetric::of_sum(90.0)),
        ]);
        // The IO counter wins when it is non-zero.
        assert_eq!(num_records_in(&with_both, &io(50, 0, 0.0), true), 50.0);
        // A source reading 0 records uses its operator's numRecordsIn.
        assert_eq!(num_records_in(&with_both, &io(0, 0, 0.0), true), 70.0);
        // ... and numRecordsOut when numRecordsIn is 0 too.
        let zero_in = flink(&[
            (FlinkMetric::SourceTaskNumRecordsIn, AggregatedMetric::of_sum(0.0)),
            (FlinkMetric::SourceTaskNumRecordsOut, AggregatedMetric::of_sum(90.0)),
        ]);
        assert_eq!(num_records_in(&zero_in, &io(0, 0, 0.0), true), 90.0);
        // Non-sources never fall back.
        assert_eq!(num_records_in(&with_both, &io(0, 0, 0.0), false), 0.0);
        // Nothing at all: the IO zero stays.
        assert_eq!(num_records_in(&FlinkMetrics::new(), &io(0, 0, 0.0), true), 0.0);
    }

    #[test]
    fn vertex_metrics_of_a_source_and_an_operator() {
        let config = CollectionConfig::default();
        let source = flink(&[
            (FlinkMetric::BusyTimePerSec, agg(f64::NAN, 900.0, f64::NAN, f64::NAN)),
            (
                FlinkMetric::SourceTaskNumRecordsInPerSec,
                AggregatedMetric::of_sum(1000.0),
            ),
        ]);
        let m = vertex_scaling_metrics(&source, &io(1, 2, 3.0), true, &config, || PREV_TPR);
        let expected = MetricValues::from_iter([
            (ScalingMetric::Lag, 0.0),
            (ScalingMetric::Load, 0.9),
            (ScalingMetric::AccumulatedBusyTime, 3.0),
            (ScalingMetric::NumRecordsIn, 1.0),
            (ScalingMetric::NumRecordsOut, 2.0),
            (ScalingMetric::ObservedTpr, PREV_TPR),
        ]);
        assert_eq!(m, expected);

        let operator = flink(&[
            (FlinkMetric::BusyTimePerSec, agg(f64::NAN, 100.0, f64::NAN, f64::NAN)),
            (FlinkMetric::NumRecordsInPerSec, agg(400.0, 600.0, 500.0, 1000.0)),
        ]);
        let m = vertex_scaling_metrics(&operator, &io(1, 2, 3.0), false, &config, || panic!("not a source"));
        let expected = MetricValues::from_iter([
            (ScalingMetric::Load, 0.1),
            (ScalingMetric::AccumulatedBusyTime, 3.0),
            (ScalingMetric::NumRecordsIn, 1.0),
            (ScalingMetric::NumRecordsOut, 2.0),
            (ScalingMetric::NumRecordsInPerSecond, 1000.0),
        ]);
        assert_eq!(m, expected);
    }

    #[test]
    fn vertex_metrics_are_rounded_to_three_decimals() {
        let f = flink(&[
            (FlinkMetric::BusyTimePerSec, agg(0.0, 123.4567, 0.0, 0.0)),
            (FlinkMetric::NumRecordsInPerSec, AggregatedMetric::of_sum(995.8456)),
        ]);
        let m = vertex_scaling_metrics(&f, &io(0, 0, 0.0004), false, &CollectionConfig::default(), || 0.0);
        // 123.4567 / 1000 = 0.1234567 -> 0.123; 995.8456 -> 995.846; 0.0004 would round to 0: kept.
        assert_eq!(m.get(ScalingMetric::Load), Some(0.123));
        assert_eq!(m.get(ScalingMetric::NumRecordsInPerSecond), Some(995.846));
        assert_eq!(m.get(ScalingMetric::AccumulatedBusyTime), Some(0.0004));
    }

    #[test]
    fn backpressure_is_collected_for_every_vertex_with_the_load_aggregator() {
        // Subtasks backpressured 100, 800 and 450 ms/s: MAX 0.8, MIN 0.1, AVG 0.45.
        let bp = agg(100.0, 800.0, 450.0, 1350.0);
        let f = flink(&[
            (FlinkMetric::BusyTimePerSec, agg(50.0, 900.0, 400.0, 1200.0)),
            (FlinkMetric::BackpressureTimePerSec, bp),
        ]);
        for (aggregator, expected_load, expected_bp) in [
            (BusyTimeAggregator::Max, 0.9, 0.8),
            (BusyTimeAggregator::Min, 0.05, 0.1),
            (BusyTimeAggregator::Avg, 0.4, 0.45),
        ] {
            let config = CollectionConfig {
                busy_time_aggregator: aggregator,
                ..CollectionConfig::default()
            };
            for is_source in [true, false] {
                let m = vertex_scaling_metrics(&f, &io(0, 0, 0.0), is_source, &config, || 0.0);
                assert_eq!(m.get(ScalingMetric::Load), Some(expected_load), "{aggregator:?}");
                assert_eq!(m.get(ScalingMetric::Backpressure), Some(expected_bp), "{aggregator:?}");
            }
        }
        // 333.3336 ms/s -> 0.3333336 -> rounded as every collected metric: 0.333.
        let odd = flink(&[(FlinkMetric::BackpressureTimePerSec, agg(0.0, 333.3336, 0.0, 0.0))]);
        let m = vertex_scaling_metrics(&odd, &io(0, 0, 0.0), false, &CollectionConfig::default(), || 0.0);
        assert_eq!(m.get(ScalingMetric::Backpressure), Some(0.333));
        // Negative is clamped to 0, NaN stays NaN, not collected is absent.
        let negative = flink(&[(FlinkMetric::BackpressureTimePerSec, agg(0.0, -5.0, 0.0, 0.0))]);
        assert_eq!(backpressure(&negative, BusyTimeAggregator::Max), Some(0.0));
        let nan = flink(&[(FlinkMetric::BackpressureTimePerSec, AggregatedMetric::NAN)]);
        assert!(backpressure(&nan, BusyTimeAggregator::Max).is_some_and(f64::is_nan));
        let none = flink(&[(FlinkMetric::BusyTimePerSec, agg(0.0, 5.0, 0.0, 0.0))]);
        let m = vertex_scaling_metrics(&none, &io(0, 0, 0.0), false, &CollectionConfig::default(), || 0.0);
        assert!(!m.contains(ScalingMetric::Backpressure));
    }

    #[test]
    fn several_pending_records_metrics_sum_into_the_lag() {
        let a = agg(1.0, 3.0, 2.0, 4.0);
        let b = agg(0.0, 10.0, 5.0, 20.0);
        let f = flink(&[(FlinkMetric::PendingRecords, a.merge(&b))]);
        assert_eq!(lag(&f), 24.0);
        assert_eq!(lag(&FlinkMetrics::new()), 0.0);
    }

    #[test]
    fn merge_propagates_nan_like_java() {
        let m = agg(1.0, 2.0, 1.5, 3.0).merge(&AggregatedMetric::NAN);
        assert!(m.min.is_nan() && m.max.is_nan() && m.sum.is_nan() && m.avg.is_nan());
    }

    #[test]
    fn global_metrics_need_both_heap_values_and_report_maxima() {
        assert!(global_metrics(None, &FlinkMetrics::new()).is_empty());
        let heap_only = flink(&[(FlinkMetric::HeapMemoryUsed, agg(0.0, 100.0, 0.0, 0.0))]);
        assert!(global_metrics(None, &heap_only).is_empty());

        let tm = flink(&[
            (FlinkMetric::HeapMemoryUsed, agg(50.0, 100.0, 75.0, 150.0)),
            (FlinkMetric::HeapMemoryMax, agg(200.0, 200.0, 200.0, 400.0)),
            (FlinkMetric::ManagedMemoryUsed, agg(123.0, 133.0, 128.0, 256.0)),
            (FlinkMetric::MetaspaceMemoryUsed, agg(0.0, 22.0, 11.0, 22.0)),
            (FlinkMetric::TotalGcTimePerSec, agg(1.0, 36.5, 3.0, 40.0)),
        ]);
        let slots = TaskSlotMetrics {
            total: 8.0,
            available: 7.0,
        };
        let g = global_metrics(Some(slots), &tm);
        let expected = MetricValues::from_iter([
            (ScalingMetric::NumTaskSlotsUsed, 1.0),
            (ScalingMetric::GcPressure, 0.0365),
            (ScalingMetric::HeapMemoryUsed, 100.0),
            (ScalingMetric::HeapMaxUsageRatio, 0.5),
            (ScalingMetric::ManagedMemoryUsed, 133.0),
            (ScalingMetric::MetaspaceMemoryUsed, 22.0),
        ]);
        assert_eq!(g, expected);
    }

    fn source_sink_topology(sink_finished: bool, source_finished: bool) -> JobTopology {
        let mut src = VertexSpec::new("src", 1, 128);
        src.finished = source_finished;
        let mut sink = VertexSpec::new("sink", 2, 128);
        sink.finished = sink_finished;
        JobTopology::new(
            vec![src, sink],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Rebalance)],
        )
        .expect("valid topology")
    }

    #[test]
    fn conversion_gives_finished_vertices_zeros_and_infinite_observed_tpr() {
        let topology = source_sink_topology(false, true);
        let mut raw = RawJobMetrics::default();
        // Whatever was collected for a finished vertex is ignored.
        raw.io_metrics.insert("src".into(), io(10, 20, 30.0));
        raw.vertex_metrics.insert(
            "sink".into(),
            flink(&[(FlinkMetric::BusyTimePerSec, agg(0.0, 500.0, 250.0, 500.0))]),
        );
        raw.io_metrics.insert("sink".into(), io(100, 0, 1000.0));
        let collected =
            convert_to_scaling_metrics(&topology, &raw, &CollectionConfig::default(), &MetricHistory::new());
        let src = collected.vertex("src").expect("source metrics");
        assert_eq!(src.get(ScalingMetric::Lag), Some(0.0));
        assert_eq!(src.get(ScalingMetric::Load), Some(0.0));
        assert_eq!(src.get(ScalingMetric::NumRecordsIn), Some(0.0));
        assert_eq!(src.get(ScalingMetric::NumRecordsOut), Some(0.0));
        assert_eq!(src.get(ScalingMetric::AccumulatedBusyTime), Some(0.0));
        assert_eq!(src.get(ScalingMetric::ObservedTpr), Some(f64::INFINITY));
        assert_eq!(src.get(ScalingMetric::Backpressure), Some(0.0));
        let sink = collected.vertex("sink").expect("sink metrics");
        assert!(
            !sink.contains(ScalingMetric::Backpressure),
            "not collected for the sink"
        );
        assert_eq!(sink.get(ScalingMetric::Load), Some(0.5));
        assert_eq!(sink.get(ScalingMetric::NumRecordsIn), Some(100.0));
        assert!(!sink.contains(ScalingMetric::NumRecordsInPerSecond));
    }

    #[test]
    fn conversion_carries_the_history_average_of_observed_tpr() {
        let topology = source_sink_topology(false, false);
        let at = |s: i64| Utc.timestamp_opt(s, 0).single().expect("valid time");
        let sample = |tpr: f64| CollectedMetrics {
            vertex_metrics: [(
                "src".into(),
                MetricValues::from_iter([(ScalingMetric::ObservedTpr, tpr)]),
            )]
            .into(),
            ..Default::default()
        };
        let mut raw = RawJobMetrics::default();
        raw.vertex_metrics.insert(
            "src".into(),
            flink(&[
                (FlinkMetric::BusyTimePerSec, agg(0.0, 10.0, 5.0, 10.0)),
                (FlinkMetric::BackpressureTimePerSec, agg(0.0, 0.0, 0.0, 0.0)),
                (
                    FlinkMetric::SourceTaskNumRecordsInPerSec,
                    AggregatedMetric::of_sum(100.0),
                ),
            ]),
        );
        let config = CollectionConfig::default();

        // One observation is below min-observations (2): NaN.
        let one: MetricHistory = [(at(0), sample(300.0))].into_iter().collect();
        let c = convert_to_scaling_metrics(&topology, &raw, &config, &one);
        assert!(
            c.vertex("src")
                .and_then(|m| m.get(ScalingMetric::ObservedTpr))
                .is_some_and(f64::is_nan)
        );

        // Two observations (300, 500): average 400.
        let two: MetricHistory = [(at(0), sample(300.0)), (at(10), sample(500.0))].into_iter().collect();
        let c = convert_to_scaling_metrics(&topology, &raw, &config, &two);
        assert_eq!(
            c.vertex("src").and_then(|m| m.get(ScalingMetric::ObservedTpr)),
            Some(400.0)
        );
    }

    #[test]
    fn flink_metric_names_are_recognised() {
        let names = [
            "busyTimeMsPerSecond",
            "Source__datagen.numRecordsInPerSecond",
            "Source__datagen.numRecordsIn",
            "Source__datagen.numRecordsOut",
            "numRecordsIn",
            "a.pendingRecords",
            "b.pendingRecords",
        ];
        assert_eq!(
            FlinkMetric::SourceTaskNumRecordsIn.find_any(names),
            Some("Source__datagen.numRecordsIn")
        );
        assert_eq!(
            FlinkMetric::PendingRecords.find_all(names),
            vec!["a.pendingRecords", "b.pendingRecords"]
        );
        assert_eq!(FlinkMetric::NumRecordsInPerSec.find_any(names), None);
        for m in FlinkMetric::ALL {
            assert!(FlinkMetric::ALL.iter().filter(|o| **o == m).count() == 1);
        }
    }
}
