//! Evaluation of a metric window: true processing rate, target and catch-up data rates, load and
//! the scale-up / scale-down rate thresholds of every vertex, plus the job-wide metrics.
//!
//! This is the reference's `ScalingMetricEvaluator.computeEvaluatedMetrics`,
//! without custom evaluator plugins. The history is read in one pass over the snapshots' column
//! digests (dense columns resolved to topology vertices once per distinct vertex list), feeding
//! per-vertex rate and average accumulators, so no per-sample map lookup happens.

use crate::columns::{self, RowAt, column};
use crate::custom_evaluation::CustomEvaluator;
use crate::history_stats::{self, AverageAccumulator};
use crate::java;
use crate::root_cause::VertexSignals;
use crate::{
    BusyTimeAggregator, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, MetricHistory,
    MetricValues, MetricsError, ScalingMetric, VertexId, VertexInfo,
};
use std::collections::BTreeMap;
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
/// `ScalingMetricEvaluator.computeEvaluatedMetrics`).
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
///
/// `custom` (the reference's `FlinkAutoscalerEvaluator` plugin, [`CustomEvaluator`]), when given,
/// is consulted for every vertex right after its built-in evaluation; its answer is merged over the
/// built-in metrics ([`crate::merge_custom_metrics`]) before downstream vertices read them. Pass
/// `None` for the built-in evaluation alone.
pub fn evaluate(
    topology: &JobTopology,
    history: &MetricHistory,
    config: &EvaluationConfig,
    custom: Option<&mut CustomEvaluator<'_>>,
) -> Result<EvaluatedMetrics, MetricsError> {
    evaluate_window(topology, &Window::read(topology, history), config, custom)
}

/// The result of [`evaluate_with_estimates`]: the evaluated metrics, and the window figures
/// that explain a decision on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// What [`evaluate`] returns.
    pub metrics: EvaluatedMetrics,
    /// What [`true_processing_rate_estimates`] returns for the same window and configuration.
    pub estimates: BTreeMap<VertexId, TprEstimate>,
    /// What [`root_cause::window_signals`](crate::root_cause::window_signals) returns for the
    /// same window (for [`root_cause::explain_with`](crate::root_cause::explain_with)).
    pub signals: BTreeMap<VertexId, VertexSignals>,
}

/// [`evaluate`], keeping the figures that explain a decision from the same read of the window:
/// the true-processing-rate estimates it computed on the way (those of
/// [`true_processing_rate_estimates`]) and the window averages the root cause reads (those of
/// [`root_cause::window_signals`](crate::root_cause::window_signals)). The window is decoded
/// once rather than three times.
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_with_estimates(
    topology: &JobTopology,
    history: &MetricHistory,
    config: &EvaluationConfig,
    custom: Option<&mut CustomEvaluator<'_>>,
) -> Result<Evaluation, MetricsError> {
    let window = Window::read(topology, history);
    Ok(Evaluation {
        metrics: evaluate_window(topology, &window, config, custom)?,
        estimates: window.per_vertex(topology, |info, series| vertex_tpr_estimate(info, series, config)),
        signals: window.per_vertex(topology, |_, series| series.signals()),
    })
}

/// [`evaluate`] on the `window` read.
fn evaluate_window(
    topology: &JobTopology,
    window: &Window,
    config: &EvaluationConfig,
    mut custom: Option<&mut CustomEvaluator<'_>>,
) -> Result<EvaluatedMetrics, MetricsError> {
    let vertices = topology.vertices();
    let processing_backlog = is_processing_backlog(topology, window, config);

    let mut evaluated = Evaluated {
        rank: topology.id_rank(),
        entries: topology
            .id_order()
            .iter()
            .map(|&v| (vertices[v].id.clone(), EvaluatedVertexMetrics::new()))
            .collect(),
    };
    // The custom evaluator's view of the vertices evaluated so far, kept only when there is one.
    let mut in_progress = BTreeMap::new();
    for &v in topology.topological_order() {
        evaluate_vertex(topology, window, &mut evaluated, v, processing_backlog, config)?;
        if let Some(custom) = custom.as_deref_mut() {
            let id = &vertices[v].id;
            crate::custom_evaluation::apply(custom, id, &mut evaluated[v], &in_progress, processing_backlog);
            in_progress.insert(id.clone(), evaluated[v]);
        }
    }

    Ok(EvaluatedMetrics {
        // Already in id order: the map takes the vector as it is.
        vertices: crate::VertexMap::from(evaluated.entries),
        global: window.global.evaluate(),
    })
}

/// The evaluated metrics of every vertex, laid out in id order (the result map's order, so the
/// large per-vertex maps are never moved once evaluated) and reached by topology index.
struct Evaluated<'t> {
    /// [`JobTopology::id_rank`].
    rank: &'t [usize],
    entries: Vec<(VertexId, EvaluatedVertexMetrics)>,
}

impl std::ops::Index<usize> for Evaluated<'_> {
    type Output = EvaluatedVertexMetrics;

    fn index(&self, v: usize) -> &EvaluatedVertexMetrics {
        &self.entries[self.rank[v]].1
    }
}

impl std::ops::IndexMut<usize> for Evaluated<'_> {
    fn index_mut(&mut self, v: usize) -> &mut EvaluatedVertexMetrics {
        &mut self.entries[self.rank[v]].1
    }
}

/// The scale-up and scale-down rate thresholds of a vertex from its evaluated `TARGET_DATA_RATE`
/// (average) and `CATCH_UP_DATA_RATE` (current), as `(scale_up, scale_down)`
/// (reference: `computeProcessingRateThresholds`).
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
    let utilization = java::min(1.0, java::max(0.0, target_utilization));
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
    java::round(catch_up_rate + restart_catch_up_rate + target_rate / utilization)
}

/// Everything the evaluation reads from the history, gathered in one pass.
struct Window {
    vertices: Vec<VertexSeries>,
    global: GlobalSeries,
}

/// Window statistics of one vertex's collected metrics.
struct VertexSeries {
    /// The window rates of [`RATE_METRICS`] (NaN when not measurable), computed once.
    records_in: f64,
    records_out: f64,
    lag: f64,
    busy_time: f64,
    load: AverageAccumulator,
    records_in_per_second: AverageAccumulator,
    observed_tpr: AverageAccumulator,
    /// Read for the root cause ([`VertexSeries::signals`]), not for the evaluation.
    backpressure: AverageAccumulator,
    /// The vertex's metrics in the latest snapshot, if it has any there.
    latest: Option<MetricValues>,
    /// The metrics present in some snapshot of the vertex (bit `metric.index()`).
    seen: u32,
}

impl VertexSeries {
    /// What the root cause reads of the vertex.
    fn signals(&self) -> VertexSignals {
        VertexSignals::of(&self.load, &self.backpressure)
    }
}

impl Default for VertexSeries {
    fn default() -> Self {
        Self {
            records_in: f64::NAN,
            records_out: f64::NAN,
            lag: f64::NAN,
            busy_time: f64::NAN,
            load: AverageAccumulator::default(),
            records_in_per_second: AverageAccumulator::default(),
            observed_tpr: AverageAccumulator::default(),
            backpressure: AverageAccumulator::default(),
            latest: None,
            seen: 0,
        }
    }
}

