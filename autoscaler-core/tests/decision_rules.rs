//! Decision rules across vertices and cycles, hand-worked after the reference's
//! `ScalingExecutorTest` and `DelayedScaleDownEndToEndTest`: alignment only for keyed vertices and
//! sources with partitions, the delayed scale-down's window maximum and its reset by any executed
//! rescale, and the state a rescale leaves for the next cycle's restart tracking.

use autoscaler_core::scaling::{
    Decision, DecisionInput, DecisionOutcome, NoChangeReason, max_restart_time_or_default,
    record_restart_duration_if_tracked_and_parallelism_matches, record_scaling, trim_scaling_history,
    trim_scaling_tracking,
};
use autoscaler_core::{DelayedScaleDown, ScalingHistory, ScalingTracking, config::AutoScalerOptions};
use autoscaler_metrics::{
    EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, ScalingMetric,
    ShipStrategy, VertexId, VertexSpec,
};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::time::Duration;

/// The decision without plugins (which cannot fail without the compat switch).
fn decide(
    input: &autoscaler_core::scaling::DecisionInput<'_>,
    state: &mut autoscaler_core::DelayedScaleDown,
) -> autoscaler_core::scaling::Decision {
    autoscaler_core::scaling::decide(input, &autoscaler_core::plugins::ResolvedPlugins::default(), state)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn minute(m: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_714_557_600, 0).single().unwrap_or_default() + TimeDelta::minutes(m)
}

/// With utilization target 1 and no catch-up (restart 0, catch-up duration 0) the target capacity
/// is exactly `target_rate`, so the scale factor is `target_rate / tpr`.
fn options() -> AutoScalerOptions {
    let mut options = AutoScalerOptions::default();
    options.utilization_target = 1.0;
    options.catch_up_duration = Duration::ZERO;
    options.restart_time = Duration::ZERO;
    options.scale_down_max_factor = 1.0;
    options.scale_up_max_factor = f64::from(i32::MAX);
    options
}

fn metrics(parallelism: u32, tpr: f64, target_rate: f64, bounds: (f64, f64)) -> EvaluatedVertexMetrics {
    let mut m = EvaluatedVertexMetrics::new();
    m.insert(
        ScalingMetric::Parallelism,
        EvaluatedScalingMetric::of(f64::from(parallelism)),
    );
    m.insert(ScalingMetric::MaxParallelism, EvaluatedScalingMetric::of(720.0));
    m.insert(ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(0.0));
    m.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::new(tpr, tpr));
    m.insert(
        ScalingMetric::TargetDataRate,
        EvaluatedScalingMetric::new(target_rate, target_rate),
    );
    m.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(0.0));
    m.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of(bounds.0),
    );
    m.insert(
        ScalingMetric::ScaleDownRateThreshold,
        EvaluatedScalingMetric::of(bounds.1),
    );
    m
}

fn evaluated(vertices: &[(&str, EvaluatedVertexMetrics)]) -> EvaluatedMetrics {
    EvaluatedMetrics {
        vertices: vertices.iter().map(|(id, m)| (VertexId::new(id), *m)).collect(),
        global: EvaluatedVertexMetrics::new(),
    }
}

fn run(
    now: DateTime<Utc>,
    topology: &JobTopology,
    evaluated: &EvaluatedMetrics,
    history: &ScalingHistory,
    options: &AutoScalerOptions,
    state: &mut DelayedScaleDown,
) -> Decision {
    let input = DecisionInput {
        now,
        topology,
        evaluated,
        scaling_history: history,
        restart_time: Duration::ZERO,
        options,
        in_excluded_period: false,
        task_manager_cpu: None,
        task_manager_memory: None,
    };
    decide(&input, state)
}

