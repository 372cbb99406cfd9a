//! Writing the `flink-autoscaler-result/1` document.

use autoscaler_core::{ConfigChanges, DelayedScaleDown};
use autoscaler_metrics::root_cause::{self, Explanation};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, MetricHistory,
};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// The format tag of a result.
pub const RESULT_FORMAT: &str = "flink-autoscaler-result/1";

/// A Number per the format: finite values as JSON numbers, non-finite as `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn number(v: f64) -> Value {
    if v.is_nan() {
        Value::String("NaN".into())
    } else if v == f64::INFINITY {
        Value::String("Infinity".into())
    } else if v == f64::NEG_INFINITY {
        Value::String("-Infinity".into())
    } else {
        serde_json::Number::from_f64(v).map_or(Value::String("NaN".into()), Value::Number)
    }
}

/// A time as RFC 3339 in UTC with `Z`.
pub fn time(t: DateTime<Utc>) -> Value {
    Value::String(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

fn evaluated_metric(m: EvaluatedScalingMetric) -> Value {
    json!({"current": number(m.current), "average": number(m.average)})
}

fn metric_map(m: &EvaluatedVertexMetrics) -> Value {
    let mut out = Map::new();
    for (k, v) in m.iter() {
        out.insert(k.name().to_owned(), evaluated_metric(v));
    }
    Value::Object(out)
}

/// The `evaluated` section, vertices in topology declaration order.
pub fn evaluated(metrics: &EvaluatedMetrics, topology: &JobTopology) -> Value {
    let mut vertices = Map::new();
    for v in topology.vertices() {
        if let Some(m) = metrics.vertices.get(&v.id) {
            vertices.insert(v.id.to_string(), metric_map(m));
        }
    }
    json!({"vertices": Value::Object(vertices), "global": metric_map(&metrics.global)})
}

/// The `delayed_scale_down` section.
pub fn delayed_scale_down(state: &DelayedScaleDown) -> Value {
    let mut out = Map::new();
    for (id, info) in &state.delayed_vertices {
        let recs: Vec<Value> = info
            .recommended_parallelisms
            .iter()
            .map(|r| {
                json!({
                    "trigger_time": time(r.trigger_time),
                    "parallelism": r.parallelism,
                    "outside_utilization_bound": r.outside_utilization_bound,
                })
            })
            .collect();
        out.insert(
            id.to_string(),
            json!({"first_trigger_time": time(info.first_trigger_time), "recommended_parallelisms": recs}),
        );
    }
    Value::Object(out)
}

/// The `config_changes` section: overrides by key, removals sorted ascending.
pub fn config_changes(changes: &ConfigChanges) -> Value {
    let overrides: Map<String, Value> = changes
        .overrides
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    // A BTreeSet iterates in byte order.
    let removals: Vec<Value> = changes.removals.iter().map(|k| Value::String(k.clone())).collect();
    json!({"overrides": overrides, "removals": removals})
}

/// The `explanation` section (the root cause of backpressure, see
/// [`autoscaler_metrics::root_cause`]) of the samples of the evaluation window: `null` when no
/// sample has `BACKPRESSURE`.
pub fn explanation(topology: &JobTopology, window: &MetricHistory) -> Value {
    root_cause::explain(topology, window).map_or(Value::Null, |e| explanation_json(&e, topology))
}

/// An [`Explanation`] as `{"bottlenecks": [...], "vertices": {...}}`, vertices in topology
/// declaration order.
pub fn explanation_json(e: &Explanation, topology: &JobTopology) -> Value {
    let mut vertices = Map::new();
    for v in topology.vertices() {
        if let Some(x) = e.vertices.get(&v.id) {
            vertices.insert(
                v.id.to_string(),
                json!({"role": x.role.as_str(), "bottleneck": x.bottleneck.as_ref().map(|b| b.to_string())}),
            );
        }
    }
    let bottlenecks: Vec<Value> = e.bottlenecks.iter().map(|b| Value::from(b.to_string())).collect();
    json!({"bottlenecks": bottlenecks, "vertices": Value::Object(vertices)})
}
