//! Fleet benchmark: the real standalone control loop (`autoscaler_core::standalone`) over N
//! synthetic jobs, each a `JobAutoScalerImpl` on one SQLite state store, the way `flink-autoscaler
//! run` wires them (options validation included), but with a metric source that costs nothing:
//! every job's collection hands out a pre-generated snapshot.
//!
//! ```text
//! cargo run --release --example fleet -- [--jobs N] [--vertices V] [--cycles C] [--state sqlite:PATH]
//! ```
//!
//! Defaults: 1000 jobs of a 10-vertex chain, a 15-minute metric window at a 10 s control-loop
//! interval (90 snapshots per full window), a SQLite file in the temporary directory. Before the
//! measured cycles every job's window is filled (stored and flushed once) so each measured cycle is
//! what a long-running process does every 10 s: collect, evaluate a full window, decide (the jobs
//! are balanced, so nothing rescales), persist and flush. The clock is simulated: cycle `c` runs
//! at `c * 10 s`, without sleeping.
//!
//! The last line is
//! `fleet: jobs N, vertices V, cycles C, cpu per cycle X ms, p99 job-cycle Y us, rss Z MB`:
//! CPU is the process's own user + system time (`getrusage(RUSAGE_SELF)`) spent in the measured
//! cycles divided by their number; a job-cycle is the wall time of one job's `scale` call; RSS is
//! the process's peak resident set (`ru_maxrss`).

use autoscaler_core::{
    AutoScalerStateStore, AutoscalerError, BasicJobContext, CollectError, CollectedJobMetrics, ControlLoopOptions,
    FetchError, JobAutoScaler, JobAutoScalerImpl, JobListFetcher, MetricsCollector, MetricsSnapshot,
    ParallelismOverrides, RealizeError, ScalingRealizer, StandaloneAutoscaler, async_trait, config::AutoScalerOptions,
    config::Configuration,
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, JobTopology, MetricHistory, MetricValues, ScalingMetric, ShipStrategy, VertexSpec,
};
use autoscaler_state::{AnyEventHandler, AnyStateStore};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

type Ctx = BasicJobContext<String, ()>;

/// The control-loop interval, which is also the collection interval.
const INTERVAL_SECS: i64 = 10;
/// The metric window: 15 minutes.
const WINDOW_SECS: i64 = 15 * 60;
/// Snapshots in a full window.
const WINDOW_SNAPSHOTS: usize = (WINDOW_SECS / INTERVAL_SECS) as usize;
/// Records per second every job reads.
const RATE: f64 = 1000.0;
/// Busy ratio of every vertex: inside the default utilization band, so no job rescales.
const LOAD: f64 = 0.6;
/// Parallelism of every vertex.
const PARALLELISM: u32 = 2;

