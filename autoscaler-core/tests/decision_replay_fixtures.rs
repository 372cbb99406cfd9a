//! The decision stage against the reference's own results: each bench scenario's expected
//! `evaluated` section is fed to `decide` with the scenario's state, and outcome, parallelism,
//! per-vertex detail, events, restart time and the delayed scale-down state after the cycle must
//! match the reference's `*.expected.json`.

use autoscaler_core::scaling::{
    DecisionInput, max_restart_time_or_default, record_restart_duration_if_tracked_and_parallelism_matches,
    trim_scaling_history, trim_scaling_tracking,
};
use autoscaler_core::{
    DelayedScaleDown, EventType, RecommendedParallelism, ScalingHistory, ScalingRecord, ScalingSummary,
    ScalingTracking, VertexDelayedScaleDownInfo, config::AutoScalerOptions,
};
use autoscaler_metrics::{
    EdgeSpec, EvaluatedMetrics, EvaluatedVertexMetrics, JobTopology, ShipStrategy, VertexId, VertexSpec,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The decision without plugins (which cannot fail without the compat switch).
fn decide(
    input: &autoscaler_core::scaling::DecisionInput<'_>,
    state: &mut autoscaler_core::DelayedScaleDown,
) -> autoscaler_core::scaling::Decision {
    autoscaler_core::scaling::decide(input, &autoscaler_core::plugins::ResolvedPlugins::default(), state)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Config keys the bench scenarios set; neither influences the decision stage.
const WINDOW_KEYS: [&str; 2] = ["job.autoscaler.metrics.window", "job.autoscaler.stabilization.interval"];

/// A bench scenario or its expected result: they live once in the repository, with the
/// workspace's bench fixtures (`tests/fixtures/bench/`).
fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/bench")
        .join(name)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn time(value: &Value) -> DateTime<Utc> {
    let text = value.as_str().unwrap_or_else(|| panic!("not a time: {value}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .with_timezone(&Utc)
}

/// A replay Number: a JSON number or `"NaN"` / `"Infinity"` / `"-Infinity"`.
fn number(value: &Value) -> f64 {
    match value {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => autoscaler_metrics::json_number::parse_non_finite(s).unwrap_or_else(|| panic!("{s}")),
        Value::Null => f64::NAN,
        other => panic!("not a number: {other}"),
    }
}

fn uint(value: &Value) -> u32 {
    value
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or_else(|| panic!("not an integer: {value}"))
}

fn object(value: &Value) -> &Map<String, Value> {
    value.as_object().unwrap_or_else(|| panic!("not an object: {value}"))
}

fn array(value: &Value) -> &Vec<Value> {
    value.as_array().unwrap_or_else(|| panic!("not an array: {value}"))
}

fn metrics(value: &Value) -> EvaluatedVertexMetrics {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("metrics {value}: {e}"))
}

fn topology(scenario: &Value) -> JobTopology {
    let vertices = array(&scenario["topology"]["vertices"])
        .iter()
        .map(|v| {
            let mut spec = VertexSpec::new(
                VertexId::new(v["id"].as_str().unwrap_or_default()),
                uint(&v["parallelism"]),
                uint(&v["max_parallelism"]),
            )
            .with_source_partitions(v.get("num_source_partitions").map_or(0, uint))
            .with_finished(v["finished"].as_bool().unwrap_or(false));
            spec.name = v["name"].as_str().map(str::to_owned);
            spec.slot_sharing_group = v["slot_sharing_group"].as_str().map(str::to_owned);
            spec
        })
        .collect();
    let edges = scenario["topology"]["edges"]
        .as_array()
        .map(|edges| {
            edges
                .iter()
                .map(|e| {
                    EdgeSpec::new(
                        e["from"].as_str().unwrap_or_default(),
                        e["to"].as_str().unwrap_or_default(),
                        ShipStrategy::parse_lenient(e["ship_strategy"].as_str().unwrap_or_default()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    JobTopology::new_lenient(vertices, edges).unwrap_or_else(|e| panic!("topology: {e}"))
}

fn scaling_history(scenario: &Value, topology: &JobTopology) -> ScalingHistory {
    let Some(history) = scenario.get("scaling_history") else {
        return ScalingHistory::new();
    };
    object(history)
        .iter()
        // Replay §3.1: entries of vertices that are not in the topology are dropped.
        .filter(|(id, _)| topology.get(id).is_some())
        .map(|(id, entries)| {
            let entries = array(entries)
                .iter()
                .map(|e| {
                    let summary = ScalingSummary {
                        current_parallelism: uint(&e["current_parallelism"]),
                        new_parallelism: uint(&e["new_parallelism"]),
                        metrics: e.get("metrics").map(metrics).unwrap_or_default(),
                    };
                    (time(&e["at"]), summary)
                })
                .collect();
            (VertexId::new(id), entries)
        })
        .collect()
}

fn scaling_tracking(scenario: &Value) -> ScalingTracking {
    let records = scenario
        .get("scaling_tracking")
        .map(|t| {
            array(t)
                .iter()
                .map(|r| {
                    let restart_duration = r["restart_duration_ms"].as_u64().map(Duration::from_millis);
                    (time(&r["at"]), ScalingRecord { restart_duration })
                })
                .collect()
        })
        .unwrap_or_default();
    ScalingTracking {
        scaling_records: records,
    }
}

fn delayed_scale_down(scenario: &Value) -> DelayedScaleDown {
    let delayed_vertices = scenario
        .get("delayed_scale_down")
        .map(|d| {
            object(d)
                .iter()
                .map(|(id, info)| {
                    let recommended_parallelisms = array(&info["recommended_parallelisms"])
                        .iter()
                        .map(|r| RecommendedParallelism {
                            trigger_time: time(&r["trigger_time"]),
                            parallelism: uint(&r["parallelism"]),
                            outside_utilization_bound: r["outside_utilization_bound"].as_bool().unwrap_or(false),
                        })
                        .collect();
                    let info = VertexDelayedScaleDownInfo {
                        first_trigger_time: time(&info["first_trigger_time"]),
                        recommended_parallelisms,
                    };
                    (VertexId::new(id), info)
                })
                .collect()
        })
        .unwrap_or_default();
    DelayedScaleDown {
        delayed_vertices,
        updated: false,
    }
}

fn delayed_scale_down_json(state: &DelayedScaleDown) -> Value {
    let vertices: Map<String, Value> = state
        .delayed_vertices
        .iter()
        .map(|(id, info)| {
            let recommended: Vec<Value> = info
                .recommended_parallelisms
                .iter()
                .map(|r| {
                    json!({
                        "trigger_time": r.trigger_time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        "parallelism": r.parallelism,
                        "outside_utilization_bound": r.outside_utilization_bound,
                    })
                })
                .collect();
            let first = info
                .first_trigger_time
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            (
                id.to_string(),
                json!({"first_trigger_time": first, "recommended_parallelisms": recommended}),
            )
        })
        .collect();
    Value::Object(vertices)
}

/// Normalises times inside an expected delayed scale-down to our rendering.
fn normalise_times(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if k.ends_with("_time") {
                        json!(time(v).to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                    } else {
                        normalise_times(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalise_times).collect()),
        other => other.clone(),
    }
}

fn evaluated(expected: &Value) -> EvaluatedMetrics {
    let section = &expected["evaluated"];
    EvaluatedMetrics {
        vertices: object(&section["vertices"])
            .iter()
            .map(|(id, m)| (VertexId::new(id), metrics(m)))
            .collect(),
        global: section.get("global").map(metrics).unwrap_or_default(),
    }
}

/// A scaling report's entries are emitted in the reference's hash-map order; compare them as a
/// set after the header.
fn normalised_message(reason: &str, message: &str) -> (String, BTreeSet<String>) {
    if reason != "ScalingReport" {
        return (message.to_owned(), BTreeSet::new());
    }
    let (header, entries) = message.split_at(message.find("{ Vertex ID").unwrap_or(message.len()));
    let entries = entries.split_inclusive('}').map(str::to_owned).collect::<BTreeSet<_>>();
    (header.to_owned(), entries)
}

fn same_number(actual: f64, expected: f64) -> bool {
    (actual.is_nan() && expected.is_nan()) || actual == expected
}

fn check_scenario(scenario_path: &Path, expected_path: &Path) {
    let scenario = read_json(scenario_path);
    let expected = read_json(expected_path);
    if let Some(config) = scenario.get("config") {
        for key in object(config).keys() {
            assert!(WINDOW_KEYS.contains(&key.as_str()), "unexpected config key {key}");
        }
    }
    let options = AutoScalerOptions::default();
    let now = time(&scenario["now"]);
    let topology = topology(&scenario);

    // Replay §3.3 step 1: state loading.
    let history = trim_scaling_history(&scaling_history(&scenario, &topology), now, &options);
    let mut tracking = trim_scaling_tracking(&scaling_tracking(&scenario), now, &options);
    if let Some(running_since) = scenario["job"].get("running_since") {
        record_restart_duration_if_tracked_and_parallelism_matches(
            &mut tracking,
            time(running_since),
            &topology,
            &history,
        );
    }
    let restart_time = max_restart_time_or_default(&tracking, &options);
    assert_eq!(
        restart_time.as_secs(),
        expected["restart_time_s"].as_u64().unwrap_or(u64::MAX)
    );

    let evaluated = evaluated(&expected);
    let mut state = delayed_scale_down(&scenario);
    let input = DecisionInput {
        now,
        topology: &topology,
        evaluated: &evaluated,
        scaling_history: &history,
        restart_time,
        options: &options,
        in_excluded_period: false,
        task_manager_cpu: scenario["job"]["taskmanager_cpu"].as_f64(),
        task_manager_memory: None,
    };
    let decision = decide(&input, &mut state);

    let expected_decision = &expected["decision"];
    assert_eq!(decision.outcome.as_str(), expected_decision["outcome"]);
    assert_eq!(
        decision.outcome.reason(),
        expected_decision["reason"].as_str(),
        "reason of {}",
        scenario_path.display()
    );

    let expected_parallelism: BTreeMap<String, u32> = object(&expected_decision["parallelism"])
        .iter()
        .map(|(id, p)| (id.clone(), uint(p)))
        .collect();
    let parallelism: BTreeMap<String, u32> = decision
        .parallelism
        .iter()
        .map(|(id, p)| (id.to_string(), *p))
        .collect();
    assert_eq!(parallelism, expected_parallelism);

    let expected_vertices = object(&expected_decision["vertices"]);
    assert_eq!(decision.vertices.len(), expected_vertices.len());
    for (id, want) in expected_vertices {
        let got = decision
            .vertices
            .get(id.as_str())
            .unwrap_or_else(|| panic!("vertex {id} not examined"));
        assert_eq!(got.current, uint(&want["current"]), "current of {id}");
        assert_eq!(got.target, uint(&want["target"]), "target of {id}");
        assert_eq!(
            got.outside_utilization_bound,
            want["outside_utilization_bound"].as_bool().unwrap_or(false),
            "outside bound of {id}"
        );
        assert_eq!(
            got.excluded,
            want["excluded"].as_bool().unwrap_or(false),
            "excluded {id}"
        );
        let want_rate = number(&want["expected_processing_rate"]);
        assert!(
            same_number(got.expected_processing_rate, want_rate),
            "expected rate of {id}: {} vs {want_rate}",
            got.expected_processing_rate
        );
    }

    let mut got_events: Vec<(String, String, (String, BTreeSet<String>))> = decision
        .events
        .iter()
        .map(|e| {
            let kind = match e.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            };
            (
                kind.to_owned(),
                e.reason.clone(),
                normalised_message(&e.reason, &e.message),
            )
        })
        .collect();
    let mut want_events: Vec<(String, String, (String, BTreeSet<String>))> = array(&expected["events"])
        .iter()
        .map(|e| {
            let reason = e["reason"].as_str().unwrap_or_default();
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                reason.to_owned(),
                normalised_message(reason, e["message"].as_str().unwrap_or_default()),
            )
        })
        .collect();
    got_events.sort();
    want_events.sort();
    assert_eq!(got_events, want_events);

    assert_eq!(
        delayed_scale_down_json(&state),
        normalise_times(&expected["delayed_scale_down"])
    );
}

#[test]
fn chain_10_decision_matches_the_reference() {
    check_scenario(&fixture_path("chain-10.json"), &fixture_path("chain-10.expected.json"));
}

#[test]
fn dag_100_decision_matches_the_reference() {
    check_scenario(&fixture_path("dag-100.json"), &fixture_path("dag-100.expected.json"));
}

#[test]
fn dag_1000_decision_matches_the_reference() {
    check_scenario(&fixture_path("dag-1000.json"), &fixture_path("dag-1000.expected.json"));
}
