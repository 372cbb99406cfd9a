//! One autoscaler cycle as plain functions over data: [`observe`], [`assess`], [`conclude`].
//!
//! Nothing here does I/O, awaits or reads a clock: the job's stored state comes in as a
//! [`JobState`], the cycle's instant and options as arguments, and each step updates the state in
//! place and marks what it changed in [`StateChanges`], so the caller writes back only those parts.
//! [`JobAutoScalerImpl::run_cycle`](crate::JobAutoScalerImpl::run_cycle) drives these steps against
//! a state store, a collector, a realizer and an event handler; the `flink-autoscaler replay` tool
//! drives the very same steps on a recorded scenario. Every rule of the cycle lives here once.
//!
//! The steps follow the reference's `ScalingMetricCollector.collect` (observe, and the scaling
//! state loading of assess), `ScalingMetricEvaluator.evaluate` (assess) and
//! `ScalingExecutor.scaleResource` with `ScalingHistoryUtils.addToScalingHistoryAndStore`
//! (conclude):
//!
//! 1. [`observe`]: the restart rule (a job that switched to RUNNING after the first stored
//!    snapshot voids the stored window), the conversion of Flink metrics against the window of the
//!    current run (the observed-TPR fallback), the exclusion of vertices whose busy time is not
//!    finite, the insertion of the new snapshot, the window status and the trim of a full window.
//! 2. [`assess`]: the scaling history and tracking as a decision reads them
//!    ([`load_scaling_state`]: vertices gone from the topology dropped, trimmed by age and count,
//!    the restart duration recorded, the restart time), then fewer than two samples, the
//!    evaluation, and a window that is not full yet.
//! 3. [`conclude`]: the decision, the executed scaling recorded in history and tracking, the new
//!    parallelism overrides, the next delayed scale-down state.

use crate::autoscaler::CycleStep;
use crate::collector::{CollectedJobMetrics, MetricsSnapshot};
use crate::config::AutoScalerOptions;
use crate::model::event::EventType;
pub use crate::model::state::{JobState, StateChanges};
use crate::model::state::{ParallelismOverrides, ScalingHistory, ScalingSummary};
use crate::plugins::{PluginError, ResolvedPlugins, evaluate_with_plugins};
use crate::record::{DecisionRecord, JobOutcome, RecordInput};
use crate::scaling::{
    self, CycleEvent, Decision, DecisionInput, DecisionOutcome, max_restart_time_or_default,
    record_restart_duration_if_tracked_and_parallelism_matches, record_scaling, trim_scaling_history,
    trim_scaling_tracking,
};
use autoscaler_metrics::root_cause::{self, Explanation, VertexSignals};
use autoscaler_metrics::{
    CollectedMetrics, EvaluatedMetrics, JobTopology, MetricsError, ScalingMetric, TprEstimate, VertexId, VertexMap,
    WindowStatus, voids_history, window_and_trim,
};
use chrono::{DateTime, Utc};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What [`observe`] saw this cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The job graph with current parallelism.
    pub topology: JobTopology,
    /// When the job last switched to RUNNING.
    pub job_running_since: DateTime<Utc>,
    /// Whether the stored window was void (the job restarted since its first snapshot).
    pub restarted: bool,
    /// The window status after the new snapshot was added.
    pub window: WindowStatus,
    /// The vertices excluded from scaling this cycle because their busy time was not measured
    /// ([`unmeasured_vertices`]), as if listed in `vertex.exclude.ids`.
    pub unmeasured: Vec<VertexId>,
    /// Whether the unmeasured vertices are reported (a `MetricsIncomplete` event each, the
    /// `unmeasured` flag of their decision): this project's rule. Under
    /// `job.autoscaler.compat.reference-1-16` they are excluded silently, as the reference's
    /// collector does, and only for a collection of Flink metrics.
    pub report_unmeasured: bool,
}

impl Observation {
    /// The vertices excluded from scaling this cycle: `vertex.exclude.ids`, the vertices whose busy
    /// time could not be measured and the finished vertices (which the reference's collector adds
    /// to the job's exclusions too), each once. The realizer's merge with the user's own overrides
    /// reads this list.
    pub fn excluded_vertices(&self, options: &AutoScalerOptions) -> Vec<String> {
        let mut excluded = options.vertex_exclude_ids.clone();
        let finished = self.topology.vertices().iter().filter(|v| v.finished).map(|v| &v.id);
        for id in self.unmeasured.iter().chain(finished) {
            if !excluded.iter().any(|e| e == id.as_str()) {
                excluded.push(id.to_string());
            }
        }
        excluded
    }
}

/// `options` with `unmeasured` added to `vertex.exclude.ids` (borrowed when there is nothing to add):
/// the options the decision of a cycle reads.
pub fn effective_options<'o>(options: &'o AutoScalerOptions, unmeasured: &[VertexId]) -> Cow<'o, AutoScalerOptions> {
    let missing: Vec<&VertexId> = unmeasured
        .iter()
        .filter(|id| !options.vertex_exclude_ids.iter().any(|e| e == id.as_str()))
        .collect();
    if missing.is_empty() {
        return Cow::Borrowed(options);
    }
    let mut owned = options.clone();
    owned
        .vertex_exclude_ids
        .extend(missing.into_iter().map(ToString::to_string));
    Cow::Owned(owned)
}

/// Step 1: adds this cycle's collection, taken at `collected_at` (the cycle's `now` for a live
/// collection), to the job's metric window.
///
/// A job that switched to RUNNING after the first stored snapshot voids the stored window
/// ([`voids_history`]). A [`MetricsSnapshot::Flink`] collection is then converted against what is
/// left of the window (sources that are not catching up carry its `OBSERVED_TPR` average forward).
/// The vertices whose busy time this collection did not measure are excluded from scaling for the
/// cycle ([`unmeasured_vertices`]). The snapshot is inserted, the window status computed, and a
/// full window trimmed ([`window_and_trim`]). The metric history always counts as changed.
pub fn observe(
    state: &mut JobState,
    changes: &mut StateChanges,
    collected: CollectedJobMetrics,
    collected_at: DateTime<Utc>,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
) -> Observation {
    let CollectedJobMetrics {
        topology,
        job_running_since,
        metrics,
    } = collected;
    let restarted = voids_history(&state.metric_history, job_running_since);
    if restarted {
        state.metric_history.clear();
    }
    let from_flink = matches!(metrics, MetricsSnapshot::Flink(_));
    let snapshot = metrics.into_scaling_metrics(&topology, options, &state.metric_history);
    let report_unmeasured = !options.compat_reference_1_16;
    let unmeasured = if report_unmeasured {
        unmeasured_vertices(&topology, &snapshot, options)
    } else if from_flink {
        busy_time_not_finite(&snapshot)
    } else {
        Vec::new()
    };
    state.metric_history.insert(collected_at, snapshot);
    let window = window_and_trim(
        &mut state.metric_history,
        job_running_since,
        now,
        options.stabilization_interval,
        options.metrics_window,
    );
    changes.metric_history = true;
    Observation {
        topology,
        job_running_since,
        restarted,
        window,
        unmeasured,
        report_unmeasured,
    }
}

