//! One decision over all vertices (the reference's `ScalingExecutor.scaleResource` up to, not
//! including, persisting; anchor §2.7).

use super::ParallelismChange;
use super::delayed_scale_down::clear_all;
use super::report;
use super::vertex_scaler::{VertexScaleInput, compute_scale_target_parallelism};
use super::{
    BlockReason, CycleEvent, Decision, DecisionInput, DecisionOutcome, NoChangeReason, VertexConstraint, VertexDecision,
};
use crate::model::state::{ConfigChanges, DelayedScaleDown, ScalingSummary};
use crate::plugins::{ChainOutcome, DecisionHooks, PluginError, ResolvedPlugins, ScalingSummaries};
use crate::tuning::{self, TuningInput};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, ShipStrategy, VertexInfo,
    VertexMap,
};
use std::collections::{BTreeMap, BTreeSet};

/// Decides the cycle at `input.now` (anchor §2.7 steps 2-9, replay §3.5), with the plugins the
/// job's configuration selected (`&ResolvedPlugins::default()` for none).
///
/// In order: memory pressure blocks before any vertex is looked at; every evaluated vertex that is
/// neither excluded (`vertex.exclude.ids`, finished) gets its target from the vertex scaler (a
/// custom alignment mode, if selected, aligns the changing vertices instead of the built-in mode);
/// if no changing vertex is outside its utilization bound nothing happens; `scaling.enabled=false`
/// and then an excluded period block with a "disabled" scaling report; the cluster-resource check
/// (none without a plugin: the reference's no-op) may block silently
/// ([`BlockReason::ClusterResources`]); the resource quota blocks with `ResourceQuotaReached`;
/// then the scaling executors run in ascending priority: an empty result is a veto
/// ([`BlockReason::Vetoed`], a Warning `ScalingVetoed` event), otherwise the report,
/// [`Decision::summaries`], [`Decision::parallelism`] and the vertices' targets follow the chain's
/// output. A change to be executed emits the enabled report and clears the delayed scale-down
/// state.
///
/// `delayed_scale_down` is updated in place (its `updated` flag tells whether to persist it). On
/// [`DecisionOutcome::Scale`] the caller then persists with [`record_scaling`](super::record_scaling).
///
/// # Errors
/// [`PluginError`] when a custom alignment mode, the resource check or an executor fails, or an
/// executor returns an unusable summary; [`PluginError::Aborted`] ([`DecisionError`](super::DecisionError)) where the
/// reference 1.16 aborts the decision and `job.autoscaler.compat.reference-1-16` asks to do the
/// same. Nothing is to be recorded then; the delayed scale-down state may have been updated for
/// the vertices decided before, and the caller discards it.
pub fn decide(
    input: &DecisionInput<'_>,
    plugins: &ResolvedPlugins,
    delayed_scale_down: &mut DelayedScaleDown,
) -> Result<Decision, PluginError> {
    decide_inner(input, plugins, delayed_scale_down)
}

