//! Plugins: the real autoscaler on a simulated working day, with a stock business-hours executor,
//! a custom alignment mode and memory tuning.
//!
//! ```text
//! cargo run --release --example plugins
//! ```
//!
//! `source -> parse -> sink`, where `parse` (2,000 records/s per subtask) is the bottleneck. The
//! load follows a day in simulated time (time 0 is 00:00 UTC): 3,000 records/s at night, 9,000 from
//! 10:00, 2,000 from 12:00. The plugins, registered by name on the autoscaler and selected by the
//! job configuration:
//!
//! - `office` (class `business-hours`, the stock [`BusinessHoursExecutor`]): no scale-downs from
//!   09:00 to 17:00. The scale-up at 10:00 goes through; the scale-down the autoscaler wants after
//!   the drop at 12:00 is vetoed (a `ScalingVetoed` event) until 17:00.
//! - `pairs` (class `multiple-of`, [`MultipleOf`] below): every new parallelism is rounded up to a
//!   multiple of its `of` parameter (2: the TaskManagers have two slots each).
//! - memory tuning (`job.autoscaler.memory.tuning.enabled`): the TaskManagers (4 gb) report a
//!   300 MiB heap and 90 MiB metaspace in use and no managed memory; every rescale comes with a
//!   `Configuration recommendation`, and the recommended configuration is printed at the end.
//!
//! The example prints each rescale, the first veto of a series, and how many cycles were vetoed.
//! The scale-down waits for 17:00, then goes to the highest parallelism recommended since its first
//! trigger (the delayed scale-down rule; the trigger is kept while the scaling is vetoed, and it
//! came right after the drop, while the metric window still held part of the higher rate); the
//! next scale-down, 10 min later, reaches 2.
//!
//! Output (debug build, about 8 s; `--release` is faster):
//!
//! ```text
//! 00:04:00 Scaling execution enabled, begin scaling vertices:{ Vertex ID parse | Parallelism 1 -> 4 | ...
//! bottleneck: parse (busy 100%), backpressuring source
//! 10:03:00 Scaling execution enabled, begin scaling vertices:{ Vertex ID parse | Parallelism 4 -> 8 | ...
//! bottleneck: parse (busy 84%), backpressuring source
//! 12:07:00 Scaling decision vetoed by scaling custom executor instance 'office' (class=business-hours).
//! 17:00:00 the veto ends (293 cycles vetoed so far)
//! 17:00:00 Scaling execution enabled, begin scaling vertices:{ Vertex ID parse | Parallelism 8 -> 4 | ...
//! 17:10:00 Scaling execution enabled, begin scaling vertices:{ Vertex ID parse | Parallelism 4 -> 2 | ...
//! ```

use autoscaler_sim::harness::{SimAutoscaler, example_configuration};
use autoscaler_sim::{RateProfile, SimEdge, SimJob, SimSettings, SimTaskManagerMemory, SimVertex, Simulator};
use flink_autoscaler::core::plugins::{
    AlignmentModeContext, BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor, ParallelismAlignmentMode, PluginError,
    PluginRegistry,
};
use flink_autoscaler::metrics::ShipStrategy;
use std::time::{Duration, Instant};

/// An alignment mode: the target rounded up to a multiple of the `of` parameter (default 2), for
/// every vertex, within the vertex's parallelism limits.
struct MultipleOf;

impl ParallelismAlignmentMode for MultipleOf {
    fn is_applicable(&self, _: &AlignmentModeContext<'_>) -> bool {
        true
    }

    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        let of: i64 =
            match ctx.config.parameter("of") {
                None => 2,
                Some(text) => text.parse().ok().filter(|of| *of > 0).ok_or_else(|| {
                    PluginError::failed(format!("parameter 'of' = {text:?} is not a positive number"))
                })?,
            };
        let target = ctx.alignment.target;
        let aligned = (target + of - 1) / of * of;
        Ok(aligned.min(ctx.alignment.upper_limit.min(ctx.alignment.max_parallelism)))
    }
}

fn hours(h: f64) -> f64 {
    h * 3600.0
}

