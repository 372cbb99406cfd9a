//! Each extension point through the real cycle (`JobAutoScalerImpl::run_cycle` with the scripted
//! job of `support`): plugins registered with `with_plugins`, selected by the job configuration.
//!
//! Without plugins the job scales its sink 1 -> 2 at 10:02:00 (see `support`); every test here
//! checks how a plugin changes that.

mod support;

use autoscaler_core::plugins::{
    AlignmentModeContext, EvaluatorContext, ExecutorContext, ParallelismAlignmentMode, PluginError, PluginRegistry,
    ResourceCheck, ScalingExecutorPlugin, ScalingMetricsEvaluatorPlugin, ScalingSummaries,
};
use autoscaler_core::scaling::{BlockReason, DecisionOutcome};
use autoscaler_core::{AutoScalerStateStore, ConfigChanges, EventType};
use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, VertexId};
use autoscaler_sim::logs::LogBuffer;
use std::sync::{Arc, Mutex};
use support::{Harness, Setup, harness_with, lock};

/// `job.autoscaler.scaling.custom-executors: guard` with `guard.class: <class>` and extra
/// parameters of `guard`.
fn one_executor(class: &str, params: &[(&str, &str)]) -> Setup {
    let mut setup = Setup::default()
        .set("job.autoscaler.scaling.custom-executors", "guard")
        .set("job.autoscaler.scaling.custom-executor.guard.class", class);
    for (key, value) in params {
        setup = setup.set(&format!("job.autoscaler.scaling.custom-executor.guard.{key}"), value);
    }
    setup
}

/// Asserts that nothing of a scaling was recorded or realized.
async fn assert_nothing_recorded_or_realized(h: &Harness) {
    assert!(h.store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    assert!(
        h.store
            .get_scaling_tracking(&h.ctx)
            .await
            .expect("tracking")
            .scaling_records
            .is_empty()
    );
    assert!(
        h.store
            .get_parallelism_overrides(&h.ctx)
            .await
            .expect("overrides")
            .is_empty()
    );
    assert!(lock(&h.realizer.calls).is_empty(), "{:?}", lock(&h.realizer.calls));
    assert_eq!(h.parallelism(), (2, 1));
    assert!(h.events.messages("ScalingReport").is_empty());
}

/// Vetoes every scaling.
struct Veto;

impl ScalingExecutorPlugin for Veto {
    fn apply(&self, _: &ExecutorContext<'_>, _: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        Ok(ScalingSummaries::new())
    }
}

#[tokio::test]
async fn a_vetoing_executor_blocks_the_scaling_with_an_event_and_records_nothing() {
    let h = harness_with(Setup {
        plugins: PluginRegistry::new().with_executor("veto", Veto),
        ..one_executor("veto", &[])
    });
    h.until_window_full().await;
    assert_eq!(
        h.cycle().await.decision_outcome(),
        Some(DecisionOutcome::Blocked(BlockReason::Vetoed))
    );
    let events = lock(&h.events.0).clone();
    assert_eq!(
        events,
        [(
            EventType::Warning,
            "ScalingVetoed".to_owned(),
            "Scaling decision vetoed by scaling custom executor instance 'guard' (class=veto).".to_owned()
        )]
    );
    assert_nothing_recorded_or_realized(&h).await;
    // It stays vetoed, cycle after cycle.
    for _ in 0..3 {
        assert_eq!(
            h.cycle().await.decision_outcome(),
            Some(DecisionOutcome::Blocked(BlockReason::Vetoed))
        );
    }
    assert_nothing_recorded_or_realized(&h).await;
}

/// Caps the vertex named by its `vertex` parameter at its `max` parameter.
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
        let vertex = ctx
            .config
            .parameter("vertex")
            .ok_or_else(|| PluginError::failed("no vertex"))?;
        if let Some(summary) = summaries.get_mut(vertex) {
            summary.new_parallelism = summary.new_parallelism.min(max);
        }
        Ok(summaries)
    }
}