fn decide_inner<P: DecisionHooks>(
    input: &DecisionInput<'_>,
    plugins: &P,
    delayed_scale_down: &mut DelayedScaleDown,
) -> Result<Decision, P::Error> {
    let options = input.options;
    let vertices = input.topology.vertices();
    let current_parallelism: VertexMap<u32> = input
        .topology
        .id_order()
        .iter()
        .map(|&i| (vertices[i].id.clone(), vertices[i].parallelism.get()))
        .collect();
    let mut decision = Decision {
        outcome: DecisionOutcome::NoChange(NoChangeReason::AtTarget),
        vertices: VertexMap::new(),
        summaries: VertexMap::new(),
        parallelism: current_parallelism,
        events: Vec::new(),
        memory_tuning: None,
    };

    if let Some(event) = memory_pressure_event(input) {
        decision.outcome = DecisionOutcome::Blocked(BlockReason::MemoryPressure);
        decision.events.push(event);
        return Ok(decision);
    }

    let excluded: BTreeSet<&str> = options.vertex_exclude_ids.iter().map(String::as_str).collect();
    // Collected in vertex order, then built into maps at once (cheaper than inserting one by one).
    let mut vertices = Vec::with_capacity(input.evaluated.vertices.len());
    let mut summaries = Vec::new();
    let mut any_change = false;
    let mut any_outside_bound = false;
    for (vertex, metrics) in &input.evaluated.vertices {
        let info = input.topology.get(vertex.as_str());
        let current = current_parallelism_of(metrics, info);
        if excluded.contains(vertex.as_str()) || info.is_some_and(|i| i.finished) {
            vertices.push((
                vertex.clone(),
                VertexDecision {
                    current,
                    target: current,
                    outside_utilization_bound: false,
                    excluded: true,
                    unmeasured: false,
                    expected_processing_rate: f64::NAN,
                    constraint: VertexConstraint::None,
                },
            ));
            continue;
        }
        let scale_input = VertexScaleInput {
            vertex,
            metrics,
            current,
            max_parallelism: java_int_metric(metrics, ScalingMetric::MaxParallelism)
                .unwrap_or_else(|| info.map_or(i64::from(current), |i| i64::from(i.max_parallelism.get()))),
            num_source_partitions: java_int_metric(metrics, ScalingMetric::NumSourcePartitions)
                .unwrap_or_else(|| info.map_or(0, |i| i64::from(i.num_source_partitions))),
            has_hash_input: info.is_some_and(has_hash_input),
            info,
            history: input.scaling_history.get(vertex),
            restart_time: input.restart_time,
            now: input.now,
            options,
        };
        let result = compute_scale_target_parallelism(&scale_input, plugins, delayed_scale_down, &mut decision.events)?;
        let ParallelismChange {
            new,
            outside_utilization_bound,
            ..
        } = result.change;
        vertices.push((
            vertex.clone(),
            VertexDecision {
                current,
                target: new,
                outside_utilization_bound,
                excluded: false,
                unmeasured: false,
                expected_processing_rate: result.expected_processing_rate,
                constraint: result.constraint,
            },
        ));
        if result.change.is_no_change() {
            continue;
        }
        any_change = true;
        any_outside_bound |= outside_utilization_bound;
        summaries.push((
            vertex.clone(),
            ScalingSummary {
                current_parallelism: current,
                new_parallelism: new,
                metrics: summary_metrics(metrics, result.expected_processing_rate, new),
            },
        ));
    }
    decision.vertices = vertices.into_iter().collect();

    // In-band changes only ride along when some changing vertex is out of band.
    if !any_outside_bound {
        decision.outcome = DecisionOutcome::NoChange(if any_change {
            NoChangeReason::WithinBounds
        } else {
            NoChangeReason::AtTarget
        });
        return Ok(decision);
    }
    decision.summaries = summaries.into_iter().collect();

    let blocked_header = if !options.scaling_enabled {
        Some((BlockReason::ScalingDisabled, report::scaling_disabled_header()))
    } else if input.in_excluded_period {
        Some((BlockReason::ExcludedPeriod, report::excluded_period_header(options)))
    } else {
        None
    };
    if let Some((reason, header)) = blocked_header {
        decision
            .events
            .push(report::scaling_report_event(&decision.summaries, header, options));
        decision.outcome = DecisionOutcome::Blocked(reason);
        return Ok(decision);
    }

    // Memory tuning: its recommendation, and the TaskManager memory the resource checks assume.
    let task_manager_memory = tune_memory(input, &mut decision);

    if plugins.exceeds_cluster_resources(input, &decision.summaries, task_manager_memory)? {
        decision.outcome = DecisionOutcome::Blocked(BlockReason::ClusterResources);
        return Ok(decision);
    }

    if scaling_would_exceed_resource_quota(input, &decision.summaries, task_manager_memory) {
        decision.events.push(report::resource_quota_event(options));
        decision.outcome = DecisionOutcome::Blocked(BlockReason::ResourceQuota);
        return Ok(decision);
    }

    if plugins.has_executors() {
        let no_changes = ConfigChanges::default();
        let config_changes = decision.memory_tuning.as_ref().map_or(&no_changes, |t| &t.changes);
        match plugins.run_executor_chain(input, decision.summaries.clone(), config_changes)? {
            ChainOutcome::Vetoed { instance, class } => {
                decision
                    .events
                    .push(report::scaling_vetoed_event(&instance, &class, options));
                decision.outcome = DecisionOutcome::Blocked(BlockReason::Vetoed);
                return Ok(decision);
            }
            ChainOutcome::Approved(summaries) => adopt_executor_summaries(&mut decision, summaries),
        }
    }

    decision.events.push(report::scaling_report_event(
        &decision.summaries,
        report::scaling_enabled_header(),
        options,
    ));
    for (vertex, summary) in &decision.summaries {
        decision.parallelism.insert(vertex.clone(), summary.new_parallelism);
    }
    clear_all(delayed_scale_down);
    decision.outcome = DecisionOutcome::Scale;
    Ok(decision)
}

