//! The observed-scalability guard in the live cycle (replay §3.5.2, FLINK-39890): with the
//! support harness's job (`src -> sink`, the sink scales 1 -> 2 in the 5th cycle) and a stored
//! scaling history in which the sink was idle, the cycle scales linearly; under
//! `job.autoscaler.compat.reference-1-16` it fails as the reference 1.16 does, with an
//! `AutoscalerError` event and nothing recorded or realized.

mod support;

use autoscaler_core::{
    AutoScalerStateStore, CycleOutcome, EventType, ScalingHistory, ScalingSummary, scaling::DecisionOutcome,
};
use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, VertexId};
use chrono::{TimeZone, Utc};
use std::collections::BTreeMap;
use support::{Harness, harness, lock};

/// The sink's history: true processing rate 0 at parallelism 1, 2 and 4 (the last a scale-down to
/// 1, so no ineffective-scaling check applies). The baseline rate (the summary at parallelism 1) is
/// 0, so Σ(p²) × baseline = 21 × 0 = 0.
fn idle_history() -> ScalingHistory {
    let summary = |current: u32, new: u32| {
        let mut metrics = EvaluatedVertexMetrics::new();
        metrics.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(0.0));
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics,
        }
    };
    let at = |minute: u32| {
        Utc.with_ymd_and_hms(2024, 5, 1, 9, minute, 0)
            .single()
            .unwrap_or_default()
    };
    let entries = BTreeMap::from([
        (at(10), summary(1, 2)),
        (at(20), summary(2, 4)),
        (at(30), summary(4, 1)),
    ]);
    [(VertexId::new("sink"), entries)].into_iter().collect()
}

async fn prepared(compat: bool) -> Harness {
    let mut h = harness();
    h.ctx.conf.set("job.autoscaler.observed-scalability.enabled", "true");
    if compat {
        h.ctx.conf.set("job.autoscaler.compat.reference-1-16", "true");
    }
    h.store
        .store_scaling_history(&h.ctx, &idle_history())
        .await
        .expect("store the history");
    // Four cycles fill the 2 min window.
    for _ in 0..4 {
        assert!(!matches!(h.cycle().await, CycleOutcome::Decided(_)));
    }
    h
}

#[tokio::test]
async fn an_idle_history_scales_the_sink_linearly() {
    let h = prepared(false).await;
    // Coefficient 1: the harness's usual 1 -> 2.
    assert_eq!(h.cycle().await.decision_outcome(), Some(DecisionOutcome::Scale));
    assert_eq!(h.parallelism(), (2, 2));
    assert_eq!(h.events.reasons(), ["ScalingReport"]);
}

#[tokio::test]
async fn under_the_compat_switch_an_idle_history_fails_the_cycle_as_1_16_does() {
    let h = prepared(true).await;
    let error = h.try_cycle().await.expect_err("1.16 aborts the decision");
    assert!(
        error.to_string().contains(
            "Character N is neither a decimal digit number, decimal point, nor \"e\" notation exponential mark."
        ),
        "{error}"
    );
    let events = lock(&h.events.0).clone();
    let last = events.last().cloned().unwrap_or_else(|| panic!("no event"));
    assert_eq!((last.0, last.1.as_str()), (EventType::Warning, "AutoscalerError"));
    assert!(last.2.contains("Character N"), "{}", last.2);
    // Nothing scaled, nothing recorded.
    assert_eq!(h.parallelism(), (2, 1));
    assert!(lock(&h.realizer.calls).is_empty());
    let history = h.store.get_scaling_history(&h.ctx).await.expect("history");
    assert_eq!(history, idle_history());
}