fn clock(t: Duration) -> String {
    let s = t.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let job = SimJob::new("working-day")
        .vertex(SimVertex::source(
            "source",
            20_000.0,
            1,
            RateProfile::Steps {
                steps: vec![(0.0, 3_000.0), (hours(10.0), 9_000.0), (hours(12.0), 2_000.0)],
            },
        ))
        .vertex(SimVertex::new("parse", 2_000.0, 1))
        .vertex(SimVertex::new("sink", 20_000.0, 1))
        .edge(SimEdge::new("source", "parse", ShipStrategy::Rebalance))
        .edge(SimEdge::new("parse", "sink", ShipStrategy::Rebalance))
        .settings(SimSettings {
            // A coarser step keeps a simulated day fast; the meters still update every 5 s.
            step: Duration::from_millis(500),
            task_manager_memory: Some(SimTaskManagerMemory {
                heap_max: 1024.0 * 1_048_576.0,
                heap_used: 300.0 * 1_048_576.0,
                metaspace_used: 90.0 * 1_048_576.0,
                managed_used: 0.0,
            }),
            ..SimSettings::default()
        });

    let mut conf = example_configuration();
    for (key, value) in [
        ("job.autoscaler.scaling.custom-executors", "office"),
        (
            "job.autoscaler.scaling.custom-executor.office.class",
            BUSINESS_HOURS_EXECUTOR,
        ),
        ("job.autoscaler.scaling.custom-executor.office.start", "09:00"),
        ("job.autoscaler.scaling.custom-executor.office.end", "17:00"),
        ("job.autoscaler.scaling.parallelism-alignment.mode", "pairs"),
        (
            "job.autoscaler.scaling.parallelism-alignment.mode.pairs.class",
            "multiple-of",
        ),
        ("job.autoscaler.scaling.parallelism-alignment.mode.pairs.of", "2"),
        ("job.autoscaler.memory.tuning.enabled", "true"),
        ("taskmanager.memory.process.size", "4 gb"),
        ("taskmanager.numberOfTaskSlots", "2"),
    ] {
        conf.set(key, value);
    }
    let registry = PluginRegistry::new()
        .with_executor(BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor)
        .with_alignment_mode("multiple-of", MultipleOf);
    let mut autoscaler = SimAutoscaler::new(Simulator::new(job)?, conf, Duration::from_secs(60)).with_plugins(registry);

    let end = Duration::from_secs(18 * 3600);
    let mut vetoed_cycles = 0;
    let mut in_veto = false;
    let mut recommendation = None;
    let mut errors = 0;
    while autoscaler.handle().lock().now() < end {
        let cycle = autoscaler.cycle().await;
        if let Err(e) = &cycle.outcome {
            errors += 1;
            println!("{} error: {e}", clock(cycle.at));
        }
        let events = autoscaler.take_events();
        let vetoed = events.iter().any(|e| e.reason == "ScalingVetoed");
        vetoed_cycles += usize::from(vetoed);
        if in_veto && !vetoed {
            println!(
                "{} the veto ends ({vetoed_cycles} cycles vetoed so far)",
                clock(cycle.at)
            );
        }
        for event in events {
            match event.reason.as_str() {
                "ScalingReport" => println!("{} {}", clock(event.at), event.message),
                "ScalingVetoed" if !in_veto => println!("{} {}", clock(event.at), event.message),
                "Configuration recommendation" => recommendation = Some(event.message),
                _ => {}
            }
        }
        in_veto = vetoed;
    }

    let sim = autoscaler.handle().lock();
    println!(
        "\nAfter {} simulated ({:.1} s of wall time):",
        clock(sim.now()),
        started.elapsed().as_secs_f64()
    );
    for rescale in sim.rescales() {
        println!(
            "  rescale at {}: {:?} -> {:?}",
            clock(Duration::from_millis(rescale.at_ms)),
            rescale.from,
            rescale.to
        );
    }
    println!("  cycles vetoed by the business-hours executor: {vetoed_cycles}; failed cycles: {errors}");
    match recommendation {
        Some(message) => println!("\nThe last recommended configuration:\n{message}"),
        None => println!("\nNo memory recommendation was made."),
    }
    Ok(())
}
