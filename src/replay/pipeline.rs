//! The replay pipeline: the live cycle's steps on a recorded scenario (replay-format §3.3-3.5).

use super::output::{self, number};
use super::scenario::{Scenario, ScenarioError, ScenarioInput};
use autoscaler_core::cycle::{self, DecisionFacts, JobState, Stage, StateChanges};
use autoscaler_core::scaling::{CycleEvent, Decision};
use autoscaler_core::{AutoScalerOptions, CollectedJobMetrics, DelayedScaleDown, MetricsSnapshot, OptionsError};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, JobTopology, MetricHistory, ScalingMetric,
    compute_processing_rate_thresholds,
};
use serde_json::{Map, Value, json};
use std::time::Duration;

fn options_error(e: OptionsError) -> ScenarioError {
    match e {
        OptionsError::InvalidValue { key, value, reason } => {
            ScenarioError::new(format!("config.{key}"), format!("cannot parse {value:?}: {reason}"))
        }
        other => ScenarioError::new("config", other.to_string()),
    }
}

fn event_json(e: &CycleEvent) -> Value {
    json!({"type": e.event_type.to_string(), "reason": e.reason, "message": e.message})
}

fn current_parallelism(topology: &JobTopology) -> Map<String, Value> {
    topology
        .vertices()
        .iter()
        .map(|v| (v.id.to_string(), Value::from(v.parallelism.get())))
        .collect()
}

/// A decision section for outcomes without a decision stage.
fn no_decision(topology: &JobTopology, outcome: &str, reason: &str) -> Value {
    json!({
        "outcome": outcome,
        "reason": reason,
        "parallelism": Value::Object(current_parallelism(topology)),
        "vertices": {},
    })
}

fn decision_json(topology: &JobTopology, d: &Decision) -> Value {
    let mut parallelism = current_parallelism(topology);
    for (id, p) in &d.parallelism {
        parallelism.insert(id.to_string(), Value::from(*p));
    }
    let mut vertices = Map::new();
    for v in topology.vertices() {
        if let Some(vd) = d.vertices.get(&v.id) {
            vertices.insert(
                v.id.to_string(),
                json!({
                    "current": vd.current,
                    "target": vd.target,
                    "outside_utilization_bound": vd.outside_utilization_bound,
                    "excluded": vd.excluded,
                    "expected_processing_rate": number(vd.expected_processing_rate),
                }),
            );
        }
    }
    json!({
        "outcome": d.outcome.as_str(),
        "reason": d.outcome.reason(),
        "parallelism": Value::Object(parallelism),
        "vertices": Value::Object(vertices),
    })
}

/// Completes decision-only input (§3.4): topology facts and thresholds a vertex lacks.
fn complete_evaluated(
    given: &EvaluatedMetrics,
    topology: &JobTopology,
    options: &AutoScalerOptions,
    restart_time: Duration,
) -> EvaluatedMetrics {
    let config = options.evaluation_config(restart_time);
    let mut out = given.clone();
    for (id, metrics) in out.vertices.iter_mut() {
        let Some(v) = topology.get(id.as_str()) else { continue };
        let facts = [
            (ScalingMetric::Parallelism, f64::from(v.parallelism.get())),
            (ScalingMetric::MaxParallelism, f64::from(v.max_parallelism.get())),
            (ScalingMetric::NumSourcePartitions, f64::from(v.num_source_partitions)),
        ];
        for (metric, value) in facts {
            if !metrics.contains(metric) {
                metrics.insert(
                    metric,
                    EvaluatedScalingMetric {
                        current: value,
                        average: f64::NAN,
                    },
                );
            }
        }
        if !metrics.contains(ScalingMetric::ScaleUpRateThreshold)
            || !metrics.contains(ScalingMetric::ScaleDownRateThreshold)
        {
            let (up, down) = compute_processing_rate_thresholds(metrics, &config, false);
            metrics.insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(up));
            metrics.insert(ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(down));
        }
    }
    out
}

