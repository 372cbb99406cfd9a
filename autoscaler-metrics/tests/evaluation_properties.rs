//! Properties of the evaluation over generated jobs.

use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluationConfig, JobTopology, MetricHistory, MetricValues, ScalingMetric,
    ShipStrategy, VertexSpec, evaluate,
};
use chrono::{TimeZone, Utc};
use proptest::prelude::*;

/// A FORWARD chain `v0 -> v1 -> ...` where every vertex reads and emits the same record counts.
fn forward_chain(length: usize, counts: &[f64], gaps_ms: &[i64], lag: f64) -> (JobTopology, MetricHistory) {
    let ids: Vec<String> = (0..length).map(|i| format!("v{i}")).collect();
    let topology = JobTopology::new(
        ids.iter().map(|id| VertexSpec::new(id.as_str(), 1, 128)).collect(),
        ids.windows(2)
            .map(|w| EdgeSpec::new(w[0].as_str(), w[1].as_str(), ShipStrategy::Forward))
            .collect(),
    )
    .expect("a chain is a valid topology");
    let mut at = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid instant");
    let mut history = MetricHistory::new();
    for (count, gap) in counts.iter().zip(gaps_ms) {
        at += chrono::TimeDelta::milliseconds(*gap);
        let vertex_metrics = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let mut m = MetricValues::new();
                m.insert(ScalingMetric::NumRecordsIn, *count);
                m.insert(ScalingMetric::NumRecordsOut, *count);
                m.insert(ScalingMetric::Load, 0.5);
                if i == 0 {
                    m.insert(ScalingMetric::Lag, lag);
                }
                (id.as_str().into(), m)
            })
            .collect();
        history
            .push(
                at,
                CollectedMetrics {
                    vertex_metrics,
                    global_metrics: MetricValues::new(),
                },
            )
            .expect("increasing times");
    }
    (topology, history)
}

proptest! {
    #[test]
    fn target_rates_are_conserved_along_forward_chains_with_output_ratio_one(
        length in 2usize..8,
        increments in proptest::collection::vec(1.0..1e6f64, 2..6),
        gaps_ms in proptest::collection::vec(1i64..60_000, 6),
        lag in 0.0..1e7f64,
    ) {
        let counts: Vec<f64> = increments.iter().scan(0.0, |total, inc| { *total += inc; Some(*total) }).collect();
        let (topology, history) = forward_chain(length, &counts, &gaps_ms, lag);
        let result = evaluate(&topology, &history, &EvaluationConfig::default(), None).expect("rates are known");
        let source_target = result.vertex_metric("v0", ScalingMetric::TargetDataRate).expect("present");
        let source_catch_up = result.vertex_metric("v0", ScalingMetric::CatchUpDataRate).expect("present");
        prop_assert!(source_target.average > 0.0);
        for i in 1..length {
            let id = format!("v{i}");
            prop_assert_eq!(result.vertex_metric(&id, ScalingMetric::TargetDataRate), Some(source_target));
            prop_assert_eq!(result.vertex_metric(&id, ScalingMetric::CatchUpDataRate), Some(source_catch_up));
        }
    }
}
