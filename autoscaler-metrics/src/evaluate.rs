//! Evaluation of a metric window: true processing rate, target and catch-up data rates, load and
//! the scale-up / scale-down rate thresholds of every vertex, plus the job-wide metrics.
//!
//! This is the reference's `ScalingMetricEvaluator.computeEvaluatedMetrics` (anchor-features §2.3),
//! without custom evaluator plugins. The history is read in one pass: every snapshot's vertex map is
//! merged once against the topology's ids sorted the same way, feeding per-vertex rate and average
//! accumulators, so no per-sample map lookup happens.

use crate::history_stats::{AverageAccumulator, RateAccumulator};
use crate::{
    BusyTimeAggregator, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, MetricHistory,
    MetricValues, MetricsError, ScalingMetric, VertexId, VertexInfo,
};
use std::time::Duration;

/// The options the evaluation reads (`job.autoscaler.*` keys), already resolved from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluationConfig {
    /// `metrics.busy-time.aggregator`: how per-subtask busy time was aggregated.
    pub busy_time_aggregator: BusyTimeAggregator,
    /// `utilization.target`.
    pub utilization_target: f64,
    /// Upper utilization bound: `utilization.max`, or target + `target.utilization.boundary`.
    pub utilization_max: f64,
    /// Lower utilization bound: `utilization.min`, or target − `target.utilization.boundary`.
    pub utilization_min: f64,
    /// `catch-up.duration` (used in whole seconds).
    pub catch_up_duration: Duration,
    /// The cycle's restart time (`restart.time` or the tracked maximum; used in whole seconds).
    pub restart_time: Duration,
    /// `backlog-processing.lag-threshold` (used in whole seconds).
    pub backlog_lag_threshold: Duration,
    /// `observed-true-processing-rate.switch-threshold`.
    pub observed_tpr_switch_threshold: f64,
    /// `observed-true-processing-rate.min-observations`.
    pub observed_tpr_min_observations: usize,
}

impl Default for EvaluationConfig {
    /// The reference defaults: target 0.7 with boundary 0.3 (bounds 1.0 and 0.4), catch-up 30 min,
    /// restart 5 min, backlog lag threshold 5 min, switch threshold 0.15, 2 observations, MAX busy time.
    fn default() -> Self {
        Self {
            busy_time_aggregator: BusyTimeAggregator::Max,
            utilization_target: 0.7,
            utilization_max: 0.7 + 0.3,
            utilization_min: 0.7 - 0.3,
            catch_up_duration: Duration::from_secs(30 * 60),
            restart_time: Duration::from_secs(5 * 60),
            backlog_lag_threshold: Duration::from_secs(5 * 60),
            observed_tpr_switch_threshold: 0.15,
            observed_tpr_min_observations: 2,
        }
    }
}

/// Evaluates the metric window `history` of the job `topology` (reference:
/// `ScalingMetricEvaluator.computeEvaluatedMetrics`, anchor-features §2.3).
///
/// Every vertex, finished or not, gets `TARGET_DATA_RATE` (average), `CATCH_UP_DATA_RATE` (current),
/// `TRUE_PROCESSING_RATE` and `LOAD` (average), `LAG` (current, only when the latest snapshot has it),
/// `PARALLELISM`, `MAX_PARALLELISM`, `NUM_SOURCE_PARTITIONS` and both rate thresholds (current). The
/// job-wide result holds `GC_PRESSURE` and `NUM_TASK_SLOTS_USED` (latest) and the heap, managed
/// memory and metaspace metrics (latest and window mean). Values are rounded as the reference stores
/// them ([`crate::round_metric`]).
///
/// # Errors
/// [`MetricsError::MissingIngestionRate`] when a source's input rate plus lag growth is NaN (fewer
/// than two `NUM_RECORDS_IN` or `LAG` samples), as the reference's
/// "Cannot evaluate metrics without ingestion rate information".
pub fn evaluate(
    topology: &JobTopology,
    history: &MetricHistory,
    config: &EvaluationConfig,
) -> Result<EvaluatedMetrics, MetricsError> {
    let vertices = topology.vertices();
    let window = Window::read(topology, history);
    let processing_backlog = is_processing_backlog(topology, &window, config);

    let mut evaluated = vec![EvaluatedVertexMetrics::new(); vertices.len()];
    for &v in topology.topological_order() {
        evaluated[v] = evaluate_vertex(topology, &window, &evaluated, v, processing_backlog, config)?;
    }

    Ok(EvaluatedMetrics {
        vertices: window
            .id_order
            .iter()
            .map(|&v| (vertices[v].id.clone(), evaluated[v]))
            .collect(),
        global: window.global.evaluate(),
    })
}