/// The *unmeasured* vertices of a collection (replay §3.3 step 7a): every vertex of `topology`,
/// not excluded already (`vertex.exclude.ids`, finished), whose `LOAD` is absent from `snapshot` or
/// not finite, in topology id order.
///
/// The reference's collector excludes a vertex whose busy time is not finite from scaling for the
/// cycle, silently; a collector that leaves busy time out altogether, or a snapshot of converted
/// metrics (a replayed scenario, a platform's own collector), escaped that rule and the vertex was
/// sized on the older samples of its window. This rule applies to every kind of collection, on the
/// converted `LOAD`, and the cycle reports each such vertex (`MetricsIncomplete`).
///
/// ```
/// use autoscaler_core::config::AutoScalerOptions;
/// use autoscaler_core::cycle::unmeasured_vertices;
/// use autoscaler_metrics::{CollectedMetrics, JobTopology, MetricValues, ScalingMetric, VertexId, VertexSpec};
/// let vertices = ["src", "map", "sink"].map(|id| VertexSpec::new(id, 1, 128));
/// let topology = JobTopology::new(vertices.to_vec(), vec![]).expect("valid topology");
/// let load = |value| {
///     let mut values = MetricValues::new();
///     values.insert(ScalingMetric::Load, value);
///     values
/// };
/// let mut snapshot = CollectedMetrics::default();
/// snapshot.vertex_metrics.insert(VertexId::new("src"), load(0.5));
/// snapshot.vertex_metrics.insert(VertexId::new("map"), load(f64::NAN));
/// // "sink" reported nothing at all.
/// let unmeasured = unmeasured_vertices(&topology, &snapshot, &AutoScalerOptions::default());
/// assert_eq!(unmeasured, [VertexId::new("map"), VertexId::new("sink")]);
/// ```
pub fn unmeasured_vertices(
    topology: &JobTopology,
    snapshot: &CollectedMetrics,
    options: &AutoScalerOptions,
) -> Vec<VertexId> {
    let vertices = topology.vertices();
    topology
        .id_order()
        .iter()
        .map(|&i| &vertices[i])
        .filter(|v| !v.finished && !options.vertex_exclude_ids.iter().any(|e| e == v.id.as_str()))
        .filter(|v| {
            snapshot
                .vertex_metrics
                .get(&v.id)
                .is_none_or(|values| !values.get_or_absent(ScalingMetric::Load).is_finite())
        })
        .map(|v| v.id.clone())
        .collect()
}

/// The 1.16 rule (`job.autoscaler.compat.reference-1-16`): the vertices of a converted Flink
/// collection whose `LOAD` is NaN. The conversion yields NaN exactly when the busy time Flink
/// reported was not finite (legacy sources, metrics not yet reported).
fn busy_time_not_finite(snapshot: &CollectedMetrics) -> Vec<VertexId> {
    snapshot
        .vertex_metrics
        .iter()
        .filter(|(_, values)| values.get_or_absent(ScalingMetric::Load).is_nan())
        .map(|(id, _)| id.clone())
        .collect()
}

/// The reason of the event a cycle emits for each unmeasured vertex ([`unmeasured_vertices`]).
pub const METRICS_INCOMPLETE_REASON: &str = "MetricsIncomplete";

/// The `MetricsIncomplete` Warning of an unmeasured vertex (replay §4.4), deduplicated per vertex
/// within `scaling.event.interval` by an event handler that deduplicates.
pub fn metrics_incomplete_event(topology: &JobTopology, vertex: &VertexId, interval: Duration) -> CycleEvent {
    let name = topology
        .get(vertex.as_str())
        .and_then(|v| v.name.as_deref())
        .filter(|n| !n.is_empty() && *n != vertex.as_str());
    let who = match name {
        Some(name) => format!("{name} ({vertex})"),
        None => vertex.to_string(),
    };
    CycleEvent {
        event_type: EventType::Warning,
        reason: METRICS_INCOMPLETE_REASON.to_owned(),
        message: format!(
            "Vertex {who} has no busy time (LOAD) in the latest collection: it is not scaled this cycle. \
             Check that the metrics collector reports busyTimeMsPerSecond for it."
        ),
        message_key: Some(format!("{METRICS_INCOMPLETE_REASON}:{vertex}")),
        interval: Some(interval),
        report_header: None,
    }
}

/// The scaling state a decision reads, as [`load_scaling_state`] prepares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingState {
    /// The scaling history trimmed by `history.max.age` and `history.max.count`.
    pub history: ScalingHistory,
    /// The restart time to plan with ([`max_restart_time_or_default`]).
    pub restart_time: Duration,
}

/// The scaling history and tracking as the cycle at `now` reads them (reference:
/// `ScalingMetricCollector.updateVertexList`, `getTrimmedScalingHistory`,
/// `getTrimmedScalingTracking`, `recordRestartDurationIfTrackedAndParallelismMatches`,
/// `getMaxRestartTimeOrDefault`).
///
/// History entries of vertices gone from `topology` are dropped from the stored history; the
/// tracking is trimmed in place. With `job_running_since` known, the restart duration of the latest
/// executed rescale is recorded when the job now runs at the parallelism it chose.
pub fn load_scaling_state(
    state: &mut JobState,
    changes: &mut StateChanges,
    topology: &JobTopology,
    job_running_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
) -> ScalingState {
    let before = state.scaling_history.len();
    state
        .scaling_history
        .retain(|id, _| topology.get(id.as_str()).is_some());
    changes.scaling_history |= state.scaling_history.len() != before;
    let history = trim_scaling_history(&state.scaling_history, now, options);
    state.scaling_tracking = trim_scaling_tracking(&state.scaling_tracking, now, options);
    if let Some(running_since) = job_running_since {
        changes.scaling_tracking |= record_restart_duration_if_tracked_and_parallelism_matches(
            &mut state.scaling_tracking,
            running_since,
            topology,
            &history,
        );
    }
    let restart_time = max_restart_time_or_default(&state.scaling_tracking, options);
    ScalingState { history, restart_time }
}

