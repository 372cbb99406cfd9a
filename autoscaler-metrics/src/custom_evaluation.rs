//! The custom evaluation hook (FLIP-514): a per-vertex callback whose answer is merged over the
//! built-in evaluated metrics, as the reference's `ScalingMetricEvaluator.evaluateMetrics` does with
//! its `ScalingMetricsEvaluatorPlugin`.
//!
//! The callback runs once per vertex in topological order, right after the vertex's built-in
//! evaluation (thresholds included). Its metrics are merged *before* downstream vertices are
//! evaluated, so an overridden `TARGET_DATA_RATE` or `CATCH_UP_DATA_RATE` propagates along the
//! edges exactly like a built-in one. Nothing is recomputed after the merge: a plugin that overrides
//! the target rate and wants matching thresholds returns those too.

use crate::{EvaluatedScalingMetric, EvaluatedVertexMetrics, VertexId};
use std::collections::BTreeMap;

/// What the custom evaluation of one vertex sees (the reference's plugin arguments and the
/// `evaluatedVertexMetrics` / `processingBacklog` of its context).
#[derive(Debug, Clone, Copy)]
pub struct CustomVertexEvaluation<'a> {
    /// The vertex being evaluated.
    pub vertex: &'a VertexId,
    /// Its built-in evaluated metrics.
    pub metrics: &'a EvaluatedVertexMetrics,
    /// The vertices evaluated before it (topological order), with custom metrics already merged.
    pub evaluated_vertices: &'a BTreeMap<VertexId, EvaluatedVertexMetrics>,
    /// Whether some source's lag exceeds the backlog threshold (then nothing scales down).
    pub processing_backlog: bool,
}

/// The callback: returns the metrics to merge (an empty map changes nothing).
pub type CustomEvaluator<'a> = dyn FnMut(&CustomVertexEvaluation<'_>) -> EvaluatedVertexMetrics + 'a;

/// Merges `incoming` over `actual` (reference `mergeEvaluatedMetricsMaps`): a metric `actual` lacks
/// is taken as is; for one it has, each of `current` and `average` is replaced only where the
/// incoming value is not NaN.
///
/// ```
/// use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, merge_custom_metrics};
/// let mut actual = EvaluatedVertexMetrics::new();
/// actual.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::new(5.0, 100.0));
/// let mut incoming = EvaluatedVertexMetrics::new();
/// incoming.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(250.0)); // current NaN
/// incoming.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(7.0));
/// merge_custom_metrics(&mut actual, &incoming);
/// assert_eq!(actual.get(ScalingMetric::TrueProcessingRate), Some(EvaluatedScalingMetric::new(5.0, 250.0)));
/// assert_eq!(actual.get(ScalingMetric::Lag), Some(EvaluatedScalingMetric::of(7.0)));
/// ```
pub fn merge_custom_metrics(actual: &mut EvaluatedVertexMetrics, incoming: &EvaluatedVertexMetrics) {
    for (metric, new) in incoming.iter() {
        let merged = match actual.get(metric) {
            None => new,
            Some(old) => EvaluatedScalingMetric::new(
                if new.current.is_nan() { old.current } else { new.current },
                if new.average.is_nan() { old.average } else { new.average },
            ),
        };
        actual.insert(metric, merged);
    }
}

