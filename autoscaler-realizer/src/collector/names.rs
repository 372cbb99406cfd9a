//! Which Flink metrics to ask each vertex for: filtering a vertex's metric names down to the ones
//! the autoscaler reads (reference `ScalingMetricCollector.getFilteredVertexMetricNames`), and
//! counting Kafka/Pulsar source partitions from the names (`updateKafkaPulsarSourceNumPartitions`).

use autoscaler_core::CollectError;
use autoscaler_metrics::VertexId;
use autoscaler_metrics::collection::FlinkMetric;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// Flink metric name -> what it measures, for one vertex.
pub(crate) type VertexMetricNames = BTreeMap<String, FlinkMetric>;

/// A human-readable pattern of a required metric, for "Could not find required metric" errors.
fn describe(metric: FlinkMetric) -> &'static str {
    match metric {
        FlinkMetric::BusyTimePerSec => "busyTimeMsPerSecond",
        FlinkMetric::BackpressureTimePerSec => "backPressuredTimeMsPerSecond",
        FlinkMetric::SourceTaskNumRecordsInPerSec => "Source__<operator>.numRecordsInPerSecond",
        FlinkMetric::SourceTaskNumRecordsIn => "Source__<operator>.numRecordsIn",
        _ => "an optional metric",
    }
}

/// The metric names to query for one vertex, out of all the names it reports.
///
/// Every vertex needs `busyTimeMsPerSecond`. A source also needs `backPressuredTimeMsPerSecond` and
/// its operator's `numRecordsInPerSecond` and `numRecordsIn`, and gets every `*.pendingRecords`
/// (summed later; a source without any, legacy or idle, is logged and assumed to have no lag) and
/// its operator's `numRecordsOut` when present. Other vertices get `numRecordsInPerSecond` and
/// (for this project's `BACKPRESSURE`, which the reference does not collect beyond sources)
/// `backPressuredTimeMsPerSecond` when present. A missing required metric is
/// [`CollectError::MetricNotFound`].
pub(crate) fn filter_vertex_metric_names(
    vertex: &VertexId,
    all_names: &BTreeSet<String>,
    is_source: bool,
) -> Result<VertexMetricNames, CollectError> {
    let names = || all_names.iter().map(String::as_str);
    let mut filtered = VertexMetricNames::new();
    let mut required = vec![FlinkMetric::BusyTimePerSec];
    if is_source {
        required.extend([
            FlinkMetric::BackpressureTimePerSec,
            FlinkMetric::SourceTaskNumRecordsInPerSec,
            FlinkMetric::SourceTaskNumRecordsIn,
        ]);
        let pending = FlinkMetric::PendingRecords.find_all(names());
        if pending.is_empty() {
            tracing::warn!(
                %vertex,
                "pendingRecords metric could not be found. Either a legacy source or an idle source. Assuming no pending records."
            );
        }
        for name in pending {
            filtered.insert(name.to_owned(), FlinkMetric::PendingRecords);
        }
        if let Some(name) = FlinkMetric::SourceTaskNumRecordsOut.find_any(names()) {
            filtered.insert(name.to_owned(), FlinkMetric::SourceTaskNumRecordsOut);
        }
    } else {
        for optional in [FlinkMetric::NumRecordsInPerSec, FlinkMetric::BackpressureTimePerSec] {
            if let Some(name) = optional.find_any(names()) {
                filtered.insert(name.to_owned(), optional);
            }
        }
    }
    for metric in required {
        let name = metric.find_any(names()).ok_or_else(|| CollectError::MetricNotFound {
            metric: describe(metric).to_owned(),
            vertex: vertex.to_string(),
        })?;
        filtered.insert(name.to_owned(), metric);
    }
    Ok(filtered)
}

/// Matches a Kafka partition offset metric or a Pulsar partition receive counter (the reference's
/// pattern; the Kafka cluster part is optional).
static PARTITION_METRIC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^.*?(\.kafkaCluster\.(?<kafkaCluster>.+))?\.KafkaSourceReader\.topic\.(?<kafkaTopic>.+)\.partition\.(?<kafkaId>\d+)\.currentOffset$",
        r"|^.*\.PulsarConsumer\.(?<pulsarTopic>.+)-partition-(?<pulsarId>\d+)\..*\.numMsgsReceived$",
    ))
    .ok()
});