/// How far the evaluation got.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// Fewer than two samples in the window: nothing to evaluate yet.
    InsufficientSamples,
    /// The window could not be evaluated (a source without ingestion rate).
    Failed(MetricsError),
    /// Evaluated for reporting only: the window is not full yet.
    WindowNotFull {
        /// Still inside the stabilization interval.
        stabilizing: bool,
        /// The evaluated metrics.
        evaluated: EvaluatedMetrics,
    },
    /// Evaluated on a full window: a decision is to be made.
    Ready(EvaluatedMetrics),
}

/// The not-ready reason of too few samples ([`Stage::InsufficientSamples`]).
pub const INSUFFICIENT_SAMPLES: &str = "insufficient_samples";

/// The not-ready reason of a window that is not full yet ([`Stage::WindowNotFull`]).
pub fn window_not_full_reason(stabilizing: bool) -> &'static str {
    if stabilizing { "stabilizing" } else { "window_not_full" }
}

/// What [`assess`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// The scaling state the decision reads.
    pub scaling: ScalingState,
    /// How far the evaluation got.
    pub stage: Stage,
    /// The built-in true-processing-rate estimates of every vertex, from the same read of the
    /// window as the evaluation (they explain a decision); empty when nothing was evaluated.
    pub estimates: BTreeMap<VertexId, TprEstimate>,
    /// The window averages the root cause reads, from the same read of the window as the
    /// evaluation; `None` when nothing was evaluated (the root cause then reads the window).
    pub signals: Option<BTreeMap<VertexId, VertexSignals>>,
}

/// Step 2: [`load_scaling_state`], then the evaluation of the window if it has two samples or more
/// (reference `ScalingMetricEvaluator.computeEvaluatedMetrics`), with the custom evaluator the
/// job's configuration selected, if any, adding its metrics over the built-in ones vertex by vertex
/// ([`evaluate_with_plugins`]; pass `&ResolvedPlugins::default()` for the built-in evaluation).
pub fn assess(
    state: &mut JobState,
    changes: &mut StateChanges,
    observation: &Observation,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
    plugins: &ResolvedPlugins,
) -> Assessment {
    let scaling = load_scaling_state(
        state,
        changes,
        &observation.topology,
        Some(observation.job_running_since),
        now,
        options,
    );
    let mut estimates = BTreeMap::new();
    let mut signals = None;
    let stage = if state.metric_history.len() < 2 {
        Stage::InsufficientSamples
    } else {
        match evaluate_with_plugins(
            &observation.topology,
            &state.metric_history,
            &options.evaluation_config(scaling.restart_time),
            plugins,
        ) {
            Err(error) => Stage::Failed(error),
            Ok(evaluation) => {
                estimates = evaluation.estimates;
                signals = Some(evaluation.signals);
                let evaluated = evaluation.metrics;
                if observation.window.window_full {
                    Stage::Ready(evaluated)
                } else {
                    Stage::WindowNotFull {
                        stabilizing: observation.window.stabilizing,
                        evaluated,
                    }
                }
            }
        }
    };
    Assessment {
        scaling,
        stage,
        estimates,
        signals,
    }
}

/// The facts of the cycle a decision needs besides the state.
#[derive(Debug, Clone, Copy)]
pub struct DecisionFacts<'a> {
    /// The cycle's instant.
    pub now: DateTime<Utc>,
    /// The job graph with current parallelism.
    pub topology: &'a JobTopology,
    /// The evaluated metrics; only these vertices are considered for scaling.
    pub evaluated: &'a EvaluatedMetrics,
    /// The job's options.
    pub options: &'a AutoScalerOptions,
    /// Vertices excluded from scaling this cycle besides `vertex.exclude.ids`
    /// ([`Observation::unmeasured`]; none for a decision on given metrics).
    pub unmeasured: &'a [VertexId],
    /// TaskManager CPU as the platform reports it.
    pub task_manager_cpu: Option<f64>,
    /// TaskManager process memory in bytes as the context reports it
    /// ([`crate::JobAutoScalerContext::task_manager_memory`]).
    pub task_manager_memory: Option<u64>,
}

/// Step 3: decides (reference `ScalingExecutor.scaleResource`, [`scaling::decide`]) with the
/// plugins the job's configuration selected (a custom alignment mode, the cluster-resource check,
/// the scaling executor chain; `&ResolvedPlugins::default()` for none) and, when the decision
/// scales, records it: the summaries at `now` added to the trimmed history, a new tracking record
/// without restart duration, overrides for every evaluated vertex (its new parallelism, or its
/// current one when it does not change), memory tuning's configuration changes (empty when it did
/// not run). The delayed scale-down state counts as changed when the decision updated it or
/// scaled. A veto or a block by the resource check is a decision that records nothing, like any
/// other block.
///
/// # Errors
/// [`PluginError`] when a plugin fails (or an executor returns an unusable summary), or the
/// decision is aborted as the reference 1.16 aborts it (`compat.reference-1-16`): nothing is
/// recorded then, and the delayed scale-down state is left as it was.
pub fn conclude(
    state: &mut JobState,
    changes: &mut StateChanges,
    scaling: ScalingState,
    facts: &DecisionFacts<'_>,
    plugins: &ResolvedPlugins,
) -> Result<Decision, PluginError> {
    let ScalingState {
        mut history,
        restart_time,
    } = scaling;
    let options = effective_options(facts.options, facts.unmeasured);
    let options = options.as_ref();
    let input = DecisionInput {
        now: facts.now,
        topology: facts.topology,
        evaluated: facts.evaluated,
        scaling_history: &history,
        restart_time,
        options,
        in_excluded_period: options.is_excluded_period(facts.now),
        task_manager_cpu: facts.task_manager_cpu,
        task_manager_memory: facts.task_manager_memory,
    };
    let before = state.delayed_scale_down.clone();
    let decision = match scaling::decide(&input, plugins, &mut state.delayed_scale_down) {
        Ok(decision) => decision,
        Err(error) => {
            state.delayed_scale_down = before;
            return Err(error);
        }
    };
    changes.delayed_scale_down |= state.delayed_scale_down.updated;
    if matches!(decision.outcome, DecisionOutcome::Scale) {
        record_scaling(
            &mut history,
            &mut state.scaling_tracking,
            facts.now,
            &decision.summaries,
            options,
        );
        state.scaling_history = history;
        state.parallelism_overrides = scaled_overrides(facts.topology, facts.evaluated, &decision.summaries);
        changes.scaling_history = true;
        changes.scaling_tracking = true;
        changes.parallelism_overrides = true;
        state.config_changes = decision
            .memory_tuning
            .as_ref()
            .map(|tuning| tuning.changes.clone())
            .unwrap_or_default();
        changes.config_changes = true;
        changes.delayed_scale_down = true;
    }
    Ok(decision)
}

