//! Each extension point with a test plugin: resolution from the configuration, then its effect on
//! the decision (the cycle-level tests, with the state store and realizer, live in the facade's
//! `tests/plugin_cycles.rs`).

use super::*;
use crate::config::AlignmentMode;
use crate::model::event::EventType;
use crate::model::state::{DelayedScaleDown, ScalingHistory, ScalingSummary};
use crate::scaling::{BlockReason, Decision, DecisionInput, DecisionOutcome, NoChangeReason, decide};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, EvaluationConfig,
    JobTopology, MetricHistory, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use chrono::{DateTime, TimeZone, Utc};
use std::sync::Mutex;
use std::time::Duration;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
}

fn conf(pairs: &[(&str, &str)]) -> Configuration {
    pairs.iter().copied().collect()
}

fn options(conf: &Configuration) -> AutoScalerOptions {
    AutoScalerOptions::from_configuration(conf).unwrap_or_else(|e| panic!("{e}"))
}

// ------------------------------------------------------------------------------------------------
// Test plugins
// ------------------------------------------------------------------------------------------------

/// Returns the summaries unchanged and logs its name.
struct Approve {
    name: &'static str,
    priority: i32,
    log: Arc<Mutex<Vec<String>>>,
}

impl ScalingExecutorPlugin for Approve {
    fn priority(&self) -> i32 {
        self.priority
    }
    fn apply(&self, ctx: &ExecutorContext<'_>, summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        let seen: Vec<String> = summaries
            .iter()
            .map(|(v, s)| format!("{v}={}", s.new_parallelism))
            .collect();
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
            "{}@{} saw {}",
            self.name,
            ctx.config.instance(),
            seen.join(",")
        ));
        Ok(summaries)
    }
}

/// Vetoes every scaling.
struct Veto;

impl ScalingExecutorPlugin for Veto {
    fn apply(&self, _: &ExecutorContext<'_>, _: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        Ok(ScalingSummaries::new())
    }
}

/// Caps every vertex at its instance parameter `max`.
struct Cap;

impl ScalingExecutorPlugin for Cap {
    fn apply(
        &self,
        ctx: &ExecutorContext<'_>,
        mut summaries: ScalingSummaries,
    ) -> Result<ScalingSummaries, PluginError> {
        let max: u32 = ctx
            .config
            .parameter("max")
            .ok_or_else(|| PluginError::failed("no max"))?
            .parse()
            .map_err(|_| PluginError::failed("max is not a number"))?;
        for summary in summaries.values_mut() {
            summary.new_parallelism = summary.new_parallelism.min(max);
        }
        Ok(summaries)
    }
}

/// Fails.
struct Boom;

impl ScalingExecutorPlugin for Boom {
    fn apply(&self, _: &ExecutorContext<'_>, _: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        Err(PluginError::failed("cost service unreachable"))
    }
}

/// Adds a summary for a vertex that does not exist.
struct Ghost;

impl ScalingExecutorPlugin for Ghost {
    fn apply(&self, _: &ExecutorContext<'_>, mut summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        summaries.insert(
            VertexId::new("ghost"),
            ScalingSummary {
                current_parallelism: 1,
                new_parallelism: 2,
                metrics: EvaluatedVertexMetrics::new(),
            },
        );
        Ok(summaries)
    }
}

/// Rounds scale-ups up to a multiple of its parameter `multiple`, for every vertex (also
/// rebalance-only ones, which the built-in modes leave alone).
struct RoundUpToMultiple;

impl ParallelismAlignmentMode for RoundUpToMultiple {
    fn is_applicable(&self, ctx: &AlignmentModeContext<'_>) -> bool {
        ctx.alignment.is_scale_up()
    }
    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        let multiple: i64 = ctx
            .config
            .parameter("multiple")
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| PluginError::failed("multiple must be a number"))?;
        let target = ctx.alignment.target;
        // Round up to the next multiple (targets are positive).
        Ok((target + multiple - 1) / multiple * multiple)
    }
}

/// One `try_schedule` call: current and new instances, CPU and memory per instance.
type ScheduleCall = (u32, u32, f64, u64);

/// Records what it was asked and answers `allow`.
struct Capacity {
    allow: bool,
    calls: Arc<Mutex<Vec<ScheduleCall>>>,
}

