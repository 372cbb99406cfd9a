//! The quickstart job converges under the real autoscaler, driven directly and through the
//! standalone control loop.

use flink_autoscaler::core::LoggingEventHandler;
use flink_autoscaler::core::job_autoscaler::JobAutoScalerImpl;
use flink_autoscaler::core::standalone::{ControlLoopOptions, StandaloneAutoscaler};
use flink_autoscaler::sim::harness::{SimAutoscaler, example_configuration};
use flink_autoscaler::sim::{
    SimHandle, SimJobListFetcher, SimMetricsCollector, SimScalingRealizer, Simulator, workloads,
};
use flink_autoscaler::state::InMemoryStateStore;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn quickstart_converges_to_the_optimum_in_few_rescales() {
    let sim = Simulator::new(workloads::quickstart()).expect("valid job");
    let mut autoscaler = SimAutoscaler::new(sim, example_configuration(), Duration::from_secs(10));
    let stable = autoscaler
        .run_until_stable(Duration::from_secs(300), Duration::from_secs(3600), |_| {})
        .await;
    assert!(stable, "quickstart did not stabilize within a simulated hour");
    let sim = autoscaler.handle().lock();
    let optimum = sim.optimal_parallelism(sim.now().as_secs_f64(), 0.7);
    assert_eq!(sim.parallelism(), optimum);
    assert!(sim.rescales().len() <= 3, "{} rescales", sim.rescales().len());
    assert!(sim.total_backlog() < 50_000.0);
}

#[tokio::test]
async fn the_standalone_loop_scales_the_simulated_job() {
    let handle = SimHandle::new(Simulator::new(workloads::quickstart()).expect("valid job"));
    let fetcher = SimJobListFetcher::new(vec![(handle.clone(), example_configuration())]);
    let events = Arc::new(LoggingEventHandler);
    let autoscaler = JobAutoScalerImpl::new(
        Arc::new(SimMetricsCollector),
        Arc::new(InMemoryStateStore::new()),
        Arc::new(SimScalingRealizer),
        events.clone(),
    )
    .with_clock(Arc::new(handle.clock()));
    let mut control_loop = StandaloneAutoscaler::new(
        Arc::new(fetcher),
        Arc::new(autoscaler),
        events,
        ControlLoopOptions::default(),
    );
    for _ in 0..(30 * 6) {
        handle.advance(Duration::from_secs(10));
        control_loop
            .run_cycle()
            .await
            .expect("the simulated job list never fails");
        control_loop.wait_idle().await;
    }
    let sim = handle.lock();
    assert!(!sim.rescales().is_empty(), "the loop never rescaled");
    assert_eq!(sim.parallelism()["parse"], 4, "{:?}", sim.rescales());
}
