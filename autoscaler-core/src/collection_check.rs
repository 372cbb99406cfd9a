//! What a collection lacks ([`check_collection`]): for a collector's tests and a platform's own
//! health checks. Pure: no options, no history, no clock.
//!
//! The rules are those of the collector contract (the tables on [`MetricsCollector`]): a gap is
//! reported where the cycle falls back to an assumption or leaves a vertex out, never for a
//! metric the contract calls optional.
//!
//! [`MetricsCollector`]: crate::MetricsCollector

use crate::collector::MetricsSnapshot;
use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, RawJobMetrics};
use autoscaler_metrics::{BusyTimeAggregator, CollectedMetrics, JobTopology, ScalingMetric, VertexId, VertexInfo};
use std::fmt;

/// What is wrong with a metric of a collection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GapProblem {
    /// Not in the collection at all.
    Absent,
    /// Present, but these aggregates (`min`, `max`, `avg`, `sum`) or, for a plain value,
    /// `value`, are NaN or infinite.
    NotFinite(Vec<&'static str>),
}

/// What the cycle does about a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GapEffect {
    /// The vertex is *unmeasured*: excluded from scaling this cycle, with a `MetricsIncomplete`
    /// warning event. For a busy time whose aggregates are only partly not finite, only when the
    /// configured `metrics.busy-time.aggregator` reads one of them (see
    /// [`CollectionCheck::unmeasured_vertices`]).
    Unmeasured,
    /// The evaluation goes on with the assumption named here (`LAG` taken as 0, say).
    Assumed(&'static str),
}

/// One thing a collection lacks: which vertex (or the job), which metric, what is wrong, and
/// what follows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectionGap {
    /// The vertex; `None` for a job-wide metric (task slots, task-manager memory).
    pub vertex: Option<VertexId>,
    /// The metric as the collection names it: a Flink metric (`busyTimeMsPerSecond`,
    /// `read-records`, `taskSlotsTotal`) in a [`MetricsSnapshot::Flink`], a scaling metric
    /// (`LOAD`, `NUM_RECORDS_IN`) in a [`MetricsSnapshot::Scaling`].
    pub metric: &'static str,
    /// Absent or not finite.
    pub problem: GapProblem,
    /// What the cycle does about it.
    pub effect: GapEffect,
}

impl fmt::Display for CollectionGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.vertex {
            Some(vertex) => write!(f, "vertex {vertex}: ")?,
            None => f.write_str("job: ")?,
        }
        match &self.problem {
            GapProblem::Absent => write!(f, "{} absent", self.metric)?,
            GapProblem::NotFinite(parts) => write!(f, "{} not finite ({})", self.metric, parts.join(", "))?,
        }
        match self.effect {
            GapEffect::Unmeasured => f.write_str(": the vertex is unmeasured, not scaled this cycle"),
            GapEffect::Assumed(assumption) => write!(f, ": {assumption}"),
        }
    }
}

/// Everything one collection lacks, in topology order (job-wide gaps last).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectionCheck {
    /// The gaps found.
    pub gaps: Vec<CollectionGap>,
}

impl CollectionCheck {
    /// Whether the collection has everything the contract asks for.
    pub fn is_complete(&self) -> bool {
        self.gaps.is_empty()
    }

    /// The vertices this collection leaves unmeasured when the busy time is aggregated with
    /// `aggregator` (`metrics.busy-time.aggregator`, `MAX` by default): their busy time is absent,
    /// or the aggregate `aggregator` reads is not finite.
    pub fn unmeasured_vertices(&self, aggregator: BusyTimeAggregator) -> Vec<&VertexId> {
        let read = aggregate_name(aggregator);
        self.gaps
            .iter()
            .filter(|gap| gap.effect == GapEffect::Unmeasured)
            .filter(|gap| match &gap.problem {
                GapProblem::Absent => true,
                // A scaling snapshot's LOAD is a plain value, whatever the aggregator.
                GapProblem::NotFinite(parts) => parts.iter().any(|p| *p == read || *p == "value"),
            })
            .filter_map(|gap| gap.vertex.as_ref())
            .collect()
    }
}