impl ResourceCheck for Capacity {
    fn try_schedule(&self, current: u32, new: u32, cpu: f64, memory: u64) -> Result<bool, PluginError> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((current, new, cpu, memory));
        Ok(self.allow)
    }
}

/// Overrides the `TRUE_PROCESSING_RATE` average of the vertex named by its parameter `vertex` with
/// its parameter `tpr`, and logs what its context showed.
struct TprOverride {
    log: Arc<Mutex<Vec<String>>>,
}

impl ScalingMetricsEvaluatorPlugin for TprOverride {
    fn evaluate_vertex_metrics(
        &self,
        vertex: &VertexId,
        evaluated: &EvaluatedVertexMetrics,
        ctx: &EvaluatorContext<'_>,
    ) -> Result<EvaluatedVertexMetrics, PluginError> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
            "{vertex}: built-in tpr {}, before {:?}, backlog {}",
            evaluated.get_or_absent(ScalingMetric::TrueProcessingRate).average,
            ctx.evaluated_vertices.keys().map(VertexId::as_str).collect::<Vec<_>>(),
            ctx.processing_backlog
        ));
        let mut out = EvaluatedVertexMetrics::new();
        if ctx.config.parameter("vertex") == Some(vertex.as_str()) {
            let tpr: f64 = ctx
                .config
                .parameter("tpr")
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| PluginError::failed("tpr must be a number"))?;
            out.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
        }
        Ok(out)
    }
}

/// Fails for every vertex.
struct FailingEvaluator;

impl ScalingMetricsEvaluatorPlugin for FailingEvaluator {
    fn evaluate_vertex_metrics(
        &self,
        _: &VertexId,
        _: &EvaluatedVertexMetrics,
        _: &EvaluatorContext<'_>,
    ) -> Result<EvaluatedVertexMetrics, PluginError> {
        Err(PluginError::failed("model not loaded"))
    }
}

