//! The rescale-API realizer against a mock Flink: PUT only on change, no-ops, refusals, events;
//! and the cooldown governor wrapped around it.

mod common;

use autoscaler_core::{
    EventType, JobStatus, ManualClock, ParallelismOverrides, RealizeError, ScalingRealizer, config::Configuration,
};
use autoscaler_metrics::VertexId;
use autoscaler_realizer::{CooldownConfig, CooldownRealizer, RescaleApiScalingRealizer};
use chrono::{TimeZone, Utc};
use common::*;
use std::sync::Arc;
use std::time::Duration;
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer};

fn adaptive() -> Configuration {
    Configuration::from_iter([("jobmanager.scheduler", "adaptive")])
}

fn overrides(entries: &[(&str, u32)]) -> ParallelismOverrides {
    entries.iter().map(|(v, p)| (VertexId::new(v), *p)).collect()
}

fn requirements_path() -> String {
    format!("/jobs/{JOB}/resource-requirements")
}

/// All four vertices at `{1, 1}` except the bottleneck at `{1, keyed}`.
fn expected_body(keyed: u32) -> serde_json::Value {
    let bounds = |upper: u32| serde_json::json!({"parallelism": {"lowerBound": 1, "upperBound": upper}});
    serde_json::json!({ SOURCE: bounds(1), PARSE: bounds(1), KEYED: bounds(keyed), SINK: bounds(1) })
}

#[tokio::test]
async fn a_changed_parallelism_is_put_listing_every_vertex_and_reported() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &requirements_path(),
        recorded(200, "resource-requirements-get"),
    )
    .await;
    Mock::given(method("PUT"))
        .and(path(requirements_path()))
        .and(body_json(expected_body(4)))
        .respond_with(recorded(200, "resource-requirements-put"))
        .expect(1)
        .mount(&server)
        .await;
    let events = Arc::new(RecordingEvents::default());
    let realizer = RescaleApiScalingRealizer::<String, Ctx>::with_event_handler(events.clone());
    let ctx = ctx(client(&server), adaptive());

    realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 4)]))
        .await
        .expect("PUT accepted");

    let events = events.events();
    assert_eq!(events.len(), 1);
    let (kind, reason, message) = &events[0];
    assert_eq!((*kind, reason.as_str()), (EventType::Normal, "Scaling"));
    assert!(
        message.starts_with("In-place scaling triggered, the new requirements is {"),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "{KEYED}=JobVertexResourceRequirements{{parallelism=Parallelism{{lowerBound=1, upperBound=4}}}}"
        )),
        "{message}"
    );
    assert!(message.ends_with("}."), "{message}");
}

#[tokio::test]
async fn matching_requirements_send_no_put() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &requirements_path(),
        recorded(200, "resource-requirements-get"),
    )
    .await;
    Mock::given(method("PUT"))
        .respond_with(recorded(200, "resource-requirements-put"))
        .expect(0)
        .mount(&server)
        .await;
    let events = Arc::new(RecordingEvents::default());
    let realizer = RescaleApiScalingRealizer::<String, Ctx>::with_event_handler(events.clone());
    let ctx = ctx(client(&server), adaptive());

    // Already at 1; an override of an unknown vertex is ignored.
    realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 1), ("0123456789abcdef0123456789abcdef", 3)]))
        .await
        .expect("nothing to do");
    assert!(events.events().is_empty());
}

#[tokio::test]
async fn a_job_that_is_not_running_or_not_adaptive_is_left_alone() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(recorded(200, "resource-requirements-get"))
        .expect(0)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .respond_with(recorded(200, "resource-requirements-put"))
        .expect(0)
        .mount(&server)
        .await;
    let realizer = RescaleApiScalingRealizer::<String, Ctx>::new();

    for status in [JobStatus::Created, JobStatus::Canceled, JobStatus::Restarting] {
        let mut ctx = ctx(client(&server), adaptive());
        ctx.job_status = Some(status);
        realizer
            .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 4)]))
            .await
            .expect("no-op");
    }
    for conf in [
        Configuration::new(),
        Configuration::from_iter([("jobmanager.scheduler", "default")]),
    ] {
        let ctx = ctx(client(&server), conf);
        realizer
            .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 4)]))
            .await
            .expect("no-op");
    }
}

#[tokio::test]
async fn a_refused_rescale_carries_flinks_reason() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &requirements_path(),
        recorded(200, "resource-requirements-get"),
    )
    .await;
    Mock::given(method("PUT"))
        .and(path(requirements_path()))
        .respond_with(recorded(400, "resource-requirements-put-bad-above-max-parallelism"))
        .expect(1)
        .mount(&server)
        .await;
    let events = Arc::new(RecordingEvents::default());
    let realizer = RescaleApiScalingRealizer::<String, Ctx>::with_event_handler(events.clone());
    let ctx = ctx(client(&server), adaptive());

    match realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 200)]))
        .await
    {
        Err(RealizeError::Refused(message)) => assert_eq!(
            message,
            format!(
                "The newly requested parallelism 200 for the job vertex {KEYED} exceeds its maximum parallelism 128."
            )
        ),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert!(events.events().is_empty(), "no Scaling event for a refused request");
}

#[tokio::test]
async fn a_job_gone_from_the_cluster_is_unavailable() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &requirements_path(),
        recorded(500, "resource-requirements-get-job-not-running"),
    )
    .await;
    let realizer = RescaleApiScalingRealizer::<String, Ctx>::new();
    let ctx = ctx(client(&server), adaptive());
    match realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 4)]))
        .await
    {
        Err(RealizeError::Unavailable(message)) => {
            assert!(message.contains("not running on the cluster anymore"), "{message}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn the_cooldown_holds_a_second_change_until_min_has_passed() {
    let server = MockServer::start().await;
    mount_get(
        &server,
        &requirements_path(),
        recorded(200, "resource-requirements-get"),
    )
    .await;
    for keyed in [4, 8] {
        Mock::given(method("PUT"))
            .and(path(requirements_path()))
            .and(body_json(expected_body(keyed)))
            .respond_with(recorded(200, "resource-requirements-put"))
            .expect(1)
            .mount(&server)
            .await;
    }
    let start = Utc.timestamp_opt(1_800_000_000, 0).single().expect("valid");
    let clock = Arc::new(ManualClock::new(start));
    let realizer: CooldownRealizer<RescaleApiScalingRealizer<String, Ctx>, String> = CooldownRealizer::with_clock(
        RescaleApiScalingRealizer::new(),
        CooldownConfig {
            min_interval: Duration::from_secs(30),
            max_interval: None,
            ..CooldownConfig::default()
        },
        clock.clone(),
    );
    let ctx = ctx(client(&server), adaptive());

    realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 4)]))
        .await
        .expect("first change goes through");
    clock.advance(Duration::from_secs(10));
    realizer
        .realize_parallelism_overrides(&ctx, &overrides(&[(KEYED, 8)]))
        .await
        .expect("held");
    assert_eq!(
        realizer.held_until(&JOB.to_owned()),
        Some(start + chrono::TimeDelta::seconds(30))
    );
    clock.advance(Duration::from_secs(20));
    assert!(realizer.poll(&ctx).await.expect("due now"));
    // The mock verifies on drop that exactly one PUT of each body was sent.
}
