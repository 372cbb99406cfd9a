//! The evaluation of the benchmark scenarios matches the reference's `evaluated` result exactly
//! (after the reference's 3-decimal rounding; NaN equals NaN).

mod common;

use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, EvaluationConfig, apply_window, evaluate};
use common::{fixture, load_expected, load_scenario};

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

fn same_metric(a: EvaluatedScalingMetric, b: EvaluatedScalingMetric) -> bool {
    same(a.current, b.current) && same(a.average, b.average)
}

/// Every difference between two evaluated metric maps, as readable lines.
fn diff(scope: &str, actual: &EvaluatedVertexMetrics, expected: &EvaluatedVertexMetrics) -> Vec<String> {
    let mut out = Vec::new();
    for (metric, want) in expected.iter() {
        match actual.get(metric) {
            Some(got) if same_metric(got, want) => {}
            got => out.push(format!("{scope} {metric}: expected {want:?}, got {got:?}")),
        }
    }
    for (metric, got) in actual.iter() {
        if !expected.contains(metric) {
            out.push(format!("{scope} {metric}: unexpected {got:?}"));
        }
    }
    out
}

fn assert_matches_reference(name: &str) {
    let mut scenario = load_scenario(&fixture(&format!("{name}.json")));
    let expected = load_expected(&fixture(&format!("{name}.expected.json")));
    let status = apply_window(
        &mut scenario.history,
        scenario.running_since,
        scenario.now,
        scenario.stabilization,
        scenario.window,
    );
    assert!(status.window_full && !status.stabilizing);
    assert_eq!(
        scenario.history.len(),
        60,
        "the sample older than the window is trimmed"
    );

    let evaluated = evaluate(
        &scenario.topology,
        &scenario.history,
        &EvaluationConfig::default(),
        None,
    )
    .expect("the scenario has ingestion rates");

    let mut problems = diff("global", &evaluated.global, &expected.global);
    for (id, want) in &expected.vertices {
        match evaluated.vertices.get(id) {
            Some(got) => problems.extend(diff(id.as_str(), got, want)),
            None => problems.push(format!("{id}: missing")),
        }
    }
    for id in evaluated.vertices.keys() {
        if !expected.vertices.contains_key(id) {
            problems.push(format!("{id}: unexpected vertex"));
        }
    }
    assert!(
        problems.is_empty(),
        "{name}: {} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn chain_10_evaluation_matches_reference() {
    assert_matches_reference("chain-10");
}

#[test]
fn dag_100_evaluation_matches_reference() {
    assert_matches_reference("dag-100");
}

#[test]
fn dag_1000_evaluation_matches_reference() {
    assert_matches_reference("dag-1000");
}
