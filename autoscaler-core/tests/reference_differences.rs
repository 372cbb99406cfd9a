//! Where the decision departs from the reference 1.16 on purpose, and the switch back
//! (`job.autoscaler.compat.reference-1-16`), over whole decisions:
//! * the partition cap in alignment (replay §3.5.1, the reference's FLINK-40389): a source never
//!   ends above its partition count, in every mode but OFF; a custom mode keeps its own say;
//! * the observed-scalability guard (replay §3.5.2, FLINK-39890): an idle vertex's history gives
//!   the coefficient 1.0 where 1.16 aborts the decision.
//!
//! Hand-worked with utilization target 1 and no catch-up or restart allowance, so that the target
//! capacity is the target data rate and the scale factor `target rate / true processing rate`.

use autoscaler_core::config::{AlignmentMode, AutoScalerOptions, Configuration};
use autoscaler_core::plugins::{
    AlignmentModeContext, ParallelismAlignmentMode, PluginError, PluginRegistry, ResolvedPlugins,
};
use autoscaler_core::scaling::{
    Decision, DecisionError, DecisionInput, DecisionOutcome, decide as decide_with_plugins,
};
use autoscaler_core::{DelayedScaleDown, ScalingHistory, ScalingSummary};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, ScalingMetric, VertexId, VertexSpec,
};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

/// The decision without plugins, which cannot fail without the compat switch.
fn decide(input: &DecisionInput<'_>, state: &mut DelayedScaleDown) -> Decision {
    decide_with_plugins(input, &ResolvedPlugins::default(), state).unwrap_or_else(|e| panic!("{e}"))
}

fn minute(m: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_714_557_600, 0).single().unwrap_or_default() + TimeDelta::minutes(m)
}

fn options(alignment_mode: AlignmentMode, compat: bool) -> AutoScalerOptions {
    let mut options = AutoScalerOptions::default();
    options.utilization_target = 1.0;
    options.catch_up_duration = Duration::ZERO;
    options.restart_time = Duration::ZERO;
    options.scale_down_max_factor = 1.0;
    options.scale_down_interval = Duration::ZERO;
    options.alignment_mode = alignment_mode;
    options.compat_reference_1_16 = compat;
    options
}

/// One source `src` at `parallelism` with `partitions`, max parallelism 180, true processing rate
/// `tpr` and target rate `target_rate`, outside its utilization bounds either way.
fn source_job(parallelism: u32, partitions: u32, tpr: f64, target_rate: f64) -> (JobTopology, EvaluatedMetrics) {
    source_job_with_max(parallelism, 180, partitions, tpr, target_rate)
}

/// [`source_job`] with another max parallelism.
fn source_job_with_max(
    parallelism: u32,
    max_parallelism: u32,
    partitions: u32,
    tpr: f64,
    target_rate: f64,
) -> (JobTopology, EvaluatedMetrics) {
    let mut spec = VertexSpec::new("src", parallelism, max_parallelism);
    spec.num_source_partitions = partitions;
    let topology = JobTopology::new(vec![spec], vec![]).unwrap_or_else(|e| panic!("{e}"));
    let mut m = EvaluatedVertexMetrics::new();
    m.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
    m.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(target_rate));
    m.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(0.0));
    // Thresholds that put any change outside the bounds.
    m.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of(f64::INFINITY),
    );
    m.insert(ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(0.0));
    let evaluated = EvaluatedMetrics {
        vertices: [(VertexId::new("src"), m)].into_iter().collect(),
        global: EvaluatedVertexMetrics::new(),
    };
    (topology, evaluated)
}

fn input<'a>(
    topology: &'a JobTopology,
    evaluated: &'a EvaluatedMetrics,
    history: &'a ScalingHistory,
    options: &'a AutoScalerOptions,
) -> DecisionInput<'a> {
    DecisionInput {
        now: minute(0),
        topology,
        evaluated,
        scaling_history: history,
        restart_time: Duration::ZERO,
        options,
        in_excluded_period: false,
        task_manager_cpu: None,
        task_manager_memory: None,
    }
}

fn new_parallelism(decision: &Decision) -> u32 {
    decision.parallelism["src"]
}

