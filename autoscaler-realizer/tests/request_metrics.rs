//! The REST client's request series (`flink_autoscaler_rest_request_*`): one sample per request,
//! labelled by the source and the route template (never a raw id), and one failure per failed
//! attempt with the error's kind. Recorded through the `metrics` facade into a local Prometheus
//! recorder.

mod common;

use autoscaler_realizer::{rest::REST_REQUEST_DURATION, rest::REST_REQUEST_ERRORS, rest::RestClientConfig};
use common::{JOB, SOURCE};
use std::time::Duration;
use wiremock::MockServer;

/// The value of the sample `name{labels}` in `text`, labels in any order.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.split_once("} ")?;
        let matches = labels
            .iter()
            .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
        let count = set.split(',').count();
        (matches && count == labels.len()).then(|| value.trim().parse().ok())?
    })
}

#[test]
fn requests_are_timed_and_failures_counted_per_source_and_route() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let server = MockServer::start().await;
            common::mount_get(&server, "/jobs/overview", common::recorded(200, "jobs-overview")).await;
            common::mount_get(
                &server,
                &common::subtask_metrics_path(SOURCE),
                common::json(500, r#"{"errors":["boom"]}"#),
            )
            .await;
            common::mount_get(&server, &format!("/jobs/{JOB}"), common::json(200, "not json")).await;
            let client = common::client_with(
                &server,
                RestClientConfig {
                    retries: 2,
                    metrics_source: "prod".to_owned(),
                    ..RestClientConfig::default()
                },
            );
            let run = async {
                client.jobs_overview().await.expect("overview");
                client.jobs_overview().await.expect("overview again");
                let failed = client.vertex_metric_names(JOB, SOURCE).await;
                assert!(failed.is_err(), "{failed:?}");
                assert!(
                    client.job_details(JOB).await.is_err(),
                    "a body that does not parse fails"
                );
            };
            tokio::time::timeout(Duration::from_secs(30), run)
                .await
                .expect("in time");
        });
    });
    let text = handle.render();
    let labels = |endpoint| [("source", "prod"), ("method", "GET"), ("endpoint", endpoint)];
    let count = format!("{REST_REQUEST_DURATION}_count");
    assert_eq!(sample(&text, &count, &labels("/jobs/overview")), Some(2.0), "{text}");
    let subtasks = "/jobs/:jobid/vertices/:vertexid/subtasks/metrics";
    // A 500 is retried: three attempts, three failures.
    assert_eq!(sample(&text, &count, &labels(subtasks)), Some(3.0), "{text}");
    let mut failed = labels(subtasks).to_vec();
    failed.push(("kind", "status"));
    assert_eq!(sample(&text, REST_REQUEST_ERRORS, &failed), Some(3.0), "{text}");
    // A decode failure is not retried and counts as such.
    let mut undecodable = labels("/jobs/:jobid").to_vec();
    undecodable.push(("kind", "decode"));
    assert_eq!(sample(&text, REST_REQUEST_ERRORS, &undecodable), Some(1.0), "{text}");
    // Successful requests count no failure; raw ids never become label values.
    assert!(
        !text.contains(&format!(
            "{REST_REQUEST_ERRORS}{{source=\"prod\",method=\"GET\",endpoint=\"/jobs/overview\""
        )),
        "{text}"
    );
    assert!(!text.contains(JOB) && !text.contains(SOURCE), "{text}");
}