/// The scale-up and scale-down rate thresholds of a vertex from its evaluated `TARGET_DATA_RATE`
/// (average) and `CATCH_UP_DATA_RATE` (current), as `(scale_up, scale_down)`
/// (reference: `computeProcessingRateThresholds`, anchor-features §2.3.5).
///
/// While the job processes backlog the bounds are 1.0 and 0.0, so the scale-down threshold is +Inf
/// and nothing scales down; otherwise they are [`EvaluationConfig::utilization_max`] and
/// [`EvaluationConfig::utilization_min`]. Only the scale-down threshold includes the restart allowance.
///
/// ```
/// use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, EvaluationConfig, ScalingMetric};
/// use autoscaler_metrics::compute_processing_rate_thresholds;
/// use std::time::Duration;
///
/// let mut metrics = EvaluatedVertexMetrics::new();
/// metrics.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(700.0));
/// metrics.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(350.0));
/// let config = EvaluationConfig {
///     utilization_max: 0.9,
///     utilization_min: 0.7,
///     catch_up_duration: Duration::from_secs(2),
///     restart_time: Duration::from_secs(1),
///     ..EvaluationConfig::default()
/// };
/// assert_eq!(compute_processing_rate_thresholds(&metrics, &config, false), (1128.0, 1700.0));
/// assert_eq!(compute_processing_rate_thresholds(&metrics, &config, true), (1050.0, f64::INFINITY));
/// ```
pub fn compute_processing_rate_thresholds(
    metrics: &EvaluatedVertexMetrics,
    config: &EvaluationConfig,
    processing_backlog: bool,
) -> (f64, f64) {
    // Processing backlog: allow full utilization and never scale down, so as not to add lag.
    let (upper, lower) = if processing_backlog {
        (1.0, 0.0)
    } else {
        (config.utilization_max, config.utilization_min)
    };
    (
        target_processing_capacity(metrics, config, upper, false),
        target_processing_capacity(metrics, config, lower, true),
    )
}

/// The processing rate a vertex needs to run at `target_utilization`: catch-up rate + (optionally)
/// restart catch-up rate + target rate / utilization, rounded half up to an integer
/// (reference: `AutoScalerUtils.getTargetProcessingCapacity`).
///
/// NaN when `CATCH_UP_DATA_RATE.current` or `TARGET_DATA_RATE.average` is NaN (or absent). The
/// utilization is clamped to `[0, 1]`; 0 gives +Inf. The restart allowance is
/// `target * restart_s / catch_up_s`, counted only `with_restart` and a non-zero catch-up duration.
/// Durations count in whole seconds (`Duration.toSeconds`).
pub fn target_processing_capacity(
    metrics: &EvaluatedVertexMetrics,
    config: &EvaluationConfig,
    target_utilization: f64,
    with_restart: bool,
) -> f64 {
    let catch_up_rate = metrics.get_or_absent(ScalingMetric::CatchUpDataRate).current;
    if catch_up_rate.is_nan() {
        return f64::NAN;
    }
    let catch_up_secs = config.catch_up_duration.as_secs() as f64;
    let utilization = java_min(1.0, java_max(0.0, target_utilization));
    let target_rate = metrics.get_or_absent(ScalingMetric::TargetDataRate).average;
    if target_rate.is_nan() {
        return f64::NAN;
    }
    if utilization == 0.0 {
        return f64::INFINITY;
    }
    let restart_catch_up_rate = if !with_restart || catch_up_secs == 0.0 {
        0.0
    } else {
        target_rate * config.restart_time.as_secs() as f64 / catch_up_secs
    };
    java_round(catch_up_rate + restart_catch_up_rate + target_rate / utilization)
}

