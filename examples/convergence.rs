//! Convergence benchmark: the real autoscaler on twelve simulated workloads.
//!
//! ```text
//! cargo run --release --example convergence
//! ```
//!
//! Every workload starts at parallelism 1 and runs under `JobAutoScalerImpl` (control interval
//! 10 s, the shortened time scales of `sim::harness::example_configuration`, otherwise the
//! reference's defaults: utilization target 0.7, band 0.4..1.0). A workload's run is cut into
//! load phases at its sources' load changes (the first phase is the initial deployment). For each
//! phase the benchmark counts the rescales applied, and at the phase's end compares the
//! parallelism with the simulator's optimum (the smallest parallelism keeping every subtask at or
//! below 70% busy under the phase's load); it also measures the time the source backlog grew and
//! the direction reversals (a vertex scaled up then down or vice versa; two or more in one phase
//! count as an oscillation). Deterministic: the same binary prints the same table.

use flink_autoscaler::sim::harness::{ConvergenceReport, example_configuration, measure_convergence};
use flink_autoscaler::sim::{Simulator, workloads};
use std::time::{Duration, Instant};

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn parallelism_list(report: &ConvergenceReport) -> (String, String) {
    let Some(last) = report.phases.last() else {
        return (String::new(), String::new());
    };
    let join =
        |m: &std::collections::BTreeMap<String, u32>| m.values().map(|p| p.to_string()).collect::<Vec<_>>().join("/");
    (join(&last.final_parallelism), join(&last.optimal_parallelism))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let mut reports = Vec::new();
    println!(
        "{:<13} {:>6} {:<16} {:<14} {:<14} {:>12} {:>10} {:>9} {:>6}",
        "workload", "phases", "rescales/phase", "final p", "optimum p", "over-prov.", "backlog+", "reversals", "osc."
    );
    for workload in workloads::benchmark() {
        let sim = Simulator::new(workload.job.clone())?;
        let report = measure_convergence(
            workload.name,
            sim,
            example_configuration(),
            Duration::from_secs(10),
            workload.horizon,
            0.7,
        )
        .await;
        let rescales: Vec<String> = report.phases.iter().map(|p| p.rescales.to_string()).collect();
        let over: Vec<String> = report
            .phases
            .iter()
            .map(|p| format!("{:+.0}", p.over_provisioning * 100.0))
            .collect();
        let growing: u64 = report.phases.iter().map(|p| p.backlog_growing.as_secs()).sum();
        let reversals: usize = report.phases.iter().map(|p| p.reversals).sum();
        let oscillations: usize = report.phases.iter().map(|p| p.oscillations).sum();
        let (final_p, optimum_p) = parallelism_list(&report);
        println!(
            "{:<13} {:>6} {:<16} {:<14} {:<14} {:>11}% {:>9}s {:>9} {:>6}",
            workload.name,
            report.phases.len(),
            rescales.join(","),
            final_p,
            optimum_p,
            over.join(","),
            growing,
            reversals,
            oscillations
        );
        for e in &report.errors {
            println!("    error: {e}");
        }
        reports.push(report);
    }
    let mut rescales: Vec<f64> = reports
        .iter()
        .flat_map(|r| r.phases.iter().map(|p| p.rescales as f64))
        .collect();
    let mut over: Vec<f64> = reports
        .iter()
        .flat_map(|r| r.phases.iter().map(|p| p.over_provisioning * 100.0))
        .collect();
    let oscillations: usize = reports
        .iter()
        .flat_map(|r| r.phases.iter().map(|p| p.oscillations))
        .sum();
    let max_rescales = rescales.iter().copied().fold(0.0, f64::max);
    let max_over = over.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    println!(
        "(final p / optimum p: parallelism per vertex in declaration-sorted order at the end of the run; \
         over-prov.: per phase, Σ final / Σ optimum − 1; backlog+: time the source backlog grew; {:.1} s wall)",
        started.elapsed().as_secs_f64()
    );
    println!(
        "workloads: {}, rescales per load change: median {} max {}, over-provisioning: median {:.0}% max {:.0}%, oscillations: {}",
        reports.len(),
        median(&mut rescales),
        max_rescales,
        median(&mut over),
        max_over,
        oscillations
    );
    Ok(())
}