/// Makes the executor chain's output the decision: its summaries, and each examined vertex's target
/// (a vertex the chain dropped keeps its current parallelism).
fn adopt_executor_summaries(decision: &mut Decision, summaries: ScalingSummaries) {
    if summaries == decision.summaries {
        return;
    }
    for (vertex, detail) in decision.vertices.iter_mut() {
        if detail.excluded {
            continue;
        }
        match summaries.get(vertex) {
            Some(summary) => detail.target = summary.new_parallelism,
            None => {
                detail.target = detail.current;
                detail.outside_utilization_bound = false;
            }
        }
    }
    decision.summaries = summaries;
}

/// Writes what the reference's executor writes into the evaluated metrics it was handed:
/// `EXPECTED_PROCESSING_RATE` where the vertex scaler computed one and, for the summarized
/// vertices, `RECOMMENDED_PARALLELISM` (even when the change is blocked).
pub fn apply_to_evaluated(decision: &Decision, evaluated: &mut EvaluatedMetrics) {
    for (vertex, detail) in &decision.vertices {
        if let Some(metrics) = evaluated.vertices.get_mut(vertex)
            && !detail.expected_processing_rate.is_nan()
        {
            metrics.insert(
                ScalingMetric::ExpectedProcessingRate,
                EvaluatedScalingMetric::of(detail.expected_processing_rate),
            );
        }
    }
    for (vertex, summary) in &decision.summaries {
        if let Some(metrics) = evaluated.vertices.get_mut(vertex) {
            metrics.insert(
                ScalingMetric::RecommendedParallelism,
                EvaluatedScalingMetric::of(f64::from(summary.new_parallelism)),
            );
        }
    }
}

/// The summary keeps the vertex's metrics with the expectation and recommendation the reference
/// writes into the same map.
fn summary_metrics(
    metrics: &EvaluatedVertexMetrics,
    expected_processing_rate: f64,
    new: u32,
) -> EvaluatedVertexMetrics {
    let mut metrics = *metrics;
    metrics.insert(
        ScalingMetric::ExpectedProcessingRate,
        EvaluatedScalingMetric::of(expected_processing_rate),
    );
    metrics.insert(
        ScalingMetric::RecommendedParallelism,
        EvaluatedScalingMetric::of(f64::from(new)),
    );
    metrics
}

/// Runs memory tuning ([`crate::tuning`]) for the summaries about to be executed, keeps its result
/// in [`Decision::memory_tuning`] (its event among the events) and returns the TaskManager memory
/// the resource checks assume afterwards: the tuned process size when tuning is enabled (the
/// reference checks against `ConfigChanges.newConfigWithOverrides`).
fn tune_memory(input: &DecisionInput<'_>, decision: &mut Decision) -> Option<u64> {
    let tuning = tuning::tune_task_manager_memory(&TuningInput {
        options: input.options,
        task_manager_memory: input.task_manager_memory,
        topology: input.topology,
        evaluated: input.evaluated,
        summaries: &decision.summaries,
    });
    if let Ok(recommendation) = &tuning.outcome {
        decision.events.push(recommendation.event(input.options));
    }
    let memory = tuning::tuned_task_manager_memory(&tuning.changes, input.options, input.task_manager_memory);
    decision.memory_tuning = Some(tuning);
    memory
}

