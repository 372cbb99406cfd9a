//! The replay pipeline: state loading, window, evaluation, decision (replay-format §3.3-3.5).

use super::output::{self, number};
use super::scenario::{Scenario, ScenarioError, ScenarioInput};
use autoscaler_core::scaling::{
    self, CycleEvent, Decision, DecisionInput, max_restart_time_or_default,
    record_restart_duration_if_tracked_and_parallelism_matches, trim_scaling_history, trim_scaling_tracking,
};
use autoscaler_core::{AutoScalerOptions, DelayedScaleDown, EventType, OptionsError};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, JobTopology, MetricHistory, ScalingMetric,
    compute_processing_rate_thresholds, evaluate, window_status,
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

/// Runs the scenario's cycle and returns the result document.
pub fn replay(s: &Scenario) -> Result<Value, ScenarioError> {
    let options = AutoScalerOptions::from_configuration(&s.config).map_err(options_error)?;
    let in_excluded_period = options.is_excluded_period(s.now).map_err(options_error)?;

    // §3.3 step 1: state loading.
    let history = trim_scaling_history(&s.scaling_history, s.now, &options);
    let mut tracking = trim_scaling_tracking(&s.scaling_tracking, s.now, &options);
    if let Some(running_since) = s.job.running_since {
        record_restart_duration_if_tracked_and_parallelism_matches(&mut tracking, running_since, &s.topology, &history);
    }
    let restart_time = max_restart_time_or_default(&tracking, &options);

    let mut result = Map::new();
    result.insert("format".into(), Value::from(output::RESULT_FORMAT));
    let mut delayed: DelayedScaleDown = s.delayed_scale_down.clone();
    let mut events: Vec<Value> = Vec::new();
    // The evaluation window, for the decision record's estimates and root cause.
    let mut window: Option<MetricHistory> = None;

    let evaluated = match &s.input {
        ScenarioInput::Evaluated(given) => {
            result.insert("explanation".into(), Value::Null);
            complete_evaluated(given, &s.topology, &options, restart_time)
        }
        ScenarioInput::Metrics(snapshots) => {
            let running_since = s.job.running_since.unwrap_or(s.now);
            // Step 2: a restart after the first snapshot invalidates all but the last one.
            let restarted = snapshots.first().is_some_and(|(at, _)| running_since > *at);
            let kept = if restarted {
                &snapshots[snapshots.len() - 1..]
            } else {
                &snapshots[..]
            };
            let mut metric_history: MetricHistory = kept.iter().cloned().collect();
            // Step 3: window.
            let status = window_status(
                &metric_history,
                running_since,
                s.now,
                options.stabilization_interval,
                options.metrics_window,
            );
            if status.window_full {
                metric_history.remove_before(autoscaler_metrics::time::sub_saturating(s.now, options.metrics_window));
            }
            // §4.7: the root cause, from the samples of the evaluation window.
            result.insert("explanation".into(), output::explanation(&s.topology, &metric_history));
            result.insert("evaluated".into(), Value::Null);
            result.insert("restart_time_s".into(), Value::from(restart_time.as_secs()));
            // Step 4.
            if metric_history.len() < 2 {
                result.insert(
                    "decision".into(),
                    no_decision(&s.topology, "not_ready", "insufficient_samples"),
                );
                return Ok(finish(result, &delayed, events));
            }
            // Step 5.
            let config = options.evaluation_config(restart_time);
            let evaluated = match evaluate(&s.topology, &metric_history, &config) {
                Ok(e) => e,
                Err(e) => {
                    let message = e.to_string();
                    events.push(json!({"type": "Warning", "reason": "AutoscalerError", "message": message}));
                    result.insert("decision".into(), no_decision(&s.topology, "error", &message));
                    return Ok(finish(result, &delayed, events));
                }
            };
            result.insert("evaluated".into(), output::evaluated(&evaluated, &s.topology));
            // Step 6.
            if !status.window_full {
                let reason = if status.stabilizing {
                    "stabilizing"
                } else {
                    "window_not_full"
                };
                result.insert("decision".into(), no_decision(&s.topology, "not_ready", reason));
                return Ok(finish(result, &delayed, events));
            }
            window = Some(metric_history);
            evaluated
        }
    };
    result.insert("restart_time_s".into(), Value::from(restart_time.as_secs()));

    // §3.5: decision.
    let input = DecisionInput {
        now: s.now,
        topology: &s.topology,
        evaluated: &evaluated,
        scaling_history: &history,
        restart_time,
        options: &options,
        in_excluded_period,
        task_manager_cpu: s.job.taskmanager_cpu,
        // The context's value (§3.1): the scenario's, else the configured process size.
        task_manager_memory: s.job.taskmanager_memory.or(options.task_manager_process_memory),
    };
    let decision = scaling::decide(&input, &mut delayed);
    events.extend(decision.events.iter().map(event_json));
    result.insert("decision".into(), decision_json(&s.topology, &decision));
    result.insert(
        "record".into(),
        super::record::decision_record(s, &evaluated, &decision, &options, restart_time, window.as_ref()),
    );
    // §4.6: what memory tuning returned, `null` when the decision did not reach it.
    if let Some(tuning) = &decision.memory_tuning {
        result.insert("config_changes".into(), output::config_changes(&tuning.changes));
    }
    let _ = EventType::Normal;
    Ok(finish(result, &delayed, events))
}

fn finish(mut result: Map<String, Value>, delayed: &DelayedScaleDown, events: Vec<Value>) -> Value {
    result.insert("delayed_scale_down".into(), output::delayed_scale_down(delayed));
    result.entry("config_changes").or_insert(Value::Null);
    result.entry("record").or_insert(Value::Null);
    result.insert("events".into(), Value::Array(events));
    Value::Object(result)
}
