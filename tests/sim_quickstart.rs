//! The quickstart job converges under the real autoscaler, driven directly and through the
//! standalone control loop.

use autoscaler_sim::harness::{SimAutoscaler, example_configuration};
use autoscaler_sim::{SimHandle, SimJobListFetcher, SimMetricsCollector, SimScalingRealizer, Simulator, workloads};
use flink_autoscaler::core::JobAutoScalerImpl;
use flink_autoscaler::core::LoggingEventHandler;
use flink_autoscaler::core::{ControlLoopOptions, StandaloneAutoscaler};
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
    .with_clock(handle.clock());
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

#[tokio::test]
async fn the_collector_reports_flink_metrics_with_flink_meaning() {
    use autoscaler_sim::sim_instant;
    use autoscaler_sim::{RateProfile, SimEdge, SimJob, SimVertex};
    use flink_autoscaler::core::{MetricsCollector, config::AutoScalerOptions};
    use flink_autoscaler::metrics::{MetricHistory, ScalingMetric};

    // 3,000 records/s into a vertex that manages 1,000: the source is backpressured 900 ms/s.
    let job = SimJob::new("bp")
        .vertex(SimVertex::source(
            "src",
            10_000.0,
            1,
            RateProfile::Constant { rate: 3_000.0 },
        ))
        .vertex(SimVertex::new("slow", 1_000.0, 1))
        .edge(SimEdge::new(
            "src",
            "slow",
            flink_autoscaler::metrics::ShipStrategy::Rebalance,
        ));
    let handle = SimHandle::new(Simulator::new(job).expect("valid job"));
    handle.advance(Duration::from_secs(120));
    let ctx = handle.context(example_configuration());
    let options = AutoScalerOptions::from_configuration(&ctx.configuration).expect("valid options");
    let collected = SimMetricsCollector
        .collect(&ctx, &options, sim_instant(Duration::from_secs(120)))
        .await
        .expect("running job");
    let metrics = collected
        .metrics
        .into_scaling_metrics(&collected.topology, &options, &MetricHistory::new());
    let src = metrics.vertex("src").expect("source metrics");
    let slow = metrics.vertex("slow").expect("slow metrics");
    assert_eq!(slow.get(ScalingMetric::Load), Some(1.0));
    assert_eq!(src.get(ScalingMetric::Load), Some(0.1));
    // Lagging by more than 30 s of input: observed TPR = 1,000 / (1 - 900/1000) = the capacity.
    assert_eq!(src.get(ScalingMetric::ObservedTpr), Some(10_000.0));
    let lag = src.get(ScalingMetric::Lag).expect("lag");
    assert!((lag - handle.lock().backlog(0)).abs() < 1.0, "{lag}");
    assert_eq!(slow.get(ScalingMetric::NumRecordsInPerSecond), Some(1_000.0));
    assert_eq!(collected.job_running_since, sim_instant(Duration::ZERO));
}

#[tokio::test]
async fn runs_are_deterministic() {
    use autoscaler_sim::harness::measure_convergence;
    let run = || async {
        let workload = workloads::benchmark()
            .into_iter()
            .find(|w| w.name == "skewed")
            .expect("workload");
        let sim = Simulator::new(workload.job).expect("valid job");
        measure_convergence(
            "skewed",
            sim,
            example_configuration(),
            Duration::from_secs(10),
            Duration::from_secs(1800),
            0.7,
        )
        .await
    };
    assert_eq!(run().await, run().await);
}

#[tokio::test]
async fn the_realizer_honours_the_jobs_scaling_interval_min() {
    use flink_autoscaler::core::{ParallelismOverrides, ScalingRealizer};
    let handle = SimHandle::new(Simulator::new(workloads::quickstart()).expect("valid job"));
    let mut conf = example_configuration();
    conf.set("jobmanager.adaptive-scheduler.scaling-interval.min", "2 min");
    let overrides: ParallelismOverrides = [("parse".into(), 3)].into_iter().collect();
    handle.advance(Duration::from_secs(10));
    SimScalingRealizer
        .realize_parallelism_overrides(&handle.context(conf), &overrides)
        .await
        .expect("accepted");
    handle.advance(Duration::from_secs(100));
    assert!(handle.lock().rescales().is_empty(), "held until 2 min after the start");
    handle.advance(Duration::from_secs(15));
    assert_eq!(handle.lock().rescales()[0].at_ms, 120_000);
}
