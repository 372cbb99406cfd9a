//! The REST metrics collector against a mock Flink serving the recorded job: topology, metrics,
//! metric-name discovery and caching, `[]` answers, missing metrics, vanished jobs, TM metrics.

mod common;

use autoscaler_core::{
    CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot, config::AutoScalerOptions,
    config::Configuration,
};
use autoscaler_metrics::collection::FlinkMetric;
use autoscaler_metrics::{CollectedMetrics, MetricHistory, MetricValues, ScalingMetric, ShipStrategy};
use autoscaler_realizer::RestMetricsCollector;
use autoscaler_realizer::rest::RestError;
use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use wiremock::matchers::{method, path, query_param_contains, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The aggregated answer of the source for the names the collector discovers (the recorded query
/// asked for other names); numbers from `vertex-subtask-metrics-agg-source.json`.
const SOURCE_AGGREGATES: &str = r#"[
 {"id":"busyTimeMsPerSecond","min":43.0,"max":43.0,"avg":43.0,"sum":43.0,"skew":0.0},
 {"id":"backPressuredTimeMsPerSecond","min":470.0,"max":470.0,"avg":470.0,"sum":470.0,"skew":0.0},
 {"id":"Source__datagen.numRecordsIn","min":66014.0,"max":66014.0,"avg":66014.0,"sum":66014.0,"skew":0.0},
 {"id":"Source__datagen.numRecordsInPerSecond","min":1001.8,"max":1001.8,"avg":1001.8,"sum":1001.8,"skew":0.0},
 {"id":"Source__datagen.numRecordsOut","min":66014.0,"max":66014.0,"avg":66014.0,"sum":66014.0,"skew":0.0}
]"#;

fn running_since() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(RUNNING_SINCE_MS).expect("valid timestamp")
}

/// Ten minutes after the job started: past the default 5 min stabilization.
fn stable_now() -> DateTime<Utc> {
    running_since() + TimeDelta::minutes(10)
}

async fn mount_aggregates(server: &MockServer, vertex: &str, response: ResponseTemplate) {
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(vertex)))
        .and(query_param_contains("get", "busyTimeMsPerSecond"))
        .respond_with(response)
        .mount(server)
        .await;
}

/// Everything one collection of the recorded job asks for.
async fn mount_job(server: &MockServer) {
    mount_get(server, &format!("/jobs/{JOB}"), recorded(200, "job-details")).await;
    mount_metric_name_listings(server).await;
    mount_aggregates(server, SOURCE, json(200, SOURCE_AGGREGATES)).await;
    mount_aggregates(server, PARSE, recorded(200, "vertex-subtask-metrics-agg-upstream")).await;
    mount_aggregates(server, KEYED, recorded(200, "vertex-subtask-metrics-agg")).await;
    mount_aggregates(server, SINK, recorded(200, "vertex-subtask-metrics-agg")).await;
    mount_get(server, "/jobmanager/metrics", recorded(200, "jobmanager-metrics")).await;
    mount_get(server, "/taskmanagers/metrics", recorded(200, "taskmanagers-metrics")).await;
}

async fn requests_to(server: &MockServer, at: &str, listing: bool) -> usize {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .filter(|r| r.url.path() == at && (r.url.query().is_none() == listing))
        .count()
}

fn vertex(metrics: &CollectedMetrics, id: &str) -> MetricValues {
    *metrics.vertex(id).unwrap_or_else(|| panic!("metrics of {id}"))
}

/// The job's options, as the cycle parses them once and hands them to the collector.
fn opts(ctx: &Ctx) -> AutoScalerOptions {
    AutoScalerOptions::from_configuration(&ctx.configuration).expect("valid options")
}

/// The collection converted as the cycle converts it on an empty window.
fn scaling(collected: &CollectedJobMetrics) -> CollectedMetrics {
    collected.metrics.clone().into_scaling_metrics(
        &collected.topology,
        &AutoScalerOptions::default(),
        &MetricHistory::new(),
    )
}