// ------------------------------------------------------------------------------------------------
// Resolution
// ------------------------------------------------------------------------------------------------

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[test]
fn executors_resolve_by_class_skipping_unknown_unset_and_duplicate_instances() {
    let registry = PluginRegistry::new()
        .with_executor("veto", Veto)
        .with_executor("cap", Cap);
    let c = conf(&[
        ("job.autoscaler.scaling.custom-executors", "a;missing;noclass;a;b"),
        ("job.autoscaler.scaling.custom-executor.a.class", "cap"),
        ("job.autoscaler.scaling.custom-executor.missing.class", "not-registered"),
        ("job.autoscaler.scaling.custom-executor.noclass.max", "3"),
        // The legacy operator prefix is a fallback for the class key.
        (
            "kubernetes.operator.job.autoscaler.scaling.custom-executor.b.class",
            "veto",
        ),
    ]);
    let resolved = registry.resolve(&c, &options(&c));
    assert_eq!(resolved.executor_instances().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(resolved.executors()[0].config.class(), "cap");
    assert_eq!(resolved.executors()[1].config.class(), "veto");
}

#[test]
fn executors_run_in_ascending_priority_and_equal_priorities_keep_the_configured_order() {
    let log = log();
    let executor = |name, priority| Approve {
        name,
        priority,
        log: Arc::clone(&log),
    };
    let registry = PluginRegistry::new()
        .with_executor("low", executor("low", 10))
        .with_executor("default1", executor("default1", 0))
        .with_executor("default2", executor("default2", 0))
        .with_executor("high", executor("high", -10));
    let c = conf(&[
        ("job.autoscaler.scaling.custom-executors", "l;d2;h;d1"),
        ("job.autoscaler.scaling.custom-executor.l.class", "low"),
        ("job.autoscaler.scaling.custom-executor.d2.class", "default2"),
        ("job.autoscaler.scaling.custom-executor.h.class", "high"),
        ("job.autoscaler.scaling.custom-executor.d1.class", "default1"),
    ]);
    let resolved = registry.resolve(&c, &options(&c));
    assert_eq!(
        resolved.executor_instances().collect::<Vec<_>>(),
        ["h", "d2", "d1", "l"]
    );
    let fixture = Fixture::new();
    let decision = fixture.decide_with(&resolved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(
        entries(&log),
        [
            "high@h saw map=8,source=1",
            "default2@d2 saw map=8,source=1",
            "default1@d1 saw map=8,source=1",
            "low@l saw map=8,source=1",
        ]
    );
}

#[test]
fn only_the_first_custom_evaluator_is_used() {
    let registry = PluginRegistry::new()
        .with_evaluator("tpr", TprOverride { log: log() })
        .with_evaluator("failing", FailingEvaluator);
    let c = conf(&[
        ("job.autoscaler.metrics.custom-evaluators", "first;second"),
        ("job.autoscaler.metrics.custom-evaluator.first.class", "failing"),
        ("job.autoscaler.metrics.custom-evaluator.second.class", "tpr"),
    ]);
    let resolved = registry.resolve(&c, &options(&c));
    assert_eq!(resolved.evaluator_instance(), Some("first"));
    // A first instance that cannot be resolved means no evaluator (the rest are not consulted).
    let c = conf(&[
        ("job.autoscaler.metrics.custom-evaluators", "first;second"),
        ("job.autoscaler.metrics.custom-evaluator.second.class", "tpr"),
    ]);
    assert_eq!(registry.resolve(&c, &options(&c)).evaluator_instance(), None);
}

#[test]
fn a_custom_alignment_mode_needs_a_registered_class_else_balanced() {
    let registry = PluginRegistry::new().with_alignment_mode("round-up", RoundUpToMultiple);
    let mode = "job.autoscaler.scaling.parallelism-alignment.mode";
    let resolve = |pairs: &[(&str, &str)]| {
        let c = conf(pairs);
        let o = options(&c);
        (
            registry.resolve(&c, &o).alignment_mode_name().map(str::to_owned),
            o.alignment_mode,
        )
    };
    let class = "job.autoscaler.scaling.parallelism-alignment.mode.fives.class";
    assert_eq!(
        resolve(&[(mode, "fives"), (class, "round-up")]),
        (Some("fives".to_owned()), AlignmentMode::Balanced)
    );
    // No class, or a class nobody registered: BALANCED (with a warning).
    assert_eq!(resolve(&[(mode, "fives")]), (None, AlignmentMode::Balanced));
    assert_eq!(
        resolve(&[(mode, "fives"), (class, "not-registered")]),
        (None, AlignmentMode::Balanced)
    );
    // A built-in name always selects the built-in, whatever class key exists for it.
    assert_eq!(
        resolve(&[
            (mode, "EVENLY_SPREAD"),
            (
                "job.autoscaler.scaling.parallelism-alignment.mode.EVENLY_SPREAD.class",
                "round-up"
            )
        ]),
        (None, AlignmentMode::EvenlySpread)
    );
}

#[test]
fn each_instance_sees_its_own_parameters_over_the_job_configuration() {
    let c = conf(&[
        ("job.autoscaler.scaling.custom-executor.cap.class", "cap"),
        ("job.autoscaler.scaling.custom-executor.cap.max", "6"),
        ("job.autoscaler.scaling.custom-executor.other.max", "99"),
        ("max", "1"),
        ("job.autoscaler.utilization.target", "0.5"),
    ]);
    let config = PluginConfig::new(&c, CUSTOM_EXECUTOR_PREFIX, "cap", "cap");
    assert_eq!(config.parameters(), &conf(&[("class", "cap"), ("max", "6")]));
    // The job keys stay visible; a parameter wins over a job key of the same name.
    assert_eq!(config.configuration().get("max"), Some("6"));
    assert_eq!(
        config.configuration().get("job.autoscaler.utilization.target"),
        Some("0.5")
    );
}

// ------------------------------------------------------------------------------------------------
// Decision
// ------------------------------------------------------------------------------------------------

/// Evaluated metrics of a vertex at `parallelism` whose target capacity is `capacity` at restart
/// 0 (catch-up `capacity - 700 / 0.7`), with thresholds `[up, down]`.
fn vertex_metrics(parallelism: u32, tpr: f64, capacity: f64, up: f64, down: f64) -> EvaluatedVertexMetrics {
    [
        (
            ScalingMetric::Parallelism,
            EvaluatedScalingMetric::of(f64::from(parallelism)),
        ),
        (ScalingMetric::MaxParallelism, EvaluatedScalingMetric::of(720.0)),
        (ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(0.0)),
        (ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr)),
        (ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(700.0)),
        (
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::of(capacity - 1000.0),
        ),
        (ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(up)),
        (ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(down)),
    ]
    .into_iter()
    .collect()
}

struct Fixture {
    topology: JobTopology,
    evaluated: EvaluatedMetrics,
    history: ScalingHistory,
    options: AutoScalerOptions,
    cpu: Option<f64>,
    memory: Option<u64>,
}

impl Fixture {
    /// source (2) -REBALANCE-> map (4) -REBALANCE-> sink (2): map is the bottleneck (capacity 2000
    /// over TPR 1000: factor 2, 4 -> 8, outside its bound as 1000 < 1500); source can go from 2 to
    /// 1 within its band (factor 0.5); sink is at target. Built-in alignment leaves rebalance-only
    /// vertices alone.
    fn new() -> Self {
        let topology = JobTopology::new(
            vec![
                VertexSpec::new("source", 2, 720),
                VertexSpec::new("map", 4, 720),
                VertexSpec::new("sink", 2, 720),
            ],
            vec![
                EdgeSpec::new("source", "map", ShipStrategy::Rebalance),
                EdgeSpec::new("map", "sink", ShipStrategy::Rebalance),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut evaluated = EvaluatedMetrics::default();
        for (id, metrics) in [
            ("source", vertex_metrics(2, 1000.0, 500.0, 400.0, 2000.0)),
            ("map", vertex_metrics(4, 1000.0, 2000.0, 1500.0, 3000.0)),
            ("sink", vertex_metrics(2, 1000.0, 1000.0, 500.0, 1500.0)),
        ] {
            evaluated.vertices.insert(VertexId::new(id), metrics);
        }
        Fixture {
            topology,
            evaluated,
            history: ScalingHistory::new(),
            options: AutoScalerOptions {
                scale_down_interval: Duration::ZERO,
                ..AutoScalerOptions::default()
            },
            cpu: None,
            memory: None,
        }
    }

    fn decide_with(&self, plugins: &ResolvedPlugins) -> Result<Decision, PluginError> {
        let input = DecisionInput {
            now: at(0),
            topology: &self.topology,
            evaluated: &self.evaluated,
            scaling_history: &self.history,
            restart_time: Duration::ZERO,
            options: &self.options,
            in_excluded_period: false,
            task_manager_cpu: self.cpu,
            task_manager_memory: self.memory,
        };
        decide(&input, plugins, &mut DelayedScaleDown::default())
    }

    /// Resolves `registry` against `pairs` (the fixture's options are kept).
    fn resolve(&self, registry: &PluginRegistry, pairs: &[(&str, &str)]) -> ResolvedPlugins {
        let c = conf(pairs);
        let from_conf = options(&c);
        let o = AutoScalerOptions {
            custom_evaluators: from_conf.custom_evaluators,
            custom_executors: from_conf.custom_executors,
            custom_alignment_mode: from_conf.custom_alignment_mode,
            ..self.options.clone()
        };
        registry.resolve(&c, &o)
    }
}

fn targets(decision: &Decision) -> Vec<(&str, u32)> {
    decision.vertices.iter().map(|(v, d)| (v.as_str(), d.target)).collect()
}

fn one_executor(class: &str) -> Vec<(&'static str, String)> {
    vec![
        ("job.autoscaler.scaling.custom-executors", "guard".to_owned()),
        ("job.autoscaler.scaling.custom-executor.guard.class", class.to_owned()),
        ("job.autoscaler.scaling.custom-executor.guard.max", "6".to_owned()),
    ]
}

fn with_executor(fixture: &Fixture, class: &str, registry: &PluginRegistry) -> ResolvedPlugins {
    let pairs = one_executor(class);
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fixture.resolve(registry, &pairs)
}

#[test]
fn no_plugins_decides_as_the_built_in_executor() {
    let fixture = Fixture::new();
    let decision = fixture
        .decide_with(&ResolvedPlugins::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(targets(&decision), [("map", 8), ("sink", 2), ("source", 1)]);
}

#[test]
fn a_vetoing_executor_blocks_with_a_scaling_vetoed_event_and_no_report() {
    let fixture = Fixture::new();
    let registry = PluginRegistry::new().with_executor("veto", Veto);
    let decision = fixture
        .decide_with(&with_executor(&fixture, "veto", &registry))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Blocked(BlockReason::Vetoed));
    assert_eq!(decision.outcome.to_string(), "blocked/vetoed");
    // The only event is the veto: the enabled scaling report comes after the chain.
    assert_eq!(decision.events.len(), 1);
    let event = &decision.events[0];
    assert_eq!(event.event_type, EventType::Warning);
    assert_eq!(event.reason, "ScalingVetoed");
    assert_eq!(
        event.message,
        "Scaling decision vetoed by scaling custom executor instance 'guard' (class=veto)."
    );
    assert_eq!(event.message_key.as_deref(), Some("ScalingVetoed:guard"));
    assert_eq!(event.interval, Some(fixture.options.scaling_event_interval));
    // Nothing changes; the recommendation stays visible.
    assert_eq!(decision.parallelism["map"], 4);
    assert_eq!(decision.parallelism["source"], 2);
    assert_eq!(decision.summaries.len(), 2);
}

#[test]
fn a_capping_executor_changes_the_report_the_parallelism_and_the_targets() {
    let fixture = Fixture::new();
    let registry = PluginRegistry::new().with_executor("cap", Cap);
    let decision = fixture
        .decide_with(&with_executor(&fixture, "cap", &registry))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    // map 8 capped at max=6; source 1 and sink 2 are below the cap.
    assert_eq!(targets(&decision), [("map", 6), ("sink", 2), ("source", 1)]);
    assert_eq!(decision.parallelism["map"], 6);
    assert_eq!(decision.summaries["map"].new_parallelism, 6);
    assert_eq!(decision.events.len(), 1);
    assert!(
        decision.events[0]
            .message
            .contains("Vertex ID map | Parallelism 4 -> 6 |"),
        "{}",
        decision.events[0].message
    );
}

#[test]
fn a_failing_or_misbehaving_executor_fails_the_decision() {
    let fixture = Fixture::new();
    let registry = PluginRegistry::new()
        .with_executor("boom", Boom)
        .with_executor("ghost", Ghost);
    let error = fixture
        .decide_with(&with_executor(&fixture, "boom", &registry))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("scaling custom executor instance 'guard' (class=boom) failed: cost service unreachable")
    );
    let error = fixture
        .decide_with(&with_executor(&fixture, "ghost", &registry))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            "scaling custom executor instance 'guard' (class=ghost) returned an invalid scaling summary for \
             vertex ghost: the vertex is not in the job graph"
        )
    );
}