/// What one cycle did, from "disabled" to "decided".
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CycleOutcome {
    /// The autoscaler is disabled for the job; its state was cleared.
    Disabled,
    /// The job is not RUNNING; only stored overrides were re-applied.
    JobNotRunning,
    /// Metrics were not ready (just started, metrics missing during stabilization).
    NotReady(String),
    /// Fewer than two samples: nothing to evaluate yet.
    InsufficientSamples,
    /// Evaluated for reporting only: the window is not full yet.
    WindowNotFull {
        /// Still inside the stabilization interval.
        stabilizing: bool,
    },
    /// The evaluation or the decision failed ([`CycleStep::Evaluate`], [`CycleStep::Decide`]):
    /// nothing of a decision is recorded. `JobAutoScalerImpl::run_cycle` returns it as an
    /// [`AutoscalerError`](crate::AutoscalerError).
    Failed {
        /// The step that failed.
        step: CycleStep,
        /// What went wrong.
        message: String,
    },
    /// A decision was made: its outcome, the new parallelism of every vertex
    /// ([`Decision::parallelism`]), every examined vertex and the events it emitted.
    Decided(Box<Decision>),
}

impl CycleOutcome {
    /// The decision, when the cycle made one.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Self::Decided(decision) => Some(decision),
            _ => None,
        }
    }

    /// The decision's outcome, when the cycle made one.
    pub fn decision_outcome(&self) -> Option<DecisionOutcome> {
        self.decision().map(|d| d.outcome)
    }
}

/// Completes given metrics with the cycle's restart time ([`CycleMetrics::Evaluated`]).
pub type CompleteEvaluation<'a> = Box<dyn FnOnce(&JobTopology, Duration) -> EvaluatedMetrics + 'a>;

/// The metrics a cycle decides on.
// One value per cycle, moved once: boxing the collection would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub enum CycleMetrics<'a> {
    /// A collection taken at `collected_at` (the cycle's `now` for a live collection), added to
    /// the stored window and evaluated with it ([`observe`], [`assess`]).
    Collected {
        /// The collection.
        collected: CollectedJobMetrics,
        /// When it was taken.
        collected_at: DateTime<Utc>,
    },
    /// Metrics evaluated elsewhere (replay's `evaluated` mode, replay §3.4): no window, no
    /// evaluation; `complete` fills in what the decision reads, given the cycle's restart time.
    Evaluated {
        /// The job graph with current parallelism.
        topology: JobTopology,
        /// When the job last switched to RUNNING, if known (the restart-duration recording).
        job_running_since: Option<DateTime<Utc>>,
        /// Completes the given metrics with the cycle's restart time.
        complete: CompleteEvaluation<'a>,
    },
}

/// Everything a cycle is given besides the job's state and plugins.
pub struct CycleInput<'a> {
    /// The cycle's instant.
    pub now: DateTime<Utc>,
    /// The metrics to decide on.
    pub metrics: CycleMetrics<'a>,
    /// The job's options.
    pub options: &'a AutoScalerOptions,
    /// TaskManager CPU as the platform reports it.
    pub task_manager_cpu: Option<f64>,
    /// TaskManager process memory in bytes as the context reports it.
    pub task_manager_memory: Option<u64>,
    /// Whether to build the [`DecisionRecord`] (an event handler that wants it, every replay).
    pub records: bool,
    /// Whether to classify the window's backpressure ([`CycleResult::explanation`]) whatever
    /// the outcome (replay prints it); otherwise only a decision's record or scaling report does.
    pub explain: bool,
    /// The job's name for the record (`None`: the handler knows the job from its context).
    pub job: Option<&'a str>,
}

/// Everything one cycle did ([`run`]): the outcome with the decision, which parts of the state it
/// changed, the events to emit, the decision record. The job's state itself, the evaluated
/// metrics included, is in the [`JobState`] the cycle ran on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CycleResult {
    /// What happened.
    pub outcome: CycleOutcome,
    /// The parts of the state the cycle changed: write back exactly these.
    pub changes: StateChanges,
    /// The collection's job graph (`None` only for a disabled job without a collection).
    pub topology: Option<JobTopology>,
    /// The restart time the cycle planned with ([`max_restart_time_or_default`]).
    pub restart_time: Duration,
    /// The vertices excluded from scaling this cycle, for the merge with the user's own overrides
    /// ([`Observation::excluded_vertices`]).
    pub excluded: Vec<String>,
    /// The vertices whose busy time was not measured this cycle ([`unmeasured_vertices`]).
    pub unmeasured: Vec<VertexId>,
    /// The classification of the window's backpressure, when asked for or needed, and when some
    /// sample has `BACKPRESSURE`.
    pub explanation: Option<Explanation>,
    /// The root-cause line a scaling report of this cycle ends with (`None` without a bottleneck).
    pub root_cause: Option<String>,
    /// The decision record, when [`CycleInput::records`] asked for it.
    pub record: Option<DecisionRecord>,
    /// The events of a cycle without a decision (a decided cycle's are the decision's).
    undecided_events: Vec<CycleEvent>,
}

impl CycleResult {
    /// The events this cycle emits, in order: one `MetricsIncomplete` Warning per unmeasured
    /// vertex, then, when it decided, the decision's events.
    pub fn events(&self) -> &[CycleEvent] {
        match &self.outcome {
            CycleOutcome::Decided(decision) => &decision.events,
            _ => &self.undecided_events,
        }
    }
}

/// The result of a cycle of a disabled job (`job.autoscaler.enabled: false`): its state is cleared
/// (every part counts as changed), nothing is collected or decided. `topology`, when known, gives
/// the record its vertices; `records` asks for the record, of job `job`.
pub fn disable(
    state: &mut JobState,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
    topology: Option<JobTopology>,
    records: bool,
    job: Option<&str>,
) -> CycleResult {
    *state = JobState::default();
    let record = records.then(|| {
        DecisionRecord::undecided(
            now,
            job,
            topology.as_ref(),
            None,
            options,
            options.restart_time,
            JobOutcome::Disabled,
            "disabled",
        )
    });
    CycleResult {
        outcome: CycleOutcome::Disabled,
        changes: StateChanges::all(),
        topology,
        restart_time: options.restart_time,
        excluded: options.vertex_exclude_ids.clone(),
        unmeasured: Vec::new(),
        explanation: None,
        root_cause: None,
        record,
        undecided_events: Vec::new(),
    }
}

