//! The REST client against a mock Flink serving recorded responses: parsing, errors, retries,
//! timeouts, malformed bodies, auth header.

mod common;

use autoscaler_core::JobStatus;
use autoscaler_realizer::rest::Aggregation;
use autoscaler_realizer::{rest::AuthHeader, rest::FlinkRestClient, rest::RestClientConfig, rest::RestError};
use common::*;
use std::time::{Duration, Instant};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn jobs_overview_and_job_details_parse_the_recorded_responses() {
    let server = MockServer::start().await;
    mount_get(&server, "/jobs/overview", recorded(200, "jobs-overview")).await;
    mount_get(&server, &format!("/jobs/{JOB}"), recorded(200, "job-details")).await;
    let client = client(&server);

    let overview = client.jobs_overview().await.expect("overview parses");
    assert_eq!(overview.jobs.len(), 1);
    assert_eq!(overview.jobs[0].jid, JOB);
    assert_eq!(overview.jobs[0].tasks.total, 4);
    assert_eq!(overview.jobs[0].effective_status(), Some(JobStatus::Running));

    let details = client.job_details(JOB).await.expect("details parse");
    assert_eq!(details.status(), Some(JobStatus::Running));
    assert_eq!(
        details.running_since().map(|t| t.timestamp_millis()),
        Some(RUNNING_SINCE_MS)
    );
    assert_eq!(details.vertices.len(), 4);
    let keyed = details.vertex(KEYED).expect("expensive-keyed is a vertex");
    assert_eq!((keyed.parallelism, keyed.max_parallelism), (1, 128));
    let io = keyed.metrics.expect("IO metrics present");
    assert_eq!(
        (io.read_records, io.write_records, io.accumulated_busy_time),
        (62_993, 62_992, 63_505.0)
    );
    let plan = details.plan.expect("plan embedded in the details");
    assert_eq!(plan.nodes.len(), 4);
    let keyed_node = plan.nodes.iter().find(|n| n.id == KEYED).expect("keyed node");
    assert_eq!(keyed_node.inputs[0].id, PARSE);
    assert_eq!(keyed_node.inputs[0].ship_strategy, "HASH");
}

#[tokio::test]
async fn plan_config_and_metric_endpoints_parse() {
    let server = MockServer::start().await;
    mount_get(&server, &format!("/jobs/{JOB}/plan"), recorded(200, "job-plan")).await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/jobmanager/config"),
        recorded(200, "job-jobmanager-config"),
    )
    .await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/vertices/{KEYED}/metrics"),
        recorded(200, "vertex-metrics"),
    )
    .await;
    Mock::given(method("GET"))
        .and(path("/jobmanager/metrics"))
        .and(query_param("get", "taskSlotsTotal,taskSlotsAvailable"))
        .respond_with(recorded(200, "jobmanager-metrics"))
        .mount(&server)
        .await;
    let client = client(&server);

    let plan = client.job_plan(JOB).await.expect("plan parses");
    assert_eq!(plan.nodes.iter().filter(|n| n.inputs.is_empty()).count(), 1);

    let config = client.job_jobmanager_config(JOB).await.expect("config parses");
    assert!(
        config
            .iter()
            .any(|e| e.key == "jobmanager.scheduler" && e.value == "adaptive")
    );

    // Per-subtask values are strings.
    let values = client
        .vertex_subtask_metric_values(JOB, KEYED, &["0.busyTimeMsPerSecond", "0.isBackPressured"])
        .await
        .expect("values parse");
    let busy = values
        .iter()
        .find(|v| v.id == "0.busyTimeMsPerSecond")
        .expect("busy time");
    assert_eq!(busy.as_f64(), Some(1000.0));
    let flag = values.iter().find(|v| v.id == "0.isBackPressured").expect("flag");
    assert_eq!((flag.value.as_str(), flag.as_f64()), ("false", None));

    let slots = client
        .jobmanager_metrics(&["taskSlotsTotal", "taskSlotsAvailable"])
        .await
        .expect("JM metrics parse");
    assert!(
        slots
            .iter()
            .any(|v| v.id == "taskSlotsAvailable" && v.as_f64() == Some(7.0))
    );
}

#[tokio::test]
async fn aggregated_metrics_send_names_and_aggregations_and_parse_floats() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(KEYED)))
        .and(query_param("get", "busyTimeMsPerSecond,numRecordsInPerSecond"))
        .and(query_param("agg", "max,avg"))
        .respond_with(recorded(200, "vertex-subtask-metrics-agg"))
        .expect(1)
        .mount(&server)
        .await;
    let values = client(&server)
        .vertex_aggregated_metrics(
            JOB,
            KEYED,
            &["busyTimeMsPerSecond", "numRecordsInPerSecond"],
            &[Aggregation::Max, Aggregation::Avg],
        )
        .await
        .expect("aggregates parse");
    let rate = values.iter().find(|v| v.id == "numRecordsInPerSecond").expect("rate");
    assert_eq!((rate.max, rate.sum), (995.85, 995.85));
}