impl fmt::Display for CollectionCheck {
    /// One gap a line, or `complete`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.gaps.is_empty() {
            return f.write_str("complete");
        }
        for (i, gap) in self.gaps.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{gap}")?;
        }
        Ok(())
    }
}

fn aggregate_name(aggregator: BusyTimeAggregator) -> &'static str {
    match aggregator {
        BusyTimeAggregator::Max => "max",
        BusyTimeAggregator::Min => "min",
        BusyTimeAggregator::Avg => "avg",
    }
}

/// Lists what `snapshot` lacks for `topology`, per vertex and metric, by the collector contract
/// (see [`MetricsCollector`](crate::MetricsCollector)). FINISHED vertices are never reported:
/// the cycle gives them zeros whatever was collected.
///
/// ```
/// use autoscaler_core::{GapEffect, MetricsSnapshot, check_collection};
/// use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, IoMetrics, RawJobMetrics};
/// use autoscaler_metrics::{BusyTimeAggregator, EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexSpec};
///
/// let topology = JobTopology::new(
///     vec![VertexSpec::new("source", 1, 128), VertexSpec::new("map", 2, 128)],
///     vec![EdgeSpec::new("source", "map", ShipStrategy::Hash)],
/// )?;
/// let mut raw = RawJobMetrics::default();
/// raw.io_metrics.insert("map".into(), IoMetrics::default());
/// raw.vertex_metrics.insert("source".into(), [(FlinkMetric::BusyTimePerSec, AggregatedMetric::ZERO)].into());
/// // The collector forgot the busy time of `map`: that vertex cannot be scaled.
/// raw.vertex_metrics.insert("map".into(), [(FlinkMetric::BackpressureTimePerSec, AggregatedMetric::ZERO)].into());
/// let check = check_collection(&topology, &MetricsSnapshot::Flink(raw));
/// assert_eq!(check.unmeasured_vertices(BusyTimeAggregator::Max), [&VertexId::new("map")]);
/// let map_gaps: Vec<_> = check.gaps.iter().filter(|g| g.vertex == Some(VertexId::new("map"))).collect();
/// assert_eq!(map_gaps.len(), 1);
/// assert_eq!(map_gaps[0].metric, "busyTimeMsPerSecond");
/// assert_eq!(map_gaps[0].effect, GapEffect::Unmeasured);
/// // The source's other metrics and the task managers' are missing too: every gap is listed.
/// println!("{check}");
/// # Ok::<(), autoscaler_metrics::MetricsError>(())
/// ```
pub fn check_collection(topology: &JobTopology, snapshot: &MetricsSnapshot) -> CollectionCheck {
    let mut gaps = Vec::new();
    match snapshot {
        MetricsSnapshot::Flink(raw) => check_flink(topology, raw, &mut gaps),
        MetricsSnapshot::Scaling(collected) => check_scaling(topology, collected, &mut gaps),
    }
    CollectionCheck { gaps }
}

/// The running vertices of `topology`.
fn running(topology: &JobTopology) -> impl Iterator<Item = &VertexInfo> {
    topology.vertices().iter().filter(|v| !v.finished)
}

const NO_RATE: &str = "its record counters read 0: input and output rates 0, so its target rate propagates as 0";