/// The record of a cycle whose metrics were not ready (the collector said so), before any state
/// was read.
pub fn not_ready_record(
    now: DateTime<Utc>,
    job: Option<&str>,
    options: &AutoScalerOptions,
    reason: &str,
) -> DecisionRecord {
    DecisionRecord::undecided(
        now,
        job,
        None,
        None,
        options,
        options.restart_time,
        JobOutcome::NotReady,
        &format!("metrics_not_ready: {reason}"),
    )
}

/// One whole cycle on the job's `state`, every stage in order: [`observe`] the collection,
/// [`assess`] the window (state loading, evaluation), [`conclude`] with a decision, the unmeasured
/// vertices' events and flags, the root cause, the decision record. Pure: the live
/// [`JobAutoScalerImpl`](crate::JobAutoScalerImpl), scenario replay and recording replay all run
/// this, and only load, collect, store, flush, emit and realize around it.
///
/// `state` is updated in place, the evaluated metrics included whenever the cycle evaluated;
/// [`CycleResult::changes`] says which parts to write back.
pub fn run(state: &mut JobState, input: CycleInput<'_>, plugins: &ResolvedPlugins) -> CycleResult {
    let CycleInput {
        now,
        metrics,
        options,
        task_manager_cpu,
        task_manager_memory,
        records,
        explain,
        job,
    } = input;
    if !options.enabled {
        let topology = match metrics {
            CycleMetrics::Collected { collected, .. } => collected.topology,
            CycleMetrics::Evaluated { topology, .. } => topology,
        };
        return disable(state, now, options, Some(topology), records, job);
    }
    let mut changes = StateChanges::default();
    let (observation, assessment, from_window) = match metrics {
        CycleMetrics::Collected {
            collected,
            collected_at,
        } => {
            let observation = observe(state, &mut changes, collected, collected_at, now, options);
            let assessment = assess(state, &mut changes, &observation, now, options, plugins);
            (observation, assessment, true)
        }
        CycleMetrics::Evaluated {
            topology,
            job_running_since,
            complete,
        } => {
            // Replay §3.4: the state loading, then the decision on the completed metrics; no
            // window, so no vertex is unmeasured and there is no root cause.
            let scaling = load_scaling_state(state, &mut changes, &topology, job_running_since, now, options);
            let evaluated = complete(&topology, scaling.restart_time);
            let observation = Observation {
                topology,
                job_running_since: job_running_since.unwrap_or(now),
                restarted: false,
                window: WindowStatus {
                    stabilizing: false,
                    window_full: true,
                    stable_time: now,
                    window_full_time: now,
                },
                unmeasured: Vec::new(),
                report_unmeasured: false,
            };
            let assessment = Assessment {
                scaling,
                stage: Stage::Ready(evaluated),
                estimates: BTreeMap::new(),
                signals: None,
            };
            (observation, assessment, false)
        }
    };
    let Assessment {
        scaling,
        stage,
        estimates,
        signals,
    } = assessment;
    let restart_time = scaling.restart_time;
    let undecided_events: Vec<CycleEvent> = if observation.report_unmeasured {
        observation
            .unmeasured
            .iter()
            .map(|v| metrics_incomplete_event(&observation.topology, v, options.scaling_event_interval))
            .collect()
    } else {
        Vec::new()
    };
    // The root cause, from the evaluation's read of the window when there was one.
    let explain_window = |state: &JobState| {
        let (topology, window) = (&observation.topology, &state.metric_history);
        from_window
            .then(|| match &signals {
                Some(signals) => root_cause::explain_with(topology, window, || signals),
                None => root_cause::explain(topology, window),
            })
            .flatten()
    };
    let mut explanation = if explain { explain_window(&*state) } else { None };
    let undecided = |evaluated: Option<&EvaluatedMetrics>, outcome: JobOutcome, reason: &str| {
        records.then(|| {
            DecisionRecord::undecided(
                now,
                job,
                Some(&observation.topology),
                evaluated,
                options,
                restart_time,
                outcome,
                reason,
            )
        })
    };
    let (outcome, record, undecided_events) = match stage {
        Stage::InsufficientSamples => (
            CycleOutcome::InsufficientSamples,
            undecided(None, JobOutcome::NotReady, INSUFFICIENT_SAMPLES),
            undecided_events,
        ),
        Stage::Failed(error) => {
            let message = error.to_string();
            let record = undecided(None, JobOutcome::Error, &message);
            let outcome = CycleOutcome::Failed {
                step: CycleStep::Evaluate,
                message,
            };
            (outcome, record, undecided_events)
        }
        Stage::WindowNotFull { stabilizing, evaluated } => {
            let evaluated = keep_evaluated(state, &mut changes, evaluated);
            let record = undecided(
                Some(&evaluated),
                JobOutcome::NotReady,
                window_not_full_reason(stabilizing),
            );
            (CycleOutcome::WindowNotFull { stabilizing }, record, undecided_events)
        }
        Stage::Ready(evaluated) => {
            let evaluated = keep_evaluated(state, &mut changes, evaluated);
            let facts = DecisionFacts {
                now,
                topology: &observation.topology,
                evaluated: &evaluated,
                options,
                unmeasured: &observation.unmeasured,
                task_manager_cpu,
                task_manager_memory,
            };
            match conclude(state, &mut changes, scaling, &facts, plugins) {
                Err(error) => {
                    let message = error.to_string();
                    let record = undecided(Some(&evaluated), JobOutcome::Error, &message);
                    let outcome = CycleOutcome::Failed {
                        step: CycleStep::Decide,
                        message,
                    };
                    (outcome, record, undecided_events)
                }
                Ok(mut decision) => {
                    if observation.report_unmeasured {
                        for id in &observation.unmeasured {
                            if let Some(vertex) = decision.vertices.get_mut(id) {
                                vertex.unmeasured = true;
                            }
                        }
                        decision.events.splice(0..0, undecided_events);
                    }
                    // The root cause, for the record and the scaling report's last line.
                    let reports = decision.events.iter().any(|e| e.report_header.is_some());
                    if explanation.is_none() && (records || reports) {
                        explanation = explain_window(&*state);
                    }
                    let record = records.then(|| {
                        decided_record(
                            now,
                            job,
                            &observation,
                            &estimates,
                            &evaluated,
                            &decision,
                            options,
                            restart_time,
                            explanation.as_ref(),
                        )
                    });
                    (CycleOutcome::Decided(Box::new(decision)), record, Vec::new())
                }
            }
        }
    };
    let root_cause = explanation
        .as_ref()
        .and_then(|e| crate::record::root_cause_line(&observation.topology, e));
    let excluded = observation.excluded_vertices(options);
    CycleResult {
        outcome,
        changes,
        topology: Some(observation.topology),
        restart_time,
        excluded,
        unmeasured: observation.unmeasured,
        explanation,
        root_cause,
        record,
        undecided_events,
    }
}