/// Whether two vertex ids are equal: the same allocation (ids cloned from one another), or the same
/// bytes compared eight at a time (ids are short; this avoids a `memcmp` call per snapshot entry).
#[inline]
fn same_id(a: &VertexId, b: &VertexId) -> bool {
    let (a, b) = (a.as_str().as_bytes(), b.as_str().as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if std::ptr::eq(a, b) {
        return true;
    }
    let (mut words_a, mut words_b) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut words_a).zip(&mut words_b) {
        if x.first_chunk::<8>().map(|w| u64::from_ne_bytes(*w)) != y.first_chunk::<8>().map(|w| u64::from_ne_bytes(*w))
        {
            return false;
        }
    }
    words_a.remainder().iter().zip(words_b.remainder()).all(|(x, y)| x == y)
}

/// Everything the evaluation reads from the history, gathered in one pass.
struct Window<'h> {
    vertices: Vec<VertexSeries<'h>>,
    global: GlobalSeries<'h>,
    /// Vertex indices, in id order when the latest snapshot revealed it.
    id_order: Vec<usize>,
}

/// Window statistics of one vertex's collected metrics.
#[derive(Default)]
struct VertexSeries<'h> {
    records_in: RateAccumulator,
    records_out: RateAccumulator,
    lag: RateAccumulator,
    busy_time: RateAccumulator,
    load: AverageAccumulator,
    records_in_per_second: AverageAccumulator,
    observed_tpr: AverageAccumulator,
    /// The vertex's metrics in the latest snapshot, if it has any there.
    latest: Option<&'h MetricValues>,
}

/// The job-wide metrics whose window mean is reported (anchor-features §2.3.6).
const GLOBAL_AVERAGED: [ScalingMetric; 4] = [
    ScalingMetric::HeapMaxUsageRatio,
    ScalingMetric::HeapMemoryUsed,
    ScalingMetric::ManagedMemoryUsed,
    ScalingMetric::MetaspaceMemoryUsed,
];

/// Window statistics of the job-wide metrics.
#[derive(Default)]
struct GlobalSeries<'h> {
    averages: [AverageAccumulator; GLOBAL_AVERAGED.len()],
    latest: Option<&'h MetricValues>,
}

