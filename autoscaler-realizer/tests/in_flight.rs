//! RescaleInFlightGuard against a fake JobManager (wiremock): a job's cycles are skipped while its
//! rescale is held or not yet applied by Flink, resume once Flink reports the new parallelism or
//! the mark expires, and a vanished job's cooldown entry is dropped.

use autoscaler_core::{
    AutoscalerError, BasicJobContext, JobAutoScaler, ManualClock, ParallelismOverrides, RealizeError, ScalingRealizer,
    async_trait, config::Configuration,
};
use autoscaler_metrics::VertexId;
use autoscaler_realizer::{
    CooldownConfig, CooldownRealizer, InFlight, RescaleInFlightGuard, rest::FlinkRestClient, rest::RestClientConfig,
};
use chrono::{TimeZone, Utc};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

type Ctx = BasicJobContext<String, FlinkRestClient>;
const JOB: &str = "44444444444444444444444444444444";

/// Accepts every request.
struct Accept;

#[async_trait]
impl ScalingRealizer<String, Ctx> for Accept {
    async fn realize_parallelism_overrides(&self, _: &Ctx, _: &ParallelismOverrides) -> Result<(), RealizeError> {
        Ok(())
    }
}

/// Counts cycles.
#[derive(Default, Clone)]
struct Cycles(Arc<AtomicUsize>);

#[async_trait]
impl JobAutoScaler<String, Ctx> for Cycles {
    async fn scale(&self, _: &Ctx) -> Result<(), AutoscalerError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn cleanup(&self, _: &String) {}
}

fn p(value: u32) -> ParallelismOverrides {
    [(VertexId::new("v"), value)].into_iter().collect()
}

async fn flink_runs(server: &MockServer, parallelism: u32) {
    server.reset().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{JOB}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "jid": JOB, "name": "j", "state": "RUNNING",
            "vertices": [{"id": "v", "name": "v", "maxParallelism": 128, "parallelism": parallelism, "status": "RUNNING"}]
        })))
        .mount(server)
        .await;
}

#[tokio::test]
async fn cycles_wait_for_the_rescale_in_flight() {
    let server = MockServer::start().await;
    let client = FlinkRestClient::new(
        &server.uri(),
        RestClientConfig {
            retries: 0,
            ..RestClientConfig::default()
        },
    )
    .expect("client");
    let mut ctx = BasicJobContext::new("k".to_owned(), Configuration::new(), client);
    ctx.job_id = Some(JOB.to_owned());
    let start = Utc.timestamp_opt(1_000_000, 0).single().expect("valid");
    let clock = Arc::new(ManualClock::new(start));
    let cooldown = Arc::new(CooldownRealizer::with_clock(
        Accept,
        CooldownConfig::default(),
        clock.clone(),
    ));
    let cycles = Cycles::default();
    let guard = RescaleInFlightGuard::new(cycles.clone(), Arc::clone(&cooldown));
    let count = || cycles.0.load(Ordering::SeqCst);

    // Forwarded at 0 s; Flink still runs parallelism 1: the cycle is skipped.
    cooldown.realize_parallelism_overrides(&ctx, &p(2)).await.expect("ok");
    flink_runs(&server, 1).await;
    guard.scale(&ctx).await.expect("ok");
    assert_eq!(count(), 0);
    // Flink reports 2: the mark is dropped and the cycle runs.
    flink_runs(&server, 2).await;
    guard.scale(&ctx).await.expect("ok");
    assert_eq!(count(), 1);
    assert_eq!(cooldown.in_flight(&"k".to_owned()), InFlight::None);

    // A change at 10 s is held until 30 s: cycles skip, and the due request is released by the guard.
    clock.advance(Duration::from_secs(10));
    cooldown.realize_parallelism_overrides(&ctx, &p(4)).await.expect("ok");
    guard.scale(&ctx).await.expect("ok");
    assert_eq!(count(), 1);
    clock.advance(Duration::from_secs(20));
    guard.scale(&ctx).await.expect("ok"); // releases the held request (now forwarded)
    assert_eq!(count(), 1);
    assert!(matches!(
        cooldown.in_flight(&"k".to_owned()),
        InFlight::Forwarded { .. }
    ));

    // Flink never applies it (no slots): after 30 s + 300 s grace the mark expires and cycles resume.
    guard.scale(&ctx).await.expect("ok");
    assert_eq!(count(), 1);
    clock.advance(Duration::from_secs(330));
    guard.scale(&ctx).await.expect("ok");
    assert_eq!(count(), 2);

    // The job vanishes: its cooldown entry goes with it.
    cooldown.realize_parallelism_overrides(&ctx, &p(8)).await.expect("ok");
    guard.cleanup(&"k".to_owned()).await;
    assert_eq!(cooldown.in_flight(&"k".to_owned()), InFlight::None);
    assert_eq!(cooldown.held_until(&"k".to_owned()), None);
}