#[test]
fn executors_do_not_run_when_nothing_is_to_be_scaled_or_scaling_is_blocked() {
    let log = log();
    let registry = PluginRegistry::new().with_executor(
        "approve",
        Approve {
            name: "approve",
            priority: 0,
            log: Arc::clone(&log),
        },
    );
    // Everything within bounds: no chain.
    let mut fixture = Fixture::new();
    fixture
        .evaluated
        .vertices
        .insert(VertexId::new("map"), vertex_metrics(4, 1000.0, 2000.0, 500.0, 3000.0));
    let plugins = with_executor(&fixture, "approve", &registry);
    let decision = fixture.decide_with(&plugins).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        decision.outcome,
        DecisionOutcome::NoChange(NoChangeReason::WithinBounds)
    );
    // scaling.enabled=false: the disabled report, no chain.
    let mut fixture = Fixture::new();
    fixture.options.scaling_enabled = false;
    let decision = fixture.decide_with(&plugins).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Blocked(BlockReason::ScalingDisabled));
    assert!(entries(&log).is_empty());
}

#[test]
fn a_custom_alignment_mode_aligns_every_applicable_vertex_with_its_parameters() {
    let fixture = Fixture::new();
    let registry = PluginRegistry::new().with_alignment_mode("round-up", RoundUpToMultiple);
    let plugins = fixture.resolve(
        &registry,
        &[
            ("job.autoscaler.scaling.parallelism-alignment.mode", "fives"),
            (
                "job.autoscaler.scaling.parallelism-alignment.mode.fives.class",
                "round-up",
            ),
            ("job.autoscaler.scaling.parallelism-alignment.mode.fives.multiple", "5"),
        ],
    );
    let decision = fixture.decide_with(&plugins).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    // map (rebalance input, which BALANCED leaves at 8): 8 rounded up to 10. The source's
    // scale-down (2 -> 1) is not applicable and keeps its target.
    assert_eq!(targets(&decision), [("map", 10), ("sink", 2), ("source", 1)]);
    // A mode that fails fails the decision.
    let plugins = fixture.resolve(
        &registry,
        &[
            ("job.autoscaler.scaling.parallelism-alignment.mode", "fives"),
            (
                "job.autoscaler.scaling.parallelism-alignment.mode.fives.class",
                "round-up",
            ),
        ],
    );
    let error = fixture.decide_with(&plugins).err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("custom alignment mode 'fives' (class=round-up) failed: multiple must be a number")
    );
}

