//! The cluster job list fetcher against a mock Flink: effective status, configuration merge,
//! failures.

mod common;

use autoscaler_core::{JobAutoScalerContext, JobListFetcher, JobStatus, config::Configuration};
use autoscaler_realizer::FlinkClusterJobListFetcher;
use common::*;
use std::time::Duration;
use wiremock::MockServer;

fn base() -> Configuration {
    Configuration::from_iter([
        ("job.autoscaler.enabled", "true"),
        ("parallelism.default", "7"),
        ("job.autoscaler.flink.rest-client.timeout", "3 s"),
    ])
}

#[tokio::test]
async fn running_jobs_come_with_the_job_config_merged_over_the_base() {
    let server = MockServer::start().await;
    mount_get(&server, "/jobs/overview", recorded(200, "jobs-overview")).await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/jobmanager/config"),
        recorded(200, "job-jobmanager-config"),
    )
    .await;
    let fetcher = FlinkClusterJobListFetcher::new(client(&server));

    let jobs = fetcher.fetch(&base()).await.expect("fetch succeeds");
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.job_key(), JOB);
    assert_eq!(job.job_id(), Some(JOB));
    assert_eq!(job.job_status(), Some(JobStatus::Running));
    let conf = job.configuration();
    assert_eq!(conf.get("job.autoscaler.enabled"), Some("true"), "base kept");
    assert_eq!(conf.get("parallelism.default"), Some("1"), "job wins");
    assert_eq!(conf.get("jobmanager.scheduler"), Some("adaptive"));
    assert_eq!(job.client.timeout(), Duration::from_secs(3));
}

#[tokio::test]
async fn cancelled_jobs_are_listed_with_their_state() {
    let server = MockServer::start().await;
    mount_get(&server, "/jobs/overview", recorded(200, "jobs-overview-after-cancel")).await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/jobmanager/config"),
        recorded(200, "job-jobmanager-config"),
    )
    .await;
    let jobs = FlinkClusterJobListFetcher::new(client(&server))
        .fetch(&Configuration::new())
        .await
        .expect("fetch succeeds");
    assert_eq!(jobs[0].job_status(), Some(JobStatus::Canceled));
}

#[tokio::test]
async fn a_running_job_still_deploying_counts_as_created() {
    let server = MockServer::start().await;
    let mut overview: serde_json::Value = serde_json::from_str(&fixture("jobs-overview")).expect("fixture is JSON");
    overview["jobs"][0]["tasks"]["running"] = 3.into();
    overview["jobs"][0]["tasks"]["deploying"] = 1.into();
    mount_get(&server, "/jobs/overview", json(200, &overview.to_string())).await;
    mount_get(&server, &format!("/jobs/{JOB}/jobmanager/config"), json(200, "[]")).await;
    let jobs = FlinkClusterJobListFetcher::new(client(&server))
        .fetch(&Configuration::new())
        .await
        .expect("fetch succeeds");
    assert_eq!(jobs[0].job_status(), Some(JobStatus::Created));
}

#[tokio::test]
async fn one_unreadable_job_fails_the_whole_fetch() {
    let server = MockServer::start().await;
    mount_get(&server, "/jobs/overview", recorded(200, "jobs-overview")).await;
    mount_get(
        &server,
        &format!("/jobs/{JOB}/jobmanager/config"),
        recorded(500, "resource-requirements-get-job-not-running"),
    )
    .await;
    let error = FlinkClusterJobListFetcher::new(client(&server))
        .fetch(&Configuration::new())
        .await
        .expect_err("the job's configuration cannot be read");
    let message = error.to_string();
    assert!(message.contains(JOB) && message.contains("500"), "{message}");
}

#[tokio::test]
async fn an_unreachable_job_list_is_an_error() {
    let server = MockServer::start().await;
    mount_get(&server, "/jobs/overview", json(200, "{\"jobs\": [")).await;
    let error = FlinkClusterJobListFetcher::new(client(&server))
        .fetch(&Configuration::new())
        .await
        .expect_err("malformed job list");
    assert!(error.to_string().contains("GET /jobs/overview"), "{error}");
}
