//! Option values and intervals a hostile or careless configuration can hold: NaN, zero, the
//! longest Java `Duration`. Each was accepted silently or panicked before.

use async_trait::async_trait;
use autoscaler_core::ControlLoopOptions;
use autoscaler_core::{
    AutoscalerError, BasicJobContext, FetchError, JobAutoScaler, JobListFetcher, LoggingEventHandler,
    StandaloneAutoscaler, config::AutoScalerOptions, config::Configuration,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn options(entries: &[(&str, &str)]) -> Result<AutoScalerOptions, String> {
    AutoScalerOptions::from_configuration(&Configuration::from_iter(entries.iter().copied())).map_err(|e| e.to_string())
}

#[test]
fn a_nan_utilization_target_is_refused() {
    let error = options(&[("job.autoscaler.utilization.target", "NaN")]).expect_err("NaN passes every range check");
    assert!(
        error.contains("job.autoscaler.utilization.target") && error.contains("NaN"),
        "{error}"
    );
    // Any other double option too.
    assert!(options(&[("job.autoscaler.scale-up.max-factor", "NaN")]).is_err());
    assert!(options(&[("job.autoscaler.utilization.target", "0.5")]).is_ok());
}

#[test]
fn a_max_parallelism_of_zero_is_refused() {
    let error = options(&[("job.autoscaler.vertex.max-parallelism", "0")]).expect_err("0 cannot bound a parallelism");
    assert!(error.contains("job.autoscaler.vertex.max-parallelism"), "{error}");
    assert!(options(&[("job.autoscaler.vertex.max-parallelism", "-3")]).is_err());
    assert_eq!(
        options(&[("job.autoscaler.vertex.max-parallelism", "1")]).map(|o| o.vertex_max_parallelism),
        Ok(1)
    );
}

#[test]
fn a_zero_rest_timeout_is_refused() {
    for zero in ["0 s", "0", "PT0S"] {
        let error = options(&[("job.autoscaler.flink.rest-client.timeout", zero)]).expect_err("every call would fail");
        assert!(error.contains("job.autoscaler.flink.rest-client.timeout"), "{error}");
    }
    assert_eq!(
        options(&[("job.autoscaler.flink.rest-client.timeout", "1 ms")]).map(|o| o.rest_client_timeout),
        Ok(Duration::from_millis(1))
    );
}

#[test]
fn the_rest_timeout_is_read_alone() {
    let conf = Configuration::from_iter([
        ("job.autoscaler.metrics.window", "forever"),
        ("job.autoscaler.flink.rest-client.timeout", "3 s"),
    ]);
    assert!(AutoScalerOptions::from_configuration(&conf).is_err());
    assert_eq!(
        autoscaler_core::config::rest_client_timeout(&conf),
        Ok(Duration::from_secs(3))
    );
}

type Ctx = BasicJobContext<String>;

struct CountingFetcher(AtomicUsize);

#[async_trait]
impl JobListFetcher<String, Ctx> for CountingFetcher {
    async fn fetch(&self, _base: &Configuration) -> Result<Vec<Ctx>, FetchError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Vec::new())
    }
}

struct NoScaler;

#[async_trait]
impl JobAutoScaler<String, Ctx> for NoScaler {
    async fn scale(&self, _ctx: &Ctx) -> Result<(), AutoscalerError> {
        Ok(())
    }
    async fn cleanup(&self, _job_key: &String) {}
}

/// `--interval "9223372036854775807 s"`: `now + interval` overflowed the clock after the first
/// cycle, and the loop panicked (the binary exited 3 with "internal error").
#[tokio::test]
async fn an_interval_of_i64_max_seconds_runs_one_cycle_and_waits() {
    let conf = Configuration::from_iter([("autoscaler.standalone.control-loop.interval", "9223372036854775807 s")]);
    let options = ControlLoopOptions::from_configuration(&conf).expect("a valid Java Duration");
    assert_eq!(options.interval, Duration::from_secs(9_223_372_036_854_775_807));
    let fetcher = Arc::new(CountingFetcher(AtomicUsize::new(0)));
    let control_loop = StandaloneAutoscaler::new(
        fetcher.clone(),
        Arc::new(NoScaler),
        Arc::new(LoggingEventHandler),
        options,
    );
    let run = control_loop.run(tokio::time::sleep(Duration::from_millis(200)));
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the loop stops on shutdown");
    assert_eq!(fetcher.0.load(Ordering::SeqCst), 1);
}

/// Sets its flag when dropped: tells that a scale's future was cancelled rather than finished.
struct DropFlag(Arc<AtomicUsize>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A job list of one job whose fetch takes `fetch_delay`; its scale takes an hour.
struct SlowWorld {
    fetch_delay: Duration,
    scales_started: AtomicUsize,
    scales_dropped: Arc<AtomicUsize>,
}

#[async_trait]
impl JobListFetcher<String, Ctx> for SlowWorld {
    async fn fetch(&self, _base: &Configuration) -> Result<Vec<Ctx>, FetchError> {
        tokio::time::sleep(self.fetch_delay).await;
        Ok(vec![BasicJobContext::new("job".to_owned(), Configuration::new(), ())])
    }
}

#[async_trait]
impl JobAutoScaler<String, Ctx> for SlowWorld {
    async fn scale(&self, _ctx: &Ctx) -> Result<(), AutoscalerError> {
        let _flag = DropFlag(Arc::clone(&self.scales_dropped));
        self.scales_started.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }
    async fn cleanup(&self, _job_key: &String) {}
}

fn slow_world(fetch_delay: Duration) -> Arc<SlowWorld> {
    Arc::new(SlowWorld {
        fetch_delay,
        scales_started: AtomicUsize::new(0),
        scales_dropped: Arc::new(AtomicUsize::new(0)),
    })
}

/// SIGTERM used to wait for the whole cycle in flight (an hour here). With an abort future (the
/// binary's grace period or second signal) the scale is cancelled and the loop returns.
#[tokio::test]
async fn a_scale_in_flight_is_cancelled_when_the_abort_future_completes() {
    let world = slow_world(Duration::ZERO);
    let control_loop = StandaloneAutoscaler::new(
        world.clone(),
        world.clone(),
        Arc::new(LoggingEventHandler),
        ControlLoopOptions::default(),
    );
    let started = std::time::Instant::now();
    let run = control_loop.run_with_abort(tokio::time::sleep(Duration::from_millis(100)), async {
        tokio::time::sleep(Duration::from_millis(100)).await
    });
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the abort bounds the shutdown");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(world.scales_started.load(Ordering::SeqCst), 1);
    assert_eq!(
        world.scales_dropped.load(Ordering::SeqCst),
        1,
        "the scale's future was dropped"
    );
}

#[tokio::test]
async fn a_fetch_in_flight_does_not_delay_the_shutdown() {
    let world = slow_world(Duration::from_secs(3600));
    let control_loop = StandaloneAutoscaler::new(
        world.clone(),
        world.clone(),
        Arc::new(LoggingEventHandler),
        ControlLoopOptions::default(),
    );
    // No abort at all: the fetch alone must not hold the loop.
    tokio::time::timeout(
        Duration::from_secs(10),
        control_loop.run(tokio::time::sleep(Duration::from_millis(100))),
    )
    .await
    .expect("the fetch is dropped on shutdown");
    assert_eq!(world.scales_started.load(Ordering::SeqCst), 0);
}