#[test]
fn a_source_with_15_partitions_at_100_is_scaled_to_15() {
    // FLINK-40389's reproduction: 15 partitions, current 100, max parallelism 180; a rate of 1000
    // asked to carry 1800 gives ceil(1.8 x 100) = 180.
    let (topology, evaluated) = source_job(100, 15, 1000.0, 1800.0);
    let history = ScalingHistory::new();
    for mode in [
        AlignmentMode::Balanced,
        AlignmentMode::EvenlySpread,
        AlignmentMode::LegacyEvenlySpread,
        AlignmentMode::LegacyMaximizeUtilisation,
    ] {
        let capped = options(mode, false);
        let decision = decide(
            &input(&topology, &evaluated, &history, &capped),
            &mut DelayedScaleDown::default(),
        );
        assert_eq!(decision.outcome, DecisionOutcome::Scale, "{mode:?}");
        assert_eq!(new_parallelism(&decision), 15, "{mode:?}");
        // EXPECTED_PROCESSING_RATE = 1000 / 100 x 15.
        assert_eq!(decision.vertices["src"].expected_processing_rate, 150.0, "{mode:?}");

        let reference = options(mode, true);
        let decision = decide(
            &input(&topology, &evaluated, &history, &reference),
            &mut DelayedScaleDown::default(),
        );
        let legacy = matches!(
            mode,
            AlignmentMode::LegacyEvenlySpread | AlignmentMode::LegacyMaximizeUtilisation
        );
        if legacy {
            // 1.16 blocks the scale-up at 100 and reports it.
            assert!(matches!(decision.outcome, DecisionOutcome::NoChange(_)), "{mode:?}");
            assert_eq!(new_parallelism(&decision), 100, "{mode:?}");
            assert_eq!(decision.events.len(), 1, "{mode:?}");
            assert!(
                decision.events[0].message.starts_with(
                    "Scaling limited detected for src (expected parallelism: 180, actual parallelism 100)."
                ),
                "{}",
                decision.events[0].message
            );
        } else {
            // 1.16 scales to 180: 165 subtasks without a partition.
            assert_eq!(new_parallelism(&decision), 180, "{mode:?}");
        }
    }
    // OFF is not aligned at all.
    let off = options(AlignmentMode::Off, false);
    let decision = decide(
        &input(&topology, &evaluated, &history, &off),
        &mut DelayedScaleDown::default(),
    );
    assert_eq!(new_parallelism(&decision), 180);
}

/// A custom mode that always asks for twice the target.
struct Doubling;

impl ParallelismAlignmentMode for Doubling {
    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        Ok(ctx.alignment.target * 2)
    }
}

/// A custom mode that delegates to the built-in BALANCED.
struct Delegating;

impl ParallelismAlignmentMode for Delegating {
    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        AlignmentMode::Balanced.align_parallelism(ctx)
    }
}

fn with_custom_mode(class: &str, compat: bool) -> (AutoScalerOptions, ResolvedPlugins) {
    let mut pairs = vec![
        ("job.autoscaler.scaling.parallelism-alignment.mode", "custom"),
        ("job.autoscaler.scaling.parallelism-alignment.mode.custom.class", class),
    ];
    if compat {
        pairs.push(("job.autoscaler.compat.reference-1-16", "true"));
    }
    let conf = Configuration::from_iter(pairs);
    let read = AutoScalerOptions::from_configuration(&conf).unwrap_or_else(|e| panic!("{e}"));
    let mut options = options(AlignmentMode::Balanced, compat);
    options.custom_alignment_mode = read.custom_alignment_mode;
    let registry = PluginRegistry::new()
        .with_alignment_mode("doubling", Doubling)
        .with_alignment_mode("delegating", Delegating);
    let plugins = registry.resolve(&conf, &options);
    (options, plugins)
}

