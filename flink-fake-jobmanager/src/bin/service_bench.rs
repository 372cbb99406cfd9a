//! `service_bench`: `flink-autoscaler run` against the fake JobManager, measured from outside
//! (see `flink_fake_jobmanager::bench` and docs/service-benchmark.md). The last line is one line
//! of figures.

use clap::Parser;
use flink_fake_jobmanager::bench::{self, BenchOptions, StateChoice};
use std::path::PathBuf;

/// Measures CPU per job-cycle, RSS, /metrics bytes and requests per job-cycle of `flink-autoscaler run`.
#[derive(Debug, Parser)]
struct Args {
    /// Jobs of the fake.
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    /// Vertices per job.
    #[arg(long, default_value_t = 10)]
    vertices: usize,
    /// Control-loop interval (Flink duration syntax).
    #[arg(long, default_value = "10s")]
    interval: String,
    /// Cycles measured.
    #[arg(long, default_value_t = 6)]
    cycles: u64,
    /// Cycles run before measuring.
    #[arg(long, default_value_t = 3)]
    warmup_cycles: u64,
    /// State store: memory, sqlite, postgres (postgres://postgres@127.0.0.1:5432/test) or a URL.
    #[arg(long, default_value = "sqlite")]
    state: String,
    /// Every N-th job has a bottleneck the autoscaler scales up (0: none).
    #[arg(long, default_value_t = 0)]
    hot_every: usize,
    /// Configuration for the autoscaler, `key=value` (repeatable), e.g. `-D job.autoscaler.metrics.window=2m`.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// RUST_LOG of the autoscaler (default: its own default, info).
    #[arg(long)]
    log_level: Option<String>,
    /// The flink-autoscaler binary (default: next to this one).
    #[arg(long)]
    autoscaler: Option<PathBuf>,
    /// Work directory (config, SQLite file, logs); default a new one under the temp directory.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Record the measured window with `perf record -g` into this file.
    #[arg(long)]
    perf: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let autoscaler = match args.autoscaler {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .map(|dir| dir.join("flink-autoscaler"))
            .unwrap_or_else(|| PathBuf::from("flink-autoscaler")),
    };
    let settings = args
        .settings
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| anyhow::anyhow!("-D {s:?}: expected key=value"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let work_dir = args
        .work_dir
        .unwrap_or_else(|| std::env::temp_dir().join(format!("service-bench-{}", std::process::id())));
    let options = BenchOptions {
        autoscaler,
        jobs: args.jobs,
        vertices: args.vertices,
        hot_every: args.hot_every,
        interval: args.interval,
        warmup_cycles: args.warmup_cycles,
        cycles: args.cycles,
        state: StateChoice::parse(&args.state)?,
        settings,
        log_level: args.log_level,
        work_dir,
        perf_output: args.perf,
    };
    let mut stderr = std::io::stderr();
    let report = bench::run(&options, &mut stderr)?;
    println!("{report}");
    Ok(())
}
