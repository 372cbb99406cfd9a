//! A GET that times out is retried, counted and logged at debug level. In a test binary of its
//! own: the log capture is a thread-local subscriber, and tracing caches per call site whether
//! anyone listens, which tests running in parallel threads without a subscriber would race.

mod common;

use autoscaler_realizer::{rest::REST_REQUEST_DURATION, rest::REST_REQUEST_ERRORS, rest::RestClientConfig};
use common::JOB;
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

/// A GET that times out is retried; the attempt that timed out counts in
/// `flink_autoscaler_rest_request_errors_total{kind="timeout"}` and is logged at debug level with
/// its endpoint (issue 26: job details asked again 3.5 s apart, with nothing to show why).
#[test]
fn a_timed_out_get_is_retried_counted_and_logged_at_debug() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let logs = common::LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _logging = tracing::subscriber::set_default(subscriber);
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let server = MockServer::start().await;
            // The first answer comes after the timeout; the second at once.
            wiremock::Mock::given(wiremock::matchers::method("GET"))
                .and(wiremock::matchers::path(format!("/jobs/{JOB}")))
                .respond_with(common::recorded(200, "job-details").set_delay(Duration::from_secs(2)))
                .up_to_n_times(1)
                .with_priority(1)
                .mount(&server)
                .await;
            common::mount_get(&server, &format!("/jobs/{JOB}"), common::recorded(200, "job-details")).await;
            let client = common::client_with(
                &server,
                RestClientConfig {
                    timeout: Duration::from_millis(300),
                    retries: 2,
                    initial_backoff: Duration::from_millis(10),
                    metrics_source: "prod".to_owned(),
                    ..RestClientConfig::default()
                },
            );
            tokio::time::timeout(Duration::from_secs(30), client.job_details(JOB))
                .await
                .expect("in time")
                .expect("the retry succeeds");
        });
    });
    let text = handle.render();
    let labels = [("source", "prod"), ("method", "GET"), ("endpoint", "/jobs/:jobid")];
    let count = format!("{REST_REQUEST_DURATION}_count");
    assert_eq!(sample(&text, &count, &labels), Some(2.0), "two attempts: {text}");
    let mut timed_out = labels.to_vec();
    timed_out.push(("kind", "timeout"));
    assert_eq!(sample(&text, REST_REQUEST_ERRORS, &timed_out), Some(1.0), "{text}");
    let logs = logs.text();
    let line = logs
        .lines()
        .find(|l| l.contains("retrying"))
        .unwrap_or_else(|| panic!("no retry line in {logs}"));
    assert!(line.contains("DEBUG"), "{line}");
    assert!(line.contains("/jobs/:jobid") && line.contains("timeout"), "{line}");
}