#[tokio::test]
async fn collects_topology_and_metrics_of_the_recorded_job() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    let collected = collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collection succeeds");

    assert_eq!(collected.job_running_since, running_since());
    let topology = &collected.topology;
    assert_eq!(topology.len(), 4);
    let sources: Vec<_> = topology
        .sources()
        .map(|i| topology.vertices()[i].id.to_string())
        .collect();
    assert_eq!(sources, [SOURCE]);
    let keyed = topology.get(KEYED).expect("keyed vertex");
    assert_eq!((keyed.parallelism.get(), keyed.max_parallelism.get()), (1, 128));
    assert_eq!(keyed.inputs.len(), 1);
    assert_eq!(keyed.inputs[0].1, ShipStrategy::Hash);
    assert_eq!(topology.get(SOURCE).map(|v| v.num_source_partitions), Some(0));

    let m = &scaling(&collected);
    // Source: busy 43 ms/s -> 0.043; no pendingRecords -> lag 0; read-records 0 falls back to the
    // operator's numRecordsIn 66014; not catching up (0 < 30 s x 1001.8/s) and no history -> NaN.
    let source = vertex(m, SOURCE);
    assert_eq!(source.get(ScalingMetric::Load), Some(0.043));
    assert_eq!(source.get(ScalingMetric::Lag), Some(0.0));
    assert_eq!(source.get(ScalingMetric::NumRecordsIn), Some(66_014.0));
    assert_eq!(source.get(ScalingMetric::NumRecordsOut), Some(65_004.0));
    assert_eq!(source.get(ScalingMetric::AccumulatedBusyTime), Some(3_545.0));
    assert!(source.get(ScalingMetric::ObservedTpr).is_some_and(f64::is_nan));
    assert!(!source.contains(ScalingMetric::NumRecordsInPerSecond));
    // Backpressured 470 ms/s -> 0.47 (collected for every vertex, not only sources).
    assert_eq!(source.get(ScalingMetric::Backpressure), Some(0.47));
    // Bottleneck: busy 1000 ms/s -> 1.0, never backpressured; 995.85 records/s in.
    let keyed = vertex(m, KEYED);
    assert_eq!(keyed.get(ScalingMetric::Load), Some(1.0));
    assert_eq!(keyed.get(ScalingMetric::NumRecordsInPerSecond), Some(995.85));
    assert_eq!(keyed.get(ScalingMetric::NumRecordsIn), Some(62_993.0));
    assert_eq!(keyed.get(ScalingMetric::NumRecordsOut), Some(62_992.0));
    assert_eq!(keyed.get(ScalingMetric::AccumulatedBusyTime), Some(63_505.0));
    assert_eq!(keyed.get(ScalingMetric::Backpressure), Some(0.0));
    assert!(!keyed.contains(ScalingMetric::Lag));
    // Backpressured upstream: busy 16 ms/s, backpressured 984 ms/s; 998.3666... rounded to 3 decimals.
    let parse = vertex(m, PARSE);
    assert_eq!(parse.get(ScalingMetric::Load), Some(0.016));
    assert_eq!(parse.get(ScalingMetric::Backpressure), Some(0.984));
    assert_eq!(parse.get(ScalingMetric::NumRecordsInPerSecond), Some(998.367));

    // Global: 8 slots, 7 free; GC 3.65 ms/s; heap 152675184 of 780140544 bytes; managed 0.
    let g = &m.global_metrics;
    assert_eq!(g.get(ScalingMetric::NumTaskSlotsUsed), Some(1.0));
    assert_eq!(g.get(ScalingMetric::GcPressure), Some(0.00365));
    assert_eq!(g.get(ScalingMetric::HeapMemoryUsed), Some(152_675_184.0));
    assert_eq!(
        g.get(ScalingMetric::HeapMaxUsageRatio),
        Some(152_675_184.0 / 780_140_544.0)
    );
    assert_eq!(g.get(ScalingMetric::ManagedMemoryUsed), Some(0.0));
    assert!(!g.contains(ScalingMetric::MetaspaceMemoryUsed));
}