#[test]
fn a_resource_check_that_refuses_blocks_silently_with_the_reference_instance_counts() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let check = |allow| Capacity {
        allow,
        calls: Arc::clone(&calls),
    };
    let mut fixture = Fixture::new();
    fixture.cpu = Some(1.5);
    fixture.memory = Some(1 << 30);
    fixture.options.task_slots_per_task_manager = 2;
    fixture
        .evaluated
        .global
        .insert(ScalingMetric::NumTaskSlotsUsed, EvaluatedScalingMetric::of(4.0));
    let blocking = PluginRegistry::new().with_resource_check(check(false));
    let decision = fixture
        .decide_with(&fixture.resolve(&blocking, &[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        decision.outcome,
        DecisionOutcome::Blocked(BlockReason::ClusterResources)
    );
    assert!(decision.events.is_empty());
    assert_eq!(decision.parallelism["map"], 4);
    // 4 slots used = the largest current parallelism (map 4): slots are shared, so the largest new
    // parallelism (map 8) after. TaskManagers: ceil(4 / 2) = 2 now, ceil(8 / 2) = 4 after.
    assert_eq!(
        calls.lock().unwrap_or_else(|e| e.into_inner()).as_slice(),
        [(2, 4, 1.5, 1 << 30)]
    );

    let allowing = PluginRegistry::new().with_resource_check(check(true));
    let decision = fixture
        .decide_with(&fixture.resolve(&allowing, &[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);

    // No slot metric: the JobManager metrics are not ready, blocked without asking.
    calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    fixture.evaluated.global.remove(ScalingMetric::NumTaskSlotsUsed);
    let decision = fixture
        .decide_with(&fixture.resolve(&allowing, &[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        decision.outcome,
        DecisionOutcome::Blocked(BlockReason::ClusterResources)
    );
    // Unknown TaskManager CPU: nothing can be assumed, not asked, not blocked.
    fixture.cpu = None;
    let decision = fixture
        .decide_with(&fixture.resolve(&blocking, &[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert!(calls.lock().unwrap_or_else(|e| e.into_inner()).is_empty());
}

#[test]
fn the_resource_check_runs_before_the_quota_and_the_executors() {
    let mut fixture = Fixture::new();
    fixture.cpu = Some(1.0);
    fixture.memory = Some(1 << 30);
    fixture
        .evaluated
        .global
        .insert(ScalingMetric::NumTaskSlotsUsed, EvaluatedScalingMetric::of(4.0));
    let registry = PluginRegistry::new()
        .with_resource_check(Capacity {
            allow: false,
            calls: Arc::new(Mutex::new(Vec::new())),
        })
        .with_executor("veto", Veto);
    let decision = fixture
        .decide_with(&with_executor(&fixture, "veto", &registry))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        decision.outcome,
        DecisionOutcome::Blocked(BlockReason::ClusterResources)
    );
    assert!(decision.events.is_empty());
}

// ------------------------------------------------------------------------------------------------
// Evaluation
// ------------------------------------------------------------------------------------------------

/// src -> sink, 1000 records/s through both over 1 s, both 50 % busy: built-in TPR 1000 / 0.5 = 2000.
fn two_vertex_job() -> (JobTopology, MetricHistory) {
    let topology = JobTopology::new(
        vec![VertexSpec::new("src", 1, 128), VertexSpec::new("sink", 1, 128)],
        vec![EdgeSpec::new("src", "sink", ShipStrategy::Rebalance)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let snapshot = |records: f64| CollectedMetrics {
        vertex_metrics: [
            (
                VertexId::new("src"),
                [
                    (ScalingMetric::NumRecordsIn, records),
                    (ScalingMetric::NumRecordsOut, records),
                    (ScalingMetric::Lag, 0.0),
                    (ScalingMetric::Load, 0.5),
                ]
                .into_iter()
                .collect(),
            ),
            (
                VertexId::new("sink"),
                [(ScalingMetric::NumRecordsIn, records), (ScalingMetric::Load, 0.5)]
                    .into_iter()
                    .collect(),
            ),
        ]
        .into_iter()
        .collect(),
        global_metrics: Default::default(),
    };
    let history = [(at(0), snapshot(0.0)), (at(1), snapshot(1000.0))]
        .into_iter()
        .collect();
    (topology, history)
}

#[test]
fn an_evaluator_overriding_tpr_drives_the_decision() {
    let (topology, history) = two_vertex_job();
    let log = log();
    let registry = PluginRegistry::new().with_evaluator("tpr", TprOverride { log: Arc::clone(&log) });
    let c = conf(&[
        ("job.autoscaler.metrics.custom-evaluators", "slow-sink"),
        ("job.autoscaler.metrics.custom-evaluator.slow-sink.class", "tpr"),
        ("job.autoscaler.metrics.custom-evaluator.slow-sink.vertex", "sink"),
        ("job.autoscaler.metrics.custom-evaluator.slow-sink.tpr", "500"),
    ]);
    let o = options(&c);
    let plugins = registry.resolve(&c, &o);
    let config = EvaluationConfig::default();
    let built_in = evaluate_with_plugins(&topology, &history, &config, &ResolvedPlugins::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .metrics;
    let custom = evaluate_with_plugins(&topology, &history, &config, &plugins)
        .unwrap_or_else(|e| panic!("{e}"))
        .metrics;
    let tpr = |e: &EvaluatedMetrics, v: &str| e.vertex_metric(v, ScalingMetric::TrueProcessingRate).map(|m| m.average);
    assert_eq!(tpr(&built_in, "sink"), Some(2000.0));
    assert_eq!(tpr(&custom, "sink"), Some(500.0));
    assert_eq!(tpr(&custom, "src"), Some(2000.0));
    assert_eq!(
        entries(&log),
        [
            "src: built-in tpr 2000, before [], backlog false",
            "sink: built-in tpr 2000, before [\"src\"], backlog false"
        ]
    );

    let decide = |evaluated: &EvaluatedMetrics| {
        let input = DecisionInput {
            now: at(1),
            topology: &topology,
            evaluated,
            scaling_history: &ScalingHistory::new(),
            restart_time: Duration::ZERO,
            options: &o,
            in_excluded_period: false,
            task_manager_cpu: None,
            task_manager_memory: None,
        };
        decide(&input, &plugins, &mut DelayedScaleDown::default()).unwrap_or_else(|e| panic!("{e}"))
    };
    // Built-in: capacity round(1000 / 0.7) = 1429 over TPR 2000 is a factor 0.71, ceil(0.71) = 1:
    // the sink stays at 1.
    assert_eq!(
        decide(&built_in).outcome,
        DecisionOutcome::NoChange(NoChangeReason::AtTarget)
    );
    // Overridden: 500 is below the scale-up threshold round(1000 / 1.0) = 1000; factor 1429 / 500 =
    // 2.858, ceil(2.858 x 1) = 3.
    let decision = decide(&custom);
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(decision.parallelism["sink"], 3);
}

#[test]
fn a_failing_evaluator_leaves_the_built_in_metrics() {
    let (topology, history) = two_vertex_job();
    let registry = PluginRegistry::new().with_evaluator("failing", FailingEvaluator);
    let c = conf(&[
        ("job.autoscaler.metrics.custom-evaluators", "e"),
        ("job.autoscaler.metrics.custom-evaluator.e.class", "failing"),
    ]);
    let plugins = registry.resolve(&c, &options(&c));
    assert_eq!(plugins.evaluator_instance(), Some("e"));
    let config = EvaluationConfig::default();
    let built_in = evaluate_with_plugins(&topology, &history, &config, &ResolvedPlugins::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .metrics;
    let custom = evaluate_with_plugins(&topology, &history, &config, &plugins)
        .unwrap_or_else(|e| panic!("{e}"))
        .metrics;
    assert_eq!(custom, built_in);
}
