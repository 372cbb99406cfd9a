//! A fast fake Flink JobManager: the REST endpoints the autoscaler reads and writes, for N jobs of
//! V vertices, cheap enough that the process under test (not the fake) is what a benchmark
//! measures.
//!
//! The answers have the shapes of a real Flink 2.3 cluster's (the metric name lists, the job's
//! configuration and the task-manager metrics are the recorded answers in `fixtures/`); the
//! numbers come from a deterministic model of each job ([`workload`](crate#the-workload)).
//! Static answers are built once; the answers that move with time (job details, aggregated subtask
//! metrics) are written per request from a few numbers per job.
//!
//! A `PUT /jobs/<id>/resource-requirements` is checked as Flink checks it (every vertex listed,
//! bounds within 1..=max parallelism, else 400), recorded ([`Stats::rescales`]) and applied at
//! once, as the adaptive scheduler does once its cooldown is over: the vertices take the upper
//! bounds as parallelism and the job's RUNNING timestamp moves to now.
//!
//! Every request is counted per endpoint (the route template, as the autoscaler's request metrics
//! name it). [`FakeJobManager::stats`] and `GET /_fake/stats` give the counts and every rescale;
//! `POST /_fake/stall?ms=N` (or [`FakeJobManager::stall_for`]) holds every answer for N ms, to
//! test timeouts.
//!
//! # The workload
//!
//! Job `j` reads `1000 * (1 + j % 5)` records/s through a chain of V vertices (vertex 0 the source,
//! REBALANCE then HASH edges). Vertex `v` starts at parallelism `1 + (j + v) % 4` with a
//! utilization of 0.5 to 0.7, inside the autoscaler's default band, so it is left alone. Every
//! `hot_every`-th job has vertex 1 at utilization 1.4: the source is backpressured, its
//! `pendingRecords` grows, and the autoscaler scales vertex 1 up.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use flink_fake_jobmanager::{FakeConfig, FakeJobManager};
//! let fake = FakeJobManager::new(FakeConfig { jobs: 3, vertices: 4, ..FakeConfig::default() });
//! let running = fake.start("127.0.0.1:0".parse().expect("address")).await?;
//! println!("Flink REST at {}", running.url());
//! // ... run the autoscaler against it ...
//! let stats = running.fake().stats();
//! println!("{} requests, {} rescales", stats.total_requests, stats.rescales.len());
//! running.stop().await;
//! # Ok(()) }
//! ```

pub mod bench;
mod server;
mod workload;

use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use workload::VertexRates;

/// The Flink version the fake claims to be (the recorded answers are from it).
pub const FLINK_VERSION: &str = "2.3.0";
/// Max parallelism of every vertex.
pub const MAX_PARALLELISM: u32 = 128;

/// What the fake serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeConfig {
    /// Number of jobs.
    pub jobs: usize,
    /// Vertices per job (at least 1; vertex 0 is the source).
    pub vertices: usize,
    /// Every `hot_every`-th job (job 0, `hot_every`, ...) has a bottleneck; 0 for none.
    pub hot_every: usize,
    /// Whether sources report `pendingRecords` (a Kafka source does, a datagen source does not).
    pub pending_records: bool,
    /// How long before the fake starts the jobs switched to RUNNING (so that the autoscaler's
    /// stabilization period may already be over).
    pub running_for: Duration,
    /// Slots the cluster reports (`taskSlotsTotal`); half of them are free.
    pub task_slots: u32,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            jobs: 1,
            vertices: 4,
            hot_every: 0,
            pending_records: true,
            running_for: Duration::from_secs(3600),
            task_slots: 1_000_000,
        }
    }
}

/// The endpoints the fake serves, by route template (the names of [`Stats::requests`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// `GET /jobs/overview`.
    JobsOverview,
    /// `GET /jobs/:jobid`.
    JobDetails,
    /// `GET /jobs/:jobid/status`.
    JobStatus,
    /// `GET /jobs/:jobid/plan`.
    JobPlan,
    /// `GET /jobs/:jobid/config`.
    JobConfig,
    /// `GET /jobs/:jobid/jobmanager/config`.
    JobJobManagerConfig,
    /// `GET /jobs/:jobid/metrics`.
    JobMetrics,
    /// `GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics` without `get`: the metric names.
    VertexMetricNames,
    /// `GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics?get=...`: aggregated values.
    VertexMetricValues,
    /// `GET /jobs/:jobid/resource-requirements`.
    ResourceRequirementsGet,
    /// `PUT /jobs/:jobid/resource-requirements`.
    ResourceRequirementsPut,
    /// `GET /jobmanager/config`.
    JobManagerConfig,
    /// `GET /jobmanager/metrics`.
    JobManagerMetrics,
    /// `GET /taskmanagers/metrics`.
    TaskManagersMetrics,
    /// Anything else (answered 404).
    Other,
}