/// The recorded snapshot of the real e2e job classified: `expensive-keyed` is the bottleneck, the
/// parse map (98% backpressured) and the source (47%) are its victims. The mock answers the sink
/// with the keyed vertex's aggregates (busy 100%): a vertex whose input is measured and not
/// backpressured keeps up, so it is not a bottleneck.
#[tokio::test]
async fn the_recorded_job_names_expensive_keyed_as_its_bottleneck() {
    use autoscaler_metrics::root_cause::{Role, explain};
    let server = MockServer::start().await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collected = RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collection succeeds");
    let history: MetricHistory = [(stable_now(), scaling(&collected))].into_iter().collect();
    let explanation = explain(&collected.topology, &history).expect("backpressure collected");
    assert_eq!(explanation.bottlenecks, vec![KEYED.into()]);
    for victim in [SOURCE, PARSE] {
        assert_eq!(explanation.vertices[victim].role, Role::Backpressured, "{victim}");
        assert_eq!(explanation.vertices[victim].bottleneck, Some(KEYED.into()));
    }
    assert_eq!(explanation.vertices[SINK].role, Role::Ok);
}

/// Each vertex's metrics are asked with the four aggregates the rules read; `skew` is not asked.
#[tokio::test]
async fn vertex_metrics_are_asked_for_every_aggregate_but_skew() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collection succeeds");
    let requests = server.received_requests().await.unwrap_or_default();
    let asked: Vec<_> = requests
        .iter()
        .filter(|r| r.url.path().ends_with("/subtasks/metrics") && r.url.query_pairs().any(|(k, _)| k == "get"))
        .map(|r| r.url.clone())
        .collect();
    assert_eq!(asked.len(), 4, "one query per vertex: {asked:?}");
    for url in asked {
        let agg: Vec<String> = url
            .query_pairs()
            .filter(|(k, _)| k == "agg")
            .map(|(_, v)| v.into_owned())
            .collect();
        assert_eq!(agg, ["min,max,avg,sum"], "{url}");
    }
}

#[tokio::test]
async fn metric_names_are_listed_once_then_only_sources_are_relisted() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("first cycle");
    assert_eq!(requests_to(&server, &subtask_metrics_path(SOURCE), true).await, 1);
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 1);
    let cached = collector.cached_metric_names(&JOB.to_owned()).expect("names cached");
    assert_eq!(cached.len(), 4);
    assert_eq!(
        cached[KEYED].len(),
        3,
        "busy time, backpressure and input rate: {:?}",
        cached[KEYED]
    );

    collector
        .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10))
        .await
        .expect("second cycle");
    assert_eq!(requests_to(&server, &subtask_metrics_path(SOURCE), true).await, 2);
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 1);
    assert_eq!(requests_to(&server, &subtask_metrics_path(PARSE), true).await, 1);

    // Cleanup forgets the names: the next cycle lists every vertex again.
    MetricsCollector::<String, Ctx>::cleanup(&collector, &JOB.to_owned()).await;
    assert!(collector.cached_metric_names(&JOB.to_owned()).is_none());
    collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("third cycle");
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 2);
}

/// Whether two collections handed out one topology (not two equal ones; both are alive, so two
/// builds cannot share the address of their vertices).
fn same_graph(a: &CollectedJobMetrics, b: &CollectedJobMetrics) -> bool {
    std::ptr::eq(a.topology.vertices().as_ptr(), b.topology.vertices().as_ptr())
}

#[tokio::test]
async fn the_topology_of_an_unchanged_job_is_handed_out_again_until_cleanup() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    let first = collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("first cycle");
    let second = collector
        .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10))
        .await
        .expect("second cycle");
    assert!(same_graph(&first, &second), "the unchanged job's topology is reused");
    assert_eq!(scaling(&first), scaling(&second), "with the same IO counters");

    MetricsCollector::<String, Ctx>::cleanup(&collector, &JOB.to_owned()).await;
    let third = collector
        .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(20))
        .await
        .expect("third cycle");
    assert!(!same_graph(&second, &third), "cleanup forgot it");
    assert_eq!(second.topology, third.topology);
}

#[tokio::test]
async fn a_job_key_given_a_new_job_id_is_asked_under_the_new_id() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let collector = RestMetricsCollector::<String>::new();
    let mut ctx = ctx(client(&server), Configuration::new());
    collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collected");
    // The job was resubmitted under a new id, which the mock does not know.
    let other = "00000000000000000000000000000001";
    ctx.job_id = Some(other.to_owned());
    let refused = collector
        .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(requests_to(&server, &format!("/jobs/{other}"), true).await, 1);
    assert_eq!(requests_to(&server, &format!("/jobs/{JOB}"), true).await, 1);
}