#[tokio::test]
async fn a_capping_executor_changes_what_is_reported_recorded_and_realized() {
    // Target utilization 0.3: every vertex needs round(1000 x 300/1800 + 1000/0.3) = 3500
    // records/s; the sink (TPR 1052.6/s) ceil(3500 / 1052.6) = 4 subtasks, the source (TPR
    // 1000 / 0.5 = 2000/s over 2 subtasks) ceil(3500 / 2000 x 2) = 4, riding along in its band.
    // The executor caps the sink at 3.
    let h = harness_with(Setup {
        plugins: PluginRegistry::new().with_executor("cap", Cap),
        ..one_executor("cap", &[("vertex", "sink"), ("max", "3")]).set("job.autoscaler.target.utilization", "0.3")
    });
    h.until_scaled().await;
    assert_eq!(h.parallelism(), (4, 3));
    let reports = h.events.messages("ScalingReport");
    assert_eq!(reports.len(), 1);
    assert!(
        reports[0].contains("Vertex ID sink | Parallelism 1 -> 3 |"),
        "{}",
        reports[0]
    );
    let history = h.store.get_scaling_history(&h.ctx).await.expect("history");
    let recorded: Vec<u32> = history["sink"].values().map(|s| s.new_parallelism).collect();
    assert_eq!(recorded, [3]);
    let overrides = h.store.get_parallelism_overrides(&h.ctx).await.expect("overrides");
    assert_eq!(overrides.get("sink"), Some(&3));

    // Without the executor the same job goes to 4.
    let uncapped = harness_with(Setup::default().set("job.autoscaler.target.utilization", "0.3"));
    uncapped.until_scaled().await;
    assert_eq!(uncapped.parallelism(), (4, 4));
}

/// Overrides the sink's true processing rate with its `tpr` parameter and keeps what it saw.
struct TprOverride {
    seen: Arc<Mutex<Vec<String>>>,
}

impl ScalingMetricsEvaluatorPlugin for TprOverride {
    fn evaluate_vertex_metrics(
        &self,
        vertex: &VertexId,
        _evaluated: &EvaluatedVertexMetrics,
        ctx: &EvaluatorContext<'_>,
    ) -> Result<EvaluatedVertexMetrics, PluginError> {
        let before: Vec<&str> = ctx.evaluated_vertices.keys().map(VertexId::as_str).collect();
        lock(&self.seen).push(format!("{vertex} after {before:?} backlog={}", ctx.processing_backlog));
        if vertex.as_str() != "sink" {
            return Ok(EvaluatedVertexMetrics::new());
        }
        let tpr: f64 = ctx
            .config
            .parameter("tpr")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| PluginError::failed("no tpr"))?;
        Ok(EvaluatedVertexMetrics::from_iter([(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::avg(tpr),
        )]))
    }
}

#[tokio::test]
async fn an_evaluator_overriding_tpr_drives_the_decision() {
    // TPR 400 instead of 1052.6: ceil(1595 / 400) = 4 subtasks instead of 2. Of the two
    // configured instances only the first one is used.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let h = harness_with(Setup {
        plugins: PluginRegistry::new().with_evaluator("tpr", TprOverride { seen: seen.clone() }),
        ..Setup::default()
            .set("job.autoscaler.metrics.custom-evaluators", "slow;other")
            .set("job.autoscaler.metrics.custom-evaluator.slow.class", "tpr")
            .set("job.autoscaler.metrics.custom-evaluator.slow.tpr", "400")
            .set("job.autoscaler.metrics.custom-evaluator.other.class", "tpr")
            .set("job.autoscaler.metrics.custom-evaluator.other.tpr", "1")
    });
    h.until_scaled().await;
    assert_eq!(h.parallelism(), (2, 4));
    let evaluated = h
        .store
        .get_evaluated_metrics(&h.ctx)
        .await
        .expect("evaluated")
        .expect("stored");
    assert_eq!(
        evaluated.vertices["sink"]
            .get(ScalingMetric::TrueProcessingRate)
            .map(|m| m.average),
        Some(400.0)
    );
    // In topological order, with the vertices evaluated before it; the job has no backlog.
    let seen = lock(&seen).clone();
    assert_eq!(
        seen[..2],
        ["src after [] backlog=false", "sink after [\"src\"] backlog=false"]
    );
}