impl Endpoint {
    /// Every endpoint, in counter order.
    pub const ALL: [Endpoint; 15] = [
        Endpoint::JobsOverview,
        Endpoint::JobDetails,
        Endpoint::JobStatus,
        Endpoint::JobPlan,
        Endpoint::JobConfig,
        Endpoint::JobJobManagerConfig,
        Endpoint::JobMetrics,
        Endpoint::VertexMetricNames,
        Endpoint::VertexMetricValues,
        Endpoint::ResourceRequirementsGet,
        Endpoint::ResourceRequirementsPut,
        Endpoint::JobManagerConfig,
        Endpoint::JobManagerMetrics,
        Endpoint::TaskManagersMetrics,
        Endpoint::Other,
    ];

    /// The method and route template, e.g. `GET /jobs/:jobid`.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::JobsOverview => "GET /jobs/overview",
            Endpoint::JobDetails => "GET /jobs/:jobid",
            Endpoint::JobStatus => "GET /jobs/:jobid/status",
            Endpoint::JobPlan => "GET /jobs/:jobid/plan",
            Endpoint::JobConfig => "GET /jobs/:jobid/config",
            Endpoint::JobJobManagerConfig => "GET /jobs/:jobid/jobmanager/config",
            Endpoint::JobMetrics => "GET /jobs/:jobid/metrics",
            Endpoint::VertexMetricNames => "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics (names)",
            Endpoint::VertexMetricValues => "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics?get",
            Endpoint::ResourceRequirementsGet => "GET /jobs/:jobid/resource-requirements",
            Endpoint::ResourceRequirementsPut => "PUT /jobs/:jobid/resource-requirements",
            Endpoint::JobManagerConfig => "GET /jobmanager/config",
            Endpoint::JobManagerMetrics => "GET /jobmanager/metrics",
            Endpoint::TaskManagersMetrics => "GET /taskmanagers/metrics",
            Endpoint::Other => "other",
        }
    }

    fn index(self) -> usize {
        Endpoint::ALL
            .iter()
            .position(|e| *e == self)
            .unwrap_or(Endpoint::ALL.len() - 1)
    }
}

/// One rescale the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rescale {
    /// The job.
    pub job_id: String,
    /// The new parallelism (upper bound) of every vertex, by vertex id.
    pub parallelism: BTreeMap<String, u32>,
    /// When it was accepted, ms since the epoch.
    pub at_ms: i64,
}

/// What the fake has been asked so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Requests per endpoint ([`Endpoint::name`]); endpoints never asked are absent.
    pub requests: BTreeMap<String, u64>,
    /// All requests, `/_fake/*` excluded.
    pub total_requests: u64,
    /// Every accepted rescale, oldest first.
    pub rescales: Vec<Rescale>,
}

impl Stats {
    /// Requests to `endpoint`.
    pub fn count(&self, endpoint: Endpoint) -> u64 {
        self.requests.get(endpoint.name()).copied().unwrap_or(0)
    }

    /// Accepted rescales per job id.
    pub fn rescales_per_job(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for rescale in &self.rescales {
            *out.entry(rescale.job_id.clone()).or_insert(0) += 1;
        }
        out
    }
}

/// The fake's state, shared by its handlers. Cheap to clone.
#[derive(Clone)]
pub struct FakeJobManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FakeJobManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeJobManager")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Shared {
    pub(crate) config: FakeConfig,
    pub(crate) jobs: Vec<Job>,
    pub(crate) by_id: HashMap<String, usize>,
    /// Per vertex index: the metric names answer and the set of names.
    pub(crate) names: Vec<(Bytes, HashSet<String>)>,
    pub(crate) overview: Bytes,
    pub(crate) job_configuration: Bytes,
    pub(crate) tm_metrics: Vec<(String, f64)>,
    counters: Vec<AtomicU64>,
    rescales: Mutex<Vec<Rescale>>,
    stall_until_ms: AtomicI64,
}

pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) index: usize,
    pub(crate) hot: bool,
    pub(crate) vertex_ids: Vec<String>,
    pub(crate) live: Mutex<Live>,
}