#[derive(Debug)]
struct Args {
    jobs: usize,
    vertices: usize,
    cycles: usize,
    state: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        jobs: 1000,
        vertices: 10,
        cycles: 5,
        state: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let count = |v: String, what: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|n| (1..=1_000_000).contains(n))
                .ok_or_else(|| format!("{what} must be an integer in 1..=1000000, got {v:?}"))
        };
        match flag.as_str() {
            "--jobs" => args.jobs = count(value()?, "--jobs")?,
            "--vertices" => args.vertices = count(value()?, "--vertices")?.max(2),
            "--cycles" => args.cycles = count(value()?, "--cycles")?,
            "--state" => args.state = Some(value()?),
            "-h" | "--help" => {
                return Err("usage: fleet [--jobs N] [--vertices V] [--cycles C] [--state sqlite:PATH]".into());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// A chain `v0 -> v1 -> ... -> v{n-1}` (v0 is the source).
fn chain(vertices: usize) -> JobTopology {
    let ids: Vec<String> = (0..vertices).map(|i| format!("v{i}")).collect();
    let specs = ids
        .iter()
        .map(|id| VertexSpec::new(id.as_str(), PARALLELISM, 128))
        .collect();
    let edges = ids
        .windows(2)
        .map(|w| EdgeSpec::new(w[0].as_str(), w[1].as_str(), ShipStrategy::Rebalance))
        .collect();
    JobTopology::new(specs, edges).expect("a chain is a valid topology")
}

/// The snapshot of a chain after `secs` seconds at [`RATE`] records per second.
fn snapshot(topology: &JobTopology, secs: i64) -> CollectedMetrics {
    let records = RATE * secs as f64;
    let busy_ms = LOAD * 1000.0 * secs as f64 * f64::from(PARALLELISM);
    let vertex_metrics = topology
        .vertices()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut values = MetricValues::from_iter([
                (ScalingMetric::NumRecordsIn, records),
                (ScalingMetric::NumRecordsOut, records),
                (ScalingMetric::Load, LOAD),
                (ScalingMetric::AccumulatedBusyTime, busy_ms),
            ]);
            if i == 0 {
                values.insert(ScalingMetric::Lag, 0.0);
            } else {
                values.insert(ScalingMetric::NumRecordsInPerSecond, RATE);
            }
            (v.id.clone(), values)
        })
        .collect();
    CollectedMetrics {
        vertex_metrics,
        global_metrics: MetricValues::new(),
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid instant") + TimeDelta::seconds(secs)
}

/// The simulated time and cycle number, shared by the clock and the collector.
#[derive(Default)]
struct Tick {
    secs: AtomicI64,
    snapshot: AtomicUsize,
}

/// Hands out the pre-generated snapshot of the current tick.
struct PreGenerated {
    topology: JobTopology,
    running_since: DateTime<Utc>,
    snapshots: Vec<CollectedMetrics>,
    tick: Arc<Tick>,
}

#[async_trait]
impl MetricsCollector<String, Ctx> for PreGenerated {
    async fn collect(
        &self,
        _: &Ctx,
        _: &AutoScalerOptions,
        _: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let i = self.tick.snapshot.load(Ordering::Relaxed);
        let latest = self.snapshots.get(i).cloned().unwrap_or_default();
        Ok(CollectedJobMetrics::new(
            self.topology.clone(),
            self.running_since,
            MetricsSnapshot::Scaling(latest),
        ))
    }
}

/// Lists the same jobs every cycle.
struct Fleet(Vec<Ctx>);

#[async_trait]
impl JobListFetcher<String, Ctx> for Fleet {
    async fn fetch(&self, _: &Configuration) -> Result<Vec<Ctx>, FetchError> {
        Ok(self.0.clone())
    }
}

/// A realizer that applies nothing (the jobs never rescale).
struct Discard;

#[async_trait]
impl ScalingRealizer<String, Ctx> for Discard {
    async fn realize_parallelism_overrides(&self, _: &Ctx, _: &ParallelismOverrides) -> Result<(), RealizeError> {
        Ok(())
    }
}

/// Times every job's `scale` call.
struct Timed {
    inner: Arc<dyn JobAutoScaler<String, Ctx>>,
    micros: Mutex<Vec<u64>>,
}

#[async_trait]
impl JobAutoScaler<String, Ctx> for Timed {
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        let start = Instant::now();
        let result = self.inner.scale(ctx).await;
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.micros.lock().unwrap_or_else(PoisonError::into_inner).push(micros);
        result
    }

    async fn cleanup(&self, job_key: &String) {
        self.inner.cleanup(job_key).await;
    }
}

