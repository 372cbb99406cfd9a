//! The same autoscaler as the simulated examples, against a real Flink cluster.
//!
//! ```text
//! cargo run --example standalone_flink -- http://127.0.0.1:8081 [run-for-seconds]
//! ```
//!
//! Scales every job of the cluster behind the URL with the REST metrics collector, the
//! rescale-API realizer (behind the cooldown of `jobmanager.adaptive-scheduler.scaling-interval.*`)
//! and the cluster job-list fetcher, in the standalone control loop, until Ctrl-C or the optional
//! number of seconds. The jobs must run with `jobmanager.scheduler: adaptive`. The settings are the
//! shortened ones of the simulated examples (metric window 3 min, stabilization 1 min, ...), so a
//! demo job reacts within minutes; job configuration from the cluster overrides them. State is
//! kept in memory. `e2e/` has scripts that start a local Flink 2.3 with a bottleneck job.

use autoscaler_sim::harness::example_configuration;
use flink_autoscaler::core::JobAutoScalerImpl;
use flink_autoscaler::core::{AutoScalerEventHandler, BasicJobContext, LoggingEventHandler};
use flink_autoscaler::core::{ControlLoopOptions, StandaloneAutoscaler};
use flink_autoscaler::realizer::{
    CooldownConfig, CooldownRealizer, FlinkClusterJobListFetcher, RescaleApiScalingRealizer, RestMetricsCollector,
    rest::FlinkRestClient, rest::RestClientConfig,
};
use flink_autoscaler::state::InMemoryStateStore;
use std::sync::Arc;
use std::time::Duration;

type Ctx = BasicJobContext<String, FlinkRestClient>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "http://127.0.0.1:8081".to_owned());
    let run_for: Option<u64> = args.next().map(|s| s.parse()).transpose()?;

    let mut base = example_configuration();
    base.set("autoscaler.standalone.control-loop.interval", "10 s");
    let client = FlinkRestClient::new(&url, RestClientConfig::default())?;
    let events: Arc<dyn AutoScalerEventHandler<String, Ctx>> = Arc::new(LoggingEventHandler);
    let realizer = CooldownRealizer::new(
        RescaleApiScalingRealizer::with_event_handler(events.clone()),
        CooldownConfig::from_configuration(&base)?,
    );
    let autoscaler = JobAutoScalerImpl::new(
        Arc::new(RestMetricsCollector::<String>::new()),
        Arc::new(InMemoryStateStore::new()),
        Arc::new(realizer),
        events.clone(),
    );
    let control_loop = StandaloneAutoscaler::new(
        Arc::new(FlinkClusterJobListFetcher::new(client)),
        Arc::new(autoscaler),
        events,
        ControlLoopOptions::from_configuration(&base)?,
    )
    .with_base_configuration(base)
    .with_options_validation();
    println!("autoscaling every job of {url} (Ctrl-C stops)");
    control_loop
        .run(async move {
            match run_for {
                Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        })
        .await;
    Ok(())
}