/// Rounds a target up to a multiple of its `of` parameter, for every vertex.
struct MultipleOf;

impl ParallelismAlignmentMode for MultipleOf {
    fn is_applicable(&self, _: &AlignmentModeContext<'_>) -> bool {
        true
    }

    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        let of: i64 = ctx
            .config
            .parameter("of")
            .and_then(|v| v.parse().ok())
            .filter(|of| *of > 0)
            .ok_or_else(|| PluginError::failed("`of` must be a positive number"))?;
        let target = ctx.alignment.target;
        Ok((target + of - 1) / of * of)
    }
}

fn multiple_of(of: &str) -> Setup {
    Setup {
        plugins: PluginRegistry::new().with_alignment_mode("multiple-of", MultipleOf),
        ..Setup::default()
            .set("job.autoscaler.scaling.parallelism-alignment.mode", "threes")
            .set(
                "job.autoscaler.scaling.parallelism-alignment.mode.threes.class",
                "multiple-of",
            )
            .set("job.autoscaler.scaling.parallelism-alignment.mode.threes.of", of)
    }
}

#[tokio::test]
async fn a_custom_alignment_mode_aligns_with_its_own_parameters() {
    // The sink's target 2 becomes the next multiple of 3 (the FORWARD-fed sink is applicable
    // because the mode says so; the built-in modes would leave it at 2).
    let h = harness_with(multiple_of("3"));
    h.until_scaled().await;
    assert_eq!(h.parallelism(), (2, 3));
}

/// One `try_schedule` call: current and new instances, CPU and memory per instance.
type ScheduleRequest = (u32, u32, f64, u64);

/// Refuses every new TaskManager and keeps what it was asked.
struct NoRoom {
    asked: Arc<Mutex<Vec<ScheduleRequest>>>,
}

impl ResourceCheck for NoRoom {
    fn try_schedule(&self, current: u32, new: u32, cpu: f64, memory: u64) -> Result<bool, PluginError> {
        lock(&self.asked).push((current, new, cpu, memory));
        Ok(false)
    }
}

#[tokio::test]
async fn a_resource_check_that_refuses_blocks_the_scaling() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let h = harness_with(
        Setup {
            memory_metrics: true,
            cpu: Some(1.0),
            plugins: PluginRegistry::new().with_resource_check(NoRoom { asked: asked.clone() }),
            ..Setup::default()
        }
        .set("taskmanager.memory.process.size", "2 gb"),
    );
    h.until_window_full().await;
    assert_eq!(
        h.cycle().await.decision_outcome(),
        Some(DecisionOutcome::Blocked(BlockReason::ClusterResources))
    );
    // 2 slots used, one slot per TaskManager: 2 TaskManagers now; after the scaling the slots are
    // shared (the widest vertex uses all 2), so max(2, 2) = 2 slots, 2 TaskManagers; 1 core and
    // 2 gb each.
    assert_eq!(lock(&asked).clone(), [(2, 2, 1.0, 2 * 1024 * 1024 * 1024)]);
    // As the reference, the block emits no event of its own (memory tuning, which runs before the
    // check, still reports its recommendation).
    assert_eq!(h.events.reasons(), ["Configuration recommendation"]);
    assert_nothing_recorded_or_realized(&h).await;
}