/// The job-wide metrics whose window mean is reported (reference `ScalingMetricEvaluator.evaluateGlobalMetrics`).
const GLOBAL_AVERAGED: [ScalingMetric; 4] = [
    ScalingMetric::HeapMaxUsageRatio,
    ScalingMetric::HeapMemoryUsed,
    ScalingMetric::ManagedMemoryUsed,
    ScalingMetric::MetaspaceMemoryUsed,
];

/// Window statistics of the job-wide metrics.
#[derive(Default)]
struct GlobalSeries {
    averages: [AverageAccumulator; GLOBAL_AVERAGED.len()],
    latest: Option<MetricValues>,
}

/// The accumulated counters whose window rate the evaluation reads.
const RATE_METRICS: [ScalingMetric; 4] = [
    ScalingMetric::NumRecordsIn,
    ScalingMetric::NumRecordsOut,
    ScalingMetric::Lag,
    ScalingMetric::AccumulatedBusyTime,
];

/// The digest columns of [`RATE_METRICS`] (a metric without one fails to compile).
const RATE_COLUMNS: [usize; RATE_METRICS.len()] = [
    column(RATE_METRICS[0]),
    column(RATE_METRICS[1]),
    column(RATE_METRICS[2]),
    column(RATE_METRICS[3]),
];

impl Window {
    /// `f` of every vertex of `topology` (whose window this is) and its series, by vertex id.
    fn per_vertex<T>(
        &self,
        topology: &JobTopology,
        f: impl Fn(&VertexInfo, &VertexSeries) -> T,
    ) -> BTreeMap<VertexId, T> {
        topology
            .vertices()
            .iter()
            .zip(&self.vertices)
            .map(|(info, series)| (info.id.clone(), f(info, series)))
            .collect()
    }

    fn read(topology: &JobTopology, history: &MetricHistory) -> Self {
        const AVERAGED: [usize; 4] = [
            column(ScalingMetric::Load),
            column(ScalingMetric::NumRecordsInPerSecond),
            column(ScalingMetric::ObservedTpr),
            column(ScalingMetric::Backpressure),
        ];
        let scan = columns::scan(topology, history, AVERAGED);
        let mut series: Vec<VertexSeries> = scan
            .averages
            .iter()
            .zip(&scan.seen)
            .map(
                |([load, records_in_per_second, observed_tpr, backpressure], &seen)| VertexSeries {
                    load: *load,
                    records_in_per_second: *records_in_per_second,
                    observed_tpr: *observed_tpr,
                    backpressure: *backpressure,
                    seen,
                    ..VertexSeries::default()
                },
            )
            .collect();
        let mut global = GlobalSeries::default();
        for (_, entry) in history.entries() {
            for (acc, metric) in global.averages.iter_mut().zip(GLOBAL_AVERAGED) {
                acc.push(entry.global_value(metric));
            }
        }
        if let Some((_, latest)) = history.entries().next_back() {
            // The latest snapshot's ids are the ones `scan.latest` maps, in the same order.
            let starts = latest.columns().starts();
            for (k, vertex) in scan.latest.iter().enumerate() {
                if let Some(v) = *vertex {
                    series[v].latest = Some(latest.vertex_values(k, &starts));
                }
            }
            global.latest = Some(latest.global());
        }
        // A rate is taken between the first and the last non-NaN sample. Those are almost always
        // the vertex's earliest and latest snapshot; only when one of them lacks the counter is
        // the vertex's whole series read.
        let samples: Vec<_> = history.with_columns().collect();
        for (v, (s, ends)) in series.iter_mut().zip(&scan.ends).enumerate() {
            let Some((first_at, last_at)) = *ends else {
                continue;
            };
            // One elapsed time for every counter taken between the vertex's two ends; NaN with a
            // single sample (no rate).
            let elapsed = (first_at.0 != last_at.0)
                .then(|| history_stats::elapsed_millis(samples[first_at.0].0, samples[last_at.0].0));
            let ends_starts = (samples[first_at.0].1.starts(), samples[last_at.0].1.starts());
            let value = |(i, k): RowAt, c: usize, starts: &crate::columns::Starts| samples[i].1.value_at(c, k, starts);
            let rate = |(metric, c): (ScalingMetric, usize)| {
                let (a, b) = (value(first_at, c, &ends_starts.0), value(last_at, c, &ends_starts.1));
                if s.seen & (1 << metric.index()) == 0 {
                    // Never collected: no sample, NaN rate.
                    return f64::NAN;
                }
                if a.is_nan() || (b.is_nan() && first_at != last_at) {
                    return crate::metric_rate(history, topology.vertices()[v].id.as_str(), metric);
                }
                elapsed.map_or(f64::NAN, |elapsed| history_stats::rate_between(a, b, elapsed))
            };
            let [records_in, records_out, lag, busy_time] =
                std::array::from_fn(|i| rate((RATE_METRICS[i], RATE_COLUMNS[i])));
            (s.records_in, s.records_out, s.lag, s.busy_time) = (records_in, records_out, lag, busy_time);
        }
        Self {
            vertices: series,
            global,
        }
    }

    fn input_rate(&self, v: usize) -> f64 {
        self.vertices[v].records_in
    }

    fn output_rate(&self, v: usize) -> f64 {
        self.vertices[v].records_out
    }

    /// The latest collected value of `metric` for vertex `v`, if present.
    fn latest(&self, v: usize, metric: ScalingMetric) -> Option<f64> {
        self.vertices[v].latest.and_then(|m| m.get(metric))
    }
}

impl GlobalSeries {
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

/// Reference `isProcessingBacklog`: some source's latest lag (0 when
/// absent) divided by its input rate exceeds the backlog lag threshold in whole seconds. A NaN rate
/// never counts; a zero rate with positive lag is +Inf and does.
fn is_processing_backlog(topology: &JobTopology, window: &Window, config: &EvaluationConfig) -> bool {
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
    window: &Window,
    evaluated: &mut Evaluated<'_>,
    v: usize,
    processing_backlog: bool,
    config: &EvaluationConfig,
) -> Result<(), MetricsError> {
    let info = &topology.vertices()[v];
    let series = &window.vertices[v];

    let (target_rate, catch_up_rate) = if info.is_source() {
        source_data_rates(window, v, info, config)?
    } else {
        propagated_data_rates(topology, window, evaluated, v)
    };
    // Written in place: the inputs' metrics are read above, and the maps are large to move.
    let out = &mut evaluated[v];
    out.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(target_rate));
    out.insert(
        ScalingMetric::CatchUpDataRate,
        EvaluatedScalingMetric::of(catch_up_rate),
    );