/// Keeps this cycle's evaluation in the job's state (the store keeps the latest, shared).
fn keep_evaluated(
    state: &mut JobState,
    changes: &mut StateChanges,
    evaluated: EvaluatedMetrics,
) -> Arc<EvaluatedMetrics> {
    let evaluated = Arc::new(evaluated);
    state.evaluated_metrics = Some(Arc::clone(&evaluated));
    changes.evaluated_metrics = true;
    evaluated
}

/// The record of a cycle that reached its decision: the decision against the options it read
/// ([`effective_options`]), with the evaluation's true-processing-rate estimates `tpr` (none
/// without a window) and the root cause.
#[allow(clippy::too_many_arguments)] // the facts of one cycle, each from another stage
fn decided_record(
    now: DateTime<Utc>,
    job: Option<&str>,
    observation: &Observation,
    tpr: &BTreeMap<VertexId, TprEstimate>,
    evaluated: &EvaluatedMetrics,
    decision: &Decision,
    options: &AutoScalerOptions,
    restart_time: Duration,
    explanation: Option<&Explanation>,
) -> DecisionRecord {
    let record_options = effective_options(options, &observation.unmeasured);
    let mut record = DecisionRecord::decided(&RecordInput {
        at: now,
        job,
        topology: &observation.topology,
        evaluated,
        decision,
        options: &record_options,
        restart_time,
        tpr,
    });
    if let Some(explanation) = explanation {
        record.set_explanation(&observation.topology, explanation);
    }
    record
}