/// User + system CPU time of this process so far, and its peak RSS in bytes.
fn rusage() -> (Duration, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return (Duration::ZERO, 0);
    };
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    let cpu = micros(usage.user_time()) + micros(usage.system_time());
    // Linux reports ru_maxrss in kilobytes.
    (cpu, u64::try_from(usage.max_rss()).unwrap_or(0) * 1024)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("fleet: {message}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(message) = runtime.block_on(run(&args)) {
        eprintln!("fleet: {message}");
        std::process::exit(1);
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let temp = std::env::temp_dir().join(format!("fleet-{}.db", std::process::id()));
    let url = args
        .state
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", temp.display()));
    let store = Arc::new(AnyStateStore::open(&url).await.map_err(|e| e.to_string())?);
    let events = Arc::new(AnyEventHandler::open(&url).await.map_err(|e| e.to_string())?);

    let topology = chain(args.vertices);
    let total = WINDOW_SNAPSHOTS + args.cycles;
    // Snapshot k is collected at k * 10 s; the job runs since long before the first.
    let snapshots: Vec<CollectedMetrics> = (0..=total)
        .map(|k| snapshot(&topology, INTERVAL_SECS * k as i64))
        .collect();
    let tick = Arc::new(Tick::default());
    let collector = Arc::new(PreGenerated {
        topology: topology.clone(),
        running_since: at(-3600),
        snapshots: snapshots.clone(),
        tick: tick.clone(),
    });
    let clock_tick = tick.clone();
    let clock = Arc::new(move || at(clock_tick.secs.load(Ordering::Relaxed)));

    let configuration = Configuration::from_iter([
        ("job.autoscaler.enabled", "true"),
        ("job.autoscaler.metrics.window", "15 min"),
        ("job.autoscaler.stabilization.interval", "1 min"),
    ]);
    let jobs: Vec<Ctx> = (0..args.jobs)
        .map(|i| BasicJobContext::new(format!("job-{i:07}"), configuration.clone(), ()))
        .collect();

    // Every job starts with the full window before the cycle at WINDOW_SNAPSHOTS, persisted.
    let window: MetricHistory = snapshots[..WINDOW_SNAPSHOTS]
        .iter()
        .enumerate()
        .map(|(k, s)| (at(INTERVAL_SECS * k as i64), s.clone()))
        .collect();
    for ctx in &jobs {
        store
            .store_collected_metrics(ctx, &window)
            .await
            .map_err(|e| e.to_string())?;
        AutoScalerStateStore::<String, Ctx>::flush(&*store, ctx)
            .await
            .map_err(|e| e.to_string())?;
        // A long-running process has every job's state cached: reading it is what the first
        // measured cycle must not pay for a cold cache.
        store.get_parallelism_overrides(ctx).await.map_err(|e| e.to_string())?;
    }
    drop(window);

    let inner: Arc<dyn JobAutoScaler<String, Ctx>> =
        Arc::new(JobAutoScalerImpl::new(collector, store.clone(), Arc::new(Discard), events.clone()).with_clock(clock));
    let timed = Arc::new(Timed {
        inner,
        micros: Mutex::new(Vec::with_capacity(args.jobs * args.cycles)),
    });
    let options = ControlLoopOptions {
        interval: Duration::from_secs(INTERVAL_SECS as u64),
        parallelism: NonZeroUsize::new(100).expect("non-zero"),
        ..ControlLoopOptions::default()
    };
    let mut control_loop =
        StandaloneAutoscaler::new(Arc::new(Fleet(jobs)), timed.clone(), events, options).with_options_validation();

    let mut cpu = Duration::ZERO;
    for c in 0..args.cycles {
        let k = WINDOW_SNAPSHOTS + c;
        tick.snapshot.store(k, Ordering::Relaxed);
        tick.secs.store(INTERVAL_SECS * k as i64, Ordering::Relaxed);
        let (before, _) = rusage();
        control_loop.run_cycle().await.map_err(|e| format!("cycle {c}: {e}"))?;
        control_loop.wait_idle().await;
        let (after, _) = rusage();
        let spent = after.saturating_sub(before);
        cpu += spent;
        println!("cycle {c}: cpu {:.1} ms", spent.as_secs_f64() * 1e3);
    }
    let mut micros = std::mem::take(&mut *timed.micros.lock().unwrap_or_else(PoisonError::into_inner));
    micros.sort_unstable();
    let (_, rss) = rusage();
    store.close().await;
    if args.state.is_none() {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", temp.display()));
        }
    }
    println!(
        "fleet: jobs {}, vertices {}, cycles {}, cpu per cycle {:.1} ms, p99 job-cycle {} us, rss {} MB",
        args.jobs,
        args.vertices,
        args.cycles,
        cpu.as_secs_f64() * 1e3 / args.cycles as f64,
        percentile(&micros, 0.99),
        rss / (1024 * 1024)
    );
    Ok(())
}
