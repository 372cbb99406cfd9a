//! The service benchmark: `flink-autoscaler run` against the fake, measured from outside.
//!
//! [`run`] starts the fake (on its own thread, in this process), then the autoscaler binary as a
//! child process with `--flink-url`, `--interval`, `--state`, `--metrics-addr` and a `--config`
//! file of the `-D` settings. It waits for `warmup_cycles` control-loop cycles (one
//! `GET /jobs/overview` each), then measures over the next `cycles` cycles, from one cycle's start
//! to another's:
//!
//! - CPU of the autoscaler process only: `utime + stime` of `/proc/PID/stat` (all its threads, in
//!   clock ticks of 10 ms), divided by the job-cycles (the job details the fake served: one per
//!   job-cycle). The fake runs in this process, so its CPU is never counted.
//! - Its memory: `VmRSS` and `VmHWM` of `/proc/PID/status` at the end.
//! - The size of one `/metrics` scrape, in bytes.
//! - Requests per job-cycle, from the fake's counters.
//!
//! [`Report`]'s `Display` is the benchmark's last line.

use crate::{Endpoint, FakeConfig, FakeJobManager, Stats};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PostgreSQL the `postgres` shorthand of [`StateChoice::parse`] means.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on every Linux ABI).
const TICKS_PER_SECOND: f64 = 100.0;

/// Where the autoscaler keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChoice {
    /// `--state memory`.
    Memory,
    /// A fresh SQLite file in the work directory.
    Sqlite,
    /// A PostgreSQL URL.
    Postgres(String),
}

impl StateChoice {
    /// `memory`, `sqlite`, `postgres` (= [`DEFAULT_POSTGRES_URL`]) or a `postgres://` URL.
    pub fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            "memory" => Self::Memory,
            "sqlite" => Self::Sqlite,
            "postgres" => Self::Postgres(DEFAULT_POSTGRES_URL.to_owned()),
            url if url.starts_with("postgres://") || url.starts_with("postgresql://") => Self::Postgres(url.to_owned()),
            other => bail!("--state {other:?}: expected memory, sqlite, postgres or a postgres:// URL"),
        })
    }

    /// The label of the report (`memory`, `sqlite`, `postgres`).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Sqlite => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The `flink-autoscaler` binary.
    pub autoscaler: PathBuf,
    /// Jobs of the fake.
    pub jobs: usize,
    /// Vertices per job.
    pub vertices: usize,
    /// Every N-th job has a bottleneck (0: none).
    pub hot_every: usize,
    /// The control-loop interval, Flink duration syntax (`10s`).
    pub interval: String,
    /// Cycles before the measurement starts (at least 1).
    pub warmup_cycles: u64,
    /// Cycles measured (at least 1).
    pub cycles: u64,
    /// The state store.
    pub state: StateChoice,
    /// Extra configuration, `key=value`, written to the `--config` file.
    pub settings: Vec<(String, String)>,
    /// `RUST_LOG` of the autoscaler (`None`: its default, `info`).
    pub log_level: Option<String>,
    /// Where the config, the SQLite file and the autoscaler's logs go.
    pub work_dir: PathBuf,
    /// Record the measured window with `perf record -g` into this file.
    pub perf_output: Option<PathBuf>,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Jobs.
    pub jobs: usize,
    /// Vertices per job.
    pub vertices: usize,
    /// The interval as given.
    pub interval: String,
    /// The state store's label.
    pub state: &'static str,
    /// Control-loop cycles measured.
    pub cycles: u64,
    /// Job-cycles in the window (job details asked); below `cycles * jobs` when the loop fell
    /// behind and skipped jobs whose previous cycle was still running.
    pub job_cycles: u64,
    /// Wall time of the measured cycles.
    pub window: Duration,
    /// CPU of the autoscaler process over the window.
    pub cpu: Duration,
    /// CPU per job-cycle, microseconds.
    pub cpu_per_job_cycle_us: f64,
    /// Resident set size at the end, bytes.
    pub rss_bytes: u64,
    /// Peak resident set size, bytes.
    pub hwm_bytes: u64,
    /// Bytes of one `/metrics` scrape.
    pub metrics_bytes: usize,
    /// Requests to the fake per job-cycle.
    pub requests_per_job_cycle: f64,
    /// Requests per job-cycle by endpoint.
    pub requests_by_endpoint: BTreeMap<String, f64>,
    /// Rescales the fake accepted during the window.
    pub rescales: usize,
    /// `/proc/loadavg`'s 1-minute load at the start and at the end of the window.
    pub load: (f64, f64),
    /// The autoscaler's process id.
    pub pid: u32,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "service: jobs {}, vertices {}, interval {}, state {}, cpu per job-cycle {:.0} us, rss {} MB, hwm {} MB, metrics {} B, requests per job-cycle {:.1}, load {:.2}",
            self.jobs,
            self.vertices,
            self.interval,
            self.state,
            self.cpu_per_job_cycle_us,
            self.rss_bytes / 1_000_000,
            self.hwm_bytes / 1_000_000,
            self.metrics_bytes,
            self.requests_per_job_cycle,
            self.load.0.max(self.load.1),
        )
    }
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// `utime + stime` of a process, from `/proc/PID/stat`.
pub fn process_cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it start at the state (field 3).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat has no field {}", i + 3))
    };
    // utime is field 14, stime field 15.
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_secs_f64(total as f64 / TICKS_PER_SECOND))
}