/// The overrides of an executed scaling: every evaluated vertex of the topology at its new
/// parallelism, or at its current one when it does not change. The three lists are all in id
/// order, so this is one merge of them, without a lookup per vertex.
fn scaled_overrides(
    topology: &JobTopology,
    evaluated: &EvaluatedMetrics,
    summaries: &VertexMap<ScalingSummary>,
) -> ParallelismOverrides {
    let vertices = topology.vertices();
    let mut in_topology = topology.id_order().iter().map(|&i| &vertices[i]).peekable();
    let mut summaries = summaries.iter().peekable();
    let mut overrides = Vec::with_capacity(evaluated.vertices.len());
    for id in evaluated.vertices.keys() {
        while in_topology.next_if(|v| v.id < *id).is_some() {}
        let Some(info) = in_topology.next_if(|v| v.id == *id) else {
            continue;
        };
        while summaries.next_if(|(s, _)| *s < id).is_some() {}
        let new = summaries
            .next_if(|(s, _)| *s == id)
            .map_or(info.parallelism.get(), |(_, s)| s.new_parallelism);
        overrides.push((id.clone(), new));
    }
    ParallelismOverrides::from(overrides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::{ScalingRecord, ScalingSummary, ScalingTracking};
    use crate::scaling::DecisionOutcome;
    use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, RawJobMetrics};
    use autoscaler_metrics::{EdgeSpec, EvaluatedVertexMetrics, MetricHistory, MetricValues, ShipStrategy, VertexSpec};
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0)
            .single()
            .expect("valid instant")
    }

    fn topology(sink_parallelism: u32) -> JobTopology {
        JobTopology::new(
            vec![
                VertexSpec::new("src", 1, 128),
                VertexSpec::new("sink", sink_parallelism, 128),
            ],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Forward)],
        )
        .expect("valid topology")
    }

    /// `src -> sink` after `secs` seconds at 1000 records/s; the sink is 95 % busy at parallelism 1.
    fn snapshot(secs: i64) -> CollectedMetrics {
        let records = 1000.0 * secs as f64;
        let src = MetricValues::from_iter([
            (ScalingMetric::NumRecordsIn, records),
            (ScalingMetric::NumRecordsOut, records),
            (ScalingMetric::Load, 0.5),
            (ScalingMetric::Lag, 0.0),
        ]);
        let sink = MetricValues::from_iter([
            (ScalingMetric::NumRecordsIn, records),
            (ScalingMetric::NumRecordsInPerSecond, 1000.0),
            (ScalingMetric::Load, 0.95),
        ]);
        CollectedMetrics {
            vertex_metrics: [(VertexId::new("src"), src), (VertexId::new("sink"), sink)].into(),
            global_metrics: MetricValues::new(),
        }
    }

    fn collected(running_since: DateTime<Utc>, metrics: MetricsSnapshot) -> CollectedJobMetrics {
        CollectedJobMetrics {
            topology: topology(1),
            job_running_since: running_since,
            metrics,
        }
    }

    fn options(pairs: &[(&str, &str)]) -> AutoScalerOptions {
        AutoScalerOptions::from_configuration(&crate::config::Configuration::from_iter(pairs.iter().copied()))
            .expect("valid options")
    }

    fn times(history: &MetricHistory) -> Vec<i64> {
        history.iter().map(|(t, _)| t.timestamp() - 1_700_000_000).collect()
    }

    /// Raw Flink metrics of `src -> sink`: the source reads `rate` records/s, is not backpressured
    /// and has no lag; `sink_busy` is the sink's busy ms/s (NaN = not reported).
    fn raw(rate: f64, sink_busy: f64) -> RawJobMetrics {
        let agg = |v: f64| AggregatedMetric {
            min: v,
            max: v,
            avg: v,
            sum: v,
            skew: 0.0,
        };
        let mut raw = RawJobMetrics::default();
        raw.vertex_metrics.insert(
            VertexId::new("src"),
            [
                (FlinkMetric::BusyTimePerSec, agg(100.0)),
                (FlinkMetric::BackpressureTimePerSec, agg(0.0)),
                (
                    FlinkMetric::SourceTaskNumRecordsInPerSec,
                    AggregatedMetric::of_sum(rate),
                ),
            ]
            .into(),
        );
        raw.vertex_metrics.insert(
            VertexId::new("sink"),
            [(FlinkMetric::BusyTimePerSec, agg(sink_busy))].into(),
        );
        raw
    }

    fn observed_tpr_sample(tpr: f64) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: [(
                VertexId::new("src"),
                MetricValues::from_iter([(ScalingMetric::ObservedTpr, tpr)]),
            )]
            .into(),
            global_metrics: MetricValues::new(),
        }
    }

    #[test]
    fn scaled_overrides_cover_the_evaluated_vertices_of_the_topology() {
        // Declared out of id order; `x` is evaluated but not in the graph, `b` in the graph but not
        // evaluated, `y` summarized but neither.
        let topology = JobTopology::new(
            vec![
                VertexSpec::new("c", 2, 128),
                VertexSpec::new("a", 1, 128),
                VertexSpec::new("b", 3, 128),
            ],
            vec![],
        )
        .expect("valid topology");
        let evaluated = EvaluatedMetrics {
            vertices: ["a", "c", "x"]
                .map(|id| (VertexId::new(id), EvaluatedVertexMetrics::new()))
                .into(),
            global: EvaluatedVertexMetrics::new(),
        };
        let summary = |new| ScalingSummary {
            current_parallelism: 2,
            new_parallelism: new,
            metrics: EvaluatedVertexMetrics::new(),
        };
        let summaries = VertexMap::from([(VertexId::new("c"), summary(5)), (VertexId::new("y"), summary(7))]);
        let overrides = scaled_overrides(&topology, &evaluated, &summaries);
        assert_eq!(
            overrides.iter().map(|(id, p)| (id.as_str(), *p)).collect::<Vec<_>>(),
            [("a", 1), ("c", 5)]
        );
    }

    #[test]
    fn a_restart_after_the_first_snapshot_voids_the_window() {
        let options = options(&[]);
        let mut state = JobState {
            metric_history: [(at(100), snapshot(100)), (at(110), snapshot(110))]
                .into_iter()
                .collect(),
            ..JobState::default()
        };
        let mut changes = StateChanges::default();
        // Running since 105 > first snapshot 100: both stored snapshots go, the new one stays.
        let o = observe(
            &mut state,
            &mut changes,
            collected(at(105), MetricsSnapshot::Scaling(snapshot(120))),
            at(120),
            at(120),
            &options,
        );
        assert!(o.restarted && changes.metric_history);
        assert_eq!(times(&state.metric_history), [120]);
        // Running since exactly the first snapshot is not "after" it: nothing is dropped.
        let mut state = JobState {
            metric_history: [(at(100), snapshot(100))].into_iter().collect(),
            ..JobState::default()
        };
        let o = observe(
            &mut state,
            &mut changes,
            collected(at(100), MetricsSnapshot::Scaling(snapshot(110))),
            at(110),
            at(110),
            &options,
        );
        assert!(!o.restarted);
        assert_eq!(times(&state.metric_history), [100, 110]);
    }

    #[test]
    fn a_full_window_is_trimmed_to_now_minus_the_window() {
        // Window 60 s, stabilization 0: running since 0, snapshots at 0, 30, 60, 90; the first
        // stable snapshot is at 0, so the window is full from 60 s; at 90 the cut-off is 30.
        let options = options(&[
            ("job.autoscaler.metrics.window", "60 s"),
            ("job.autoscaler.stabilization.interval", "0 s"),
        ]);
        let mut state = JobState {
            metric_history: [0, 30, 60].iter().map(|s| (at(*s), snapshot(*s))).collect(),
            ..JobState::default()
        };
        let o = observe(
            &mut state,
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Scaling(snapshot(90))),
            at(90),
            at(90),
            &options,
        );
        assert!(o.window.window_full && !o.window.stabilizing);
        assert_eq!(times(&state.metric_history), [30, 60, 90]);
    }

    /// A state whose window holds observed-TPR samples 400 (at 10) and 600 (at 20).
    fn two_observed_tpr_samples() -> JobState {
        JobState {
            metric_history: [
                (at(10), observed_tpr_sample(400.0)),
                (at(20), observed_tpr_sample(600.0)),
            ]
            .into_iter()
            .collect(),
            ..JobState::default()
        }
    }

    #[test]
    fn flink_metrics_are_converted_against_the_window_of_the_current_run_only() {
        let options = options(&[]);
        // Two observed-TPR samples (400, 600) of the current run: not catching up, the source
        // carries their average 500 forward.
        let mut state = two_observed_tpr_samples();
        observe(
            &mut state,
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Flink(raw(100.0, 500.0))),
            at(30),
            at(30),
            &options,
        );
        let latest = state.metric_history.latest().and_then(|m| m.vertex("src")).copied();
        assert_eq!(latest.and_then(|m| m.get(ScalingMetric::ObservedTpr)), Some(500.0));

        // The same samples taken before the job (re)started at 15 are void: nothing to carry.
        let mut state = two_observed_tpr_samples();
        observe(
            &mut state,
            &mut StateChanges::default(),
            collected(at(15), MetricsSnapshot::Flink(raw(100.0, 500.0))),
            at(30),
            at(30),
            &options,
        );
        let latest = state.metric_history.latest().and_then(|m| m.vertex("src")).copied();
        assert!(
            latest
                .and_then(|m| m.get(ScalingMetric::ObservedTpr))
                .is_some_and(f64::is_nan)
        );
    }

    #[test]
    fn unmeasured_busy_time_excludes_a_vertex_for_every_kind_of_collection() {
        let options = options(&[]);
        let mut state = JobState::default();
        // The sink reports no finite busy time: LOAD NaN, excluded this cycle.
        let o = observe(
            &mut state,
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Flink(raw(100.0, f64::NAN))),
            at(10),
            at(10),
            &options,
        );
        assert_eq!(o.unmeasured, [VertexId::new("sink")]);
        assert_eq!(o.excluded_vertices(&options), ["sink"]);
        let effective = effective_options(&options, &o.unmeasured);
        assert_eq!(effective.vertex_exclude_ids, ["sink"]);
        // Already listed: the options are borrowed as they are.
        let listed = self::options(&[("job.autoscaler.vertex.exclude.ids", "sink")]);
        assert!(matches!(effective_options(&listed, &o.unmeasured), Cow::Borrowed(_)));

        // Scaling metrics (a platform's own, or recorded) too (replay §3.3 step 7a): a NaN `LOAD`
        // and an absent one alike.
        let mut nan_load = snapshot(10);
        if let Some(sink) = nan_load.vertex_metrics.get_mut("sink") {
            sink.insert(ScalingMetric::Load, f64::NAN);
        }
        let mut no_load = snapshot(10);
        if let Some(sink) = no_load.vertex_metrics.get_mut("sink") {
            sink.remove(ScalingMetric::Load);
        }
        for latest in [nan_load.clone(), no_load] {
            let o = observe(
                &mut JobState::default(),
                &mut StateChanges::default(),
                collected(at(0), MetricsSnapshot::Scaling(latest)),
                at(10),
                at(10),
                &options,
            );
            assert_eq!(o.unmeasured, [VertexId::new("sink")]);
            assert!(o.report_unmeasured);
        }
        // Listed in vertex.exclude.ids already: not unmeasured (and not reported).
        let o = observe(
            &mut JobState::default(),
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Scaling(nan_load.clone())),
            at(10),
            at(10),
            &listed,
        );
        assert!(o.unmeasured.is_empty());
        // Under the compat switch, 1.16's rule: silently, and only for Flink metrics.
        let compat = self::options(&[("job.autoscaler.compat.reference-1-16", "true")]);
        let o = observe(
            &mut JobState::default(),
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Scaling(nan_load)),
            at(10),
            at(10),
            &compat,
        );
        assert!(o.unmeasured.is_empty());
        let o = observe(
            &mut JobState::default(),
            &mut StateChanges::default(),
            collected(at(0), MetricsSnapshot::Flink(raw(100.0, f64::NAN))),
            at(10),
            at(10),
            &compat,
        );
        assert_eq!(o.unmeasured, [VertexId::new("sink")]);
        assert!(!o.report_unmeasured);
    }

    fn summary(current: u32, new: u32) -> ScalingSummary {
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics: EvaluatedVertexMetrics::new(),
        }
    }

    #[test]
    fn scaling_state_drops_gone_vertices_and_records_the_restart_duration() {
        let options = options(&[]);
        // A rescale of the sink 1 -> 2 started at 100; the job runs at parallelism 2 since 160.
        let mut state = JobState {
            scaling_history: [
                (VertexId::new("sink"), [(at(100), summary(1, 2))].into()),
                (VertexId::new("gone"), [(at(100), summary(1, 3))].into()),
            ]
            .into(),
            scaling_tracking: ScalingTracking {
                scaling_records: [(at(100), ScalingRecord { restart_duration: None })].into(),
            },
            ..JobState::default()
        };
        let mut changes = StateChanges::default();
        let scaling = load_scaling_state(&mut state, &mut changes, &topology(2), Some(at(160)), at(200), &options);
        assert!(changes.scaling_history && changes.scaling_tracking);
        assert_eq!(
            state.scaling_history.keys().map(VertexId::as_str).collect::<Vec<_>>(),
            ["sink"]
        );
        // Restart took 160 - 100 = 60 s; tracking is off by default, so restart.time (5 min) is used.
        assert_eq!(
            state.scaling_tracking.scaling_records[&at(100)].restart_duration,
            Some(Duration::from_secs(60))
        );
        assert_eq!(scaling.restart_time, Duration::from_secs(300));
        let tracked = self::options(&[("job.autoscaler.restart.time-tracking.enabled", "true")]);
        let mut changes = StateChanges::default();
        let scaling = load_scaling_state(&mut state, &mut changes, &topology(2), Some(at(160)), at(200), &tracked);
        assert_eq!(scaling.restart_time, Duration::from_secs(60));
        assert_eq!(changes, StateChanges::default(), "nothing new to record");
    }

    /// Runs observe, assess and conclude on a full 15-minute window of `src -> sink`.
    fn full_cycle(state: &mut JobState, options: &AutoScalerOptions) -> (StateChanges, Option<Decision>) {
        let mut changes = StateChanges::default();
        let now = at(1200);
        let o = observe(
            state,
            &mut changes,
            collected(at(0), MetricsSnapshot::Scaling(snapshot(1200))),
            now,
            now,
            options,
        );
        let a = assess(state, &mut changes, &o, now, options, &ResolvedPlugins::default());
        let Stage::Ready(evaluated) = a.stage else {
            return (changes, None);
        };
        let facts = DecisionFacts {
            now,
            topology: &o.topology,
            evaluated: &evaluated,
            options,
            unmeasured: &o.unmeasured,
            task_manager_cpu: None,
            task_manager_memory: None,
        };
        let decision =
            conclude(state, &mut changes, a.scaling, &facts, &ResolvedPlugins::default()).expect("no plugin to fail");
        (changes, Some(decision))
    }

    #[test]
    fn a_scaling_is_recorded_in_history_tracking_and_overrides() {
        // 20 minutes of samples every minute; the sink is 95 % busy at 1000 records/s: its TPR is
        // 1000 / 0.95 = 1052.6, below its scale-up threshold round(1000 / 0.9) = 1111. At the 0.7
        // target with the 5 min restart allowance it needs round(1000 * 300/1800 + 1000/0.7) = 1595
        // records/s: ceil(1595 / 1052.6) = 2 subtasks.
        let options = options(&[("job.autoscaler.utilization.max", "0.9")]);
        let mut state = JobState {
            metric_history: (0..20).map(|m| (at(60 * m), snapshot(60 * m))).collect(),
            ..JobState::default()
        };
        let (changes, decision) = full_cycle(&mut state, &options);
        let decision = decision.expect("a full window is decided");
        assert_eq!(decision.outcome, DecisionOutcome::Scale);
        assert_eq!(decision.parallelism["sink"], 2);
        assert!(
            changes.scaling_history
                && changes.scaling_tracking
                && changes.parallelism_overrides
                && changes.config_changes
                && changes.delayed_scale_down
        );
        assert_eq!(
            state.parallelism_overrides,
            [(VertexId::new("sink"), 2), (VertexId::new("src"), 1)].into()
        );
        assert_eq!(state.scaling_history["sink"][&at(1200)].new_parallelism, 2);
        assert_eq!(
            state.scaling_tracking.scaling_records[&at(1200)],
            ScalingRecord { restart_duration: None }
        );
        // The window kept the samples at or after 1200 - 900 = 300.
        assert_eq!(state.metric_history.first_time(), Some(at(300)));
    }

    #[test]
    fn a_balanced_decision_changes_only_the_metric_window() {
        // Utilization bound 1.0: the 95 %-busy sink is within bounds, nothing changes.
        let options = options(&[]);
        let mut state = JobState {
            metric_history: (0..20).map(|m| (at(60 * m), snapshot(60 * m))).collect(),
            ..JobState::default()
        };
        let (changes, decision) = full_cycle(&mut state, &options);
        assert!(matches!(
            decision.map(|d| d.outcome),
            Some(DecisionOutcome::NoChange(_))
        ));
        assert_eq!(
            changes,
            StateChanges {
                metric_history: true,
                ..StateChanges::default()
            }
        );
        assert!(state.parallelism_overrides.is_empty() && state.scaling_history.is_empty());
    }

    #[test]
    fn fewer_than_two_samples_are_not_evaluated() {
        let options = options(&[]);
        let mut state = JobState::default();
        let mut changes = StateChanges::default();
        let o = observe(
            &mut state,
            &mut changes,
            collected(at(0), MetricsSnapshot::Scaling(snapshot(10))),
            at(10),
            at(10),
            &options,
        );
        let a = assess(
            &mut state,
            &mut changes,
            &o,
            at(10),
            &options,
            &ResolvedPlugins::default(),
        );
        assert_eq!(a.stage, Stage::InsufficientSamples);
        assert_eq!(a.scaling.restart_time, Duration::from_secs(300));
    }
}