/// Runs the scenario's cycle and returns the result document: the steps of
/// [`autoscaler_core::cycle`] on the scenario's state, exactly as a live cycle runs them.
pub fn replay(s: &Scenario) -> Result<Value, ScenarioError> {
    let options = AutoScalerOptions::from_configuration(&s.config).map_err(options_error)?;
    let mut state = JobState {
        metric_history: MetricHistory::new(),
        scaling_history: s.scaling_history.clone(),
        scaling_tracking: s.scaling_tracking.clone(),
        delayed_scale_down: s.delayed_scale_down.clone(),
        parallelism_overrides: Default::default(),
        config_changes: Default::default(),
    };
    let mut changes = StateChanges::default();

    let mut result = Map::new();
    result.insert("format".into(), Value::from(output::RESULT_FORMAT));
    let mut events: Vec<Value> = Vec::new();

    let (scaling, evaluated, unmeasured) = match &s.input {
        ScenarioInput::Evaluated(given) => {
            // §3.4: state loading, then the decision on the completed metrics.
            result.insert("explanation".into(), Value::Null);
            let scaling = cycle::load_scaling_state(
                &mut state,
                &mut changes,
                &s.topology,
                s.job.running_since,
                s.now,
                &options,
            );
            let evaluated = complete_evaluated(given, &s.topology, &options, scaling.restart_time);
            (scaling, evaluated, Vec::new())
        }
        ScenarioInput::Metrics(snapshots) => {
            // §3.3: the earlier snapshots are the stored window, the last one this cycle's collection.
            let Some(((collected_at, latest), earlier)) = snapshots.split_last() else {
                return Err(ScenarioError::new("metrics", "expected at least one snapshot"));
            };
            state.metric_history = earlier.iter().cloned().collect();
            let collected = CollectedJobMetrics {
                topology: s.topology.clone(),
                job_running_since: s.job.running_since.unwrap_or(s.now),
                metrics: MetricsSnapshot::Scaling(latest.clone()),
            };
            let observation = cycle::observe(&mut state, &mut changes, collected, *collected_at, s.now, &options);
            let assessment = cycle::assess(&mut state, &mut changes, &observation, s.now, &options);
            // §4.7: the root cause, from the samples of the evaluation window.
            result.insert(
                "explanation".into(),
                output::explanation(&s.topology, &state.metric_history),
            );
            result.insert("evaluated".into(), Value::Null);
            result.insert(
                "restart_time_s".into(),
                Value::from(assessment.scaling.restart_time.as_secs()),
            );
            match assessment.stage {
                Stage::InsufficientSamples => {
                    result.insert(
                        "decision".into(),
                        no_decision(&s.topology, "not_ready", "insufficient_samples"),
                    );
                    return Ok(finish(result, &state.delayed_scale_down, events));
                }
                Stage::Failed(e) => {
                    let message = e.to_string();
                    events.push(json!({"type": "Warning", "reason": "AutoscalerError", "message": message}));
                    result.insert("decision".into(), no_decision(&s.topology, "error", &message));
                    return Ok(finish(result, &state.delayed_scale_down, events));
                }
                Stage::WindowNotFull { stabilizing, evaluated } => {
                    result.insert("evaluated".into(), output::evaluated(&evaluated, &s.topology));
                    let reason = if stabilizing { "stabilizing" } else { "window_not_full" };
                    result.insert("decision".into(), no_decision(&s.topology, "not_ready", reason));
                    return Ok(finish(result, &state.delayed_scale_down, events));
                }
                Stage::Ready(evaluated) => {
                    result.insert("evaluated".into(), output::evaluated(&evaluated, &s.topology));
                    (assessment.scaling, evaluated, observation.unmeasured)
                }
            }
        }
    };
    result.insert("restart_time_s".into(), Value::from(scaling.restart_time.as_secs()));

    // §3.5: decision.
    let facts = DecisionFacts {
        now: s.now,
        topology: &s.topology,
        evaluated: &evaluated,
        options: &options,
        unmeasured: &unmeasured,
        task_manager_cpu: s.job.taskmanager_cpu,
        // The context's value (§3.1): the scenario's, else the configured process size.
        task_manager_memory: s.job.taskmanager_memory.or(options.task_manager_process_memory),
    };
    let restart_time = scaling.restart_time;
    let decision = cycle::conclude(&mut state, &mut changes, scaling, &facts);
    events.extend(decision.events.iter().map(event_json));
    result.insert("decision".into(), decision_json(&s.topology, &decision));
    // The evaluation window, for the decision record's estimates and root cause.
    let window = matches!(s.input, ScenarioInput::Metrics(_)).then_some(&state.metric_history);
    result.insert(
        "record".into(),
        super::record::decision_record(s, &evaluated, &decision, &options, restart_time, window),
    );
    // §4.6: what memory tuning returned, `null` when the decision did not reach it.
    if let Some(tuning) = &decision.memory_tuning {
        result.insert("config_changes".into(), output::config_changes(&tuning.changes));
    }
    Ok(finish(result, &state.delayed_scale_down, events))
}

fn finish(mut result: Map<String, Value>, delayed: &DelayedScaleDown, events: Vec<Value>) -> Value {
    result.insert("delayed_scale_down".into(), output::delayed_scale_down(delayed));
    result.entry("config_changes").or_insert(Value::Null);
    result.entry("record").or_insert(Value::Null);
    result.insert("events".into(), Value::Array(events));
    Value::Object(result)
}