impl<'h> Window<'h> {
    fn read(topology: &JobTopology, history: &'h MetricHistory) -> Self {
        let vertex_count = topology.len();
        let mut series: Vec<VertexSeries<'h>> = (0..vertex_count).map(|_| VertexSeries::default()).collect();
        let mut global = GlobalSeries::default();
        // Snapshots almost always list the same vertices: the vertex at position k of a snapshot's
        // (sorted) map is resolved by comparing its id with position k of the previous snapshot, and
        // looked up in the topology only when that differs. Ids unknown to the topology are ignored;
        // vertices missing from a snapshot read as NaN.
        let mut layout: Vec<(&'h VertexId, Option<usize>)> = Vec::with_capacity(vertex_count);
        let last = history.len().saturating_sub(1);
        for (i, (at, snapshot)) in history.iter().enumerate() {
            let at = *at;
            for (position, (id, values)) in snapshot.vertex_metrics.iter().enumerate() {
                let vertex = match layout.get(position) {
                    Some(&(previous, vertex)) if same_id(previous, id) => vertex,
                    _ => {
                        let vertex = topology.index_of(id.as_str());
                        if position < layout.len() {
                            layout[position] = (id, vertex);
                        } else {
                            layout.push((id, vertex));
                        }
                        vertex
                    }
                };
                let Some(v) = vertex else { continue };
                let s = &mut series[v];
                s.records_in.push(at, values.get_or_absent(ScalingMetric::NumRecordsIn));
                s.records_out
                    .push(at, values.get_or_absent(ScalingMetric::NumRecordsOut));
                s.lag.push(at, values.get_or_absent(ScalingMetric::Lag));
                s.busy_time
                    .push(at, values.get_or_absent(ScalingMetric::AccumulatedBusyTime));
                s.load.push(values.get_or_absent(ScalingMetric::Load));
                s.records_in_per_second
                    .push(values.get_or_absent(ScalingMetric::NumRecordsInPerSecond));
                s.observed_tpr.push(values.get_or_absent(ScalingMetric::ObservedTpr));
                if i == last {
                    s.latest = Some(values);
                }
            }
            layout.truncate(snapshot.vertex_metrics.len());
            for (acc, metric) in global.averages.iter_mut().zip(GLOBAL_AVERAGED) {
                acc.push(snapshot.global_metrics.get_or_absent(metric));
            }
            if i == last {
                global.latest = Some(&snapshot.global_metrics);
            }
        }
        // The latest snapshot's layout is in id order; when it covers every vertex it is the order
        // of the result map for free.
        let mut id_order: Vec<usize> = layout.iter().filter_map(|(_, v)| *v).collect();
        if id_order.len() != vertex_count {
            id_order = (0..vertex_count).collect();
        }
        Self {
            vertices: series,
            global,
            id_order,
        }
    }

    fn input_rate(&self, v: usize) -> f64 {
        self.vertices[v].records_in.rate()
    }

    fn output_rate(&self, v: usize) -> f64 {
        self.vertices[v].records_out.rate()
    }

    /// The latest collected value of `metric` for vertex `v`, if present.
    fn latest(&self, v: usize, metric: ScalingMetric) -> Option<f64> {
        self.vertices[v].latest.and_then(|m| m.get(metric))
    }
}

impl GlobalSeries<'_> {
    /// Reference `evaluateGlobalMetrics`: GC pressure and task slots as latest values (NaN when
    /// absent, always present as keys), memory metrics as latest plus window mean.
    fn evaluate(&self) -> EvaluatedVertexMetrics {
        let latest = |metric| self.latest.map_or(f64::NAN, |m| m.get_or_absent(metric));
        let mut out = EvaluatedVertexMetrics::new();
        out.insert(
            ScalingMetric::GcPressure,
            EvaluatedScalingMetric::of(latest(ScalingMetric::GcPressure)),
        );
        for (acc, metric) in self.averages.iter().zip(GLOBAL_AVERAGED) {
            out.insert(metric, EvaluatedScalingMetric::new(latest(metric), acc.average(1)));
        }
        out.insert(
            ScalingMetric::NumTaskSlotsUsed,
            EvaluatedScalingMetric::of(latest(ScalingMetric::NumTaskSlotsUsed)),
        );
        out
    }
}

/// Reference `isProcessingBacklog` (anchor-features §2.3.2): some source's latest lag (0 when
/// absent) divided by its input rate exceeds the backlog lag threshold in whole seconds. A NaN rate
/// never counts; a zero rate with positive lag is +Inf and does.
fn is_processing_backlog(topology: &JobTopology, window: &Window<'_>, config: &EvaluationConfig) -> bool {
    let threshold_secs = config.backlog_lag_threshold.as_secs() as f64;
    topology.sources().any(|v| {
        let lag = window.latest(v, ScalingMetric::Lag).unwrap_or(0.0);
        let input_rate = window.input_rate(v);
        !input_rate.is_nan() && lag / input_rate > threshold_secs
    })
}

