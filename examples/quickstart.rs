//! Quickstart: the real autoscaler on a simulated 3-vertex job with a bottleneck.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! `source` (5,000 records/s) -> `parse` (2,000 records/s per subtask: the bottleneck) -> `sink`,
//! all at parallelism 1. Every 10 s of simulated time the autoscaler runs one cycle; the example
//! prints, per cycle and vertex, the parallelism, the evaluated true processing rate (TPR) and
//! target data rate, and the decision, and stops once the job has run 5 minutes without a rescale
//! and without backlog. Autoscaler settings are the reference defaults with shortened time scales
//! (`sim::harness::example_configuration`): metric window 3 min, stabilization 1 min, scale-down
//! interval 5 min, catch-up 10 min, restart time 30 s.

use autoscaler_sim::harness::{CycleRecord, SimAutoscaler, example_configuration};
use autoscaler_sim::{Simulator, workloads};
use std::time::{Duration, Instant};

fn clock(t: Duration) -> String {
    format!("{:02}:{:02}", t.as_secs() / 60, t.as_secs() % 60)
}

fn print_cycle(cycle: &CycleRecord) {
    let mut line = format!("{} |", clock(cycle.at));
    if cycle.vertices.iter().all(|v| v.true_processing_rate.is_nan()) {
        println!(
            "{line} {:<66} | {}",
            format!("backlog {:.0}", cycle.backlog),
            cycle.outcome_label()
        );
        return;
    }
    for v in &cycle.vertices {
        let decided = v.decided.map(|p| format!("->{p}")).unwrap_or_default();
        line.push_str(&format!(
            " {} p{}{decided:<4} {:>6.0}/{:<5.0}|",
            v.id, v.parallelism, v.true_processing_rate, v.target_data_rate
        ));
    }
    println!("{line} {}", cycle.outcome_label());
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let sim = Simulator::new(workloads::quickstart())?;
    let mut autoscaler = SimAutoscaler::new(sim, example_configuration(), Duration::from_secs(10));
    println!("time  | per vertex: parallelism (->decided)  TPR/target rate (records/s)          | outcome");
    let stable = autoscaler
        .run_until_stable(Duration::from_secs(300), Duration::from_secs(3 * 3600), print_cycle)
        .await;
    let sim = autoscaler.handle().lock();
    println!(
        "\n{} after {} simulated: {} rescales, {:.2} s of wall time",
        if stable { "Stable" } else { "NOT stable" },
        clock(sim.now()),
        sim.rescales().len(),
        started.elapsed().as_secs_f64()
    );
    let optimum = sim.optimal_parallelism(sim.now().as_secs_f64(), 0.7);
    for v in &sim.job().vertices {
        let p = sim.parallelism().get(&v.id).copied().unwrap_or(0);
        println!(
            "  {:6} parallelism {p} (simulator's optimum at 70% utilization: {})",
            v.id, optimum[&v.id]
        );
    }
    println!(
        "  backlog {:.0} records; it grew during {} s in total",
        sim.total_backlog(),
        sim.backlog_growing_time().as_secs()
    );
    Ok(())
}