#[tokio::test]
async fn missing_required_metric_is_not_ready_while_stabilizing_and_an_error_after() {
    let server = MockServer::start().await;
    // A source that does not report backPressuredTimeMsPerSecond (yet).
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(SOURCE)))
        .and(query_param_is_missing("get"))
        .respond_with(json(
            200,
            r#"[{"id":"busyTimeMsPerSecond"},{"id":"Source__s.numRecordsIn"},{"id":"Source__s.numRecordsInPerSecond"}]"#,
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    let early = running_since() + TimeDelta::minutes(1);
    match collector.collect(&ctx, &opts(&ctx), early).await {
        Err(CollectError::NotReady(reason)) => assert!(reason.contains("backPressuredTimeMsPerSecond"), "{reason}"),
        other => panic!("expected NotReady, got {other:?}"),
    }
    match collector.collect(&ctx, &opts(&ctx), stable_now()).await {
        Err(CollectError::MetricNotFound { metric, vertex }) => {
            assert_eq!(metric, "backPressuredTimeMsPerSecond");
            assert_eq!(vertex, SOURCE);
        }
        other => panic!("expected MetricNotFound, got {other:?}"),
    }
    // A shorter stabilization interval from the job's configuration is honoured.
    let short = Configuration::from_iter([("job.autoscaler.stabilization.interval", "30 s")]);
    let ctx = common::ctx(client(&server), short);
    assert!(matches!(
        collector.collect(&ctx, &opts(&ctx), early).await,
        Err(CollectError::MetricNotFound { .. })
    ));
}

#[tokio::test]
async fn an_empty_answer_leaves_the_vertex_unmeasured_and_relists_its_names() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(KEYED)))
        .and(query_param_contains("get", "busyTimeMsPerSecond"))
        .respond_with(recorded(200, "vertex-subtask-metrics-unknown-name"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    let first = collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("[] is not an error");
    // Without busy time the load is NaN (the autoscaler excludes the vertex), never 0.
    assert!(
        vertex(&scaling(&first), KEYED)
            .get(ScalingMetric::Load)
            .is_some_and(f64::is_nan)
    );
    assert!(!vertex(&scaling(&first), KEYED).contains(ScalingMetric::NumRecordsInPerSecond));
    assert_eq!(vertex(&scaling(&first), PARSE).get(ScalingMetric::Load), Some(0.016));

    let second = collector
        .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10))
        .await
        .expect("second cycle");
    assert_eq!(
        requests_to(&server, &subtask_metrics_path(KEYED), true).await,
        2,
        "names relisted"
    );
    assert_eq!(vertex(&scaling(&second), KEYED).get(ScalingMetric::Load), Some(1.0));
}

#[tokio::test]
async fn pending_records_of_a_source_are_summed_into_the_lag() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(SOURCE)))
        .and(query_param_is_missing("get"))
        .respond_with(json(
            200,
            r#"[{"id":"busyTimeMsPerSecond"},{"id":"backPressuredTimeMsPerSecond"},
                {"id":"Source__k.numRecordsIn"},{"id":"Source__k.numRecordsInPerSecond"},
                {"id":"Source__k.a.pendingRecords"},{"id":"Source__k.b.pendingRecords"},
                {"id":"Source__k.KafkaSourceReader.topic.t.partition.0.currentOffset"},
                {"id":"Source__k.KafkaSourceReader.topic.t.partition.1.currentOffset"},
                {"id":"Source__k.KafkaSourceReader.topic.t.partition.2.currentOffset"}]"#,
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(SOURCE)))
        .and(query_param_contains("get", "Source__k.a.pendingRecords"))
        .respond_with(json(
            200,
            r#"[{"id":"busyTimeMsPerSecond","min":100.0,"max":200.0,"avg":150.0,"sum":300.0},
                {"id":"backPressuredTimeMsPerSecond","min":400.0,"max":600.0,"avg":500.0,"sum":1000.0},
                {"id":"Source__k.numRecordsIn","sum":5000.0},
                {"id":"Source__k.numRecordsInPerSecond","min":400.0,"max":600.0,"avg":500.0,"sum":1000.0},
                {"id":"Source__k.a.pendingRecords","min":10000.0,"max":30000.0,"avg":20000.0,"sum":40000.0},
                {"id":"Source__k.b.pendingRecords","min":5000.0,"max":15000.0,"avg":10000.0,"sum":20000.0}]"#,
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();
    let collected = collector
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collection succeeds");

    // Once the source reports pendingRecords its listing is kept for a minute: the next cycles
    // use the cached names and partition count, the one a minute later lists it again.
    for (seconds, listings) in [(10, 1), (59, 1), (60, 2), (70, 2)] {
        let later = collector
            .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(seconds))
            .await
            .expect("later cycle");
        assert_eq!(
            requests_to(&server, &subtask_metrics_path(SOURCE), true).await,
            listings,
            "after {seconds} s"
        );
        assert_eq!(later.topology.get(SOURCE).map(|v| v.num_source_partitions), Some(3));
        assert_eq!(vertex(&scaling(&later), SOURCE).get(ScalingMetric::Lag), Some(60_000.0));
    }

    let source = vertex(&scaling(&collected), SOURCE);
    // 40000 + 20000 pending records.
    assert_eq!(source.get(ScalingMetric::Lag), Some(60_000.0));
    // Lag 60000 >= 30 s x 1000/s: catching up, so 1000 / (1 - 500/1000) = 2000.
    assert_eq!(source.get(ScalingMetric::ObservedTpr), Some(2000.0));
    assert_eq!(source.get(ScalingMetric::Load), Some(0.2));
    // Three partitions of topic t.
    assert_eq!(collected.topology.get(SOURCE).map(|v| v.num_source_partitions), Some(3));
}

