//! Convergence benchmark: the real autoscaler on thirteen simulated workloads.
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
//!
//! A second table runs the same workloads with a narrower utilization band (`utilization.min`
//! 0.6, `utilization.max` 0.8) to show how much of the over-provisioning the default band
//! (0.4..1.0, where the reference leaves a vertex alone) accounts for. `--verbose` lists every
//! rescale. The last line summarizes the default configuration.

use autoscaler_sim::harness::{ConvergenceReport, ConvergenceSummary, example_configuration, measure_convergence};
use autoscaler_sim::{Simulator, workloads};
use flink_autoscaler::core::config::Configuration;
use std::time::{Duration, Instant};

fn parallelism_list(report: &ConvergenceReport) -> (String, String) {
    let Some(last) = report.phases.last() else {
        return (String::new(), String::new());
    };
    let join =
        |m: &std::collections::BTreeMap<String, u32>| m.values().map(|p| p.to_string()).collect::<Vec<_>>().join("/");
    (join(&last.final_parallelism), join(&last.optimal_parallelism))
}

/// Runs every workload under `configuration`, printing one table row per workload.
async fn run_table(
    title: &str,
    configuration: &Configuration,
    verbose: bool,
) -> Result<Vec<ConvergenceReport>, Box<dyn std::error::Error>> {
    println!("{title}");
    println!(
        "{:<13} {:>6} {:<15} {:<14} {:<14} {:>17} {:<10} {:>9} {:>9} {:>4}",
        "workload",
        "phases",
        "rescales/phase",
        "final p",
        "optimum p",
        "over-prov./phase",
        "busy",
        "backlog+",
        "reversals",
        "osc."
    );
    let mut reports = Vec::new();
    for workload in workloads::benchmark() {
        let sim = Simulator::new(workload.job.clone())?;
        let report = measure_convergence(
            workload.name,
            sim,
            configuration.clone(),
            Duration::from_secs(10),
            workload.horizon,
            0.7,
        )
        .await;
        let rescales: Vec<String> = report.phases.iter().map(|p| p.rescales.to_string()).collect();
        let over: Vec<String> = report
            .phases
            .iter()
            .map(|p| format!("{:+.0}%", p.over_provisioning * 100.0))
            .collect();
        let growing: u64 = report.phases.iter().map(|p| p.backlog_growing.as_secs()).sum();
        let reversals: usize = report.phases.iter().map(|p| p.reversals).sum();
        let oscillations: usize = report.phases.iter().map(|p| p.oscillations).sum();
        let (final_p, optimum_p) = parallelism_list(&report);
        let busy = report.phases.last().map_or(String::new(), |p| {
            let lo = p.final_busy.values().copied().fold(f64::INFINITY, f64::min);
            let hi = p.final_busy.values().copied().fold(0.0, f64::max);
            format!("{lo:.2}-{hi:.2}")
        });
        println!(
            "{:<13} {:>6} {:<15} {:<14} {:<14} {:>17} {:<10} {:>8}s {:>9} {:>4}",
            workload.name,
            report.phases.len(),
            rescales.join(","),
            final_p,
            optimum_p,
            over.join(","),
            busy,
            growing,
            reversals,
            oscillations
        );
        if verbose {
            for r in &report.rescales {
                let changes: Vec<String> =
                    r.to.iter()
                        .filter(|(id, p)| r.from.get(*id) != Some(p))
                        .map(|(id, p)| format!("{id} {}->{p}", r.from.get(id).copied().unwrap_or(0)))
                        .collect();
                println!("    {:>5}s  {}", r.at_ms / 1000, changes.join(", "));
            }
        }
        for e in &report.errors {
            println!("    error: {e}");
        }
        reports.push(report);
    }
    Ok(reports)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let verbose = std::env::args().any(|a| a == "--verbose");
    let started = Instant::now();
    let default = run_table(
        "Reference defaults (utilization target 0.7, band 0.4..1.0)",
        &example_configuration(),
        verbose,
    )
    .await?;
    println!();
    let mut narrow = example_configuration();
    narrow.set("job.autoscaler.utilization.min", "0.6");
    narrow.set("job.autoscaler.utilization.max", "0.8");
    let variant = run_table(
        "Variant: narrow band (utilization.min 0.6, utilization.max 0.8)",
        &narrow,
        verbose,
    )
    .await?;
    println!("variant {}", ConvergenceSummary::of(&variant));
    println!();
    println!(
        "final p / optimum p: parallelism per vertex (vertex ids in sorted order) at the end of the run; optimum: \
         smallest parallelism keeping every subtask at or below 70% busy; over-prov.: Σ final / Σ optimum − 1 at the \
         end of each phase; busy: least and most busy vertex (busiest subtask) at the end; backlog+: time the source \
         backlog grew. {:.1} s wall.",
        started.elapsed().as_secs_f64()
    );
    println!("{}", ConvergenceSummary::of(&default));
    Ok(())
}