fn check_flink(topology: &JobTopology, raw: &RawJobMetrics, gaps: &mut Vec<CollectionGap>) {
    let mut gap = |vertex: Option<&VertexId>, metric, problem, effect| {
        gaps.push(CollectionGap {
            vertex: vertex.cloned(),
            metric,
            problem,
            effect,
        });
    };
    for vertex in running(topology) {
        let id = Some(&vertex.id);
        let flink = raw.vertex_metrics.get(&vertex.id);
        let metric = |m: FlinkMetric| flink.and_then(|f| f.get(&m));
        match metric(FlinkMetric::BusyTimePerSec) {
            None => gap(id, "busyTimeMsPerSecond", GapProblem::Absent, GapEffect::Unmeasured),
            Some(busy) => {
                let parts = not_finite(busy, &["min", "max", "avg"]);
                if !parts.is_empty() {
                    gap(
                        id,
                        "busyTimeMsPerSecond",
                        GapProblem::NotFinite(parts),
                        GapEffect::Unmeasured,
                    );
                }
            }
        }
        match raw.io_metrics.get(&vertex.id) {
            None => gap(
                id,
                "read-records/write-records",
                GapProblem::Absent,
                GapEffect::Assumed(NO_RATE),
            ),
            Some(io) if !io.accumulated_busy_time.is_finite() => gap(
                id,
                "accumulated-busy-time",
                GapProblem::NotFinite(vec!["value"]),
                GapEffect::Assumed("the AVG busy-time aggregator reads a NaN busy time for the vertex"),
            ),
            Some(_) => {}
        }
        if vertex.is_source() {
            if metric(FlinkMetric::PendingRecords).is_none() {
                gap(
                    id,
                    "pendingRecords",
                    GapProblem::Absent,
                    GapEffect::Assumed("LAG taken as 0 (a legacy or idle source)"),
                );
            }
            let rate_in = metric(FlinkMetric::SourceTaskNumRecordsInPerSec);
            let rate_out = metric(FlinkMetric::SourceTaskNumRecordsOutPerSec);
            if rate_in.is_none() && rate_out.is_none() {
                gap(
                    id,
                    "Source__<operator>.numRecordsInPerSecond",
                    GapProblem::Absent,
                    GapEffect::Assumed("no OBSERVED_TPR: the busy-time estimate of the processing rate alone"),
                );
            }
            if metric(FlinkMetric::BackpressureTimePerSec).is_none() {
                gap(
                    id,
                    "backPressuredTimeMsPerSecond",
                    GapProblem::Absent,
                    GapEffect::Assumed("OBSERVED_TPR not measured while catching up: the window's average is kept"),
                );
            }
        }
    }
    if raw.task_slots.is_none() {
        gap(
            None,
            "taskSlotsTotal/taskSlotsAvailable",
            GapProblem::Absent,
            GapEffect::Assumed("NUM_TASK_SLOTS_USED unknown: the resource check cannot count slots"),
        );
    }
    for (metric, name, assumption) in [
        (
            FlinkMetric::HeapMemoryUsed,
            "Status.JVM.Memory.Heap.Used",
            "heap usage unknown: the heap-usage guard and memory tuning skip it",
        ),
        (
            FlinkMetric::HeapMemoryMax,
            "Status.JVM.Memory.Heap.Max",
            "heap usage ratio unknown: the heap-usage guard skips it",
        ),
        (
            FlinkMetric::TotalGcTimePerSec,
            "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
            "GC_PRESSURE unknown: the GC-pressure guard skips it",
        ),
    ] {
        if !raw.task_manager_metrics.contains_key(&metric) {
            gap(None, name, GapProblem::Absent, GapEffect::Assumed(assumption));
        }
    }
}