#[tokio::test]
async fn a_job_that_vanished_between_cycles_is_not_ready() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(recorded(404, "job-details-bad-unknown-job"))
        .expect(1)
        .mount(&server)
        .await;
    let ctx = ctx(client(&server), Configuration::new());
    match RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
    {
        Err(CollectError::NotReady(reason)) => assert!(reason.contains("no longer known"), "{reason}"),
        other => panic!("expected NotReady, got {other:?}"),
    }

    // The same on a cancelled job's 500 (FlinkJobNotFoundException).
    let server = MockServer::start().await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}"),
        recorded(500, "resource-requirements-get-job-not-running"),
    )
    .await;
    let ctx = common::ctx(client(&server), Configuration::new());
    assert!(matches!(
        RestMetricsCollector::<String>::new()
            .collect(&ctx, &opts(&ctx), stable_now())
            .await,
        Err(CollectError::NotReady(_))
    ));
}

#[tokio::test]
async fn other_server_errors_fail_the_collection_naming_the_endpoint() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(KEYED)))
        .and(query_param_contains("get", "busyTimeMsPerSecond"))
        .respond_with(json(500, r#"{"errors":["Internal server error."]}"#))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    match RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
    {
        Err(error @ CollectError::Platform(_)) => {
            let message = error.to_string();
            assert!(message.starts_with("metric collection failed: "), "{message}");
            assert!(message.contains(&subtask_metrics_path(KEYED)), "{message}");
            // The REST error is kept as the cause, typed.
            let cause = std::error::Error::source(&error).and_then(|c| c.downcast_ref::<RestError>());
            assert!(
                matches!(cause, Some(RestError::Status { status: 500, .. })),
                "{cause:?}"
            );
        }
        other => panic!("expected Platform, got {other:?}"),
    }
}

#[tokio::test]
async fn missing_task_manager_metrics_fail_the_collection() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/taskmanagers/metrics"))
        .respond_with(json(200, "[]"))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    match RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
    {
        Err(CollectError::Failed(message)) => assert_eq!(message, "Missing required TM metrics"),
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn without_gc_metrics_the_base_set_is_used_and_the_probe_is_cached() {
    let server = MockServer::start().await;
    // Asking for the GC metric empties the answer (this JVM does not report it).
    Mock::given(method("GET"))
        .and(path("/taskmanagers/metrics"))
        .and(query_param_contains("get", "GarbageCollector"))
        .respond_with(json(200, "[]"))
        .expect(1) // probed once, then remembered
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/taskmanagers/metrics"))
        .and(query_param_contains("agg", "min,max,avg"))
        .respond_with(json(
            200,
            r#"[{"id":"Status.JVM.Memory.Heap.Max","min":200.0,"max":200.0,"avg":200.0},
                {"id":"Status.JVM.Memory.Heap.Used","min":50.0,"max":100.0,"avg":75.0},
                {"id":"Status.Flink.Memory.Managed.Used","min":0.0,"max":133.0,"avg":66.5},
                {"id":"Status.JVM.Memory.Metaspace.Used","min":11.0,"max":22.0,"avg":16.5}]"#,
        ))
        .with_priority(2)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();
    for cycle in 0..2 {
        let collected = collector
            .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10 * cycle))
            .await
            .expect("heap metrics suffice");
        let g = &scaling(&collected).global_metrics;
        assert!(!g.contains(ScalingMetric::GcPressure));
        assert_eq!(g.get(ScalingMetric::HeapMaxUsageRatio), Some(0.5));
        assert_eq!(g.get(ScalingMetric::HeapMemoryUsed), Some(100.0));
        assert_eq!(g.get(ScalingMetric::ManagedMemoryUsed), Some(133.0));
        assert_eq!(g.get(ScalingMetric::MetaspaceMemoryUsed), Some(22.0));
    }
}