/// Reference `evaluateMetrics` for one vertex; every input of `v` is already in `evaluated`.
fn evaluate_vertex(
    topology: &JobTopology,
    window: &Window<'_>,
    evaluated: &[EvaluatedVertexMetrics],
    v: usize,
    processing_backlog: bool,
    config: &EvaluationConfig,
) -> Result<EvaluatedVertexMetrics, MetricsError> {
    let info = &topology.vertices()[v];
    let series = &window.vertices[v];
    let mut out = EvaluatedVertexMetrics::new();

    let (target_rate, catch_up_rate) = if info.is_source() {
        source_data_rates(window, v, info, config)?
    } else {
        propagated_data_rates(topology, window, evaluated, v)
    };
    out.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(target_rate));
    out.insert(
        ScalingMetric::CatchUpDataRate,
        EvaluatedScalingMetric::of(catch_up_rate),
    );

    let parallelism = f64::from(info.parallelism.get());
    let busy_time = busy_time_ms_per_second(series, parallelism, config.busy_time_aggregator);
    let busy_time_tpr = tpr_from_busy_time(busy_time, tpr_input_rate(series, config.busy_time_aggregator));
    let observed_tpr = series.observed_tpr.average(config.observed_tpr_min_observations);
    let tpr = select_true_processing_rate(busy_time_tpr, observed_tpr, config.observed_tpr_switch_threshold);
    out.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
    out.insert(ScalingMetric::Load, EvaluatedScalingMetric::avg(busy_time / 1000.0));

    if let Some(lag) = window.latest(v, ScalingMetric::Lag) {
        out.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(lag));
    }
    out.insert(ScalingMetric::Parallelism, EvaluatedScalingMetric::of(parallelism));
    out.insert(
        ScalingMetric::MaxParallelism,
        EvaluatedScalingMetric::of(f64::from(info.max_parallelism.get())),
    );
    out.insert(
        ScalingMetric::NumSourcePartitions,
        EvaluatedScalingMetric::of(f64::from(info.num_source_partitions)),
    );

    // The thresholds read the rounded target and catch-up rates stored above, as the reference does.
    let (scale_up, scale_down) = compute_processing_rate_thresholds(&out, config, processing_backlog);
    out.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of(scale_up),
    );
    out.insert(
        ScalingMetric::ScaleDownRateThreshold,
        EvaluatedScalingMetric::of(scale_down),
    );
    Ok(out)
}

/// A source's (target rate, catch-up rate) (reference `computeTargetDataRate`, source branch):
/// the target is `max(0, rate(NUM_RECORDS_IN) + rate(LAG))`, counting lag growth as unserved input;
/// the catch-up rate drains the latest lag within the catch-up duration.
fn source_data_rates(
    window: &Window<'_>,
    v: usize,
    info: &VertexInfo,
    config: &EvaluationConfig,
) -> Result<(f64, f64), MetricsError> {
    let ingestion_rate = java_max(0.0, window.input_rate(v) + window.vertices[v].lag.rate());
    if ingestion_rate.is_nan() {
        return Err(MetricsError::MissingIngestionRate {
            vertex: info.id.clone(),
        });
    }
    let catch_up_secs = config.catch_up_duration.as_secs() as f64;
    let lag = window.latest(v, ScalingMetric::Lag).unwrap_or(0.0);
    let catch_up_rate = if catch_up_secs == 0.0 { 0.0 } else { lag / catch_up_secs };
    Ok((ingestion_rate, catch_up_rate))
}

/// A non-source's (target rate, catch-up rate): the inputs' evaluated (rounded) rates, each scaled
/// by the edge's output ratio (reference `computeTargetDataRate`, non-source branch).
fn propagated_data_rates(
    topology: &JobTopology,
    window: &Window<'_>,
    evaluated: &[EvaluatedVertexMetrics],
    v: usize,
) -> (f64, f64) {
    let mut target_rate = 0.0;
    let mut catch_up_rate = 0.0;
    for &(u, _) in &topology.vertices()[v].inputs {
        let ratio = edge_output_ratio(topology, window, u, v);
        target_rate += evaluated[u].get_or_absent(ScalingMetric::TargetDataRate).average * ratio;
        catch_up_rate += evaluated[u].get_or_absent(ScalingMetric::CatchUpDataRate).current * ratio;
    }
    (target_rate, catch_up_rate)
}

/// Records sent along `from -> to` per record `from` receives (reference `computeEdgeOutputRatio`).
/// 0 unless both `from`'s input rate and the edge's data rate are positive, so an idle upstream
/// cannot produce an outrageous ratio.
fn edge_output_ratio(topology: &JobTopology, window: &Window<'_>, from: usize, to: usize) -> f64 {
    let input_rate = window.input_rate(from);
    if input_rate > 0.0 {
        let edge_rate = edge_data_rate(topology, window, from, to);
        if edge_rate > 0.0 {
            return edge_rate / input_rate;
        }
    }
    0.0
}