/// The aggregates among `parts` of `metric` that are not finite.
fn not_finite(metric: &AggregatedMetric, parts: &[&'static str]) -> Vec<&'static str> {
    parts
        .iter()
        .copied()
        .filter(|part| {
            let value = match *part {
                "min" => metric.min,
                "max" => metric.max,
                "avg" => metric.avg,
                _ => metric.sum,
            };
            !value.is_finite()
        })
        .collect()
}

fn check_scaling(topology: &JobTopology, collected: &CollectedMetrics, gaps: &mut Vec<CollectionGap>) {
    for vertex in running(topology) {
        let values = collected.vertex(vertex.id.as_str());
        let mut check = |metric: ScalingMetric, effect: GapEffect| {
            let problem = match values.and_then(|v| v.get(metric)) {
                None => GapProblem::Absent,
                Some(value) if !value.is_finite() => GapProblem::NotFinite(vec!["value"]),
                Some(_) => return,
            };
            gaps.push(CollectionGap {
                vertex: Some(vertex.id.clone()),
                metric: metric.name(),
                problem,
                effect,
            });
        };
        check(ScalingMetric::Load, GapEffect::Unmeasured);
        check(ScalingMetric::NumRecordsIn, GapEffect::Assumed(NO_RATE));
        check(ScalingMetric::NumRecordsOut, GapEffect::Assumed(NO_RATE));
        if vertex.is_source() {
            check(
                ScalingMetric::Lag,
                GapEffect::Assumed("LAG taken as 0 (a legacy or idle source)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::collection::{IoMetrics, TaskSlotMetrics};
    use autoscaler_metrics::{EdgeSpec, MetricValues, ShipStrategy, VertexSpec};

    /// source -> sink, both running.
    fn topology() -> JobTopology {
        JobTopology::new(
            vec![VertexSpec::new("source", 1, 128), VertexSpec::new("sink", 1, 128)],
            vec![EdgeSpec::new("source", "sink", ShipStrategy::Hash)],
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn busy(max: f64) -> AggregatedMetric {
        AggregatedMetric {
            min: 100.0,
            max,
            avg: 300.0,
            sum: 600.0,
            skew: 0.0,
        }
    }

    /// Everything the contract asks for.
    fn complete_raw() -> RawJobMetrics {
        let mut raw = RawJobMetrics::default();
        raw.vertex_metrics.insert(
            "source".into(),
            [
                (FlinkMetric::BusyTimePerSec, busy(500.0)),
                (FlinkMetric::PendingRecords, AggregatedMetric::of_sum(1000.0)),
                (
                    FlinkMetric::SourceTaskNumRecordsInPerSec,
                    AggregatedMetric::of_sum(50.0),
                ),
                (FlinkMetric::BackpressureTimePerSec, AggregatedMetric::ZERO),
            ]
            .into(),
        );
        raw.vertex_metrics
            .insert("sink".into(), [(FlinkMetric::BusyTimePerSec, busy(800.0))].into());
        for id in ["source", "sink"] {
            raw.io_metrics.insert(
                id.into(),
                IoMetrics {
                    num_records_in: 10,
                    num_records_out: 10,
                    accumulated_busy_time: 5.0,
                },
            );
        }
        raw.task_slots = Some(TaskSlotMetrics {
            total: 4.0,
            available: 2.0,
        });
        for m in [
            FlinkMetric::HeapMemoryUsed,
            FlinkMetric::HeapMemoryMax,
            FlinkMetric::TotalGcTimePerSec,
        ] {
            raw.task_manager_metrics.insert(m, AggregatedMetric::ZERO);
        }
        raw
    }

    fn check(raw: RawJobMetrics) -> CollectionCheck {
        check_collection(&topology(), &MetricsSnapshot::Flink(raw))
    }

    #[test]
    fn a_complete_flink_collection_has_no_gap() {
        let check = check(complete_raw());
        assert!(check.is_complete(), "{check}");
        assert_eq!(check.to_string(), "complete");
    }

    #[test]
    fn missing_busy_time_leaves_the_vertex_unmeasured_under_every_aggregator() {
        let mut raw = complete_raw();
        raw.vertex_metrics.remove(&VertexId::new("sink"));
        let check = check(raw);
        assert_eq!(
            check.to_string(),
            "vertex sink: busyTimeMsPerSecond absent: the vertex is unmeasured, not scaled this cycle"
        );
        for aggregator in [
            BusyTimeAggregator::Max,
            BusyTimeAggregator::Min,
            BusyTimeAggregator::Avg,
        ] {
            assert_eq!(check.unmeasured_vertices(aggregator), [&VertexId::new("sink")]);
        }
    }

    #[test]
    fn a_nan_aggregate_leaves_the_vertex_unmeasured_only_under_the_aggregator_that_reads_it() {
        let mut raw = complete_raw();
        let sink = raw.vertex_metrics.entry("sink".into()).or_default();
        sink.insert(FlinkMetric::BusyTimePerSec, busy(f64::NAN));
        let check = check(raw);
        assert_eq!(check.gaps.len(), 1);
        assert_eq!(check.gaps[0].problem, GapProblem::NotFinite(vec!["max"]));
        assert_eq!(check.unmeasured_vertices(BusyTimeAggregator::Max).len(), 1);
        assert!(check.unmeasured_vertices(BusyTimeAggregator::Avg).is_empty());
    }

    #[test]
    fn a_source_without_backlog_rate_or_backpressure_gets_three_assumptions() {
        let mut raw = complete_raw();
        raw.vertex_metrics
            .insert("source".into(), [(FlinkMetric::BusyTimePerSec, busy(500.0))].into());
        let check = check(raw);
        let metrics: Vec<&str> = check.gaps.iter().map(|g| g.metric).collect();
        assert_eq!(
            metrics,
            [
                "pendingRecords",
                "Source__<operator>.numRecordsInPerSecond",
                "backPressuredTimeMsPerSecond"
            ]
        );
        assert!(check.gaps.iter().all(|g| matches!(g.effect, GapEffect::Assumed(_))));
        assert!(check.unmeasured_vertices(BusyTimeAggregator::Max).is_empty());
        // The source's output rate alone is enough for the input rate.
        let mut raw = complete_raw();
        let source = raw.vertex_metrics.entry("source".into()).or_default();
        source.remove(&FlinkMetric::SourceTaskNumRecordsInPerSec);
        source.insert(
            FlinkMetric::SourceTaskNumRecordsOutPerSec,
            AggregatedMetric::of_sum(50.0),
        );
        assert!(check_collection(&topology(), &MetricsSnapshot::Flink(raw)).is_complete());
    }

    #[test]
    fn missing_io_counters_and_job_wide_metrics_are_listed() {
        let mut raw = complete_raw();
        raw.io_metrics.remove(&VertexId::new("sink"));
        raw.task_slots = None;
        raw.task_manager_metrics.clear();
        let check = check(raw);
        let listed: Vec<(Option<&str>, &str)> = check
            .gaps
            .iter()
            .map(|g| (g.vertex.as_ref().map(VertexId::as_str), g.metric))
            .collect();
        assert_eq!(
            listed,
            [
                (Some("sink"), "read-records/write-records"),
                (None, "taskSlotsTotal/taskSlotsAvailable"),
                (None, "Status.JVM.Memory.Heap.Used"),
                (None, "Status.JVM.Memory.Heap.Max"),
                (None, "Status.JVM.GarbageCollector.All.TimeMsPerSecond"),
            ]
        );
    }

    #[test]
    fn finished_vertices_are_never_reported() {
        let mut sink = VertexSpec::new("sink", 1, 128);
        sink.finished = true;
        let topology = JobTopology::new(
            vec![VertexSpec::new("source", 1, 128), sink],
            vec![EdgeSpec::new("source", "sink", ShipStrategy::Hash)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut raw = complete_raw();
        raw.vertex_metrics.remove(&VertexId::new("sink"));
        raw.io_metrics.remove(&VertexId::new("sink"));
        assert!(check_collection(&topology, &MetricsSnapshot::Flink(raw)).is_complete());
    }

    #[test]
    fn a_scaling_snapshot_is_checked_on_its_scaling_metrics() {
        let values = |entries: &[(ScalingMetric, f64)]| entries.iter().copied().collect::<MetricValues>();
        let mut collected = CollectedMetrics::default();
        collected.vertex_metrics.insert(
            "source".into(),
            values(&[
                (ScalingMetric::Load, 0.5),
                (ScalingMetric::NumRecordsIn, 10.0),
                (ScalingMetric::NumRecordsOut, 10.0),
            ]),
        );
        collected.vertex_metrics.insert(
            "sink".into(),
            values(&[(ScalingMetric::Load, f64::NAN), (ScalingMetric::NumRecordsIn, 10.0)]),
        );
        let check = check_collection(&topology(), &MetricsSnapshot::Scaling(collected));
        assert_eq!(
            check.to_string(),
            "vertex source: LAG absent: LAG taken as 0 (a legacy or idle source)\n\
             vertex sink: LOAD not finite (value): the vertex is unmeasured, not scaled this cycle\n\
             vertex sink: NUM_RECORDS_OUT absent: its record counters read 0: input and output rates 0, \
             so its target rate propagates as 0"
        );
        assert_eq!(
            check.unmeasured_vertices(BusyTimeAggregator::Avg),
            [&VertexId::new("sink")]
        );
    }
}
