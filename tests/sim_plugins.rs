//! The stock business-hours executor on the simulator, through `SimAutoscaler::with_plugins`: a
//! load drop inside the window is not followed by a scale-down until the window ends, while the
//! scale-up before it goes through.

use autoscaler_sim::harness::{SimAutoscaler, example_configuration};
use autoscaler_sim::{RateProfile, SimEdge, SimJob, SimVertex, Simulator};
use flink_autoscaler::core::plugins::{BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor, PluginRegistry};
use flink_autoscaler::metrics::ShipStrategy;
use std::time::Duration;

#[tokio::test]
async fn no_scale_down_inside_the_business_hours_window() -> Result<(), Box<dyn std::error::Error>> {
    // 9,000 records/s, then 2,000 from 00:15; `parse` takes 2,000 records/s per subtask. The
    // window is 00:00-00:40 (simulated time 0 is 00:00 UTC).
    let job = SimJob::new("office")
        .vertex(SimVertex::source(
            "source",
            20_000.0,
            1,
            RateProfile::Step {
                before: 9_000.0,
                after: 2_000.0,
                at_secs: 900.0,
            },
        ))
        .vertex(SimVertex::new("parse", 2_000.0, 1))
        .vertex(SimVertex::new("sink", 20_000.0, 1))
        .edge(SimEdge::new("source", "parse", ShipStrategy::Rebalance))
        .edge(SimEdge::new("parse", "sink", ShipStrategy::Rebalance));
    let mut conf = example_configuration();
    for (key, value) in [
        ("job.autoscaler.scaling.custom-executors", "office"),
        (
            "job.autoscaler.scaling.custom-executor.office.class",
            BUSINESS_HOURS_EXECUTOR,
        ),
        ("job.autoscaler.scaling.custom-executor.office.start", "00:00"),
        ("job.autoscaler.scaling.custom-executor.office.end", "00:40"),
    ] {
        conf.set(key, value);
    }
    let registry = PluginRegistry::new().with_executor(BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor);
    let mut autoscaler = SimAutoscaler::new(Simulator::new(job)?, conf, Duration::from_secs(60)).with_plugins(registry);
    let mut vetoes = Vec::new();
    while autoscaler.handle().lock().now() < Duration::from_secs(60 * 60) {
        autoscaler.cycle().await;
        for event in autoscaler.take_events() {
            if event.reason == "ScalingVetoed" {
                vetoes.push(event.at);
            }
        }
    }
    let sim = autoscaler.handle().lock();
    let parse: Vec<(u64, u32, u32)> = sim
        .rescales()
        .iter()
        .map(|r| (r.at_ms / 1000, r.from["parse"], r.to["parse"]))
        .collect();
    let window_end = 40 * 60;
    // Up before the drop; no scale-down inside the window; one after it.
    assert!(parse.iter().any(|(at, from, to)| *at < 900 && to > from), "{parse:?}");
    assert!(
        parse.iter().all(|(at, from, to)| *at >= window_end || to >= from),
        "{parse:?}"
    );
    assert!(
        parse.iter().any(|(at, from, to)| *at >= window_end && to < from),
        "{parse:?}"
    );
    // The scale-down was vetoed, inside the window only.
    assert!(!vetoes.is_empty());
    assert!(vetoes.iter().all(|at| at.as_secs() < window_end), "{vetoes:?}");
    Ok(())
}