/// What changes when a job is rescaled.
pub(crate) struct Live {
    pub(crate) parallelism: Vec<u32>,
    pub(crate) lower: Vec<u32>,
    pub(crate) upper: Vec<u32>,
    pub(crate) running_since_ms: i64,
    pub(crate) start_ms: i64,
    pub(crate) rescales: u32,
    pub(crate) rates: Vec<VertexRates>,
}

impl Job {
    pub(crate) fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The vertex index of `vertex_id`, if it is one of this job's.
    pub(crate) fn vertex_index(&self, vertex_id: &str) -> Option<usize> {
        self.vertex_ids.iter().position(|v| v == vertex_id)
    }

    /// The name of vertex `v` (what Flink shows) and the prefix of its operator metrics.
    pub(crate) fn vertex_name(v: usize) -> (String, String) {
        if v == 0 {
            ("Source: src".to_owned(), "Source__src".to_owned())
        } else {
            (format!("op-{v}"), format!("op-{v}"))
        }
    }
}

/// A deterministic 64-bit mix (splitmix64), for ids.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The id of job `j`: 32 hex digits, the same on every run.
pub fn job_id(job: usize) -> String {
    let j = job as u64;
    format!("{:016x}{:016x}", mix(j), mix(j ^ 0xF11C))
}

