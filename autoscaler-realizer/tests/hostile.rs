//! The REST client and the job list fetcher against a hostile or broken server: endless bodies,
//! ids that try to leave their URL path segment, a job whose own configuration is invalid.

mod common;

use autoscaler_core::{JobAutoScalerContext, JobListFetcher, config::Configuration};
use autoscaler_realizer::{FlinkClusterJobListFetcher, rest::FlinkRestClient, rest::RestClientConfig, rest::RestError};
use common::*;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server on 127.0.0.1 that answers every connection with `200` and a chunked JSON body that
/// never ends (64 KiB of spaces per chunk, until the client hangs up).
async fn endless_body_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut chunk = b"10000\r\n".to_vec();
                chunk.extend(std::iter::repeat_n(b' ', 0x10000));
                chunk.extend_from_slice(b"\r\n");
                while socket.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn an_endless_body_stops_at_the_limit_and_names_the_endpoint() {
    let url = endless_body_server().await;
    let config = RestClientConfig {
        timeout: Duration::from_secs(20),
        retries: 0,
        max_response_bytes: 1024 * 1024,
        ..RestClientConfig::default()
    };
    let client = FlinkRestClient::new(&url, config).expect("valid URL");
    let started = Instant::now();
    let error = client.jobs_overview().await.expect_err("the body never ends");
    assert!(
        matches!(error, RestError::BodyTooLarge { limit: 1_048_576, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("GET /jobs/overview") && message.contains("1048576"),
        "{message}"
    );
    // Without the bound the call ran into its 20 s timeout after reading gigabytes.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_default_limit_bounds_an_endless_body_too() {
    let url = endless_body_server().await;
    let config = RestClientConfig {
        timeout: Duration::from_secs(60),
        retries: 0,
        ..RestClientConfig::default()
    };
    let client = FlinkRestClient::new(&url, config).expect("valid URL");
    let error = client.jobs_overview().await.expect_err("the body never ends");
    assert!(
        matches!(error, RestError::BodyTooLarge { limit, .. } if limit == autoscaler_realizer::rest::DEFAULT_MAX_RESPONSE_BYTES),
        "{error}"
    );
}

#[tokio::test]
async fn an_announced_oversized_body_is_refused_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(vec![b' '; 4096], "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let client = client_with(
        &server,
        RestClientConfig {
            retries: 2,
            max_response_bytes: 1024,
            ..RestClientConfig::default()
        },
    );
    let error = client.jobs_overview().await.expect_err("4096 > 1024");
    assert!(matches!(error, RestError::BodyTooLarge { limit: 1024, .. }), "{error}");
    // An error body is bounded as well.
    let error = client.job_status("x").await.expect_err("no mock: 404, short body");
    assert_eq!(error.status(), Some(404));
}

#[tokio::test]
async fn a_job_id_cannot_reach_another_endpoint() {
    let server = MockServer::start().await;
    // The id of the finding: unescaped, `jobs/../../jobs/overview?x=` resolved to `/jobs/overview`.
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(recorded(200, "jobs-overview"))
        .expect(0)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/jobs/..%2F..%2Fjobs%2Foverview%3Fx%3D"))
        .respond_with(json(404, r#"{"errors":["Job not found"]}"#))
        .expect(1)
        .mount(&server)
        .await;
    let client = client_with(
        &server,
        RestClientConfig {
            retries: 0,
            ..RestClientConfig::default()
        },
    );
    let error = client
        .job_details("../../jobs/overview?x=")
        .await
        .expect_err("the id is one path segment");
    assert_eq!(error.status(), Some(404), "{error}");
    let error = client.job_details("..").await.expect_err("a dot segment is refused");
    assert!(matches!(error, RestError::InvalidId { .. }), "{error}");
    let error = client
        .vertex_metric_names("job", "../../overview")
        .await
        .expect_err("vertex ids are escaped too");
    assert_eq!(error.status(), Some(404), "{error}");
}

#[tokio::test]
async fn a_job_with_an_invalid_own_option_is_listed_and_the_others_too() {
    let server = MockServer::start().await;
    let mut overview: serde_json::Value = serde_json::from_str(&fixture("jobs-overview")).expect("fixture is JSON");
    let mut bad = overview["jobs"][0].clone();
    bad["jid"] = "bad0000000000000000000000000000b".into();
    overview["jobs"].as_array_mut().expect("jobs is a list").push(bad);
    mount_get(&server, "/jobs/overview", json(200, &overview.to_string())).await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/jobmanager/config"),
        json(
            200,
            r#"[{"key":"job.autoscaler.flink.rest-client.timeout","value":"4 s"}]"#,
        ),
    )
    .await;
    mount_get(
        &server,
        "/jobs/bad0000000000000000000000000000b/jobmanager/config",
        json(
            200,
            r#"[{"key":"job.autoscaler.metrics.window","value":"forever"},{"key":"job.autoscaler.flink.rest-client.timeout","value":"0 s"}]"#,
        ),
    )
    .await;
    let base = Configuration::from_iter([("job.autoscaler.flink.rest-client.timeout", "3 s")]);
    let jobs = FlinkClusterJobListFetcher::new(client(&server))
        .fetch(&base)
        .await
        .expect("one job's bad options do not fail the fetch");
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].job_key(), JOB);
    assert_eq!(jobs[0].client.timeout(), Duration::from_secs(4));
    let bad = &jobs[1];
    assert_eq!(bad.job_key(), "bad0000000000000000000000000000b");
    // Its calls use the base timeout; its bad options stay in its configuration for the autoscaler
    // to report as its own error.
    assert_eq!(bad.client.timeout(), Duration::from_secs(3));
    assert_eq!(
        bad.configuration().get("job.autoscaler.metrics.window"),
        Some("forever")
    );
}
