//! The fake's answers read by the autoscaler's own REST client, and a rescale as Flink's adaptive
//! scheduler applies it.

use autoscaler_realizer::rest::{
    Aggregation, FlinkRestClient, JobResourceRequirements, ParallelismBounds, RestClientConfig, RestError,
    VertexResourceRequirements,
};
use flink_fake_jobmanager::{Endpoint, FakeConfig, FakeJobManager, vertex_id};
use std::time::Duration;

fn client(url: &str) -> FlinkRestClient {
    FlinkRestClient::new(
        url,
        RestClientConfig {
            timeout: Duration::from_secs(5),
            retries: 0,
            ..RestClientConfig::default()
        },
    )
    .expect("client")
}

#[tokio::test]
async fn every_answer_parses_and_a_rescale_is_applied_and_recorded() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let fake = FakeJobManager::new(FakeConfig {
            jobs: 3,
            vertices: 4,
            hot_every: 2,
            ..FakeConfig::default()
        });
        let running = fake.start("127.0.0.1:0".parse().expect("addr")).await.expect("start");
        let client = client(&running.url());
        let fake = running.fake();

        let overview = client.jobs_overview().await.expect("overview");
        assert_eq!(overview.jobs.len(), 3);
        let job = overview.jobs[0].jid.clone();
        assert_eq!(job, fake.job_ids()[0]);
        assert_eq!(
            overview.jobs[0].effective_status(),
            Some(autoscaler_core::JobStatus::Running)
        );

        let details = client.job_details(&job).await.expect("details");
        assert_eq!(details.vertices.len(), 4);
        let plan = details.plan.clone().expect("plan in the details");
        assert_eq!(plan.nodes.len(), 4);
        assert!(plan.nodes[0].inputs.is_empty());
        assert_eq!(plan.nodes[2].inputs[0].ship_strategy, "HASH");
        let before = details.running_since().expect("running since");
        // Job 0, vertex v: parallelism 1 + v % 4.
        let parallelism: Vec<i64> = details.vertices.iter().map(|v| v.parallelism).collect();
        assert_eq!(parallelism, vec![1, 2, 3, 4]);
        assert!(details.vertices[1].metrics.is_some_and(|m| m.read_records > 0));

        let config = client.job_jobmanager_config(&job).await.expect("job config");
        assert!(
            config
                .iter()
                .any(|e| e.key == "jobmanager.scheduler" && e.value == "adaptive")
        );

        let source = vertex_id(0, 0);
        let names = client.vertex_metric_names(&job, &source).await.expect("names");
        assert!(names.iter().any(|n| n == "Source__src.pendingRecords"));
        let values = client
            .vertex_aggregated_metrics(
                &job,
                &source,
                &[
                    "busyTimeMsPerSecond",
                    "Source__src.numRecordsInPerSecond",
                    "Source__src.pendingRecords",
                ],
                &[],
            )
            .await
            .expect("values");
        assert_eq!(values.len(), 3);
        // Job 0 is hot: vertex 1 (p=2, utilization 1.4) holds the source at 1000 / 1.4 records/s.
        let rate = values[1].aggregates();
        assert!((rate.sum - 1000.0 / 1.4).abs() < 1e-6, "{rate:?}");
        assert!(values[2].max > 0.0, "the lag grows: {:?}", values[2]);
        // One unknown name and Flink answers nothing at all.
        let none = client
            .vertex_aggregated_metrics(&job, &source, &["busyTimeMsPerSecond", "noSuchMetric"], &[])
            .await
            .expect("values");
        assert!(none.is_empty());

        let tm = client
            .taskmanagers_aggregated_metrics(
                &[
                    "Status.JVM.Memory.Heap.Max",
                    "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
                ],
                &[Aggregation::Min, Aggregation::Max, Aggregation::Avg],
            )
            .await
            .expect("tm");
        assert_eq!(tm.len(), 2);
        let slots = client
            .jobmanager_metrics(&["taskSlotsTotal", "taskSlotsAvailable"])
            .await
            .expect("jm");
        assert_eq!(slots.len(), 2);

        let mut requirements = client.resource_requirements(&job).await.expect("requirements");
        assert_eq!(requirements.0.len(), 4);
        let bottleneck = vertex_id(0, 1);
        requirements.0.insert(
            bottleneck.clone(),
            VertexResourceRequirements {
                parallelism: ParallelismBounds {
                    lower_bound: 1,
                    upper_bound: 4,
                },
            },
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        client
            .put_resource_requirements(&job, &requirements)
            .await
            .expect("put");
        assert_eq!(fake.parallelism(&job), Some(vec![1, 4, 3, 4]));
        let after = client.job_details(&job).await.expect("details");
        assert_eq!(after.vertices[1].parallelism, 4);
        assert!(after.running_since().expect("running") > before, "RUNNING moved");
        let busy = client
            .vertex_aggregated_metrics(&job, &bottleneck, &["busyTimeMsPerSecond"], &[])
            .await
            .expect("busy");
        assert!((busy[0].max - 700.0).abs() < 1e-6, "{:?}", busy[0]);

        // A bound above the max parallelism and an unknown vertex are refused with 400.
        let mut bad = requirements.clone();
        bad.0.insert(
            bottleneck,
            VertexResourceRequirements {
                parallelism: ParallelismBounds {
                    lower_bound: 1,
                    upper_bound: 129,
                },
            },
        );
        let refused = client.put_resource_requirements(&job, &bad).await;
        assert!(
            matches!(refused, Err(RestError::Status { status: 400, .. })),
            "{refused:?}"
        );
        let mut incomplete = JobResourceRequirements::default();
        incomplete
            .0
            .insert("ffff".to_owned(), requirements.0.values().next().cloned().expect("one"));
        assert!(client.put_resource_requirements(&job, &incomplete).await.is_err());
        // An unknown job: 404 on the details, 500 FlinkJobNotFoundException on the requirements.
        let missing = "0123456789abcdef0123456789abcdef";
        assert!(client.job_details(missing).await.is_err_and(|e| e.is_job_not_found()));
        assert!(
            client
                .resource_requirements(missing)
                .await
                .is_err_and(|e| e.is_job_not_found())
        );

        let stats = fake.stats();
        assert_eq!(stats.rescales.len(), 1);
        assert_eq!(stats.rescales[0].job_id, job);
        assert_eq!(stats.rescales_per_job().get(&job), Some(&1));
        assert_eq!(stats.count(Endpoint::ResourceRequirementsPut), 3);
        assert_eq!(stats.count(Endpoint::JobDetails), 3);
        assert_eq!(stats.count(Endpoint::VertexMetricValues), 3);
        assert_eq!(stats.count(Endpoint::VertexMetricNames), 1);

        // The control endpoint serves the same figures.
        let body = reqwest_free_get(running.addr(), "/_fake/stats").await;
        let served: flink_fake_jobmanager::Stats = serde_json::from_slice(&body).expect("stats json");
        assert_eq!(served.rescales, stats.rescales);
        running.stop().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn a_stall_holds_the_answers() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let running = FakeJobManager::new(FakeConfig::default())
            .start("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("start");
        running.fake().stall_for(Duration::from_millis(400));
        let client = FlinkRestClient::new(
            &running.url(),
            RestClientConfig {
                timeout: Duration::from_millis(100),
                retries: 0,
                ..RestClientConfig::default()
            },
        )
        .expect("client");
        let stalled = client.jobs_overview().await;
        assert!(matches!(stalled, Err(RestError::Timeout { .. })), "{stalled:?}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(client.jobs_overview().await.is_ok());
    })
    .await
    .expect("bounded");
}

/// `GET path` by plain HTTP/1.0 (the bench's helper, run off the runtime).
async fn reqwest_free_get(addr: std::net::SocketAddr, path: &'static str) -> Vec<u8> {
    tokio::task::spawn_blocking(move || flink_fake_jobmanager::bench::http_get(addr, path).expect("get"))
        .await
        .expect("join")
}