/// `VmRSS` and `VmHWM` of a process, bytes.
pub fn process_memory(pid: u32) -> Result<(u64, u64)> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("/proc/{pid}/status"))?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|k| k * 1024)
            .unwrap_or(0)
    };
    Ok((kib("VmRSS:"), kib("VmHWM:")))
}

/// The body of `GET http://addr/path`, by plain HTTP/1.0.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> Result<Vec<u8>> {
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers in the answer")?;
    if !answer.starts_with(b"HTTP/1.1 200") && !answer.starts_with(b"HTTP/1.0 200") {
        bail!("GET {path}: {}", String::from_utf8_lossy(&answer[..split]));
    }
    Ok(answer[split + 4..].to_vec())
}

/// A free port on 127.0.0.1 (bound and released; fine for a benchmark).
fn free_port() -> Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// The fake on its own thread with a single-threaded runtime.
struct FakeThread {
    fake: FakeJobManager,
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeThread {
    fn start(config: FakeConfig) -> Result<Self> {
        let fake = FakeJobManager::new(config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, address) = std::sync::mpsc::channel();
        let served = fake.clone();
        let thread = std::thread::Builder::new()
            .name("fake-jobmanager".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(listener.local_addr());
                    let _ = served
                        .serve(listener, async {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })?;
        let addr = address
            .recv()
            .context("the fake's thread ended")?
            .context("the fake cannot listen")?;
        Ok(Self {
            fake,
            url: format!("http://{addr}"),
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for FakeThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The autoscaler child, stopped (SIGTERM, then SIGKILL) when dropped.
struct Autoscaler {
    child: Child,
    stderr: PathBuf,
}

impl Autoscaler {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the process has exited, with the end of its log.
    fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "the autoscaler exited ({status}); its log ends:\n{}",
                tail(&self.stderr, 20)
            );
        }
        Ok(())
    }

    fn stop(&mut self) {
        terminate(self.child.id(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Autoscaler {
    fn drop(&mut self) {
        self.stop();
    }
}

fn terminate(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A YAML value, quoted.
fn yaml_quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Runs the benchmark; progress goes to `log` (one line per step).
pub fn run(options: &BenchOptions, log: &mut dyn std::io::Write) -> Result<Report> {
    let interval = autoscaler_core::config::parse_duration(&options.interval)
        .map_err(|e| anyhow::anyhow!("--interval {:?}: {e}", options.interval))?;
    if options.cycles == 0 || options.warmup_cycles == 0 {
        bail!("--cycles and --warmup-cycles must be at least 1");
    }
    if !options.autoscaler.is_file() {
        bail!(
            "no autoscaler binary at {} (build it: cargo build --release -p flink-autoscaler-cli, or pass --autoscaler)",
            options.autoscaler.display()
        );
    }
    std::fs::create_dir_all(&options.work_dir)?;
    let fake = FakeThread::start(FakeConfig {
        jobs: options.jobs,
        vertices: options.vertices,
        hot_every: options.hot_every,
        ..FakeConfig::default()
    })?;
    writeln!(
        log,
        "fake JobManager at {} with {} jobs of {} vertices",
        fake.url, options.jobs, options.vertices
    )?;

    let config = options.work_dir.join("autoscaler.yaml");
    let mut yaml = String::new();
    for (key, value) in &options.settings {
        yaml.push_str(&format!("{key}: {}\n", yaml_quote(value)));
    }
    std::fs::write(&config, yaml)?;
    let state = match &options.state {
        StateChoice::Memory => "memory".to_owned(),
        StateChoice::Sqlite => {
            let db = options.work_dir.join("state.db");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
            format!("sqlite:{}", db.display())
        }
        StateChoice::Postgres(url) => url.clone(),
    };
    let metrics_addr = free_port()?;
    let stderr = options.work_dir.join("autoscaler.log");
    let mut command = Command::new(&options.autoscaler);
    command
        .arg("run")
        .arg("--flink-url")
        .arg(format!("fake={}", fake.url))
        .arg("--interval")
        .arg(&options.interval)
        .arg("--state")
        .arg(&state)
        .arg("--metrics-addr")
        .arg(metrics_addr.to_string())
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(options.work_dir.join("autoscaler.out"))?)
        .stderr(std::fs::File::create(&stderr)?);
    match &options.log_level {
        Some(level) => command.env("RUST_LOG", level),
        None => command.env_remove("RUST_LOG"),
    };
    let mut autoscaler = Autoscaler {
        child: command
            .spawn()
            .with_context(|| format!("cannot start {}", options.autoscaler.display()))?,
        stderr,
    };
    let pid = autoscaler.pid();
    writeln!(
        log,
        "autoscaler pid {pid}, state {}, metrics on {metrics_addr}",
        options.state.label()
    )?;

    let cycles_seen = |stats: &Stats| stats.count(Endpoint::JobsOverview);
    // A cycle may take longer than the interval at first (empty caches, schema creation).
    let patience = interval * 5 + Duration::from_secs(60);
    let wait_for_cycle = |autoscaler: &mut Autoscaler, target: u64| -> Result<(Stats, Duration, Instant)> {
        let mut last_progress = Instant::now();
        let mut seen = cycles_seen(&fake.fake.stats());
        loop {
            let stats = fake.fake.stats();
            let now = cycles_seen(&stats);
            if now >= target {
                let cpu = process_cpu(pid)?;
                return Ok((stats, cpu, Instant::now()));
            }
            if now != seen {
                seen = now;
                last_progress = Instant::now();
            }
            autoscaler.check_alive()?;
            if last_progress.elapsed() > patience {
                bail!(
                    "no control-loop cycle for {patience:?}; the autoscaler's log ends:\n{}",
                    tail(&autoscaler.stderr, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let (start_stats, start_cpu, started) = wait_for_cycle(&mut autoscaler, options.warmup_cycles + 1)?;
    let load_start = load_average();
    writeln!(
        log,
        "warm after {} cycles; measuring {} cycles (load {load_start:.2})",
        options.warmup_cycles, options.cycles
    )?;
    let mut perf = match &options.perf_output {
        Some(path) => Some(
            Command::new("perf")
                .args(["record", "-g", "-p", &pid.to_string(), "-o"])
                .arg(path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("cannot start perf")?,
        ),
        None => None,
    };
    let target = cycles_seen(&start_stats) + options.cycles;
    let (end_stats, end_cpu, ended) = wait_for_cycle(&mut autoscaler, target)?;
    let load_end = load_average();
    if let Some(perf) = perf.as_mut() {
        terminate(perf.id(), nix::sys::signal::Signal::SIGINT);
        let _ = perf.wait();
    }
    let (rss, hwm) = process_memory(pid)?;
    let metrics = http_get(metrics_addr, "/metrics").context("scraping /metrics")?;
    autoscaler.stop();

    // Every job-cycle asks for the job's details once (a rescale in flight adds one check); a
    // loop that falls behind skips the jobs whose previous cycle is still running, so the
    // details are counted rather than `cycles * jobs` assumed.
    let details = end_stats.count(Endpoint::JobDetails) - start_stats.count(Endpoint::JobDetails);
    let job_cycles = details.max(1) as f64;
    let cpu = end_cpu.saturating_sub(start_cpu);
    let mut by_endpoint = BTreeMap::new();
    for (name, count) in &end_stats.requests {
        let before = start_stats.requests.get(name).copied().unwrap_or(0);
        by_endpoint.insert(name.clone(), (count - before) as f64 / job_cycles);
    }
    let report = Report {
        jobs: options.jobs,
        vertices: options.vertices,
        interval: options.interval.clone(),
        state: options.state.label(),
        cycles: options.cycles,
        job_cycles: details,
        window: ended - started,
        cpu,
        cpu_per_job_cycle_us: cpu.as_secs_f64() * 1e6 / job_cycles,
        rss_bytes: rss,
        hwm_bytes: hwm,
        metrics_bytes: metrics.len(),
        requests_per_job_cycle: (end_stats.total_requests - start_stats.total_requests) as f64 / job_cycles,
        requests_by_endpoint: by_endpoint,
        rescales: end_stats.rescales.len() - start_stats.rescales.len(),
        load: (load_start, load_end),
        pid,
    };
    for (endpoint, per_cycle) in &report.requests_by_endpoint {
        writeln!(log, "  {per_cycle:8.3} per job-cycle  {endpoint}")?;
    }
    writeln!(
        log,
        "window {:.1} s, {} cycles, {} job-cycles of {} possible, cpu {:.2} s ({:.1} % of one core), rescales {}, load {:.2} -> {:.2}",
        report.window.as_secs_f64(),
        report.cycles,
        report.job_cycles,
        report.cycles * report.jobs as u64,
        cpu.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / report.window.as_secs_f64().max(1e-9),
        report.rescales,
        load_start,
        load_end
    )?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse() {
        assert_eq!(StateChoice::parse("memory").ok(), Some(StateChoice::Memory));
        assert_eq!(
            StateChoice::parse("postgres").ok(),
            Some(StateChoice::Postgres(DEFAULT_POSTGRES_URL.to_owned()))
        );
        assert!(StateChoice::parse("mysql://x").is_err());
    }

    #[test]
    fn own_cpu_and_memory_are_readable() {
        let pid = std::process::id();
        assert!(process_cpu(pid).is_ok());
        let (rss, hwm) = process_memory(pid).expect("status");
        assert!(rss > 0 && hwm >= rss);
    }

    #[test]
    fn the_report_is_one_line() {
        let report = Report {
            jobs: 1000,
            vertices: 10,
            interval: "10s".to_owned(),
            state: "sqlite",
            cycles: 6,
            job_cycles: 6000,
            window: Duration::from_secs(60),
            cpu: Duration::from_secs(2),
            cpu_per_job_cycle_us: 333.3,
            rss_bytes: 85_400_000,
            hwm_bytes: 90_000_000,
            metrics_bytes: 1234,
            requests_per_job_cycle: 9.04,
            requests_by_endpoint: BTreeMap::new(),
            rescales: 0,
            load: (1.0, 1.5),
            pid: 1,
        };
        assert_eq!(
            report.to_string(),
            "service: jobs 1000, vertices 10, interval 10s, state sqlite, cpu per job-cycle 333 us, rss 85 MB, hwm 90 MB, metrics 1234 B, requests per job-cycle 9.0, load 1.50"
        );
    }
}
