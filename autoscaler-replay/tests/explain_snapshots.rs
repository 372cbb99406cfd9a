//! `explain` output, pinned with insta snapshots: the replay result of a scenario, its decision
//! record, and the record in words. Review changes with `cargo insta review`.

use autoscaler_replay::explain::{records_in, render};
use std::path::Path;

fn explain_scenario(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let result = autoscaler_replay::replay_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let records = records_in(&result).unwrap_or_else(|e| panic!("{name}: {e}"));
    records.iter().map(render).collect::<Vec<_>>().join("\n")
}

#[test]
fn scale_up() {
    insta::assert_snapshot!(explain_scenario("chain2-scale-up.json"));
}

#[test]
fn within_bounds() {
    insta::assert_snapshot!(explain_scenario("chain2-within-bounds.json"));
}

#[test]
fn scaling_disabled() {
    insta::assert_snapshot!(explain_scenario("chain2-scaling-disabled.json"));
}

#[test]
fn slow_sink_behind_red_map() {
    insta::assert_snapshot!(explain_scenario("root-cause-slow-sink-behind-red-map.json"));
}

#[test]
fn decision_only_scenario_has_no_estimates() {
    insta::assert_snapshot!(explain_scenario("decision-only-scale-up.json"));
}

#[test]
fn undecided_cycles_have_no_record() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/window-not-full.json");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let result = autoscaler_replay::replay_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(result["record"].is_null());
    assert!(records_in(&result).is_err());
}