/// GC pressure (current) above its threshold, else heap usage (average) above its threshold.
fn memory_pressure_event(input: &DecisionInput<'_>) -> Option<CycleEvent> {
    let global = &input.evaluated.global;
    let gc_pressure = global.get_or_absent(ScalingMetric::GcPressure).current;
    if gc_pressure > input.options.gc_pressure_threshold {
        return Some(report::gc_pressure_event(gc_pressure, input.options));
    }
    let heap_usage = global.get_or_absent(ScalingMetric::HeapMaxUsageRatio).average;
    if heap_usage > input.options.heap_usage_threshold {
        return Some(report::heap_usage_event(heap_usage, input.options));
    }
    None
}

/// A metric's current value as Java's `(int)` cast, `None` when absent or NaN.
fn java_int_metric(metrics: &EvaluatedVertexMetrics, metric: ScalingMetric) -> Option<i64> {
    metrics
        .get(metric)
        .map(|m| m.current)
        .filter(|v| !v.is_nan())
        .map(|v| i64::from(v as i32))
}

/// The evaluated `PARALLELISM`, falling back to the topology (or 1) when it is missing or not a
/// positive integer.
fn current_parallelism_of(metrics: &EvaluatedVertexMetrics, info: Option<&VertexInfo>) -> u32 {
    java_int_metric(metrics, ScalingMetric::Parallelism)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or_else(|| info.map_or(1, |i| i.parallelism.get()))
}

/// Whether some input edge is key-partitioned (alignment applies to keyed vertices).
fn has_hash_input(info: &VertexInfo) -> bool {
    info.inputs.iter().any(|(_, strategy)| *strategy == ShipStrategy::Hash)
}