#[test]
fn a_custom_alignment_mode_keeps_its_own_say() {
    // 15 partitions at 10, a rate of 1000 asked to carry 3000: target 30.
    let (topology, evaluated) = source_job(10, 15, 1000.0, 3000.0);
    let history = ScalingHistory::new();
    // The custom mode's 60 is used as it is, above the 15 partitions.
    let (options, plugins) = with_custom_mode("doubling", false);
    let decision = decide_with_plugins(
        &input(&topology, &evaluated, &history, &options),
        &plugins,
        &mut DelayedScaleDown::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(new_parallelism(&decision), 60);
    // A custom mode delegating to BALANCED gets the cap, or 1.16's answer under the switch (read
    // from the configuration the mode sees).
    for (compat, expected) in [(false, 15), (true, 30)] {
        let (options, plugins) = with_custom_mode("delegating", compat);
        let decision = decide_with_plugins(
            &input(&topology, &evaluated, &history, &options),
            &plugins,
            &mut DelayedScaleDown::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(new_parallelism(&decision), expected, "compat {compat}");
    }
}

/// FLINK-39890's history for `src`: true processing rate 0 at 2, 4 and 8.
fn idle_history() -> ScalingHistory {
    let summary = |current: u32, new: u32| {
        let mut metrics = EvaluatedVertexMetrics::new();
        metrics.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(0.0));
        metrics.insert(ScalingMetric::ExpectedProcessingRate, EvaluatedScalingMetric::of(0.0));
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics,
        }
    };
    let entries: BTreeMap<DateTime<Utc>, ScalingSummary> = BTreeMap::from([
        (minute(-30), summary(2, 4)),
        (minute(-20), summary(4, 8)),
        (minute(-10), summary(8, 16)),
    ]);
    [(VertexId::new("src"), entries)].into_iter().collect()
}

#[test]
fn an_idle_history_scales_linearly_where_1_16_aborts() {
    // src at 8 (no partitions: not aligned), rate 100 asked to carry 300: sf 3. The history's
    // baseline rate is 0, Σ(p²) x 0 = 0: the coefficient is 1 and 8 -> 24.
    let (topology, evaluated) = source_job(8, 0, 100.0, 300.0);
    let history = idle_history();
    let mut guarded = options(AlignmentMode::Balanced, false);
    guarded.observed_scalability_enabled = true;
    let input_guarded = input(&topology, &evaluated, &history, &guarded);
    let decision = decide(&input_guarded, &mut DelayedScaleDown::default());
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(new_parallelism(&decision), 24);
    // Without the switch nothing aborts.
    let with_plugins = decide_with_plugins(
        &input_guarded,
        &ResolvedPlugins::default(),
        &mut DelayedScaleDown::default(),
    );
    assert_eq!(with_plugins, Ok(decision));

    // The switch: 1.16 computes 0 / 0, cannot round the NaN and aborts the whole decision.
    let mut reference = guarded.clone();
    reference.compat_reference_1_16 = true;
    let input_reference = input(&topology, &evaluated, &history, &reference);
    let error = DecisionError::UndefinedScalingCoefficient {
        vertex: VertexId::new("src"),
    };
    assert_eq!(
        decide_with_plugins(
            &input_reference,
            &ResolvedPlugins::default(),
            &mut DelayedScaleDown::default()
        ),
        Err(PluginError::Aborted(error.clone()))
    );
    assert_eq!(
        error.to_string(),
        "Character N is neither a decimal digit number, decimal point, nor \"e\" notation exponential mark."
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

    /// Over whole decisions: a source that changes parallelism never ends above its partition count
    /// in any built-in or legacy mode (OFF never aligns), as long as `vertex.min-parallelism` does
    /// not itself lie above the partitions.
    #[test]
    fn no_source_is_scaled_above_its_partitions(
        parallelism in 1u32..300,
        partitions in 1u32..200,
        max_parallelism in 1u32..400,
        tpr in 1.0f64..10_000.0,
        target_rate in 0.0f64..100_000.0,
        vertex_min in 1i32..20,
        vertex_max in 1i32..400,
        mode in proptest::sample::select(vec![
            AlignmentMode::Balanced,
            AlignmentMode::EvenlySpread,
            AlignmentMode::LegacyEvenlySpread,
            AlignmentMode::LegacyMaximizeUtilisation,
        ]),
    ) {
        proptest::prop_assume!(i64::from(vertex_min) <= i64::from(partitions));
        let parallelism = parallelism.min(max_parallelism);
        let (topology, evaluated) = source_job_with_max(parallelism, max_parallelism, partitions, tpr, target_rate);
        let mut options = options(mode, false);
        options.vertex_min_parallelism = vertex_min;
        options.vertex_max_parallelism = vertex_max;
        let history = ScalingHistory::new();
        let decision = decide(&input(&topology, &evaluated, &history, &options), &mut DelayedScaleDown::default());
        let vertex = decision.vertices["src"];
        if vertex.target != vertex.current {
            proptest::prop_assert!(
                vertex.target <= partitions,
                "{:?}: {} -> {} with {} partitions", mode, vertex.current, vertex.target, partitions
            );
        }
    }
}
