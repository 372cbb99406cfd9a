//! The root-cause rule on the simulator's five hand-made situations: the experiment finds the
//! designed bottleneck (relieving it raises throughput), and the rule, from `LOAD` and
//! `BACKPRESSURE` alone, names the same vertex, with every backpressured vertex naming it.

use autoscaler_sim::bottleneck::{TruthSettings, evaluate_case, situations};
use flink_autoscaler::metrics::root_cause::Role;
use std::collections::BTreeSet;

#[test]
fn the_rule_finds_the_true_bottleneck_of_each_situation() {
    let expected = [
        ("slow-sink", vec!["sink"]),
        ("slow-behind-busy", vec!["aggregate"]),
        ("slow-source", vec!["source"]),
        ("dag-slow-branch", vec!["enrich"]),
        ("healthy", vec![]),
    ];
    let all = situations();
    assert_eq!(all.len(), expected.len());
    for (workload, (name, bottlenecks)) in all.iter().zip(expected) {
        assert_eq!(workload.name, name);
        let outcome = evaluate_case(&workload.job, &TruthSettings::quick()).expect("valid job");
        let expected: BTreeSet<String> = bottlenecks.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(outcome.truth, expected, "{name}: the experiment");
        assert_eq!(
            outcome.predicted, expected,
            "{name}: the rule, {:?}",
            outcome.explanation
        );
        let (right, victims) = outcome.victims_naming_a_true_bottleneck();
        assert_eq!(right, victims, "{name}: every victim names the bottleneck");
        if name == "slow-behind-busy" {
            // The busy parse in front of the slow aggregate is a victim, not a bottleneck.
            assert_eq!(outcome.explanation.role("parse"), Some(Role::Backpressured));
        }
        if name == "dag-slow-branch" {
            assert_eq!(outcome.explanation.role("filter"), Some(Role::Ok));
        }
    }
}