/// Records per second flowing along `from -> to` (reference `computeEdgeDataRate`), from the most
/// to the least reliable estimate:
/// 1. `to` has a single input: `to`'s input rate;
/// 2. every other input of `to` has exactly one output: `to`'s input rate minus their output rates
///    (a NaN output rate falls through to case 3, as in the reference);
/// 3. otherwise `from`'s output rate, which may be shared by several outputs.
fn edge_data_rate(topology: &JobTopology, window: &Window<'_>, from: usize, to: usize) -> f64 {
    let vertices = topology.vertices();
    let inputs = &vertices[to].inputs;
    if inputs.len() == 1 {
        return window.input_rate(to);
    }
    let mut from_other_inputs = 0.0;
    for &(w, _) in inputs {
        if w == from {
            continue;
        }
        if vertices[w].outputs.len() == 1 {
            from_other_inputs += window.output_rate(w);
        } else {
            from_other_inputs = f64::NAN;
            break;
        }
    }
    if !from_other_inputs.is_nan() {
        return window.input_rate(to) - from_other_inputs;
    }
    window.output_rate(from)
}

/// Average busy milliseconds per second of one subtask over the window (reference
/// `computeBusyTimeAvg`): from the accumulated busy-time counter for AVG, else the mean of the
/// collected max/min `LOAD` gauge.
fn busy_time_ms_per_second(series: &VertexSeries<'_>, parallelism: f64, aggregator: BusyTimeAggregator) -> f64 {
    match aggregator {
        BusyTimeAggregator::Avg => series.busy_time.rate() / parallelism,
        BusyTimeAggregator::Max | BusyTimeAggregator::Min => series.load.average(1) * 1000.0,
    }
}

/// The input rate the busy-time TPR divides (reference `computeTprInputRate`): estimated the same
/// way as the busy time, so the counter rate for AVG and the per-second gauge mean (falling back to
/// the counter rate when the gauge mean is NaN or infinite) for MAX/MIN.
fn tpr_input_rate(series: &VertexSeries<'_>, aggregator: BusyTimeAggregator) -> f64 {
    match aggregator {
        BusyTimeAggregator::Avg => series.records_in.rate(),
        BusyTimeAggregator::Max | BusyTimeAggregator::Min => {
            let average = series.records_in_per_second.average(1);
            if average.is_finite() {
                average
            } else {
                series.records_in.rate()
            }
        }
    }
}

/// Records per second at full utilization from busy time (reference `computeTprFromBusyTime`):
/// `input_rate / (busy_ms_per_s / 1000)`; no input means +Inf (infinite capacity until data flows),
/// and zero busy time gives ±Inf by IEEE division.
fn tpr_from_busy_time(busy_ms_per_second: f64, input_rate: f64) -> f64 {
    if input_rate == 0.0 {
        return f64::INFINITY;
    }
    input_rate / (busy_ms_per_second / 1000.0)
}

/// Chooses between the busy-time and the observed true processing rate (reference `selectTprMetric`):
/// busy time unless there is an observed rate and the busy-time rate is unusable (NaN or infinite)
/// or exceeds the observed one by more than the switch threshold.
fn select_true_processing_rate(busy_time_tpr: f64, observed_tpr: f64, switch_threshold: f64) -> f64 {
    if observed_tpr.is_nan() {
        return busy_time_tpr;
    }
    if !busy_time_tpr.is_finite() || busy_time_tpr > observed_tpr * (1.0 + switch_threshold) {
        return observed_tpr;
    }
    busy_time_tpr
}

/// Java `Math.max(a, b)`: NaN if either is NaN, and +0.0 above −0.0.
fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        // Only differs from `a` for (−0.0, +0.0): prefer the positive zero.
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Java `Math.min(a, b)`: NaN if either is NaN, and −0.0 below +0.0.
fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

/// Java `Math.round(double)` widened back to `double`: the closest integer with ties towards +Inf,
/// NaN as 0, and saturation at the `long` range (so +Inf becomes 2^63).
fn java_round(x: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    let floor = x.floor();
    // `x - floor` is exact for every double with a fractional part.
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    // `+ 0.0` turns −0.0 into 0.0: a Java long has no negative zero.
    (rounded + 0.0).clamp(i64::MIN as f64, i64::MAX as f64)
}