#[tokio::test]
async fn one_unknown_metric_name_empties_the_whole_answer() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(KEYED)))
        .and(query_param("get", "pendingRecords,noSuchMetric"))
        .respond_with(recorded(200, "vertex-subtask-metrics-unknown-name"))
        .mount(&server)
        .await;
    let values = client(&server)
        .vertex_aggregated_metrics(JOB, KEYED, &["pendingRecords", "noSuchMetric"], &[])
        .await
        .expect("[] is a valid answer");
    assert!(values.is_empty());
}

#[tokio::test]
async fn unknown_job_is_a_typed_404_naming_the_endpoint() {
    let server = MockServer::start().await;
    let unknown = "0123456789abcdef0123456789abcdef";
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{unknown}")))
        .respond_with(recorded(404, "job-details-bad-unknown-job"))
        .expect(1) // not retried
        .mount(&server)
        .await;
    let error = client(&server).job_details(unknown).await.expect_err("404");
    assert_eq!(error.status(), Some(404));
    assert!(error.is_job_not_found());
    let text = error.to_string();
    assert!(text.contains(&format!("GET /jobs/{unknown}")), "{text}");
    assert!(
        text.contains("NotFoundException: Job 0123456789abcdef0123456789abcdef not found"),
        "{text}"
    );
    assert!(!text.contains("\tat "), "no stack trace: {text}");
}

#[tokio::test]
async fn cancelled_job_500_is_job_not_found_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}/resource-requirements")))
        .respond_with(recorded(500, "resource-requirements-get-job-not-running"))
        .expect(1)
        .mount(&server)
        .await;
    let error = client(&server).resource_requirements(JOB).await.expect_err("500");
    assert!(error.is_job_not_found(), "{error}");
    assert!(
        error
            .to_string()
            .contains("FlinkJobNotFoundException: Could not find Flink job")
    );
}

#[tokio::test]
async fn other_500s_are_retried_with_a_bound() {
    let server = MockServer::start().await;
    let internal = r#"{"errors":["Internal server error.","<Exception on server side:\njava.lang.IllegalStateException: boom\n\tat x"]}"#;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(500, internal))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_get(&server, "/jobs/overview", recorded(200, "jobs-overview")).await;

    // Two failures, then success: three attempts fit in retries = 2.
    let patient = client_with(
        &server,
        RestClientConfig {
            retries: 2,
            ..RestClientConfig::default()
        },
    );
    assert!(patient.jobs_overview().await.is_ok());

    // Once the failures are used up the server answers 200; arm them again for a client without retries.
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(500, internal))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    let impatient = client_with(
        &server,
        RestClientConfig {
            retries: 0,
            ..RestClientConfig::default()
        },
    );
    let error = impatient.jobs_overview().await.expect_err("no retry");
    assert_eq!(error.status(), Some(500));
    assert!(error.to_string().contains("IllegalStateException: boom"), "{error}");
}

#[tokio::test]
async fn a_slow_server_times_out_within_the_retry_bound() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(recorded(200, "jobs-overview").set_delay(Duration::from_secs(3)))
        .expect(2) // first try + one retry
        .mount(&server)
        .await;
    let client = client_with(
        &server,
        RestClientConfig {
            timeout: Duration::from_millis(200),
            retries: 1,
            ..RestClientConfig::default()
        },
    );
    let started = Instant::now();
    let error = client.jobs_overview().await.expect_err("times out");
    let elapsed = started.elapsed();
    assert!(matches!(error, RestError::Timeout { .. }), "{error}");
    assert!(error.to_string().contains("GET /jobs/overview"));
    assert!(elapsed < Duration::from_secs(2), "bounded: took {elapsed:?}");
}

#[tokio::test]
async fn malformed_json_is_a_decode_error_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(json(200, r#"{"jid": "69d8", "state": "RUNNING", "vertices": [{"id": "#))
        .expect(1)
        .mount(&server)
        .await;
    let error = client(&server).job_details(JOB).await.expect_err("truncated body");
    assert!(matches!(error, RestError::Decode { .. }), "{error}");
    assert!(error.to_string().contains(&format!("GET /jobs/{JOB}")));
}

/// A client of `server` sending `Authorization: Bearer s3cret`.
fn bearer_client(server: &MockServer) -> FlinkRestClient {
    client_with(
        server,
        RestClientConfig {
            auth_header: Some(AuthHeader::bearer("s3cret")),
            ..RestClientConfig::default()
        },
    )
}

#[tokio::test]
async fn the_auth_header_is_sent_with_every_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .and(header("Authorization", "Bearer s3cret"))
        .respond_with(recorded(200, "jobs-overview"))
        .expect(1)
        .mount(&server)
        .await;
    let client = bearer_client(&server);
    assert!(client.jobs_overview().await.is_ok());
}