#[tokio::test]
async fn a_new_running_since_drops_the_caches() {
    let server = MockServer::start().await;
    // The first answer of the job details says the job switched to RUNNING a minute later: a
    // restart (or rescale) between the first and the second collection.
    let mut restarted: serde_json::Value = serde_json::from_str(&fixture("job-details")).expect("fixture is JSON");
    restarted["timestamps"]["RUNNING"] = serde_json::json!(RUNNING_SINCE_MS + 60_000);
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();
    let now = stable_now();
    let first = collector.collect(&ctx, &opts(&ctx), now).await.expect("first cycle");
    assert_eq!(first.job_running_since, running_since());
    collector
        .collect(&ctx, &opts(&ctx), now + TimeDelta::seconds(10))
        .await
        .expect("same run");
    // The same run: only the sources were listed again.
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 1);

    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(json(200, &restarted.to_string()))
        .with_priority(1)
        .mount(&server)
        .await;
    let after = collector
        .collect(&ctx, &opts(&ctx), now + TimeDelta::seconds(20))
        .await
        .expect("after the restart");
    assert_eq!(after.job_running_since, running_since() + TimeDelta::minutes(1));
    // A new run: every vertex was listed again.
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 2);
}

#[tokio::test]
async fn an_empty_plan_is_not_ready() {
    let server = MockServer::start().await;
    let mut details: serde_json::Value = serde_json::from_str(&fixture("job-details")).expect("fixture is JSON");
    details["plan"]["nodes"] = serde_json::json!([]);
    mount_get(&server, &format!("/jobs/{JOB}"), json(200, &details.to_string())).await;
    let ctx = ctx(client(&server), Configuration::new());
    assert!(matches!(
        RestMetricsCollector::<String>::new()
            .collect(&ctx, &opts(&ctx), stable_now())
            .await,
        Err(CollectError::NotReady(_))
    ));
}

#[tokio::test]
async fn the_plan_is_fetched_when_the_details_lack_it() {
    let server = MockServer::start().await;
    let mut details: serde_json::Value = serde_json::from_str(&fixture("job-details")).expect("fixture is JSON");
    if let Some(map) = details.as_object_mut() {
        map.remove("plan");
    }
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(json(200, &details.to_string()))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}/plan")))
        .respond_with(recorded(200, "job-plan"))
        .expect(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collected = RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("collection succeeds");
    assert_eq!(collected.topology.len(), 4);
}

#[tokio::test]
async fn a_finished_vertex_is_never_queried_and_reports_zeros() {
    let server = MockServer::start().await;
    let mut details: serde_json::Value = serde_json::from_str(&fixture("job-details")).expect("fixture is JSON");
    if let Some(sink) = details["vertices"]
        .as_array_mut()
        .and_then(|vs| vs.iter_mut().find(|v| v["id"] == SINK))
    {
        sink["status"] = "FINISHED".into();
    }
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(json(200, &details.to_string()))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collector = RestMetricsCollector::<String>::new();

    for cycle in 0..2 {
        let collected = collector
            .collect(&ctx, &opts(&ctx), stable_now() + TimeDelta::seconds(10 * cycle))
            .await
            .expect("collection succeeds");
        assert!(collected.topology.get(SINK).is_some_and(|v| v.finished));
        let sink = vertex(&scaling(&collected), SINK);
        assert_eq!(sink.get(ScalingMetric::Load), Some(0.0));
        assert_eq!(sink.get(ScalingMetric::NumRecordsIn), Some(0.0));
        assert_eq!(sink.get(ScalingMetric::NumRecordsOut), Some(0.0));
        assert_eq!(sink.get(ScalingMetric::AccumulatedBusyTime), Some(0.0));
    }
    assert_eq!(requests_to(&server, &subtask_metrics_path(SINK), true).await, 0);
    assert_eq!(requests_to(&server, &subtask_metrics_path(SINK), false).await, 0);
    // As in the reference, a finished vertex keeps the cached vertex set different from the
    // topology's, so the other vertices are listed again every cycle.
    assert_eq!(requests_to(&server, &subtask_metrics_path(KEYED), true).await, 2);
}