    let parallelism = f64::from(info.parallelism.get());
    let busy_time = busy_time_ms_per_second(series, parallelism, config.busy_time_aggregator);
    let estimate = vertex_tpr_estimate(info, series, config);
    out.insert(
        ScalingMetric::TrueProcessingRate,
        EvaluatedScalingMetric::avg(estimate.value()),
    );
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
    let (scale_up, scale_down) = compute_processing_rate_thresholds(out, config, processing_backlog);
    out.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of(scale_up),
    );
    out.insert(
        ScalingMetric::ScaleDownRateThreshold,
        EvaluatedScalingMetric::of(scale_down),
    );
    Ok(())
}

/// A source's (target rate, catch-up rate) (reference `computeTargetDataRate`, source branch):
/// the target is `max(0, rate(NUM_RECORDS_IN) + rate(LAG))`, counting lag growth as unserved input;
/// the catch-up rate drains the latest lag within the catch-up duration.
fn source_data_rates(
    window: &Window,
    v: usize,
    info: &VertexInfo,
    config: &EvaluationConfig,
) -> Result<(f64, f64), MetricsError> {
    let ingestion_rate = java::max(0.0, window.input_rate(v) + window.vertices[v].lag);
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
fn propagated_data_rates(topology: &JobTopology, window: &Window, evaluated: &Evaluated<'_>, v: usize) -> (f64, f64) {
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
fn edge_output_ratio(topology: &JobTopology, window: &Window, from: usize, to: usize) -> f64 {
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
fn edge_data_rate(topology: &JobTopology, window: &Window, from: usize, to: usize) -> f64 {
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
fn busy_time_ms_per_second(series: &VertexSeries, parallelism: f64, aggregator: BusyTimeAggregator) -> f64 {
    match aggregator {
        BusyTimeAggregator::Avg => series.busy_time / parallelism,
        BusyTimeAggregator::Max | BusyTimeAggregator::Min => series.load.average(1) * 1000.0,
    }
}

/// The input rate the busy-time TPR divides (reference `computeTprInputRate`): estimated the same
/// way as the busy time, so the counter rate for AVG and the per-second gauge mean (falling back to
/// the counter rate when the gauge mean is NaN or infinite) for MAX/MIN.
fn tpr_input_rate(series: &VertexSeries, aggregator: BusyTimeAggregator) -> f64 {
    match aggregator {
        BusyTimeAggregator::Avg => series.records_in,
        BusyTimeAggregator::Max | BusyTimeAggregator::Min => {
            let average = series.records_in_per_second.average(1);
            if average.is_finite() {
                average
            } else {
                series.records_in
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
#[cfg(test)]
fn select_true_processing_rate(busy_time_tpr: f64, observed_tpr: f64, switch_threshold: f64) -> f64 {
    match select_tpr_source(busy_time_tpr, observed_tpr, switch_threshold) {
        TprSource::BusyTime => busy_time_tpr,
        TprSource::Observed => observed_tpr,
    }
}

/// The switch rule of [`select_true_processing_rate`], telling which estimate wins.
fn select_tpr_source(busy_time_tpr: f64, observed_tpr: f64, switch_threshold: f64) -> TprSource {
    if observed_tpr.is_nan() {
        return TprSource::BusyTime;
    }
    if !busy_time_tpr.is_finite() || busy_time_tpr > observed_tpr * (1.0 + switch_threshold) {
        return TprSource::Observed;
    }
    TprSource::BusyTime
}

/// Which estimate of a vertex's true processing rate the evaluation used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TprSource {
    /// Input rate divided by the busy-time ratio.
    BusyTime,
    /// The rate observed at the sources while they were backpressured (`OBSERVED_TPR`).
    Observed,
}

/// Both estimates of a vertex's true processing rate over the window and the one the switch rule
/// chose (reference `selectTprMetric`); the values are the unrounded window figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TprEstimate {
    /// `input rate / (busy ms per s / 1000)`; NaN or ±Inf when not measurable.
    pub busy_time: f64,
    /// The average `OBSERVED_TPR`, NaN with fewer than `observed-true-processing-rate.min-observations`.
    pub observed: f64,
    /// The estimate used.
    pub source: TprSource,
    /// `observed-true-processing-rate.switch-threshold` the rule compared with.
    pub switch_threshold: f64,
}

impl TprEstimate {
    /// The chosen estimate's value.
    pub fn value(&self) -> f64 {
        match self.source {
            TprSource::BusyTime => self.busy_time,
            TprSource::Observed => self.observed,
        }
    }
}

fn tpr_estimate(series: &VertexSeries, parallelism: f64, config: &EvaluationConfig) -> TprEstimate {
    let busy_time = busy_time_ms_per_second(series, parallelism, config.busy_time_aggregator);
    let busy_time_tpr = tpr_from_busy_time(busy_time, tpr_input_rate(series, config.busy_time_aggregator));
    let observed_tpr = series.observed_tpr.average(config.observed_tpr_min_observations);
    TprEstimate {
        busy_time: busy_time_tpr,
        observed: observed_tpr,
        source: select_tpr_source(busy_time_tpr, observed_tpr, config.observed_tpr_switch_threshold),
        switch_threshold: config.observed_tpr_switch_threshold,
    }
}

/// The true-processing-rate estimates of every vertex over the window `history`, as
/// [`evaluate`] computes them (one extra pass over the window; used to explain a decision;
/// [`evaluate_with_estimates`] gives them with the evaluation, from one pass).
pub fn true_processing_rate_estimates(
    topology: &JobTopology,
    history: &MetricHistory,
    config: &EvaluationConfig,
) -> BTreeMap<VertexId, TprEstimate> {
    Window::read(topology, history).per_vertex(topology, |info, series| vertex_tpr_estimate(info, series, config))
}

/// [`tpr_estimate`] of the vertex `info` at its parallelism.
fn vertex_tpr_estimate(info: &VertexInfo, series: &VertexSeries, config: &EvaluationConfig) -> TprEstimate {
    tpr_estimate(series, f64::from(info.parallelism.get()), config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollectedMetrics, EdgeSpec, ShipStrategy, VertexSpec};
    use ScalingMetric::*;
    use chrono::{DateTime, TimeZone, Utc};

    type Metrics<'a> = &'a [(ScalingMetric, f64)];

    fn ms(millis: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(millis).single().expect("valid instant")
    }

    fn snapshot(vertices: &[(&str, Metrics<'_>)], global: Metrics<'_>) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: vertices
                .iter()
                .map(|(id, m)| ((*id).into(), m.iter().copied().collect()))
                .collect(),
            global_metrics: global.iter().copied().collect(),
        }
    }

    fn history(snapshots: Vec<(i64, CollectedMetrics)>) -> MetricHistory {
        snapshots.into_iter().map(|(t, s)| (ms(t), s)).collect()
    }

    fn topology(vertices: &[(&str, u32)], edges: &[(&str, &str)]) -> JobTopology {
        JobTopology::new(
            vertices.iter().map(|(id, p)| VertexSpec::new(*id, *p, 128)).collect(),
            edges
                .iter()
                .map(|(from, to)| EdgeSpec::new(*from, *to, ShipStrategy::Rebalance))
                .collect(),
        )
        .expect("valid topology")
    }

    fn index(topology: &JobTopology, id: &str) -> usize {
        topology.index_of(id).expect("known vertex")
    }

    fn with(metrics: &[(ScalingMetric, EvaluatedScalingMetric)]) -> EvaluatedVertexMetrics {
        metrics.iter().copied().collect()
    }

    // --- busy time and true processing rate ---

    #[test]
    fn busy_time_is_the_load_mean_for_max_and_min_and_the_counter_rate_for_avg() {
        // Reference testBusyTimeEvaluation: LOAD 0.2/0.3/0.4, busy counter +200 ms per second.
        let topo = topology(&[("v", 2)], &[]);
        let h = history(vec![
            (
                1000,
                snapshot(&[("v", &[(Load, 0.2), (AccumulatedBusyTime, 10_000.0)])], &[]),
            ),
            (
                2000,
                snapshot(&[("v", &[(Load, 0.3), (AccumulatedBusyTime, 10_200.0)])], &[]),
            ),
            (
                3000,
                snapshot(&[("v", &[(Load, 0.4), (AccumulatedBusyTime, 10_400.0)])], &[]),
            ),
        ]);
        let window = Window::read(&topo, &h);
        let v = &window.vertices[0];
        for aggregator in [BusyTimeAggregator::Max, BusyTimeAggregator::Min] {
            // Parallelism does not matter for the gauge mean.
            assert_eq!(busy_time_ms_per_second(v, 2.0, aggregator), 300.0);
            assert_eq!(busy_time_ms_per_second(v, 1.0, aggregator), 300.0);
        }
        // 400 ms over 2 s = 200 ms/s for the whole vertex, split over the subtasks.
        assert_eq!(busy_time_ms_per_second(v, 2.0, BusyTimeAggregator::Avg), 100.0);
        assert_eq!(busy_time_ms_per_second(v, 1.0, BusyTimeAggregator::Avg), 200.0);
    }

    #[test]
    fn tpr_input_rate_matches_the_busy_time_estimator() {
        // Counter rate 1000 * 100 / 1000 ms = 100/s; per-second gauge mean (40 + 60) / 2 = 50/s.
        let topo = topology(&[("v", 1)], &[]);
        let h = history(vec![
            (
                1000,
                snapshot(&[("v", &[(NumRecordsIn, 0.0), (NumRecordsInPerSecond, 40.0)])], &[]),
            ),
            (
                2000,
                snapshot(&[("v", &[(NumRecordsIn, 100.0), (NumRecordsInPerSecond, 60.0)])], &[]),
            ),
        ]);
        let window = Window::read(&topo, &h);
        assert_eq!(tpr_input_rate(&window.vertices[0], BusyTimeAggregator::Max), 50.0);
        assert_eq!(tpr_input_rate(&window.vertices[0], BusyTimeAggregator::Min), 50.0);
        assert_eq!(tpr_input_rate(&window.vertices[0], BusyTimeAggregator::Avg), 100.0);

        // Without the gauge (sources), or with only infinite gauge values, MAX falls back to the counter.
        for gauge in [f64::NAN, f64::INFINITY] {
            let h = history(vec![
                (
                    1000,
                    snapshot(&[("v", &[(NumRecordsIn, 0.0), (NumRecordsInPerSecond, gauge)])], &[]),
                ),
                (2000, snapshot(&[("v", &[(NumRecordsIn, 100.0)])], &[])),
            ]);
            let window = Window::read(&topo, &h);
            assert_eq!(tpr_input_rate(&window.vertices[0], BusyTimeAggregator::Max), 100.0);
        }
    }

    #[test]
    fn busy_time_tpr_divides_the_input_rate_by_the_busy_ratio() {
        assert_eq!(tpr_from_busy_time(100.0, 35.0), 350.0);
        assert_eq!(tpr_from_busy_time(500.0, 100.0), 200.0);
        // No input: infinite capacity, whatever the busy time (reference testZeroValuesForRatesOrBusyness).
        assert_eq!(tpr_from_busy_time(0.0, 0.0), f64::INFINITY);
        assert_eq!(tpr_from_busy_time(1.0, 0.0), f64::INFINITY);
        assert_eq!(tpr_from_busy_time(f64::NAN, 0.0), f64::INFINITY);
        // Input but zero busy time: x / 0 = +Inf.
        assert_eq!(tpr_from_busy_time(0.0, 1.0), f64::INFINITY);
        assert!(tpr_from_busy_time(f64::NAN, f64::NAN).is_nan());
        assert!(tpr_from_busy_time(100.0, f64::NAN).is_nan());
    }

    #[test]
    fn observed_tpr_is_averaged_with_a_minimum_number_of_observations() {
        // Reference testObservedTprEvaluation: observed 200 and 400 average 300, busy-time TPR 350.
        let topo = topology(&[("src", 1)], &[]);
        let h = history(vec![
            (1000, snapshot(&[("src", &[(ObservedTpr, 200.0)])], &[])),
            (2000, snapshot(&[("src", &[(ObservedTpr, 400.0)])], &[])),
        ]);
        let window = Window::read(&topo, &h);
        let observed = |min| window.vertices[0].observed_tpr.average(min);
        let busy = tpr_from_busy_time(100.0, 35.0);
        assert_eq!(observed(2), 300.0);
        // 350 <= 300 * 1.2: busy time is trusted.
        assert_eq!(select_true_processing_rate(busy, observed(2), 0.2), 350.0);
        // 350 > 300 * 1.1: busy time looks too large, the observed rate wins.
        assert_eq!(select_true_processing_rate(busy, observed(2), 0.1), 300.0);
        // Fewer than 3 observations: no observed rate, busy time is used.
        assert!(observed(3).is_nan());
        assert_eq!(select_true_processing_rate(busy, observed(3), 0.1), 350.0);
    }

    #[test]
    fn switch_rule_handles_nan_and_infinity() {
        // No observed rate: busy time, even infinite or NaN.
        assert_eq!(
            select_true_processing_rate(f64::INFINITY, f64::NAN, 0.15),
            f64::INFINITY
        );
        assert!(select_true_processing_rate(f64::NAN, f64::NAN, 0.15).is_nan());
        // Unusable busy-time rate: observed (reference testMissingBusyTimeTpr).
        assert_eq!(select_true_processing_rate(f64::NAN, 300.0, 0.15), 300.0);
        assert_eq!(select_true_processing_rate(f64::INFINITY, 300.0, 0.15), 300.0);
        // An infinite observed rate never beats a finite busy-time rate.
        assert_eq!(select_true_processing_rate(500.0, f64::INFINITY, 0.15), 500.0);
        // Exactly at the threshold: busy time (the comparison is strict).
        let at_threshold = 100.0 * (1.0 + 0.15);
        assert_eq!(select_true_processing_rate(at_threshold, 100.0, 0.15), at_threshold);
        assert_eq!(select_true_processing_rate(116.0, 100.0, 0.15), 100.0);
    }

    // --- edge data rates and target-rate propagation ---

    #[test]
    fn edge_rate_uses_the_single_input_or_subtracts_single_output_siblings() {
        // Reference testComputableOutputRatios.
        let topo = topology(
            &[("s1", 1), ("s2", 1), ("op", 1), ("sink", 1)],
            &[("s1", "op"), ("s2", "op"), ("op", "sink")],
        );
        let first = snapshot(
            &[
                ("s1", &[(NumRecordsIn, 100.0), (NumRecordsOut, 100.0)]),
                ("s2", &[(NumRecordsIn, 100.0), (NumRecordsOut, 100.0)]),
                ("op", &[(NumRecordsIn, 100.0)]),
                ("sink", &[(NumRecordsIn, 100.0)]),
            ],
            &[],
        );
        let second = snapshot(
            &[
                ("s1", &[(NumRecordsIn, 200.0), (NumRecordsOut, 300.0)]),
                ("s2", &[(NumRecordsIn, 200.0), (NumRecordsOut, 150.0)]),
                ("op", &[(NumRecordsIn, 350.0)]),
                ("sink", &[(NumRecordsIn, 150.0)]),
            ],
            &[],
        );
        let h = history(vec![(1000, first), (2000, second)]);
        let window = Window::read(&topo, &h);
        let (s1, s2, op, sink) = (
            index(&topo, "s1"),
            index(&topo, "s2"),
            index(&topo, "op"),
            index(&topo, "sink"),
        );
        // Case 2: op receives 250/s, s2 alone sends 50/s, so s1 -> op carries 200/s for 100/s in.
        assert_eq!(edge_data_rate(&topo, &window, s1, op), 200.0);
        assert_eq!(edge_output_ratio(&topo, &window, s1, op), 2.0);
        assert_eq!(edge_output_ratio(&topo, &window, s2, op), 0.5);
        // Case 1: the sink's own input rate, 50/s for op's 250/s.
        assert_eq!(edge_data_rate(&topo, &window, op, sink), 50.0);
        assert_eq!(edge_output_ratio(&topo, &window, op, sink), 0.2);
    }

    #[test]
    fn edge_rate_falls_back_to_the_upstream_output_rate() {
        // Reference testOutputRatioFallbackToOutPerSecond: both sources feed both operators.
        let topo = topology(
            &[("s1", 1), ("s2", 1), ("op1", 1), ("op2", 1)],
            &[("s1", "op1"), ("s2", "op1"), ("s1", "op2"), ("s2", "op2")],
        );
        let h = history(vec![
            (
                1000,
                snapshot(
                    &[
                        ("s1", &[(NumRecordsIn, 0.0), (NumRecordsOut, 0.0)]),
                        ("s2", &[(NumRecordsIn, 0.0), (NumRecordsOut, 0.0)]),
                    ],
                    &[],
                ),
            ),
            (
                2000,
                snapshot(
                    &[
                        ("s1", &[(NumRecordsIn, 100.0), (NumRecordsOut, 200.0)]),
                        ("s2", &[(NumRecordsIn, 100.0), (NumRecordsOut, 50.0)]),
                    ],
                    &[],
                ),
            ),
        ]);
        let window = Window::read(&topo, &h);
        let (s1, s2) = (index(&topo, "s1"), index(&topo, "s2"));
        for op in [index(&topo, "op1"), index(&topo, "op2")] {
            assert_eq!(edge_output_ratio(&topo, &window, s1, op), 2.0);
            assert_eq!(edge_output_ratio(&topo, &window, s2, op), 0.5);
        }
    }

    #[test]
    fn edge_rate_with_an_unknown_sibling_output_falls_back_and_idle_inputs_give_ratio_zero() {
        // op has inputs a and b, each with one output, but b has no output counter: case 3 for a.
        let topo = topology(&[("a", 1), ("b", 1), ("op", 1)], &[("a", "op"), ("b", "op")]);
        let h = history(vec![
            (
                0,
                snapshot(
                    &[
                        ("a", &[(NumRecordsIn, 0.0), (NumRecordsOut, 0.0)]),
                        ("b", &[(NumRecordsIn, 0.0)]),
                        ("op", &[(NumRecordsIn, 0.0)]),
                    ],
                    &[],
                ),
            ),
            (
                1000,
                snapshot(
                    &[
                        ("a", &[(NumRecordsIn, 10.0), (NumRecordsOut, 30.0)]),
                        ("b", &[(NumRecordsIn, 0.0)]),
                        ("op", &[(NumRecordsIn, 1000.0)]),
                    ],
                    &[],
                ),
            ),
        ]);
        let window = Window::read(&topo, &h);
        let (a, b, op) = (index(&topo, "a"), index(&topo, "b"), index(&topo, "op"));
        assert_eq!(edge_data_rate(&topo, &window, a, op), 30.0);
        assert_eq!(edge_output_ratio(&topo, &window, a, op), 3.0);
        // b receives nothing: its ratio is flattened to 0 rather than exploding.
        assert_eq!(edge_output_ratio(&topo, &window, b, op), 0.0);
    }

    /// src -> op -> sink, 10 s apart: src reads 100/s with lag growing 10/s to 100, op forwards
    /// 100/s and emits 200/s, the sink reads 200/s. Every vertex is 50 % busy.
    fn chain_history() -> (JobTopology, MetricHistory) {
        let topo = topology(&[("src", 2), ("op", 4), ("sink", 1)], &[("src", "op"), ("op", "sink")]);
        let at = |t: f64, lag: f64| {
            snapshot(
                &[
                    (
                        "src",
                        &[
                            (Load, 0.5),
                            (NumRecordsIn, 100.0 * t),
                            (NumRecordsOut, 100.0 * t),
                            (Lag, lag),
                        ],
                    ),
                    (
                        "op",
                        &[
                            (Load, 0.5),
                            (NumRecordsIn, 100.0 * t),
                            (NumRecordsOut, 200.0 * t),
                            (NumRecordsInPerSecond, 100.0),
                        ],
                    ),
                    (
                        "sink",
                        &[(Load, 0.5), (NumRecordsIn, 200.0 * t), (NumRecordsInPerSecond, 200.0)],
                    ),
                ],
                &[],
            )
        };
        (topo, history(vec![(0, at(0.0, 0.0)), (10_000, at(10.0, 100.0))]))
    }

    /// A cycle's reads of the window (evaluation, root cause, window status, averages and rates of
    /// any metric) use the compact snapshots: none is built as maps.
    #[test]
    fn a_cycle_reads_no_snapshot_as_maps() {
        let (topo, h) = chain_history();
        evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        crate::root_cause::explain(&topo, &h);
        crate::window::window_status(
            &h,
            Utc::now(),
            Utc::now(),
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        );
        for metric in ScalingMetric::ALL {
            crate::metric_average(&h, Some("src"), metric, 1);
            crate::metric_average(&h, None, metric, 1);
            crate::metric_rate(&h, "sink", metric);
        }
        assert!(h.shared().all(|(_, s)| !s.is_expanded()));
        // Reading a snapshot as maps builds them.
        assert!(h.latest().is_some());
        assert!(h.shared().next_back().is_some_and(|(_, s)| s.is_expanded()));
    }

    #[test]
    fn target_and_catch_up_rates_propagate_through_output_ratios() {
        let (topo, h) = chain_history();
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        let get = |id: &str, m| result.vertex_metric(id, m).expect("metric present");
        // Source: 100/s read + 10/s lag growth; catch-up 100 lag / 1800 s = 0.0555… -> 0.056.
        assert_eq!(get("src", TargetDataRate), EvaluatedScalingMetric::avg(110.0));
        assert_eq!(get("src", CatchUpDataRate), EvaluatedScalingMetric::of(0.056));
        // op: ratio 100/100 = 1; sink: ratio 200/100 = 2, applied to the rounded upstream values.
        assert_eq!(get("op", TargetDataRate).average, 110.0);
        assert_eq!(get("op", CatchUpDataRate).current, 0.056);
        assert_eq!(get("sink", TargetDataRate).average, 220.0);
        assert_eq!(get("sink", CatchUpDataRate).current, 0.112);
    }

    #[test]
    fn evaluation_reports_the_reference_metric_set() {
        let (topo, h) = chain_history();
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        let src = &result.vertices["src"];
        // Busy 500 ms/s; the source has no per-second gauge, so its TPR is 100 / 0.5.
        assert_eq!(src.get(Load), Some(EvaluatedScalingMetric::avg(0.5)));
        assert_eq!(src.get(TrueProcessingRate), Some(EvaluatedScalingMetric::avg(200.0)));
        assert_eq!(src.get(Lag), Some(EvaluatedScalingMetric::of(100.0)));
        assert_eq!(src.get(Parallelism), Some(EvaluatedScalingMetric::of(2.0)));
        assert_eq!(src.get(MaxParallelism), Some(EvaluatedScalingMetric::of(128.0)));
        assert_eq!(src.get(NumSourcePartitions), Some(EvaluatedScalingMetric::of(0.0)));
        // Up: 0.056 + 110 / 1.0 -> 110. Down: 0.056 + 110 * 300 / 1800 + 110 / 0.4 = 293.389 -> 293.
        assert_eq!(src.get(ScaleUpRateThreshold), Some(EvaluatedScalingMetric::of(110.0)));
        assert_eq!(src.get(ScaleDownRateThreshold), Some(EvaluatedScalingMetric::of(293.0)));
        assert_eq!(src.len(), 10);
        // The sink: 200 / 0.5 from its gauge; no LAG because the latest snapshot has none for it.
        let sink = &result.vertices["sink"];
        assert_eq!(sink.get(TrueProcessingRate), Some(EvaluatedScalingMetric::avg(400.0)));
        assert_eq!(sink.get(Lag), None);
        assert_eq!(sink.len(), 9);
        // 0.112 + 220 -> 220; 0.112 + 36.667 + 550 = 586.779 -> 587.
        assert_eq!(sink.get(ScaleUpRateThreshold), Some(EvaluatedScalingMetric::of(220.0)));
        assert_eq!(
            sink.get(ScaleDownRateThreshold),
            Some(EvaluatedScalingMetric::of(587.0))
        );
        assert_eq!(
            result.vertices.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["op", "sink", "src"]
        );
    }

    #[test]
    fn one_read_gives_the_evaluation_the_estimates_and_the_root_cause_signals() {
        let (topo, h) = chain_history();
        let config = EvaluationConfig::default();
        let both = evaluate_with_estimates(&topo, &h, &config, None).expect("rates are known");
        assert_eq!(Ok(&both.metrics), evaluate(&topo, &h, &config, None).as_ref());
        // Compared as text: an unobserved TPR is NaN, which equals nothing.
        assert_eq!(
            format!("{:?}", both.estimates),
            format!("{:?}", true_processing_rate_estimates(&topo, &h, &config))
        );
        // The source's busy-time estimate, 100 / 0.5, chosen: it observed no TPR.
        let src = both.estimates["src"];
        assert_eq!((src.busy_time, src.source), (200.0, TprSource::BusyTime));
        assert!(src.observed.is_nan());
        assert_eq!(both.estimates.len(), 3);
        assert_eq!(
            format!("{:?}", both.signals),
            format!("{:?}", crate::root_cause::window_signals(&topo, &h))
        );
        // Every vertex busy half the time; no BACKPRESSURE collected.
        let sink = both.signals["sink"];
        assert_eq!(sink.load, 0.5);
        assert!(sink.backpressure.is_nan());
        // An evaluation that fails gives no estimates either.
        let one = history(vec![(0, snapshot(&[("src", &[(NumRecordsIn, 1.0)])], &[]))]);
        assert!(evaluate_with_estimates(&topo, &one, &config, None).is_err());
    }

    #[test]
    fn zero_catch_up_duration_means_no_catch_up_rate() {
        let (topo, h) = chain_history();
        let config = EvaluationConfig {
            catch_up_duration: Duration::ZERO,
            ..EvaluationConfig::default()
        };
        let result = evaluate(&topo, &h, &config, None).expect("rates are known");
        assert_eq!(
            result.vertex_metric("src", CatchUpDataRate),
            Some(EvaluatedScalingMetric::of(0.0))
        );
        // No restart allowance either: 110 / 0.4 = 275.
        assert_eq!(
            result.vertex_metric("src", ScaleDownRateThreshold),
            Some(EvaluatedScalingMetric::of(275.0))
        );
    }

    #[test]
    fn finished_vertices_are_evaluated_like_any_other() {
        let topo = JobTopology::new(
            vec![VertexSpec {
                finished: true,
                num_source_partitions: 8,
                ..VertexSpec::new("done", 3, 128)
            }],
            vec![],
        )
        .expect("valid");
        let zeros: Metrics<'_> = &[(Load, 0.0), (NumRecordsIn, 0.0), (Lag, 0.0), (AccumulatedBusyTime, 0.0)];
        let h = history(vec![
            (0, snapshot(&[("done", zeros)], &[])),
            (1000, snapshot(&[("done", zeros)], &[])),
        ]);
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        let done = &result.vertices["done"];
        assert_eq!(done.get(TargetDataRate), Some(EvaluatedScalingMetric::avg(0.0)));
        assert_eq!(
            done.get(TrueProcessingRate),
            Some(EvaluatedScalingMetric::avg(f64::INFINITY))
        );
        assert_eq!(done.get(NumSourcePartitions), Some(EvaluatedScalingMetric::of(8.0)));
        assert_eq!(done.get(ScaleUpRateThreshold), Some(EvaluatedScalingMetric::of(0.0)));
    }

    #[test]
    fn a_source_without_two_input_or_lag_samples_cannot_be_evaluated() {
        let topo = topology(&[("src", 1)], &[]);
        let one = history(vec![(0, snapshot(&[("src", &[(NumRecordsIn, 0.0), (Lag, 0.0)])], &[]))]);
        let no_lag = history(vec![
            (0, snapshot(&[("src", &[(NumRecordsIn, 0.0)])], &[])),
            (1000, snapshot(&[("src", &[(NumRecordsIn, 10.0)])], &[])),
        ]);
        for h in [one, no_lag, MetricHistory::new()] {
            let err = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect_err("no ingestion rate");
            assert_eq!(err, MetricsError::MissingIngestionRate { vertex: "src".into() });
            assert_eq!(
                err.to_string(),
                "Cannot evaluate metrics without ingestion rate information"
            );
        }
    }

    #[test]
    fn negative_ingestion_is_clamped_to_zero() {
        // Lag shrinking faster than records arrive: max(0, 10 - 50) = 0.
        let topo = topology(&[("src", 1)], &[]);
        let h = history(vec![
            (0, snapshot(&[("src", &[(NumRecordsIn, 0.0), (Lag, 100.0)])], &[])),
            (1000, snapshot(&[("src", &[(NumRecordsIn, 10.0), (Lag, 50.0)])], &[])),
        ]);
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        assert_eq!(
            result.vertex_metric("src", TargetDataRate),
            Some(EvaluatedScalingMetric::avg(0.0))
        );
    }

    #[test]
    fn vertices_missing_from_snapshots_read_as_nan_and_unknown_ids_are_ignored() {
        let topo = topology(&[("src", 1)], &[]);
        let h = history(vec![
            (0, snapshot(&[("src", &[(NumRecordsIn, 0.0), (Lag, 0.0)])], &[])),
            (500, snapshot(&[("ghost", &[(NumRecordsIn, 1e9)])], &[])),
            (
                1000,
                snapshot(
                    &[
                        ("a-ghost", &[]),
                        ("src", &[(NumRecordsIn, 10.0), (Lag, 0.0)]),
                        ("z", &[]),
                    ],
                    &[],
                ),
            ),
        ]);
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        assert_eq!(result.vertices.len(), 1);
        assert_eq!(
            result.vertex_metric("src", TargetDataRate),
            Some(EvaluatedScalingMetric::avg(10.0))
        );
    }

    // --- backlog ---

    fn backlog(lag: f64, records_in_after_1s: f64, threshold: Duration) -> bool {
        let topo = topology(&[("src", 1), ("sink", 1)], &[("src", "sink")]);
        let h = history(vec![
            (
                0,
                snapshot(&[("src", &[(Lag, 0.0), (NumRecordsIn, 0.0)]), ("sink", &[])], &[]),
            ),
            (
                1000,
                snapshot(
                    &[
                        ("src", &[(Lag, lag), (NumRecordsIn, records_in_after_1s)]),
                        ("sink", &[]),
                    ],
                    &[],
                ),
            ),
        ]);
        let config = EvaluationConfig {
            backlog_lag_threshold: threshold,
            ..EvaluationConfig::default()
        };
        is_processing_backlog(&topo, &Window::read(&topo, &h), &config)
    }

    #[test]
    fn backlog_when_lag_exceeds_the_threshold_at_the_input_rate() {
        let five_min = Duration::from_secs(300);
        // Reference testBacklogProcessingEvaluation, input 200/s.
        assert!(!backlog(0.0, 100.0, five_min));
        assert!(backlog(250.0 * 300.0, 200.0, five_min), "375 s of lag");
        assert!(!backlog(180.0 * 300.0, 200.0, five_min), "270 s of lag");
        // Exactly at the threshold is not above it.
        assert!(!backlog(300.0 * 200.0, 200.0, five_min));
        // Zero input with lag: +Inf seconds of lag.
        assert!(backlog(1.0, 0.0, five_min));
        // Zero input, zero lag: 0/0 = NaN is not above anything.
        assert!(!backlog(0.0, 0.0, five_min));
        // The threshold counts in whole seconds: 300.9 s is 300 s.
        assert!(backlog(300.5 * 200.0, 200.0, Duration::from_millis(300_900)));
    }

    #[test]
    fn backlog_ignores_missing_lag_and_missing_rates() {
        let topo = topology(&[("src", 1)], &[]);
        let config = EvaluationConfig::default();
        let no_lag = history(vec![
            (0, snapshot(&[("src", &[(NumRecordsIn, 0.0)])], &[])),
            (1000, snapshot(&[("src", &[(NumRecordsIn, 100.0)])], &[])),
        ]);
        assert!(!is_processing_backlog(&topo, &Window::read(&topo, &no_lag), &config));
        let no_rate = history(vec![(1000, snapshot(&[("src", &[(Lag, 1e12)])], &[]))]);
        assert!(!is_processing_backlog(&topo, &Window::read(&topo, &no_rate), &config));
    }

    #[test]
    fn backlog_lifts_the_scale_down_threshold_to_infinity() {
        // Lag 100 000 at 100/s is 1000 s of backlog.
        let topo = topology(&[("src", 1)], &[]);
        let h = history(vec![
            (0, snapshot(&[("src", &[(NumRecordsIn, 0.0), (Lag, 100_000.0)])], &[])),
            (
                10_000,
                snapshot(&[("src", &[(NumRecordsIn, 1000.0), (Lag, 100_000.0)])], &[]),
            ),
        ]);
        let result = evaluate(&topo, &h, &EvaluationConfig::default(), None).expect("rates are known");
        // Up at utilization 1: 100000 / 1800 = 55.556 + 100 -> 156.
        assert_eq!(
            result.vertex_metric("src", ScaleUpRateThreshold),
            Some(EvaluatedScalingMetric::of(156.0))
        );
        assert_eq!(
            result.vertex_metric("src", ScaleDownRateThreshold),
            Some(EvaluatedScalingMetric::of(f64::INFINITY))
        );
    }

    // --- thresholds ---

    fn thresholds(target: f64, catch_up: f64, catch_up_s: u64, restart_s: u64, backlog: bool) -> (f64, f64) {
        let metrics = with(&[
            (TargetDataRate, EvaluatedScalingMetric::avg(target)),
            (CatchUpDataRate, EvaluatedScalingMetric::of(catch_up)),
        ]);
        let config = EvaluationConfig {
            utilization_max: 0.9,
            utilization_min: 0.7,
            catch_up_duration: Duration::from_secs(catch_up_s),
            restart_time: Duration::from_secs(restart_s),
            ..EvaluationConfig::default()
        };
        compute_processing_rate_thresholds(&metrics, &config, backlog)
    }

    #[test]
    fn threshold_vectors_of_the_reference() {
        // 350 + 700 / 0.9 = 1127.8 -> 1128; 350 + 700 * 1 / 2 + 700 / 0.7 = 1700.
        assert_eq!(thresholds(700.0, 350.0, 2, 1, false), (1128.0, 1700.0));
        assert_eq!(thresholds(700.0, 0.0, 2, 1, false), (778.0, 1350.0));
        assert_eq!(thresholds(700.0, 0.0, 0, 1, false), (778.0, 1000.0));
        assert_eq!(thresholds(700.0, 350.0, 2, 1, true), (1050.0, f64::INFINITY));
        assert_eq!(thresholds(700.0, 0.0, 2, 1, true), (700.0, f64::INFINITY));
        // A tracked restart of 10 s: 350 + 700 * 10 / 2 + 1000 = 4850.
        assert_eq!(thresholds(700.0, 350.0, 2, 10, false), (1128.0, 4850.0));
        assert_eq!(thresholds(700.0, 0.0, 2, 10, false), (778.0, 4500.0));
    }

    #[test]
    fn capacity_is_nan_without_rates_and_clamps_the_utilization() {
        let config = EvaluationConfig::default();
        let target_only = with(&[(TargetDataRate, EvaluatedScalingMetric::avg(100.0))]);
        let catch_up_only = with(&[(CatchUpDataRate, EvaluatedScalingMetric::of(0.0))]);
        assert!(target_processing_capacity(&target_only, &config, 0.5, false).is_nan());
        assert!(target_processing_capacity(&catch_up_only, &config, 0.5, false).is_nan());
        // A NaN rate wins over a zero utilization.
        assert!(target_processing_capacity(&catch_up_only, &config, 0.0, false).is_nan());
        let both = with(&[
            (TargetDataRate, EvaluatedScalingMetric::avg(100.0)),
            (CatchUpDataRate, EvaluatedScalingMetric::of(0.0)),
        ]);
        assert_eq!(target_processing_capacity(&both, &config, 0.0, true), f64::INFINITY);
        assert_eq!(target_processing_capacity(&both, &config, -1.0, true), f64::INFINITY);
        assert_eq!(target_processing_capacity(&both, &config, 2.0, false), 100.0);
        assert_eq!(target_processing_capacity(&both, &config, 0.8, false), 125.0);
        // 100 * 300 / 1800 = 16.67 + 125 = 141.67 -> 142.
        assert_eq!(target_processing_capacity(&both, &config, 0.8, true), 142.0);
        // A NaN utilization behaves as Java's: NaN arithmetic, then Math.round(NaN) = 0.
        assert_eq!(target_processing_capacity(&both, &config, f64::NAN, false), 0.0);
    }

    // --- global metrics ---

    #[test]
    fn global_metrics_report_latest_values_and_window_means() {
        let topo = topology(&[("src", 1)], &[]);
        let src: Metrics<'_> = &[(NumRecordsIn, 0.0), (Lag, 0.0)];
        let h = history(vec![
            (
                0,
                snapshot(
                    &[("src", src)],
                    &[
                        (HeapMemoryUsed, 100.0),
                        (HeapMaxUsageRatio, 0.1),
                        (GcPressure, 0.5),
                        (NumTaskSlotsUsed, 2.0),
                    ],
                ),
            ),
            (
                1000,
                snapshot(&[("src", src)], &[(HeapMemoryUsed, 300.0), (HeapMaxUsageRatio, 0.2)]),
            ),
        ]);
        let global = evaluate(&topo, &h, &EvaluationConfig::default(), None)
            .expect("rates are known")
            .global;
        assert_eq!(
            global.get(HeapMemoryUsed),
            Some(EvaluatedScalingMetric::new(300.0, 200.0))
        );
        // (0.1 + 0.2) / 2 = 0.15000000000000002 is stored rounded.
        assert_eq!(
            global.get(HeapMaxUsageRatio),
            Some(EvaluatedScalingMetric::new(0.2, 0.15))
        );
        assert_eq!(global.get(ManagedMemoryUsed), Some(EvaluatedScalingMetric::NAN));
        assert_eq!(global.get(MetaspaceMemoryUsed), Some(EvaluatedScalingMetric::NAN));
        // Latest values only: the earlier GC pressure and slot count do not carry over.
        assert_eq!(global.get(GcPressure), Some(EvaluatedScalingMetric::NAN));
        assert_eq!(global.get(NumTaskSlotsUsed), Some(EvaluatedScalingMetric::NAN));
        assert_eq!(global.len(), 6);
    }

    /// One vertex's sample in a generated window: absent from the snapshot, or its four counters
    /// each present or NaN.
    fn sample_strategy() -> impl proptest::strategy::Strategy<Value = Option<[Option<f64>; 4]>> {
        use proptest::prelude::*;
        let counter = prop_oneof![3 => (0.0..1e6f64).prop_map(Some), 1 => Just(None), 1 => Just(Some(f64::NAN))];
        proptest::option::weighted(0.8, [counter.clone(), counter.clone(), counter.clone(), counter])
    }

    proptest::proptest! {
        /// The rates read from the first and last samples equal the reference's scan of every
        /// sample (`metric_rate`), whatever is missing or NaN where.
        #[test]
        fn window_rates_equal_a_scan_of_every_sample(
            samples in proptest::collection::vec(
                (sample_strategy(), sample_strategy(), 1i64..5000),
                0..8,
            ),
        ) {
            let topo = topology(&[("a", 1), ("b", 1)], &[("a", "b")]);
            let mut at = 0;
            let mut snapshots = Vec::new();
            for (a, b, step) in &samples {
                at += step;
                let mut snapshot = CollectedMetrics::default();
                for (id, sample) in [("a", a), ("b", b)] {
                    if let Some(counters) = sample {
                        let values = RATE_METRICS
                            .iter()
                            .zip(counters)
                            .filter_map(|(m, v)| v.map(|v| (*m, v)))
                            .collect();
                        snapshot.vertex_metrics.insert(id.into(), values);
                    }
                }
                snapshots.push((at, snapshot));
            }
            let h = history(snapshots);
            let window = Window::read(&topo, &h);
            for (v, id) in ["a", "b"].into_iter().enumerate() {
                let s = &window.vertices[index(&topo, id)];
                let rates = [s.records_in, s.records_out, s.lag, s.busy_time];
                for (metric, rate) in RATE_METRICS.iter().zip(rates) {
                    let expected = crate::metric_rate(&h, id, *metric);
                    proptest::prop_assert!(
                        rate.to_bits() == expected.to_bits(),
                        "vertex {v} {metric:?}: {rate} != {expected}"
                    );
                }
            }
        }

        #[test]
        fn busy_time_tpr_is_at_least_the_input_rate(rate in 0.0..1e9f64, busy in 1e-9..=1000.0f64) {
            proptest::prop_assert!(tpr_from_busy_time(busy, rate) >= rate);
        }

        #[test]
        fn more_busy_time_never_raises_busy_time_tpr(
            rate in 0.0..1e9f64,
            busy in 0.0..=1000.0f64,
            extra in 0.0..=1000.0f64,
        ) {
            proptest::prop_assert!(tpr_from_busy_time(busy + extra, rate) <= tpr_from_busy_time(busy, rate));
        }

        #[test]
        fn switch_rule_never_yields_nan_when_an_estimate_is_finite(
            busy in proptest::prop_oneof![
                proptest::num::f64::ANY,
                proptest::strategy::Just(f64::NAN),
                proptest::strategy::Just(f64::INFINITY),
            ],
            observed in proptest::prop_oneof![
                proptest::num::f64::ANY,
                proptest::strategy::Just(f64::NAN),
                proptest::strategy::Just(f64::INFINITY),
            ],
            threshold in 0.0..10.0f64,
        ) {
            if busy.is_finite() || observed.is_finite() {
                proptest::prop_assert!(!select_true_processing_rate(busy, observed, threshold).is_nan());
            }
        }
    }
}