/// Runs `custom` for `vertex` and merges its answer into `metrics`.
pub(crate) fn apply(
    custom: &mut CustomEvaluator<'_>,
    vertex: &VertexId,
    metrics: &mut EvaluatedVertexMetrics,
    evaluated_vertices: &BTreeMap<VertexId, EvaluatedVertexMetrics>,
    processing_backlog: bool,
) {
    let incoming = custom(&CustomVertexEvaluation {
        vertex,
        metrics,
        evaluated_vertices,
        processing_backlog,
    });
    merge_custom_metrics(metrics, &incoming);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        CollectedMetrics, EdgeSpec, EvaluationConfig, JobTopology, MetricHistory, ScalingMetric, ShipStrategy,
        VertexSpec,
    };
    use chrono::{TimeZone, Utc};

    /// src -> sink, 1000 records/s through both (records counted over 1 s), both 50 % busy.
    fn job() -> (JobTopology, MetricHistory) {
        let topology = JobTopology::new(
            vec![VertexSpec::new("src", 1, 128), VertexSpec::new("sink", 1, 128)],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Rebalance)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let snapshot = |records: f64| CollectedMetrics {
            vertex_metrics: [
                (
                    VertexId::new("src"),
                    [
                        (ScalingMetric::NumRecordsIn, records),
                        (ScalingMetric::NumRecordsOut, records),
                        (ScalingMetric::Lag, 0.0),
                        (ScalingMetric::Load, 0.5),
                    ]
                    .into_iter()
                    .collect(),
                ),
                (
                    VertexId::new("sink"),
                    [(ScalingMetric::NumRecordsIn, records), (ScalingMetric::Load, 0.5)]
                        .into_iter()
                        .collect(),
                ),
            ]
            .into_iter()
            .collect(),
            global_metrics: Default::default(),
        };
        let at = |s: i64| Utc.timestamp_opt(1_700_000_000 + s, 0).single().unwrap_or_default();
        let history = [(at(0), snapshot(0.0)), (at(1), snapshot(1000.0))]
            .into_iter()
            .collect();
        (topology, history)
    }

    #[test]
    fn an_overridden_source_target_rate_propagates_downstream() {
        let (topology, history) = job();
        let config = EvaluationConfig::default();
        let built_in = crate::evaluate(&topology, &history, &config, None).unwrap_or_else(|e| panic!("{e}"));
        // Built-in: 1000 records/s at the source, edge ratio 1000 / 1000 = 1, so 1000/s at the sink.
        assert_eq!(
            built_in
                .vertex_metric("sink", ScalingMetric::TargetDataRate)
                .map(|m| m.average),
            Some(1000.0)
        );

        let mut seen = Vec::new();
        let mut custom = |e: &CustomVertexEvaluation<'_>| {
            seen.push((
                e.vertex.to_string(),
                e.evaluated_vertices.keys().map(ToString::to_string).collect::<Vec<_>>(),
            ));
            let mut out = EvaluatedVertexMetrics::new();
            if e.vertex.as_str() == "src" {
                out.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(3000.0));
            }
            out
        };
        let with_custom =
            crate::evaluate(&topology, &history, &config, Some(&mut custom)).unwrap_or_else(|e| panic!("{e}"));
        // The sink reads the merged 3000/s through the ratio 1: 3000/s.
        assert_eq!(
            with_custom
                .vertex_metric("src", ScalingMetric::TargetDataRate)
                .map(|m| m.average),
            Some(3000.0)
        );
        assert_eq!(
            with_custom
                .vertex_metric("sink", ScalingMetric::TargetDataRate)
                .map(|m| m.average),
            Some(3000.0)
        );
        // Topological order; each call sees only the vertices before it.
        assert_eq!(
            seen,
            [("src".to_owned(), vec![]), ("sink".to_owned(), vec!["src".to_owned()])]
        );
        // The source's thresholds are the built-in ones: nothing is recomputed after the merge.
        assert_eq!(
            with_custom.vertex_metric("src", ScalingMetric::ScaleUpRateThreshold),
            built_in.vertex_metric("src", ScalingMetric::ScaleUpRateThreshold)
        );
    }

    #[test]
    fn an_empty_answer_changes_nothing() {
        let (topology, history) = job();
        let config = EvaluationConfig::default();
        let built_in = crate::evaluate(&topology, &history, &config, None).unwrap_or_else(|e| panic!("{e}"));
        let mut custom = |_: &CustomVertexEvaluation<'_>| EvaluatedVertexMetrics::new();
        let with_custom =
            crate::evaluate(&topology, &history, &config, Some(&mut custom)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(with_custom, built_in);
    }
}