/// The id of vertex `v` of job `j`.
pub fn vertex_id(job: usize, vertex: usize) -> String {
    let j = job as u64;
    format!("{:016x}{:016x}", mix(j ^ 0x5EED), mix((j << 16) ^ vertex as u64))
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

const NAMES_OPERATOR: &str = include_str!("../fixtures/vertex-subtask-metrics-list.json");
const NAMES_SOURCE: &str = include_str!("../fixtures/vertex-subtask-metrics-list-source.json");
const JOB_CONFIGURATION: &str = include_str!("../fixtures/job-jobmanager-config.json");
const TM_METRICS: &str = include_str!("../fixtures/taskmanagers-metrics.json");

/// The recorded metric names of a vertex, with the recorded operator's name replaced by `prefix`.
fn metric_names(v: usize, prefix: &str, pending_records: bool) -> Vec<String> {
    #[derive(Deserialize)]
    struct Name {
        id: String,
    }
    let (recorded, recorded_prefix) = if v == 0 {
        (NAMES_SOURCE, "Source__datagen")
    } else {
        (NAMES_OPERATOR, "expensive-keyed")
    };
    let names: Vec<Name> = serde_json::from_str(recorded).unwrap_or_default();
    let mut names: Vec<String> = names
        .into_iter()
        .map(|n| n.id.replace(recorded_prefix, prefix))
        .collect();
    if v == 0 && pending_records {
        names.push(format!("{prefix}.pendingRecords"));
    }
    names
}

impl FakeJobManager {
    /// A fake with the jobs of `config`, RUNNING since `config.running_for` ago.
    pub fn new(config: FakeConfig) -> Self {
        let vertices = config.vertices.max(1);
        let config = FakeConfig { vertices, ..config };
        let started = now_ms();
        let running_since = started - i64::try_from(config.running_for.as_millis()).unwrap_or(0);
        let jobs: Vec<Job> = (0..config.jobs)
            .map(|j| {
                let hot = config.hot_every > 0 && j % config.hot_every == 0;
                let parallelism: Vec<u32> = (0..vertices).map(|v| workload::initial_parallelism(j, v)).collect();
                Job {
                    id: job_id(j),
                    name: format!("fake-job-{j}"),
                    index: j,
                    hot,
                    vertex_ids: (0..vertices).map(|v| vertex_id(j, v)).collect(),
                    live: Mutex::new(Live {
                        rates: workload::vertex_rates(j, hot, &parallelism),
                        lower: vec![1; vertices],
                        upper: parallelism.clone(),
                        parallelism,
                        running_since_ms: running_since,
                        start_ms: running_since - 1000,
                        rescales: 0,
                    }),
                }
            })
            .collect();
        let by_id = jobs.iter().map(|j| (j.id.clone(), j.index)).collect();
        let names = (0..vertices)
            .map(|v| {
                let (_, prefix) = Job::vertex_name(v);
                let names = metric_names(v, &prefix, config.pending_records);
                let body =
                    serde_json::to_vec(&names.iter().map(|n| serde_json::json!({ "id": n })).collect::<Vec<_>>())
                        .unwrap_or_default();
                (body.into(), names.into_iter().collect())
            })
            .collect();
        let tm_metrics: Vec<(String, f64)> = serde_json::from_str::<Vec<serde_json::Value>>(TM_METRICS)
            .unwrap_or_default()
            .iter()
            .filter_map(|m| Some((m.get("id")?.as_str()?.to_owned(), m.get("avg")?.as_f64()?)))
            // Reported by every task manager, though not asked for in the recording.
            .chain([("Status.JVM.Memory.Metaspace.Used".to_owned(), 9.6e7)])
            .collect();
        let mut shared = Shared {
            config,
            jobs,
            by_id,
            names,
            overview: Bytes::new(),
            job_configuration: Bytes::from_static(JOB_CONFIGURATION.as_bytes()),
            tm_metrics,
            counters: Endpoint::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            rescales: Mutex::new(Vec::new()),
            stall_until_ms: AtomicI64::new(0),
        };
        shared.overview = server::overview_body(&shared, started).into();
        Self {
            shared: Arc::new(shared),
        }
    }

    /// The configuration served.
    pub fn config(&self) -> &FakeConfig {
        &self.shared.config
    }

    /// The ids of the jobs, job 0 first.
    pub fn job_ids(&self) -> Vec<String> {
        self.shared.jobs.iter().map(|j| j.id.clone()).collect()
    }

    /// The current parallelism of every vertex of `job_id`, vertex 0 first.
    pub fn parallelism(&self, job_id: &str) -> Option<Vec<u32>> {
        let index = *self.shared.by_id.get(job_id)?;
        Some(self.shared.jobs[index].live().parallelism.clone())
    }

    /// Requests per endpoint and every rescale so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Holds every answer (`/_fake/*` excepted) until `duration` from now.
    pub fn stall_for(&self, duration: Duration) {
        self.shared.stall_for(duration);
    }

    /// Serves on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, server::router(self.shared))
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Binds `addr` (port 0 picks a free port) and serves in a task of the current runtime.
    pub async fn start(self, addr: SocketAddr) -> std::io::Result<RunningFakeJobManager> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.clone().serve(listener, async {
            let _ = stopped.await;
        }));
        Ok(RunningFakeJobManager {
            addr,
            fake: self,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

impl Shared {
    pub(crate) fn count(&self, endpoint: Endpoint) {
        self.counters[endpoint.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stall_until_ms(&self) -> i64 {
        self.stall_until_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn stall_for(&self, duration: Duration) {
        let until = now_ms() + i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 2);
        self.stall_until_ms.store(until, Ordering::Relaxed);
    }

    pub(crate) fn record_rescale(&self, rescale: Rescale) {
        lock(&self.rescales).push(rescale);
    }

    pub(crate) fn stats(&self) -> Stats {
        let mut requests = BTreeMap::new();
        let mut total = 0;
        for (endpoint, counter) in Endpoint::ALL.iter().zip(&self.counters) {
            let n = counter.load(Ordering::Relaxed);
            total += n;
            if n > 0 {
                requests.insert(endpoint.name().to_owned(), n);
            }
        }
        Stats {
            requests,
            total_requests: total,
            rescales: lock(&self.rescales).clone(),
        }
    }
}

/// A fake serving in the background; [`RunningFakeJobManager::stop`] ends it (dropping it ends it too).
#[derive(Debug)]
pub struct RunningFakeJobManager {
    addr: SocketAddr,
    fake: FakeJobManager,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl RunningFakeJobManager {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its REST base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The fake (stats, stalls, parallelism).
    pub fn fake(&self) -> &FakeJobManager {
        &self.fake
    }

    /// Stops serving and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningFakeJobManager {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_deterministic_and_distinct() {
        assert_eq!(job_id(7), job_id(7));
        assert_eq!(job_id(7).len(), 32);
        let ids: HashSet<String> = (0..10_000).map(job_id).collect();
        assert_eq!(ids.len(), 10_000);
        let vertices: HashSet<String> = (0..100).flat_map(|j| (0..10).map(move |v| vertex_id(j, v))).collect();
        assert_eq!(vertices.len(), 1000);
    }

    #[test]
    fn the_recorded_names_are_renamed_per_vertex() {
        let source = metric_names(0, "Source__src", true);
        assert!(source.iter().any(|n| n == "Source__src.numRecordsInPerSecond"));
        assert!(source.iter().any(|n| n == "Source__src.pendingRecords"));
        assert!(!source.iter().any(|n| n.contains("datagen")));
        let operator = metric_names(3, "op-3", true);
        assert!(operator.iter().any(|n| n == "op-3.numRecordsIn"));
        assert!(operator.iter().any(|n| n == "busyTimeMsPerSecond"));
        assert!(operator.len() > 50);
    }
}