#[test]
fn only_keyed_vertices_are_aligned_to_the_key_groups() {
    // ScalingExecutorTest.testAdjustByMaxParallelism: source -REBALANCE-> filter -HASH-> sink, all
    // at 2 with 720 key groups; 70 / 20 = 3.5 gives 7; only the keyed sink moves to 8
    // (720 / 8 = 90 < 720 / 7 = 102, BALANCED).
    let topology = JobTopology::new(
        vec![
            VertexSpec::new("source", 2, 720),
            VertexSpec::new("filter", 2, 720),
            VertexSpec::new("sink", 2, 720),
        ],
        vec![
            EdgeSpec::new("source", "filter", ShipStrategy::Rebalance),
            EdgeSpec::new("filter", "sink", ShipStrategy::Hash),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out_of_band = (70.0, 100.0);
    let evaluated = evaluated(&[
        ("source", metrics(2, 20.0, 70.0, out_of_band)),
        ("filter", metrics(2, 20.0, 70.0, out_of_band)),
        ("sink", metrics(2, 20.0, 70.0, out_of_band)),
    ]);
    let decision = run(
        minute(0),
        &topology,
        &evaluated,
        &ScalingHistory::new(),
        &options(),
        &mut DelayedScaleDown::default(),
    );
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    let parallelism: Vec<(&str, u32)> = decision.parallelism.iter().map(|(v, p)| (v.as_str(), *p)).collect();
    assert_eq!(parallelism, [("filter", 7), ("sink", 8), ("source", 7)]);
    // EXPECTED_PROCESSING_RATE = 20 / 2 * new.
    assert_eq!(decision.vertices["sink"].expected_processing_rate, 80.0);
    assert_eq!(decision.vertices["source"].expected_processing_rate, 70.0);
}

fn two_vertex_topology() -> JobTopology {
    JobTopology::new(
        vec![VertexSpec::new("a", 10, 720), VertexSpec::new("b", 10, 720)],
        vec![EdgeSpec::new("a", "b", ShipStrategy::Rebalance)],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_in_band_window_maximum_never_scales_down_but_an_out_of_band_one_does() {
    // DelayedScaleDownEndToEndTest: "a" wants 10 -> 5 (100 -> 50 records/s) within its band for
    // the whole interval: the delay ends, the window maximum is in band, nothing is executed.
    let topology = two_vertex_topology();
    let mut options = options();
    options.scale_down_interval = Duration::from_secs(3600);
    let in_band = evaluated(&[
        ("a", metrics(10, 100.0, 50.0, (0.0, 1000.0))),
        ("b", metrics(10, 100.0, 100.0, (0.0, 1000.0))),
    ]);
    let history = ScalingHistory::new();
    let mut state = DelayedScaleDown::default();
    for m in [0, 20, 40] {
        let decision = run(minute(m), &topology, &in_band, &history, &options, &mut state);
        assert_eq!(
            decision.outcome,
            DecisionOutcome::NoChange(NoChangeReason::AtTarget),
            "minute {m}"
        );
        // The computed scale-down is remembered (expected rate set) but delayed (target = current).
        assert_eq!(decision.vertices["a"].target, 10);
        assert_eq!(decision.vertices["a"].expected_processing_rate, 50.0);
    }
    let decision = run(minute(60), &topology, &in_band, &history, &options, &mut state);
    assert_eq!(
        decision.outcome,
        DecisionOutcome::NoChange(NoChangeReason::WithinBounds)
    );
    assert_eq!(decision.vertices["a"].target, 5);
    assert!(!decision.vertices["a"].outside_utilization_bound);
    assert!(
        state.delayed_vertices.contains_key("a"),
        "a blocked in-band change keeps the pending state"
    );

    // One minute later "a" is outside its band (100 > 90): the latest recommendation replaces the
    // equal in-band one at the head of the window, so the scale-down executes.
    let out_of_band = evaluated(&[
        ("a", metrics(10, 100.0, 50.0, (0.0, 90.0))),
        ("b", metrics(10, 100.0, 100.0, (0.0, 1000.0))),
    ]);
    let decision = run(minute(61), &topology, &out_of_band, &history, &options, &mut state);
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(decision.parallelism["a"], 5);
    assert!(state.delayed_vertices.is_empty());
}

#[test]
fn any_executed_rescale_resets_every_pending_scale_down() {
    // DelayedScaleDownEndToEndTest.testDelayedScaleDownIsResetWhenAnotherTaskScaleUp.
    let topology = two_vertex_topology();
    let mut options = options();
    options.scale_down_interval = Duration::from_secs(3600);
    let history = ScalingHistory::new();
    let mut state = DelayedScaleDown::default();
    let quiet = evaluated(&[
        ("a", metrics(10, 100.0, 50.0, (0.0, 1000.0))),
        ("b", metrics(10, 100.0, 100.0, (0.0, 1000.0))),
    ]);
    run(minute(0), &topology, &quiet, &history, &options, &mut state);
    assert_eq!(state.delayed_vertices["a"].first_trigger_time, minute(0));

    // "b" needs 3x and is out of band (100 < 200): it scales up, and "a"'s pending state goes.
    let busy = evaluated(&[
        ("a", metrics(10, 100.0, 50.0, (0.0, 1000.0))),
        ("b", metrics(10, 100.0, 300.0, (200.0, 1000.0))),
    ]);
    let decision = run(minute(10), &topology, &busy, &history, &options, &mut state);
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(decision.parallelism["b"], 30);
    assert_eq!(decision.parallelism["a"], 10);
    assert!(state.delayed_vertices.is_empty() && state.updated);

    // The interval starts over: at minute 70 "a" is only just delayed again.
    let decision = run(minute(70), &topology, &quiet, &history, &options, &mut state);
    assert_eq!(decision.vertices["a"].target, 10);
    assert_eq!(state.delayed_vertices["a"].first_trigger_time, minute(70));
}

#[test]
fn an_executed_rescale_is_tracked_until_the_job_runs_at_the_new_parallelism() {
    let topology = two_vertex_topology();
    let mut options = options();
    options.restart_time_tracking_enabled = true;
    let busy = evaluated(&[("b", metrics(10, 100.0, 300.0, (200.0, 1000.0)))]);
    let mut history = ScalingHistory::new();
    let mut tracking = ScalingTracking::default();
    let decision = run(
        minute(0),
        &topology,
        &busy,
        &history,
        &options,
        &mut DelayedScaleDown::default(),
    );
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    record_scaling(&mut history, &mut tracking, minute(0), &decision.summaries, &options);
    assert_eq!(history["b"][&minute(0)].new_parallelism, 30);
    assert_eq!(max_restart_time_or_default(&tracking, &options), Duration::ZERO);

    // Still at the old parallelism: nothing recorded.
    let history = trim_scaling_history(&history, minute(5), &options);
    let mut tracking = trim_scaling_tracking(&tracking, minute(5), &options);
    assert!(!record_restart_duration_if_tracked_and_parallelism_matches(
        &mut tracking,
        minute(2),
        &topology,
        &history
    ));
    // Running at 30 since minute 2: a 120 s restart.
    let rescaled = JobTopology::new(
        vec![VertexSpec::new("a", 10, 720), VertexSpec::new("b", 30, 720)],
        vec![EdgeSpec::new("a", "b", ShipStrategy::Rebalance)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(record_restart_duration_if_tracked_and_parallelism_matches(
        &mut tracking,
        minute(2),
        &rescaled,
        &history
    ));
    assert_eq!(
        max_restart_time_or_default(&tracking, &options),
        Duration::from_secs(120)
    );
}
