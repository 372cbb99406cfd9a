//! Smoke test against a real Flink cluster, ignored unless asked for with `--ignored`, and then
//! failing unless `FLINK_REST_URL` is set (e.g.
//! `http://127.0.0.1:18081`, a cluster from `e2e/flink.sh start` with a job from `e2e/flink.sh
//! submit`). It lists the jobs, collects each RUNNING job's metrics, and, with
//! `FLINK_RESCALE_VERTEX=<vertex id>=<parallelism>`, rescales that vertex through the realizer and
//! checks that Flink accepted the new requirements. Every request is bounded by the client timeout.
//!
//! ```sh
//! FLINK_REST_URL=http://127.0.0.1:18081 cargo test -p autoscaler-realizer --test real_flink -- --ignored --nocapture
//! ```

use autoscaler_core::{
    JobListFetcher, JobStatus, MetricsCollector, ScalingRealizer, config::AutoScalerOptions, config::Configuration,
};
use autoscaler_metrics::{MetricHistory, ScalingMetric, VertexId};
use autoscaler_realizer::{
    FlinkClusterJobListFetcher, RescaleApiScalingRealizer, RestMetricsCollector, rest::FlinkRestClient,
    rest::RestClientConfig,
};
use chrono::Utc;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs a real Flink cluster: FLINK_REST_URL=http://... cargo test ... -- --ignored"]
async fn collect_and_rescale_on_a_real_cluster() {
    // Asked for explicitly (--ignored), so a missing cluster is a failure, never a silent pass.
    let url = std::env::var("FLINK_REST_URL").expect("FLINK_REST_URL must name the cluster's REST address");
    let client = FlinkRestClient::new(
        &url,
        RestClientConfig {
            timeout: Duration::from_secs(10),
            ..RestClientConfig::default()
        },
    )
    .expect("valid FLINK_REST_URL");
    // No stabilization: a freshly submitted job must not be "not ready" for this smoke test.
    let base = Configuration::from_iter([("job.autoscaler.stabilization.interval", "0 s")]);
    let jobs = FlinkClusterJobListFetcher::new(client)
        .fetch(&base)
        .await
        .expect("job list");
    let collector = RestMetricsCollector::<String>::new();
    let mut history = MetricHistory::new();
    for ctx in jobs.iter().filter(|c| c.job_status == Some(JobStatus::Running)) {
        for _ in 0..2 {
            let now = Utc::now();
            let options = AutoScalerOptions::from_configuration(&ctx.configuration).expect("valid options");
            let collected = collector.collect(ctx, &options, now).await.expect("collection");
            let metrics = collected
                .metrics
                .into_scaling_metrics(&collected.topology, &options, &history);
            for vertex in collected.topology.vertices() {
                let m = metrics.vertex(vertex.id.as_str());
                eprintln!(
                    "{} {:?} p={} LOAD={:?} IN={:?} IN/s={:?} LAG={:?} OBSERVED_TPR={:?}",
                    vertex.id,
                    vertex.name,
                    vertex.parallelism,
                    m.and_then(|m| m.get(ScalingMetric::Load)),
                    m.and_then(|m| m.get(ScalingMetric::NumRecordsIn)),
                    m.and_then(|m| m.get(ScalingMetric::NumRecordsInPerSecond)),
                    m.and_then(|m| m.get(ScalingMetric::Lag)),
                    m.and_then(|m| m.get(ScalingMetric::ObservedTpr)),
                );
                let load = m.and_then(|m| m.get(ScalingMetric::Load));
                assert!(load.is_some_and(|l| l.is_nan() || (0.0..=1.0).contains(&l)), "{load:?}");
            }
            eprintln!("global: {:?}", metrics.global_metrics);
            history.insert(now, metrics);
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        if let Ok(spec) = std::env::var("FLINK_RESCALE_VERTEX") {
            let (vertex, parallelism) = spec.split_once('=').expect("FLINK_RESCALE_VERTEX=<vertex>=<p>");
            let parallelism: u32 = parallelism.parse().expect("numeric parallelism");
            let overrides = [(VertexId::new(vertex), parallelism)].into_iter().collect();
            RescaleApiScalingRealizer::<String, _>::new()
                .realize_parallelism_overrides(ctx, &overrides)
                .await
                .expect("rescale accepted");
            let requirements = ctx
                .client
                .resource_requirements(ctx.job_id.as_deref().unwrap_or_default())
                .await
                .expect("requirements");
            assert_eq!(requirements.0[vertex].parallelism.upper_bound, parallelism);
            // The same overrides again send no PUT (nothing changes).
            RescaleApiScalingRealizer::<String, _>::new()
                .realize_parallelism_overrides(ctx, &overrides)
                .await
                .expect("idempotent");
        }
    }
}