/// The reference's `scalingWouldExceedResourceQuota` (anchor §2.7 step 7): per slot sharing group
/// the largest summarized parallelism, before and after; TaskManagers = floor(slots / slots per TM);
/// only growth is checked, against `quota.cpu` (TM cpu x TMs) and `quota.memory` (TM memory x TMs).
fn scaling_would_exceed_resource_quota(
    input: &DecisionInput<'_>,
    summaries: &VertexMap<ScalingSummary>,
    task_manager_memory: Option<u64>,
) -> bool {
    let options = input.options;
    if options.quota_cpu.is_none() && options.quota_memory.is_none() {
        return false;
    }
    let mut groups: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut has_group_info = false;
    for vertex in input.topology.vertices() {
        let Some(group) = vertex.slot_sharing_group.as_deref() else {
            continue;
        };
        has_group_info = true;
        let entry = groups.entry(group).or_insert((0, 0));
        if let Some(summary) = summaries.get(&vertex.id) {
            entry.0 = entry.0.max(summary.current_parallelism);
            entry.1 = entry.1.max(summary.new_parallelism);
        }
    }
    if !has_group_info {
        return false;
    }
    let slots_per_tm = i64::from(options.task_slots_per_task_manager);
    if slots_per_tm <= 0 {
        return false;
    }
    let current_slots: i64 = groups.values().map(|(cur, _)| i64::from(*cur)).sum();
    let new_slots: i64 = groups.values().map(|(_, new)| i64::from(*new)).sum();
    let current_tms = current_slots / slots_per_tm;
    let new_tms = new_slots / slots_per_tm;
    if new_tms <= current_tms {
        return false;
    }
    if let Some(cpu_quota) = options.quota_cpu {
        let total_cpu = input.task_manager_cpu.unwrap_or(0.0) * new_tms as f64;
        if total_cpu > cpu_quota {
            return true;
        }
    }
    if let Some(memory_quota) = options.quota_memory {
        // Java long arithmetic.
        let tm_memory = i64::try_from(task_manager_memory.unwrap_or(0)).unwrap_or(i64::MAX);
        let total_memory = tm_memory.wrapping_mul(new_tms);
        if total_memory > i64::try_from(memory_quota).unwrap_or(i64::MAX) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AutoScalerOptions;
    use crate::model::state::ScalingHistory;
    use autoscaler_metrics::VertexId;
    use autoscaler_metrics::{EdgeSpec, JobTopology, VertexSpec};
    use chrono::{DateTime, TimeZone, Utc};
    use std::time::Duration;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
    }

    /// Evaluated metrics of a vertex at `parallelism` whose target capacity is `capacity` at
    /// restart 0, with thresholds `[up, down]`.
    fn vertex_metrics(parallelism: u32, tpr: f64, capacity: f64, up: f64, down: f64) -> EvaluatedVertexMetrics {
        let mut m = EvaluatedVertexMetrics::new();
        m.insert(
            ScalingMetric::Parallelism,
            EvaluatedScalingMetric::of(f64::from(parallelism)),
        );
        m.insert(ScalingMetric::MaxParallelism, EvaluatedScalingMetric::of(720.0));
        m.insert(ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(0.0));
        m.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
        m.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(700.0));
        m.insert(
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::of(capacity - 1000.0),
        );
        m.insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(up));
        m.insert(ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(down));
        m
    }

    struct Fixture {
        topology: JobTopology,
        evaluated: EvaluatedMetrics,
        history: ScalingHistory,
        options: AutoScalerOptions,
        in_excluded_period: bool,
        cpu: Option<f64>,
        memory: Option<u64>,
    }

    impl Fixture {
        /// source (2) -REBALANCE-> map (4) -HASH-> sink (2); map is the bottleneck (needs 2x),
        /// source could go down from 2 to 1 within its band, sink is at target.
        fn new() -> Self {
            let mut source = VertexSpec::new("source", 2, 720);
            source.slot_sharing_group = Some("default".to_owned());
            let mut map = VertexSpec::new("map", 4, 720);
            map.slot_sharing_group = Some("default".to_owned());
            let mut sink = VertexSpec::new("sink", 2, 720);
            sink.slot_sharing_group = Some("default".to_owned());
            let topology = JobTopology::new(
                vec![source, map, sink],
                vec![
                    EdgeSpec::new("source", "map", ShipStrategy::Rebalance),
                    EdgeSpec::new("map", "sink", ShipStrategy::Rebalance),
                ],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let mut evaluated = EvaluatedMetrics::default();
            evaluated
                .vertices
                .insert(VertexId::new("source"), vertex_metrics(2, 1000.0, 500.0, 400.0, 2000.0));
            evaluated
                .vertices
                .insert(VertexId::new("map"), vertex_metrics(4, 1000.0, 2000.0, 1500.0, 3000.0));
            evaluated
                .vertices
                .insert(VertexId::new("sink"), vertex_metrics(2, 1000.0, 1000.0, 500.0, 1500.0));
            Fixture {
                topology,
                evaluated,
                history: ScalingHistory::new(),
                options: AutoScalerOptions {
                    scale_down_interval: Duration::ZERO,
                    ..AutoScalerOptions::default()
                },
                in_excluded_period: false,
                cpu: None,
                memory: None,
            }
        }

        fn decide(&self, state: &mut DelayedScaleDown) -> Decision {
            decide(
                &DecisionInput {
                    now: at(0),
                    topology: &self.topology,
                    evaluated: &self.evaluated,
                    scaling_history: &self.history,
                    restart_time: Duration::ZERO,
                    options: &self.options,
                    in_excluded_period: self.in_excluded_period,
                    task_manager_cpu: self.cpu,
                    task_manager_memory: self.memory,
                },
                &ResolvedPlugins::default(),
                state,
            )
            .unwrap_or_else(|e| panic!("no plugin to fail: {e}"))
        }
    }

    fn targets(decision: &Decision) -> Vec<(&str, u32)> {
        decision.vertices.iter().map(|(v, d)| (v.as_str(), d.target)).collect()
    }

    #[test]
    fn out_of_band_vertex_carries_in_band_changes() {
        let fixture = Fixture::new();
        let mut state = DelayedScaleDown::default();
        let decision = fixture.decide(&mut state);
        assert_eq!(decision.outcome, DecisionOutcome::Scale);
        // map: sf 2 -> 8 (outside: 1000 < 1500); source: sf 0.5 -> 1 (inside); sink unchanged.
        assert_eq!(targets(&decision), [("map", 8), ("sink", 2), ("source", 1)]);
        assert_eq!(decision.summaries.len(), 2);
        assert_eq!(decision.parallelism["map"], 8);
        assert_eq!(decision.parallelism["source"], 1);
        assert_eq!(decision.events.len(), 1);
        let report = &decision.events[0];
        assert_eq!(report.reason, "ScalingReport");
        assert_eq!(
            report.message,
            "Scaling execution enabled, begin scaling vertices:\
             { Vertex ID map | Parallelism 4 -> 8 | Processing capacity 1000.00 -> 2000.00 | Target data rate 700.00}\
             { Vertex ID source | Parallelism 2 -> 1 | Processing capacity 1000.00 -> 500.00 | Target data rate 700.00}"
        );
        assert_eq!(report.message_key.as_deref(), Some("ScalingExecutor"));
        let map = &decision.summaries["map"].metrics;
        assert_eq!(map.get_or_absent(ScalingMetric::RecommendedParallelism).current, 8.0);
        assert_eq!(map.get_or_absent(ScalingMetric::ExpectedProcessingRate).current, 2000.0);
    }

    #[test]
    fn all_changes_within_bounds_is_no_change() {
        let mut fixture = Fixture::new();
        fixture
            .evaluated
            .vertices
            .insert(VertexId::new("map"), vertex_metrics(4, 1000.0, 2000.0, 500.0, 3000.0));
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        assert_eq!(
            decision.outcome,
            DecisionOutcome::NoChange(NoChangeReason::WithinBounds)
        );
        assert!(decision.summaries.is_empty());
        assert!(decision.events.is_empty());
        assert_eq!(decision.parallelism["map"], 4);
        assert_eq!(decision.vertices["map"].target, 8);
        // Nothing changes at all (only the sink, which is at its target): at target.
        let mut fixture = Fixture::new();
        fixture.evaluated.vertices.retain(|v, _| v.as_str() == "sink");
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        assert_eq!(decision.outcome, DecisionOutcome::NoChange(NoChangeReason::AtTarget));
    }

    #[test]
    fn excluded_and_finished_vertices_keep_their_parallelism() {
        let mut fixture = Fixture::new();
        fixture.options.vertex_exclude_ids = vec!["map".to_owned()];
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        let map = decision.vertices["map"];
        assert!(map.excluded);
        assert_eq!((map.current, map.target), (4, 4));
        assert!(map.expected_processing_rate.is_nan());
        // Only the in-band source change remains.
        assert_eq!(
            decision.outcome,
            DecisionOutcome::NoChange(NoChangeReason::WithinBounds)
        );
    }

    #[test]
    fn memory_pressure_blocks_before_any_vertex() {
        let mut fixture = Fixture::new();
        fixture
            .evaluated
            .global
            .insert(ScalingMetric::GcPressure, EvaluatedScalingMetric::of(0.5));
        fixture.options.gc_pressure_threshold = 0.3;
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        assert_eq!(decision.outcome, DecisionOutcome::Blocked(BlockReason::MemoryPressure));
        assert!(decision.vertices.is_empty());
        assert_eq!(decision.events[0].message_key.as_deref(), Some("gcPressure"));
        assert!(decision.events[0].message.starts_with("GC Pressure 0.5 is above"));
        // Heap usage uses the average.
        fixture.options.gc_pressure_threshold = 1.0;
        fixture.evaluated.global.insert(
            ScalingMetric::HeapMaxUsageRatio,
            EvaluatedScalingMetric::new(0.99, 0.95),
        );
        fixture.options.heap_usage_threshold = 0.9;
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        assert_eq!(decision.outcome.reason(), Some("memory_pressure"));
        assert!(decision.events[0].message.starts_with("Heap Usage 0.95 is above"));
    }

    #[test]
    fn scaling_disabled_wins_over_excluded_period_and_keeps_delayed_scale_downs() {
        let mut fixture = Fixture::new();
        fixture.options.scaling_enabled = false;
        fixture.in_excluded_period = true;
        fixture.options.scale_down_interval = Duration::from_secs(3600);
        let mut state = DelayedScaleDown::default();
        let decision = fixture.decide(&mut state);
        assert_eq!(decision.outcome, DecisionOutcome::Blocked(BlockReason::ScalingDisabled));
        assert_eq!(decision.parallelism["map"], 4);
        assert!(decision.events[0].message.starts_with(
            "Scaling execution disabled by config job.autoscaler.scaling.enabled:false, recommended parallelism \
             change:{ Vertex ID map | Parallelism 4 -> 8"
        ));
        // The source's scale-down is pending and survives the block.
        assert!(state.delayed_vertices.contains_key("source"));
        fixture.options.scaling_enabled = true;
        fixture.options.excluded_periods =
            vec![crate::config::ExcludedPeriod::parse("* * * ? * *").expect("valid period")];
        let decision = fixture.decide(&mut state);
        assert_eq!(decision.outcome.reason(), Some("excluded_period"));
        assert!(decision.events[0].message.starts_with(
            "Scaling execution disabled by config job.autoscaler.excluded.periods:[* * * ? * *], recommended"
        ));
        // Executing clears every pending scale-down.
        fixture.in_excluded_period = false;
        let decision = fixture.decide(&mut state);
        assert_eq!(decision.outcome, DecisionOutcome::Scale);
        assert!(state.delayed_vertices.is_empty() && state.updated);
    }

    #[test]
    fn resource_quota_blocks_growth_beyond_the_quota() {
        // Summarized vertices only (map 4 -> 8): 4 -> 8 TMs at 1 slot per TM.
        let mut fixture = Fixture::new();
        fixture.options.scale_down_interval = Duration::from_secs(3600);
        fixture.cpu = Some(1.0);
        fixture.options.quota_cpu = Some(7.5);
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        assert_eq!(decision.outcome, DecisionOutcome::Blocked(BlockReason::ResourceQuota));
        assert_eq!(
            decision.events.last().map(|e| e.reason.as_str()),
            Some("ResourceQuotaReached")
        );
        fixture.options.quota_cpu = Some(8.0);
        assert_eq!(
            fixture.decide(&mut DelayedScaleDown::default()).outcome,
            DecisionOutcome::Scale
        );
        // Memory: 8 TMs x 1 GiB > 7 GiB.
        fixture.memory = Some(1 << 30);
        fixture.options.quota_memory = Some(7 << 30);
        assert_eq!(
            fixture.decide(&mut DelayedScaleDown::default()).outcome.reason(),
            Some("resource_quota")
        );
        // Without slot sharing information the check is skipped.
        let mut no_groups = Fixture::new();
        no_groups.topology = JobTopology::new(
            vec![
                VertexSpec::new("source", 2, 720),
                VertexSpec::new("map", 4, 720),
                VertexSpec::new("sink", 2, 720),
            ],
            vec![],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        no_groups.options.quota_cpu = Some(0.0);
        no_groups.cpu = Some(1.0);
        assert_eq!(
            no_groups.decide(&mut DelayedScaleDown::default()).outcome,
            DecisionOutcome::Scale
        );
    }

    #[test]
    fn apply_to_evaluated_writes_expectation_and_recommendation() {
        let mut fixture = Fixture::new();
        let decision = fixture.decide(&mut DelayedScaleDown::default());
        apply_to_evaluated(&decision, &mut fixture.evaluated);
        let map = fixture.evaluated.vertices["map"];
        assert_eq!(map.get_or_absent(ScalingMetric::RecommendedParallelism).current, 8.0);
        assert_eq!(map.get_or_absent(ScalingMetric::ExpectedProcessingRate).current, 2000.0);
        assert!(!fixture.evaluated.vertices["sink"].contains(ScalingMetric::ExpectedProcessingRate));
    }
}