#[tokio::test]
async fn a_closed_port_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("local address").port();
    drop(listener);
    let config = RestClientConfig {
        timeout: Duration::from_secs(2),
        retries: 1,
        initial_backoff: Duration::from_millis(10),
        ..RestClientConfig::default()
    };
    let client = FlinkRestClient::new(&format!("http://127.0.0.1:{port}"), config).expect("valid URL");
    let error = client.jobs_overview().await.expect_err("nothing listens");
    assert!(
        matches!(error, RestError::Transport { .. } | RestError::Timeout { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn resource_requirements_round_trip() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/resource-requirements"),
        recorded(200, "resource-requirements-get"),
    )
    .await;
    let client = client(&server);
    let requirements = client.resource_requirements(JOB).await.expect("parses");
    assert_eq!(requirements.0.len(), 4);
    assert_eq!(requirements.0[KEYED].parallelism.upper_bound, 1);

    Mock::given(method("PUT"))
        .and(path(format!("/jobs/{JOB}/resource-requirements")))
        .and(header("content-type", "application/json"))
        .and(wiremock::matchers::body_json(serde_json::json!({
            SOURCE: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
            PARSE: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
            KEYED: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
            SINK: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
        })))
        .respond_with(recorded(200, "resource-requirements-put"))
        .expect(1)
        .mount(&server)
        .await;
    client
        .put_resource_requirements(JOB, &requirements)
        .await
        .expect("PUT accepted");
}

#[tokio::test]
async fn puts_are_never_retried() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path(format!("/jobs/{JOB}/resource-requirements")))
        .respond_with(ResponseTemplate::new(503))
        .expect(1)
        .mount(&server)
        .await;
    let client = client_with(
        &server,
        RestClientConfig {
            retries: 3,
            ..RestClientConfig::default()
        },
    );
    let error = client
        .put_resource_requirements(JOB, &Default::default())
        .await
        .expect_err("503");
    assert_eq!(error.status(), Some(503));
}

#[tokio::test]
async fn job_status_and_job_metrics_parse() {
    let server = MockServer::start().await;
    mount_get(&server, &format!("/jobs/{JOB}/status"), recorded(200, "job-status")).await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}/metrics")))
        .and(query_param("get", "numRestarts,uptime"))
        .respond_with(recorded(200, "job-metrics"))
        .mount(&server)
        .await;
    let client = client(&server);
    let status = client.job_status(JOB).await.expect("status parses");
    assert_eq!(status.job_status(), Some(JobStatus::Running));
    let metrics = client
        .job_metrics(JOB, &["numRestarts", "uptime"])
        .await
        .expect("metrics parse");
    let uptime = metrics.iter().find(|m| m.id == "uptime").and_then(|m| m.as_f64());
    assert_eq!(uptime, Some(65_514.0));
}

// Plain http goes to Flink directly; a redirect (a proxy in front of Flink, a standby YARN
// ResourceManager) is followed as before: a GET to the new place, a PUT with its body (307). The
// first redirected request is sent twice (directly, then through the client that follows
// redirects, which sends every later request).
#[tokio::test]
async fn redirects_are_followed_with_the_method_body_and_auth_header() {
    let server = MockServer::start().await;
    let moved = |to: &str| ResponseTemplate::new(307).insert_header("location", format!("{}{to}", server.uri()));
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(moved("/active/jobs/overview"))
        .expect(3)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/active/jobs/overview"))
        .and(header("Authorization", "Bearer s3cret"))
        .respond_with(recorded(200, "jobs-overview"))
        .expect(2)
        .mount(&server)
        .await;
    let put_path = format!("/jobs/{JOB}/resource-requirements");
    let put_body = serde_json::json!({KEYED: {"parallelism": {"lowerBound": 1, "upperBound": 3}}});
    Mock::given(method("PUT"))
        .and(path(put_path.as_str()))
        .respond_with(moved(&format!("/active{put_path}")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("/active{put_path}")))
        .and(header("content-type", "application/json"))
        .and(wiremock::matchers::body_json(&put_body))
        .respond_with(recorded(200, "resource-requirements-put"))
        .expect(1)
        .mount(&server)
        .await;
    let client = bearer_client(&server);
    for _ in 0..2 {
        let overview = client.jobs_overview().await.expect("the redirect is followed");
        assert_eq!(overview.jobs[0].jid, JOB);
    }
    let requirements: autoscaler_realizer::rest::JobResourceRequirements =
        serde_json::from_value(put_body).expect("requirements");
    client
        .put_resource_requirements(JOB, &requirements)
        .await
        .expect("the PUT follows the redirect with its body");
}