#[tokio::test]
async fn a_stabilization_interval_of_100000000_days_does_not_overflow() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    // 10^8 d = 8.64e12 s: a valid Java Duration, but running_since + it is past chrono's range
    // (year 262143), which panicked.
    let conf = Configuration::from_iter([("job.autoscaler.stabilization.interval", "100000000 d")]);
    let ctx = ctx(client(&server), conf);
    let collected = RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("still stabilizing, but the metrics are all there");
    assert_eq!(collected.topology.len(), 4);
}

#[tokio::test]
async fn a_running_timestamp_at_the_end_of_time_does_not_overflow() {
    let server = MockServer::start().await;
    let max_ms = DateTime::<Utc>::MAX_UTC.timestamp_millis(); // 8210298412799999
    let mut details: serde_json::Value = serde_json::from_str(&fixture("job-details")).expect("fixture is JSON");
    details["timestamps"]["RUNNING"] = max_ms.into();
    mount_get(&server, &format!("/jobs/{JOB}"), json(200, &details.to_string())).await;
    mount_job(&server).await;
    let ctx = ctx(client(&server), Configuration::new());
    let collected = RestMetricsCollector::<String>::new()
        .collect(&ctx, &opts(&ctx), stable_now())
        .await
        .expect("a job that started 'in the future' is collected as stabilizing");
    assert_eq!(collected.job_running_since.timestamp_millis(), max_ms);
}

#[tokio::test]
async fn the_cluster_metrics_serve_every_job_of_the_cluster_for_five_seconds() {
    let server = MockServer::start().await;
    mount_job(&server).await;
    let client = client(&server);
    let first = ctx(client.clone(), Configuration::new());
    // A second job key on the same cluster (the recorded job's id, as the mock serves only it).
    let mut second = ctx(client, Configuration::new());
    second.job_key = "another".to_owned();
    let collector = RestMetricsCollector::<String>::new();
    let count = |at: &'static str| {
        let server = &server;
        async move {
            let requests = server.received_requests().await.unwrap_or_default();
            requests.iter().filter(|r| r.url.path() == at).count()
        }
    };

    let a = collector
        .collect(&first, &opts(&first), stable_now())
        .await
        .expect("first job");
    let b = collector
        .collect(&second, &opts(&second), stable_now() + TimeDelta::seconds(4))
        .await
        .expect("second job");
    // The GC probe and the values once, the slots once: for both jobs.
    assert_eq!(count("/taskmanagers/metrics").await, 2);
    assert_eq!(count("/jobmanager/metrics").await, 1);
    let (MetricsSnapshot::Flink(a), MetricsSnapshot::Flink(b)) = (&a.metrics, &b.metrics) else {
        panic!("Flink snapshots");
    };
    // The same answer (compared as text: the unrequested skew is NaN in both).
    assert_eq!(
        format!("{:?}", a.task_manager_metrics),
        format!("{:?}", b.task_manager_metrics)
    );
    assert_eq!(a.task_slots, b.task_slots);
    assert!(a.task_manager_metrics.contains_key(&FlinkMetric::TotalGcTimePerSec));

    // Five seconds later the answer is asked again (the GC probe is remembered).
    collector
        .collect(&second, &opts(&second), stable_now() + TimeDelta::seconds(5))
        .await
        .expect("second job again");
    assert_eq!(count("/taskmanagers/metrics").await, 3);
    assert_eq!(count("/jobmanager/metrics").await, 2);
}