#[tokio::test]
async fn unregistered_plugin_names_warn_and_fall_back_to_the_built_in_behaviour() {
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // An executor of an unregistered class, a custom alignment mode of an unregistered class and
    // an evaluator without a class, with only other plugins registered.
    let h = harness_with(Setup {
        plugins: PluginRegistry::new().with_executor("veto", Veto),
        ..one_executor("com.example.Missing", &[])
            .set("job.autoscaler.scaling.parallelism-alignment.mode", "threes")
            .set(
                "job.autoscaler.scaling.parallelism-alignment.mode.threes.class",
                "multiple-of",
            )
            .set("job.autoscaler.metrics.custom-evaluators", "nameless")
    });
    h.until_scaled().await;
    // Built-in behaviour: BALANCED leaves the sink at 2, nothing vetoes.
    assert_eq!(h.parallelism(), (2, 2));
    let text = logs.text();
    for expected in [
        "No registered scaling executor matches class 'com.example.Missing' configured for instance 'guard'",
        "Custom alignment mode 'threes' (class multiple-of) was not found among the registered plugins",
        "Falling back to BALANCED",
        "Custom metric evaluator instance 'nameless' is configured but no implementation class is set",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(text.contains("WARN"), "{text}");
}

/// Fails every call.
struct Boom;

impl ScalingExecutorPlugin for Boom {
    fn apply(&self, _: &ExecutorContext<'_>, _: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        Err(PluginError::failed("quota service unreachable"))
    }
}

#[tokio::test]
async fn a_failing_plugin_fails_the_cycle_with_an_autoscaler_error_and_records_nothing() {
    let h = harness_with(Setup {
        plugins: PluginRegistry::new().with_executor("boom", Boom),
        ..one_executor("boom", &[])
    });
    h.until_window_full().await;
    let error = h.try_cycle().await.expect_err("the executor fails");
    let expected = "scaling custom executor instance 'guard' (class=boom) failed: quota service unreachable";
    assert!(error.to_string().contains(expected), "{error}");
    let events = lock(&h.events.0).clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].0, events[0].1.as_str()),
        (EventType::Warning, "AutoscalerError")
    );
    assert!(events[0].2.contains(expected), "{}", events[0].2);
    assert_nothing_recorded_or_realized(&h).await;
    // The metric window was kept: the next cycle decides (and fails) again at once.
    assert!(h.try_cycle().await.is_err());

    // A custom alignment mode with a bad parameter fails the same way.
    let h = harness_with(multiple_of("zero"));
    h.until_window_full().await;
    let error = h.try_cycle().await.expect_err("the alignment mode fails");
    assert!(
        error
            .to_string()
            .contains("custom alignment mode 'threes' (class=multiple-of) failed: `of` must be a positive number"),
        "{error}"
    );
    assert_nothing_recorded_or_realized(&h).await;
}

/// What an executor saw: the process size in its configuration, and the config changes.
type SeenTuning = (Option<String>, ConfigChanges);

/// Keeps the tuned process size and changes its executor saw.
struct SeesTuning {
    seen: Arc<Mutex<Vec<SeenTuning>>>,
}

impl ScalingExecutorPlugin for SeesTuning {
    fn apply(&self, ctx: &ExecutorContext<'_>, summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        let size = ctx.config.configuration().get("taskmanager.memory.process.size");
        lock(&self.seen).push((size.map(str::to_owned), ctx.config_changes.clone()));
        Ok(summaries)
    }
}

#[tokio::test]
async fn executors_see_the_tuned_configuration_while_memory_tuning_is_enabled() {
    for enabled in [true, false] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let h = harness_with(Setup {
            memory_metrics: true,
            plugins: PluginRegistry::new().with_executor("sees", SeesTuning { seen: seen.clone() }),
            ..one_executor("sees", &[])
                .set("taskmanager.memory.process.size", "2 gb")
                .set("job.autoscaler.memory.tuning.enabled", &enabled.to_string())
        });
        h.until_scaled().await;
        let seen = lock(&seen).clone();
        let stored = h.store.get_config_changes(&h.ctx).await.expect("config changes");
        if enabled {
            // The tuned size of `memory_tuning_cycles` (1079430352 bytes), and the very changes
            // that were stored with the scaling.
            assert_eq!(seen, [(Some("1079430352 bytes".to_owned()), stored.clone())]);
            assert!(!stored.is_empty());
        } else {
            assert_eq!(seen, [(Some("2 gb".to_owned()), ConfigChanges::default())]);
            assert!(stored.is_empty());
        }
    }
}