/// Number of distinct Kafka `cluster-topic-partition` (cluster `null` when the metric has none) or
/// Pulsar `topic-partition` a source reports metrics for; 0 when it is neither. Only alignment uses it.
pub(crate) fn count_source_partitions<'a>(names: impl IntoIterator<Item = &'a str>) -> u32 {
    let Some(regex) = PARTITION_METRIC.as_ref() else {
        return 0;
    };
    let partitions: BTreeSet<String> = names
        .into_iter()
        .filter_map(|name| {
            let caps = regex.captures(name)?;
            let group = |g: &str| caps.name(g).map(|m| m.as_str());
            match (
                group("kafkaTopic"),
                group("kafkaId"),
                group("pulsarTopic"),
                group("pulsarId"),
            ) {
                (Some(topic), Some(id), _, _) => {
                    Some(format!("{}-{topic}-{id}", group("kafkaCluster").unwrap_or("null")))
                }
                (_, _, Some(topic), Some(id)) => Some(format!("{topic}-{id}")),
                _ => None,
            }
        })
        .collect();
    u32::try_from(partitions.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn sources_and_operators_need_different_metrics() {
        let v = VertexId::new("v");
        let source_names = names(&[
            "busyTimeMsPerSecond",
            "backPressuredTimeMsPerSecond",
            "Source__src.numRecordsInPerSecond",
            "Source__src.numRecordsIn",
            "Source__src.numRecordsOut",
            "Source__src.a.pendingRecords",
            "Source__src.b.pendingRecords",
            "numRecordsInPerSecond",
        ]);
        let filtered = filter_vertex_metric_names(&v, &source_names, true).expect("all required present");
        assert_eq!(filtered.len(), 7);
        assert_eq!(
            filtered.get("Source__src.b.pendingRecords"),
            Some(&FlinkMetric::PendingRecords)
        );
        assert!(!filtered.contains_key("numRecordsInPerSecond"));

        let operator = filter_vertex_metric_names(&v, &source_names, false).expect("busy time present");
        assert_eq!(
            operator,
            VertexMetricNames::from([
                ("busyTimeMsPerSecond".to_owned(), FlinkMetric::BusyTimePerSec),
                ("numRecordsInPerSecond".to_owned(), FlinkMetric::NumRecordsInPerSec),
                (
                    "backPressuredTimeMsPerSecond".to_owned(),
                    FlinkMetric::BackpressureTimePerSec
                ),
            ])
        );
        // Backpressure is optional for non-sources: without it the vertex is still collected.
        let busy_only = names(&["busyTimeMsPerSecond", "numRecordsInPerSecond"]);
        let operator = filter_vertex_metric_names(&v, &busy_only, false).expect("busy time present");
        assert!(!operator.values().any(|m| *m == FlinkMetric::BackpressureTimePerSec));
    }

    #[test]
    fn missing_required_metrics_are_named() {
        let v = VertexId::new("v");
        let operator_only = names(&["busyTimeMsPerSecond"]);
        assert!(filter_vertex_metric_names(&v, &operator_only, false).is_ok());
        match filter_vertex_metric_names(&v, &operator_only, true) {
            Err(CollectError::MetricNotFound { metric, vertex }) => {
                assert_eq!(metric, "backPressuredTimeMsPerSecond");
                assert_eq!(vertex, "v");
            }
            other => panic!("expected MetricNotFound, got {other:?}"),
        }
        assert!(matches!(
            filter_vertex_metric_names(&v, &names(&[]), false),
            Err(CollectError::MetricNotFound { .. })
        ));
    }

    #[test]
    fn kafka_and_pulsar_partitions_are_counted_once_each() {
        let list = [
            "1.Source__Kafka.KafkaSourceReader.topic.orders.partition.0.currentOffset",
            "1.Source__Kafka.KafkaSourceReader.topic.orders.partition.1.currentOffset",
            "2.Source__Kafka.KafkaSourceReader.topic.orders.partition.1.currentOffset",
            "1.Source__Kafka.kafkaCluster.east.KafkaSourceReader.topic.orders.partition.1.currentOffset",
            "1.Source__Kafka.KafkaSourceReader.topic.orders.partition.1.committedOffset",
            "1.Source__P.PulsarConsumer.persistent_//public/default/t-partition-3.c1.numMsgsReceived",
            "busyTimeMsPerSecond",
        ];
        // orders-0, orders-1 (cluster null), east-orders-1, pulsar t-3
        assert_eq!(count_source_partitions(list), 4);
        assert_eq!(count_source_partitions(["Source__datagen.numRecordsOut"]), 0);
    }
}
