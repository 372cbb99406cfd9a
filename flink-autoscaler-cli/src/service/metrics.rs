//! The autoscaler's Prometheus series.
//!
//! Two kinds, two paths:
//!
//! - **Per-job and per-source series** live in [`ServiceMetrics`] (one [`JobSeries`] per job, one
//!   entry per source) and are rendered **at scrape time**: a job's counters, its info, and, with
//!   [`MetricsDetail::Vertex`], the gauges of its latest evaluation. A cycle only swaps one `Arc`
//!   and bumps atomics, so exporting a dag-100 job costs the cycle nothing measurable; the work
//!   happens when Prometheus scrapes. A job's series go away with [`ServiceMetrics::remove_job`],
//!   which the service calls when the control loop cleans the job up.
//! - **Process-wide series** (cycle duration histogram, source fetch latency, REST request latency
//!   and failures per endpoint, state flush latency and failures) go through the [`metrics`]
//!   facade, so a library user gets them in whatever recorder they install; the binary installs
//!   `metrics-exporter-prometheus` and appends its rendering to the series above. The REST series
//!   are emitted by the realizer's client ([`autoscaler_realizer::rest::FlinkRestClient`]) and the
//!   flush series by the state stores ([`autoscaler_state::AnyStateStore`]) themselves, so they need
//!   no wrapper. [`init_error_counters`] registers every error counter at 0 for every source (and
//!   the store), so the first failure shows in `increase()`.
//!
//! Names follow the Prometheus conventions: the unit last (`_seconds`, `_bytes`, `_ratio`,
//! `_records_per_second`, `_records`), `_total` for counters, a window average a series of its own
//! (`..._average_<unit>`) beside the latest value. Every series and its HELP text is in one table,
//! [`catalogue`]; the README's metric list is generated from it and a test scrapes the binary
//! against that list.
//!
//! Why `metrics` + `metrics-exporter-prometheus` rather than `prometheus-client`: the facade lets
//! library code emit without knowing the exporter (a platform embedding the crates can send the
//! same series to StatsD or OpenTelemetry), and the per-job series, which need removal and
//! scrape-time rendering, are rendered here without any registry.

use autoscaler_core::config::{Configuration, parse_duration};
use autoscaler_core::tuning::MEMORY_TUNING_GAUGE_PREFIX;
use autoscaler_core::{AutoscalerMetricsReporter, GaugeKind, OwnershipStats};
use autoscaler_metrics::{EvaluatedMetrics, EvaluatedScalingMetric, JobTopology, ScalingMetric, VertexId};
use autoscaler_realizer::sources::{JobLabels, SourceObserver};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Name of the cycle duration histogram.
pub const CYCLE_DURATION: &str = "flink_autoscaler_cycle_duration_seconds";
/// Name of the source fetch duration histogram.
pub const SOURCE_FETCH_DURATION: &str = "flink_autoscaler_source_fetch_duration_seconds";
/// Name of the source fetch failure counter.
pub const SOURCE_FETCH_ERRORS: &str = "flink_autoscaler_source_fetch_errors_total";
/// Name of the gauge of the last time each source was listed successfully.
pub const LAST_SUCCESSFUL_CYCLE: &str = "flink_autoscaler_last_successful_cycle_timestamp_seconds";
/// Name of the build information gauge.
pub const BUILD_INFO: &str = "flink_autoscaler_build_info";
/// Gauge of the jobs this replica holds the lease of (replicated operation only).
pub const OWNED_JOBS: &str = "flink_autoscaler_owned_jobs";
/// Gauge of the live replicas this replica sees in the state database, itself included.
pub const HA_REPLICAS: &str = "flink_autoscaler_ha_replicas";
/// Counter of the jobs this replica acquired, released or lost.
pub const OWNERSHIP_CHANGES: &str = "flink_autoscaler_ownership_changes_total";

/// Key of how long `/readyz` stays 200 without any source listed successfully (Flink duration
/// syntax); default three control loop intervals.
pub const READINESS_MAX_STALENESS_KEY: &str = "autoscaler.service.readiness.max-staleness";

/// Histogram buckets (seconds) of the process-wide latency series.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How often the process-wide histograms' samples are folded into their buckets between scrapes.
///
/// The exporter keeps each sample of a histogram until it is folded; it folds at each scrape, so
/// a service nobody scrapes (or scrapes rarely) would otherwise keep every request's latency: at
/// 10,000 jobs, eleven REST requests per job every 10 s, that is about 300 MB an hour.
pub const HISTOGRAM_UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Folds the samples of `handle`'s histograms into their buckets every `period`, for as long as
/// the returned task runs (the upkeep the exporter's own `install` would spawn, which
/// `install_recorder` leaves to its caller). Must be called within a Tokio runtime.
pub fn spawn_histogram_upkeep(
    handle: metrics_exporter_prometheus::PrometheusHandle,
    period: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            handle.run_upkeep();
        }
    })
}

/// How much `/metrics` says about each job (`--metrics-detail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MetricsDetail {
    /// The job's counters and info only: a few hundred bytes per job.
    #[default]
    Job,
    /// Also every evaluated metric of the job and of each of its vertices, the recommended
    /// parallelism and memory tuning's recommendations: a few KB per job.
    Vertex,
}

impl MetricsDetail {
    /// The flag's spelling (`job`, `vertex`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Job => "job",
            Self::Vertex => "vertex",
        }
    }
}

/// `autoscaler.service.readiness.max-staleness` of `conf`, or three `interval`s.
///
/// # Errors
/// The key's value is not a duration.
pub fn readiness_max_staleness(conf: &Configuration, interval: Duration) -> Result<Duration, String> {
    match conf.get(READINESS_MAX_STALENESS_KEY) {
        Some(value) => parse_duration(value).map_err(|e| format!("{READINESS_MAX_STALENESS_KEY}: {value:?}: {e}")),
        None => Ok(interval.saturating_mul(3)),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an evaluated metric is the job's (`EvaluatedMetrics::global`) or a vertex's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Job,
    Vertex,
}

/// One evaluated [`ScalingMetric`] as Prometheus series: the latest value, and the window average
/// for the metrics the evaluation averages.
struct EvaluatedGauge {
    metric: ScalingMetric,
    scope: Scope,
    /// Series of the latest value.
    current: &'static str,
    /// Series of the window average (exactly for the metrics that have one).
    average: Option<&'static str>,
    /// Factor from the evaluation's unit to the series' (milliseconds to seconds).
    scale: f64,
    /// What the value is, for the HELP text.
    what: &'static str,
}

const fn gauge(
    metric: ScalingMetric,
    scope: Scope,
    current: &'static str,
    average: Option<&'static str>,
    what: &'static str,
) -> EvaluatedGauge {
    EvaluatedGauge {
        metric,
        scope,
        current,
        average,
        scale: 1.0,
        what,
    }
}

/// Every evaluated metric but `RECOMMENDED_PARALLELISM` (rendered from the decision, see
/// [`RECOMMENDED_PARALLELISM`]), in the evaluation's order.
const EVALUATED_GAUGES: &[EvaluatedGauge] = {
    use ScalingMetric as M;
    use Scope::{Job, Vertex};
    &[
        gauge(
            M::Load,
            Vertex,
            "flink_autoscaler_vertex_load_ratio",
            Some("flink_autoscaler_vertex_load_average_ratio"),
            "Busy time of the vertex per unit of time (0..1)",
        ),
        gauge(
            M::TrueProcessingRate,
            Vertex,
            "flink_autoscaler_vertex_true_processing_rate_records_per_second",
            Some("flink_autoscaler_vertex_true_processing_rate_average_records_per_second"),
            "Records per second the vertex can process at full utilization",
        ),
        gauge(
            M::ObservedTpr,
            Vertex,
            "flink_autoscaler_vertex_observed_true_processing_rate_records_per_second",
            Some("flink_autoscaler_vertex_observed_true_processing_rate_average_records_per_second"),
            "True processing rate observed under backpressure (sources)",
        ),
        gauge(
            M::TargetDataRate,
            Vertex,
            "flink_autoscaler_vertex_target_data_rate_records_per_second",
            Some("flink_autoscaler_vertex_target_data_rate_average_records_per_second"),
            "Records per second the vertex must sustain",
        ),
        gauge(
            M::CatchUpDataRate,
            Vertex,
            "flink_autoscaler_vertex_catch_up_data_rate_records_per_second",
            None,
            "Extra records per second needed to drain the backlog within the catch-up duration",
        ),
        gauge(
            M::Lag,
            Vertex,
            "flink_autoscaler_vertex_lag_records",
            None,
            "Records pending at the source",
        ),
        gauge(
            M::Parallelism,
            Vertex,
            "flink_autoscaler_vertex_parallelism",
            None,
            "Parallelism of the vertex",
        ),
        gauge(
            M::MaxParallelism,
            Vertex,
            "flink_autoscaler_vertex_max_parallelism",
            None,
            "Maximum parallelism (key groups) of the vertex",
        ),
        gauge(
            M::NumSourcePartitions,
            Vertex,
            "flink_autoscaler_vertex_source_partitions",
            None,
            "Partitions of the source (0 = unknown)",
        ),
        gauge(
            M::ScaleUpRateThreshold,
            Vertex,
            "flink_autoscaler_vertex_scale_up_rate_threshold_records_per_second",
            None,
            "Processing rate below which the vertex is scaled up",
        ),
        gauge(
            M::ScaleDownRateThreshold,
            Vertex,
            "flink_autoscaler_vertex_scale_down_rate_threshold_records_per_second",
            None,
            "Processing rate above which the vertex is scaled down",
        ),
        gauge(
            M::ExpectedProcessingRate,
            Vertex,
            "flink_autoscaler_vertex_expected_processing_rate_records_per_second",
            None,
            "Processing rate expected after the last rescale",
        ),
        gauge(
            M::NumRecordsIn,
            Vertex,
            "flink_autoscaler_vertex_input_records",
            None,
            "Records the vertex has received (all subtasks)",
        ),
        gauge(
            M::NumRecordsInPerSecond,
            Vertex,
            "flink_autoscaler_vertex_input_records_per_second",
            None,
            "Records per second the vertex receives (all subtasks)",
        ),
        gauge(
            M::NumRecordsOut,
            Vertex,
            "flink_autoscaler_vertex_output_records",
            None,
            "Records the vertex has sent (all subtasks)",
        ),
        EvaluatedGauge {
            scale: 0.001,
            ..gauge(
                M::AccumulatedBusyTime,
                Vertex,
                "flink_autoscaler_vertex_accumulated_busy_time_seconds",
                None,
                "Busy time accumulated by the subtasks of the vertex",
            )
        },
        gauge(
            M::GcPressure,
            Job,
            "flink_autoscaler_job_gc_pressure_ratio",
            None,
            "Share of time the job's TaskManagers spend in garbage collection (0..1)",
        ),
        gauge(
            M::HeapMemoryUsed,
            Job,
            "flink_autoscaler_job_heap_memory_used_bytes",
            Some("flink_autoscaler_job_heap_memory_used_average_bytes"),
            "Heap used by the job's TaskManagers",
        ),
        gauge(
            M::ManagedMemoryUsed,
            Job,
            "flink_autoscaler_job_managed_memory_used_bytes",
            Some("flink_autoscaler_job_managed_memory_used_average_bytes"),
            "Managed memory used by the job's TaskManagers",
        ),
        gauge(
            M::MetaspaceMemoryUsed,
            Job,
            "flink_autoscaler_job_metaspace_memory_used_bytes",
            Some("flink_autoscaler_job_metaspace_memory_used_average_bytes"),
            "Metaspace used by the job's TaskManagers",
        ),
        gauge(
            M::HeapMaxUsageRatio,
            Job,
            "flink_autoscaler_job_heap_usage_ratio",
            Some("flink_autoscaler_job_heap_usage_average_ratio"),
            "Heap used over heap maximum of the job's TaskManagers (0..1)",
        ),
        gauge(
            M::NumTaskSlotsUsed,
            Job,
            "flink_autoscaler_job_task_slots_used",
            None,
            "Task slots the job uses",
        ),
        gauge(
            M::Backpressure,
            Vertex,
            "flink_autoscaler_vertex_backpressure_ratio",
            Some("flink_autoscaler_vertex_backpressure_average_ratio"),
            "Backpressured time of the vertex per unit of time (0..1)",
        ),
    ]
};

/// Series of the parallelism the autoscaler recommends per vertex.
pub const RECOMMENDED_PARALLELISM: &str = "flink_autoscaler_vertex_recommended_parallelism";
/// Series of memory tuning's last recommended sizes.
pub const MEMORY_TUNING: &str = "flink_autoscaler_job_memory_tuning_recommended_bytes";
/// Series of the job's name (and YARN application), to join on `source` and `job_id`.
pub const JOB_INFO: &str = "flink_autoscaler_job_info";

const JOB_LABELS: &str = "`source`, `job_id`";
const VERTEX_LABELS: &str = "`source`, `job_id`, `vertex_id`, `vertex_name`";

/// A series family `/metrics` can serve: the one table the renderer's HELP texts, the README's
/// metric list and the scrape test read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The metric name.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its labels, as the README lists them.
    pub labels: &'static str,
    /// The detail level it needs (`None`: process-wide, always served).
    pub detail: Option<MetricsDetail>,
    /// The HELP text.
    pub help: String,
}

fn family(name: &str, kind: &'static str, labels: &'static str, detail: Option<MetricsDetail>, help: &str) -> Family {
    Family {
        name: name.to_owned(),
        kind,
        labels,
        detail,
        help: help.to_owned(),
    }
}

/// The per-job counters: name, HELP, and how to read them.
const JOB_COUNTERS: [(&str, &str); 3] = [
    ("flink_autoscaler_cycles_total", "Autoscaler cycles run for the job."),
    (
        "flink_autoscaler_errors_total",
        "Autoscaler cycles of the job that failed.",
    ),
    (
        "flink_autoscaler_scalings_total",
        "Rescales the autoscaler decided for the job.",
    ),
];

/// The process series of the `metrics-process` collector (Linux: all of them).
const PROCESS_SERIES: &[(&str, &str, &str)] = &[
    (
        "process_cpu_seconds_total",
        "counter",
        "CPU time the process used (user and system), seconds.",
    ),
    ("process_open_fds", "gauge", "File descriptors the process has open."),
    (
        "process_max_fds",
        "gauge",
        "Most file descriptors the process may open.",
    ),
    (
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size of the process.",
    ),
    (
        "process_virtual_memory_max_bytes",
        "gauge",
        "Largest virtual memory the process may use.",
    ),
    (
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory of the process.",
    ),
    (
        "process_start_time_seconds",
        "gauge",
        "Start time of the process, seconds since the Unix epoch.",
    ),
    ("process_threads", "gauge", "Threads of the process."),
];

/// Every series family `/metrics` can serve, in the order of the README's list.
pub fn catalogue() -> Vec<Family> {
    use MetricsDetail::{Job, Vertex};
    let mut out = vec![
        family(
            BUILD_INFO,
            "gauge",
            "`version`, `os`, `arch`",
            None,
            "Always 1: the autoscaler's version and platform.",
        ),
        family(
            LAST_SUCCESSFUL_CYCLE,
            "gauge",
            "`source`",
            None,
            "When the source's jobs were last listed successfully, seconds since the Unix epoch (0: never).",
        ),
        family(
            SOURCE_FETCH_ERRORS,
            "counter",
            "`source`",
            None,
            "Failed listings of the source's jobs.",
        ),
        family(
            OWNED_JOBS,
            "gauge",
            "`replica`",
            None,
            "Jobs this replica holds the lease of, after its last round (only when replicas share a database store).",
        ),
        family(
            HA_REPLICAS,
            "gauge",
            "`replica`",
            None,
            "Live replicas this replica sees in the state database, itself included.",
        ),
        family(
            OWNERSHIP_CHANGES,
            "counter",
            "`replica`",
            None,
            "Jobs this replica acquired, released or lost.",
        ),
        family(
            JOB_INFO,
            "gauge",
            "`source`, `job_id`, `job_name`, `application` (YARN jobs)",
            Some(Job),
            "Always 1: the job's name, to join on source and job_id.",
        ),
    ];
    for (name, help) in JOB_COUNTERS {
        out.push(family(name, "counter", JOB_LABELS, Some(Job), help));
    }
    for g in EVALUATED_GAUGES {
        let labels = match g.scope {
            Scope::Job => JOB_LABELS,
            Scope::Vertex => VERTEX_LABELS,
        };
        out.push(family(
            g.current,
            "gauge",
            labels,
            Some(Vertex),
            &format!("{}, at the last evaluation.", g.what),
        ));
        if let Some(average) = g.average {
            out.push(family(
                average,
                "gauge",
                labels,
                Some(Vertex),
                &format!("{}, averaged over the metric window.", g.what),
            ));
        }
    }
    out.push(family(
        RECOMMENDED_PARALLELISM,
        "gauge",
        VERTEX_LABELS,
        Some(Vertex),
        "The parallelism the autoscaler last recommended for the vertex.",
    ));
    out.push(family(
        MEMORY_TUNING,
        "gauge",
        "`source`, `job_id`, `key` (e.g. `taskmanager.memory.process.size`)",
        Some(Vertex),
        "The TaskManager memory sizes memory tuning last recommended (reported, not applied).",
    ));
    out.push(family(
        JOB_MISCONFIGURED,
        "gauge",
        JOB_LABELS,
        Some(Job),
        "1 while the job's own autoscaler options do not validate (the job is not scaled); absent otherwise.",
    ));
    out.push(family(
        crate::service::config::CONFIG_RELOADS,
        "counter",
        "`outcome` (`applied`, `rejected`)",
        None,
        "Configuration reloads on SIGHUP, by outcome.",
    ));
    out.push(family(
        CYCLE_DURATION,
        "histogram",
        "`source`",
        None,
        "Time of one job's autoscaler cycle.",
    ));
    out.push(family(
        SOURCE_FETCH_DURATION,
        "histogram",
        "`source`",
        None,
        "Time to list the source's jobs.",
    ));
    out.push(family(
        autoscaler_realizer::rest::REST_REQUEST_DURATION,
        "histogram",
        "`source`, `method`, `endpoint` (route template)",
        None,
        "Time of one Flink REST request (each attempt of a retried GET).",
    ));
    out.push(family(
        autoscaler_realizer::rest::REST_REQUEST_ERRORS,
        "counter",
        "`source`, `method`, `endpoint`, `kind`",
        None,
        "Failed Flink REST requests.",
    ));
    out.push(family(
        autoscaler_state::STATE_FLUSH_DURATION,
        "histogram",
        "`store` (`sqlite`, `postgres`, `mysql`)",
        None,
        "Time of one state flush that writes to the database.",
    ));
    out.push(family(
        autoscaler_state::STATE_FLUSH_GROUP_JOBS,
        "histogram",
        "`store`",
        None,
        "Jobs written together by one group commit of state flushes (one sample per transaction).",
    ));
    out.push(family(
        autoscaler_state::STATE_FLUSH_ERRORS,
        "counter",
        "`store`",
        None,
        "Failed state flushes.",
    ));
    out.push(family(
        autoscaler_state::STATE_ROWS_DISCARDED,
        "counter",
        "`store`",
        None,
        "State rows read from the database that could not be decoded, discarded and deleted by the job's next flush.",
    ));
    for (name, kind, help) in PROCESS_SERIES {
        out.push(family(name, kind, "", None, help));
    }
    out
}

/// The README's metric list: one table row per [`catalogue`] family.
pub fn catalogue_markdown() -> String {
    let mut out = String::from("| series | type | labels | detail | meaning |\n|---|---|---|---|---|\n");
    for f in catalogue() {
        let detail = f.detail.map_or("always", MetricsDetail::as_str);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {detail} | {} |",
            f.name, f.kind, f.labels, f.help
        );
    }
    out
}

/// Describes the process-wide series of the `metrics` facade with their [`catalogue`] HELP texts
/// (call once the recorder is installed).
pub fn describe_process_series() {
    for f in catalogue() {
        if !is_facade_series(&f.name) {
            continue;
        }
        let name = f.name.clone();
        match f.kind {
            "histogram" => metrics::describe_histogram!(name, f.help),
            "counter" => metrics::describe_counter!(name, f.help),
            _ => metrics::describe_gauge!(name, f.help),
        }
    }
}

/// The series emitted through the `metrics` facade (the rest are rendered by [`ServiceMetrics`]).
fn is_facade_series(name: &str) -> bool {
    [
        CYCLE_DURATION,
        SOURCE_FETCH_DURATION,
        autoscaler_realizer::rest::REST_REQUEST_DURATION,
        autoscaler_realizer::rest::REST_REQUEST_ERRORS,
        autoscaler_state::STATE_FLUSH_DURATION,
        autoscaler_state::STATE_FLUSH_GROUP_JOBS,
        autoscaler_state::STATE_FLUSH_ERRORS,
        autoscaler_state::STATE_ROWS_DISCARDED,
        crate::service::config::CONFIG_RELOADS,
    ]
    .contains(&name)
}

/// Registers every error counter of the `metrics` facade at 0: the REST errors of every route and
/// kind for each source, and the flush errors and discarded rows of `store` (`sqlite`, `postgres`,
/// `mysql`; `None` for the in-memory store, which never reads or writes a database).
pub fn init_error_counters<'a>(sources: impl IntoIterator<Item = &'a str>, store: Option<&'static str>) {
    use autoscaler_realizer::rest::{REST_REQUEST_ERRORS, ROUTES, RestError};
    for source in sources {
        for (method, endpoint) in ROUTES {
            for kind in RestError::KINDS {
                metrics::counter!(
                    REST_REQUEST_ERRORS,
                    "source" => source.to_owned(),
                    "method" => *method,
                    "endpoint" => *endpoint,
                    "kind" => kind
                )
                .increment(0);
            }
        }
    }
    if let Some(store) = store {
        metrics::counter!(autoscaler_state::STATE_FLUSH_ERRORS, "store" => store).increment(0);
        metrics::counter!(autoscaler_state::STATE_ROWS_DISCARDED, "store" => store).increment(0);
    }
}

/// Vertex id -> name, shared with each rendering of `/metrics`.
type VertexNames = Arc<HashMap<String, String>>;

/// The series of one job. It is the job's [`AutoscalerMetricsReporter`]: the core's `scalings`,
/// `errors`, `RECOMMENDED_PARALLELISM` and `MemoryTuning.*` reports land here; other gauges are
/// ignored (the evaluated metrics arrive whole through [`JobSeries::set_evaluation`]).
#[derive(Debug)]
pub struct JobSeries {
    labels: JobLabels,
    /// `source="..",job_id=".."`, escaped once.
    job_labels: String,
    cycles: AtomicU64,
    errors: AtomicU64,
    scalings: AtomicU64,
    /// Whether the job's own options failed the service's check this cycle.
    misconfigured: AtomicBool,
    evaluation: Mutex<Option<Arc<EvaluatedMetrics>>>,
    /// The last collected topology (shared with the collector), and its vertex id -> name.
    vertex_names: Mutex<(Option<JobTopology>, VertexNames)>,
    recommended: Mutex<BTreeMap<String, f64>>,
    /// Memory tuning's last recommended sizes in bytes, by configuration key.
    memory: Mutex<BTreeMap<String, f64>>,
}

impl JobSeries {
    fn new(labels: JobLabels) -> Self {
        let job_labels = format!(
            "source=\"{}\",job_id=\"{}\"",
            escape(&labels.source),
            escape(&labels.job_id),
        );
        Self {
            labels,
            job_labels,
            cycles: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            scalings: AtomicU64::new(0),
            misconfigured: AtomicBool::new(false),
            evaluation: Mutex::new(None),
            vertex_names: Mutex::new((None, Arc::new(HashMap::new()))),
            recommended: Mutex::new(BTreeMap::new()),
            memory: Mutex::new(BTreeMap::new()),
        }
    }

    /// The job's labels.
    pub fn labels(&self) -> &JobLabels {
        &self.labels
    }

    /// Replaces the latest evaluation (one `Arc` swap).
    pub fn set_evaluation(&self, evaluated: Arc<EvaluatedMetrics>) {
        *lock(&self.evaluation) = Some(evaluated);
    }

    /// Records the vertex names of `topology` when they changed: nothing to do while the
    /// collector hands out the same topology (one pointer comparison), a lookup per vertex when it
    /// built a new one. On a change, the recommended parallelism of vertices the job no longer has
    /// goes away.
    pub fn set_topology(&self, topology: &JobTopology) {
        let mut kept = lock(&self.vertex_names);
        if kept.0.as_ref().is_some_and(|last| last.shares_graph_with(topology)) {
            return;
        }
        let current = &kept.1;
        let same = current.len() == topology.len()
            && topology
                .vertices()
                .iter()
                .all(|v| current.get(v.id.as_str()).map(String::as_str) == Some(v.name.as_deref().unwrap_or("")));
        if !same {
            let names = topology
                .vertices()
                .iter()
                .map(|v| (v.id.as_str().to_owned(), v.name.clone().unwrap_or_default()))
                .collect::<HashMap<_, _>>();
            lock(&self.recommended).retain(|vertex, _| names.contains_key(vertex));
            kept.1 = Arc::new(names);
        }
        kept.0 = Some(topology.clone());
    }

    /// Counts a cycle.
    pub fn count_cycle(&self) {
        self.cycles.fetch_add(1, Ordering::Relaxed);
    }

    /// Records whether the job's own options failed the service's check.
    pub fn set_misconfigured(&self, misconfigured: bool) {
        self.misconfigured.store(misconfigured, Ordering::Relaxed);
    }

    /// `scalings_total` so far.
    pub fn scalings(&self) -> u64 {
        self.scalings.load(Ordering::Relaxed)
    }
}

const RECOMMENDED_SUFFIX: &str = ".RECOMMENDED_PARALLELISM.Current";

impl AutoscalerMetricsReporter for JobSeries {
    /// The evaluated metrics are rendered from the latest evaluation at scrape time, so the cycle
    /// need not compute a gauge per vertex and metric.
    fn wants_gauges(&self) -> bool {
        false
    }

    /// Keeps the recommended parallelism (without formatting a gauge name); ignores the rest.
    fn set_vertex_gauge(&self, vertex: &VertexId, metric: ScalingMetric, kind: GaugeKind, value: f64) {
        if metric == ScalingMetric::RecommendedParallelism && kind == GaugeKind::Current {
            let mut recommended = lock(&self.recommended);
            match recommended.get_mut(vertex.as_str()) {
                Some(slot) => *slot = value,
                None => {
                    recommended.insert(vertex.as_str().to_owned(), value);
                }
            }
        }
    }

    fn increment_counter(&self, name: &str) {
        match name {
            "scalings" => self.scalings.fetch_add(1, Ordering::Relaxed),
            "errors" => self.errors.fetch_add(1, Ordering::Relaxed),
            "cycles" => self.cycles.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }

    fn set_gauge(&self, name: &str, value: f64) {
        if let Some(vertex) = name.strip_suffix(RECOMMENDED_SUFFIX) {
            lock(&self.recommended).insert(vertex.to_owned(), value);
        } else if let Some(key) = name.strip_prefix(MEMORY_TUNING_GAUGE_PREFIX) {
            lock(&self.memory).insert(key.to_owned(), value);
        }
    }
}

/// Whether the service is live and ready (`/livez`, `/readyz`).
#[derive(Debug)]
pub struct Health {
    started: Instant,
    /// Milliseconds from `started` to the last successful listing of any source, plus one; 0 while
    /// none has succeeded.
    listed_at_ms: AtomicU64,
    state_ok: AtomicBool,
    max_staleness: Duration,
    /// The replica's name and job-lease counters, when it shares its jobs with other replicas.
    ownership: std::sync::OnceLock<(String, Arc<OwnershipStats>)>,
}

impl Default for Health {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl Health {
    /// Not ready until a source is listed; then ready while one was listed within `max_staleness`.
    pub fn new(max_staleness: Duration) -> Self {
        Self {
            started: Instant::now(),
            listed_at_ms: AtomicU64::new(0),
            state_ok: AtomicBool::new(true),
            max_staleness,
            ownership: std::sync::OnceLock::new(),
        }
    }

    /// Ready: a source was listed successfully within the staleness bound, and the last state
    /// flush did not fail.
    pub fn is_ready(&self) -> bool {
        self.not_ready_reason().is_none()
    }

    /// How long since a source was last listed successfully (`None`: never).
    pub fn since_last_listing(&self) -> Option<Duration> {
        match self.listed_at_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(self.started.elapsed().saturating_sub(Duration::from_millis(at - 1))),
        }
    }

    /// Why the service is not ready, if it is not.
    pub fn not_ready_reason(&self) -> Option<String> {
        match self.since_last_listing() {
            None => return Some("no job list fetch has succeeded yet".to_owned()),
            Some(age) if age > self.max_staleness => {
                return Some(format!(
                    "no source has been listed successfully for {} s ({READINESS_MAX_STALENESS_KEY} is {} s)",
                    age.as_secs(),
                    self.max_staleness.as_secs_f64()
                ));
            }
            Some(_) => {}
        }
        if let Some((replica, stats)) = self.ownership.get()
            && !stats.last_round_succeeded()
        {
            return Some(format!(
                "replica {replica} cannot renew its job leases in the state database ({} failed rounds so far): its jobs stop at their lease deadlines",
                stats.failed_rounds()
            ));
        }
        if !self.state_ok.load(Ordering::Relaxed) {
            return Some("the state store is unreachable (the last flush failed)".to_owned());
        }
        None
    }

    /// Makes readiness (and the ownership series of `/metrics`) follow the job leases of
    /// `replica`: not ready while the last round of renewals failed. Set once; later calls are
    /// ignored.
    pub fn set_ownership(&self, replica: String, stats: Arc<OwnershipStats>) {
        let _ = self.ownership.set((replica, stats));
    }

    /// Records a successful listing now.
    fn listed(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.listed_at_ms.store(ms + 1, Ordering::Relaxed);
    }

    /// Records a state store operation's outcome.
    pub fn set_state_ok(&self, ok: bool) {
        self.state_ok.store(ok, Ordering::Relaxed);
    }
}

/// What is kept of one source.
#[derive(Debug, Clone, Copy, Default)]
struct SourceSeries {
    fetch_errors: u64,
    /// Seconds since the Unix epoch of the last successful listing; 0 = never.
    last_listed: f64,
}

/// The registry of per-job and per-source series, the health flags, and the renderer of
/// `/metrics`.
#[derive(Debug, Default)]
pub struct ServiceMetrics {
    /// foldhash: two lookups per job-cycle, where SipHash costs more than the rest of a lookup.
    jobs: RwLock<foldhash::HashMap<String, Arc<JobSeries>>>,
    sources: Mutex<BTreeMap<String, SourceSeries>>,
    health: Health,
    detail: MetricsDetail,
}

impl ServiceMetrics {
    /// An empty registry, at [`MetricsDetail::Job`], ready within 30 s of a listing.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry at `detail`, ready while a source was listed within `max_staleness`.
    pub fn with_options(detail: MetricsDetail, max_staleness: Duration) -> Self {
        Self {
            detail,
            health: Health::new(max_staleness),
            ..Self::default()
        }
    }

    /// Health flags.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Declares the sources, so their series exist (at 0) before the first listing.
    pub fn register_sources<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let mut sources = lock(&self.sources);
        for name in names {
            sources.entry(name.to_owned()).or_default();
        }
    }

    /// The series of `labels.job_key`, created on first use.
    pub fn job(&self, labels: &JobLabels) -> Arc<JobSeries> {
        if let Some(series) = self
            .jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&labels.job_key)
            && series.labels == *labels
        {
            return Arc::clone(series);
        }
        let mut jobs = self.jobs.write().unwrap_or_else(PoisonError::into_inner);
        let entry = jobs
            .entry(labels.job_key.clone())
            .or_insert_with(|| Arc::new(JobSeries::new(labels.clone())));
        if entry.labels != *labels {
            // Renamed job: new labels, same counters would be wrong; start over.
            *entry = Arc::new(JobSeries::new(labels.clone()));
        }
        Arc::clone(entry)
    }

    /// The series of a known job.
    pub fn get(&self, job_key: &str) -> Option<Arc<JobSeries>> {
        self.jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(job_key)
            .cloned()
    }

    /// Drops every series of the job (it vanished).
    pub fn remove_job(&self, job_key: &str) {
        self.jobs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(job_key);
    }

    /// Keys of the jobs with series.
    pub fn job_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// The series of this registry in the Prometheus text format (version 0.0.4): build info, the
    /// sources', then the jobs' in key order.
    pub fn render_jobs(&self) -> String {
        let mut jobs: Vec<Arc<JobSeries>> = self
            .jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        jobs.sort_by(|a, b| a.labels.job_key.cmp(&b.labels.job_key));
        let helps: HashMap<String, String> = catalogue().into_iter().map(|f| (f.name, f.help)).collect();
        let help = |name: &str| helps.get(name).map_or("", String::as_str);
        let per_job = match self.detail {
            MetricsDetail::Job => 400,
            MetricsDetail::Vertex => 4096,
        };
        let mut out = String::with_capacity(4096 + jobs.len() * per_job);
        let mut header = |out: &mut String, name: &str, kind: &str| {
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", help(name));
        };

        header(&mut out, BUILD_INFO, "gauge");
        let _ = writeln!(
            out,
            "{BUILD_INFO}{{version=\"{}\",os=\"{}\",arch=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH
        );
        let sources = lock(&self.sources).clone();
        header(&mut out, LAST_SUCCESSFUL_CYCLE, "gauge");
        for (source, s) in &sources {
            let _ = writeln!(
                out,
                "{LAST_SUCCESSFUL_CYCLE}{{source=\"{}\"}} {}",
                escape(source),
                number(s.last_listed)
            );
        }
        header(&mut out, SOURCE_FETCH_ERRORS, "counter");
        for (source, s) in &sources {
            let _ = writeln!(
                out,
                "{SOURCE_FETCH_ERRORS}{{source=\"{}\"}} {}",
                escape(source),
                s.fetch_errors
            );
        }

        if let Some((replica, stats)) = self.health.ownership.get() {
            let replica = escape(replica);
            for (name, kind, value) in [
                (OWNED_JOBS, "gauge", stats.owned_jobs()),
                (HA_REPLICAS, "gauge", stats.live_replicas()),
                (OWNERSHIP_CHANGES, "counter", stats.ownership_changes()),
            ] {
                header(&mut out, name, kind);
                let _ = writeln!(out, "{name}{{replica=\"{replica}\"}} {value}");
            }
        }

        header(&mut out, JOB_INFO, "gauge");
        for job in &jobs {
            let l = &job.labels;
            let application = l
                .application
                .as_deref()
                .map(|a| format!(",application=\"{}\"", escape(a)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{JOB_INFO}{{{},job_name=\"{}\"{application}}} 1",
                job.job_labels,
                escape(&l.job_name)
            );
        }
        let counters: [&dyn Fn(&JobSeries) -> u64; 3] = [
            &|s| s.cycles.load(Ordering::Relaxed),
            &|s| s.errors.load(Ordering::Relaxed),
            &|s| s.scalings.load(Ordering::Relaxed),
        ];
        for ((name, _), read) in JOB_COUNTERS.iter().zip(counters) {
            header(&mut out, name, "counter");
            for job in &jobs {
                let _ = writeln!(out, "{name}{{{}}} {}", job.job_labels, read(job));
            }
        }
        render_misconfigured(&jobs, &mut out);
        if self.detail == MetricsDetail::Vertex {
            self.render_evaluations(&jobs, &mut out, &mut header);
        }
        out
    }

    /// The per-vertex and job-wide gauges of [`MetricsDetail::Vertex`].
    fn render_evaluations(
        &self,
        jobs: &[Arc<JobSeries>],
        out: &mut String,
        header: &mut dyn FnMut(&mut String, &str, &str),
    ) {
        // One consistent view per job for the whole rendering, with its vertices' labels.
        let views: Vec<JobView<'_>> = jobs
            .iter()
            .map(|j| {
                let names = Arc::clone(&lock(&j.vertex_names).1);
                let evaluation = lock(&j.evaluation).clone();
                let mut vertex_labels = HashMap::new();
                let mut add = |id: &str| {
                    if !vertex_labels.contains_key(id) {
                        vertex_labels.insert(id.to_owned(), vertex_label(j, id, &names));
                    }
                };
                for vertex in evaluation.iter().flat_map(|e| e.vertices.keys()) {
                    add(vertex.as_str());
                }
                for vertex in lock(&j.recommended).keys() {
                    add(vertex);
                }
                (&**j, evaluation, vertex_labels)
            })
            .collect();
        for g in EVALUATED_GAUGES {
            for (series, average) in [(Some(g.current), false), (g.average, true)] {
                let Some(name) = series else { continue };
                let mut started = false;
                for (job, evaluation, vertex_labels) in &views {
                    let Some(evaluation) = evaluation else { continue };
                    let pick = |m: &EvaluatedScalingMetric| if average { m.average } else { m.current };
                    let mut sample = |out: &mut String, labels: &str, value: f64| {
                        if value.is_nan() {
                            return;
                        }
                        if !started {
                            header(out, name, "gauge");
                            started = true;
                        }
                        let _ = writeln!(out, "{name}{{{labels}}} {}", number(value * g.scale));
                    };
                    match g.scope {
                        Scope::Job => {
                            if let Some(m) = evaluation.global.get(g.metric) {
                                sample(out, &job.job_labels, pick(&m));
                            }
                        }
                        Scope::Vertex => {
                            for (vertex, values) in &evaluation.vertices {
                                if let (Some(m), Some(labels)) =
                                    (values.get(g.metric), vertex_labels.get(vertex.as_str()))
                                {
                                    sample(out, labels, pick(&m));
                                }
                            }
                        }
                    }
                }
            }
        }
        header(out, RECOMMENDED_PARALLELISM, "gauge");
        for (job, _, vertex_labels) in &views {
            for (vertex, value) in lock(&job.recommended).iter() {
                if let Some(labels) = vertex_labels.get(vertex) {
                    let _ = writeln!(out, "{RECOMMENDED_PARALLELISM}{{{labels}}} {}", number(*value));
                }
            }
        }
        header(out, MEMORY_TUNING, "gauge");
        for (job, _, _) in &views {
            for (key, value) in lock(&job.memory).iter() {
                let _ = writeln!(
                    out,
                    "{MEMORY_TUNING}{{{},key=\"{}\"}} {}",
                    job.job_labels,
                    escape(key),
                    number(*value)
                );
            }
        }
    }
}

/// Name of the gauge of a job whose own options do not validate.
pub const JOB_MISCONFIGURED: &str = "flink_autoscaler_job_misconfigured";

/// `flink_autoscaler_job_misconfigured{source,job_id}`: 1 while the job's own options fail the
/// service's check. Only those jobs have the series (an alert tests `== 1`), which keeps the
/// job-level scrape small at fleet scale.
fn render_misconfigured(jobs: &[Arc<JobSeries>], out: &mut String) {
    let mut header = true;
    for job in jobs.iter().filter(|j| j.misconfigured.load(Ordering::Relaxed)) {
        if std::mem::take(&mut header) {
            let _ = writeln!(
                out,
                "# HELP {JOB_MISCONFIGURED} 1 while the job's own autoscaler options do not validate (the job is not scaled); absent otherwise.\n# TYPE {JOB_MISCONFIGURED} gauge"
            );
        }
        let _ = writeln!(
            out,
            "{JOB_MISCONFIGURED}{{source=\"{}\",job_id=\"{}\"}} 1",
            escape(&job.labels.source),
            escape(&job.labels.job_id),
        );
    }
}

/// One job's series as seen by one rendering: the job, its latest evaluation, the labels of
/// its vertices by id.
type JobView<'a> = (&'a JobSeries, Option<Arc<EvaluatedMetrics>>, HashMap<String, String>);

fn vertex_label(job: &JobSeries, vertex: &str, names: &HashMap<String, String>) -> String {
    format!(
        "{},vertex_id=\"{}\",vertex_name=\"{}\"",
        job.job_labels,
        escape(vertex),
        escape(names.get(vertex).map_or("", String::as_str))
    )
}

/// A sample value in the text format.
fn number(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        v.to_string()
    }
}

/// A label value escaped for the text format (backslash, double quote, newline).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64 / 1000.0)
}

impl SourceObserver for ServiceMetrics {
    fn job_reporter(&self, labels: &JobLabels) -> Arc<dyn AutoscalerMetricsReporter> {
        self.job(labels)
    }

    fn source_fetched(&self, source: &str, outcome: Result<usize, &str>, elapsed: Duration) {
        metrics::histogram!(SOURCE_FETCH_DURATION, "source" => source.to_owned()).record(elapsed.as_secs_f64());
        if outcome.is_err() {
            lock(&self.sources).entry(source.to_owned()).or_default().fetch_errors += 1;
        }
    }

    fn source_listed(&self, source: &str) {
        lock(&self.sources).entry(source.to_owned()).or_default().last_listed = unix_now();
        self.health.listed();
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::{EvaluatedVertexMetrics, VertexSpec};

    fn vertex_detail() -> ServiceMetrics {
        ServiceMetrics::with_options(MetricsDetail::Vertex, Duration::from_secs(30))
    }

    fn labels(key: &str, name: &str) -> JobLabels {
        JobLabels {
            job_key: format!("prod/{key}"),
            source: "prod".into(),
            application: None,
            job_id: key.into(),
            job_name: name.into(),
        }
    }

    #[test]
    fn memory_tuning_recommendations_render_one_gauge_per_size() {
        let metrics = vertex_detail();
        let series = metrics.job(&labels("j1", "orders"));
        // What the core reports with a recommendation (`MemoryRecommendation::gauges`).
        series.set_gauge("MemoryTuning.taskmanager.memory.process.size", 1_079_430_352.0);
        series.set_gauge("MemoryTuning.taskmanager.memory.jvm-metaspace.size", 100_663_296.0);
        let text = metrics.render_jobs();
        let job = r#"source="prod",job_id="j1""#;
        assert!(
            text.contains("# TYPE flink_autoscaler_job_memory_tuning_recommended_bytes gauge\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "flink_autoscaler_job_memory_tuning_recommended_bytes{{{job},key=\"taskmanager.memory.process.size\"}} 1079430352\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "flink_autoscaler_job_memory_tuning_recommended_bytes{{{job},key=\"taskmanager.memory.jvm-metaspace.size\"}} 100663296\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn per_vertex_series_render_from_the_latest_evaluation_and_vanish_with_the_job() {
        let metrics = vertex_detail();
        let series = metrics.job(&labels("j1", "orders \"eu\""));
        let mut vertex = EvaluatedVertexMetrics::default();
        vertex.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric {
                current: f64::NAN,
                average: 1052.5,
            },
        );
        vertex.insert(ScalingMetric::Parallelism, EvaluatedScalingMetric::of(2.0));
        vertex.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(0.0));
        let mut evaluated = EvaluatedMetrics::default();
        evaluated.vertices.insert(VertexId::new("v1"), vertex);
        evaluated.global.insert(
            ScalingMetric::HeapMaxUsageRatio,
            EvaluatedScalingMetric {
                current: 0.5,
                average: 0.25,
            },
        );
        evaluated
            .global
            .insert(ScalingMetric::NumTaskSlotsUsed, EvaluatedScalingMetric::of(8.0));
        series.set_evaluation(Arc::new(evaluated));
        let topology =
            JobTopology::new(vec![VertexSpec::new("v1", 2, 128).with_name("Sink")], vec![]).expect("topology");
        series.set_topology(&topology);
        assert!(
            !series.wants_gauges(),
            "evaluated metrics are rendered from the evaluation"
        );
        series.set_vertex_gauge(
            &VertexId::new("v1"),
            ScalingMetric::RecommendedParallelism,
            GaugeKind::Current,
            3.0,
        );
        series.set_vertex_gauge(&VertexId::new("v1"), ScalingMetric::Lag, GaugeKind::Current, 99.0);
        assert_eq!(lock(&series.recommended).get("v1"), Some(&3.0));
        series.set_gauge("v1.RECOMMENDED_PARALLELISM.Current", 4.0);
        series.set_gauge("v1.TRUE_PROCESSING_RATE.Current", 9.0);
        series.increment_counter("scalings");
        series.count_cycle();

        let text = metrics.render_jobs();
        let job = r#"source="prod",job_id="j1",vertex_id="v1",vertex_name="Sink""#;
        assert!(
            text.contains(&format!(
                "flink_autoscaler_vertex_true_processing_rate_average_records_per_second{{{job}}} 1052.5\n"
            )),
            "{text}"
        );
        // NaN current: no sample.
        assert!(
            !text.contains("flink_autoscaler_vertex_true_processing_rate_records_per_second{"),
            "{text}"
        );
        assert!(!text.contains("NaN"), "{text}");
        assert!(
            text.contains(&format!("flink_autoscaler_vertex_parallelism{{{job}}} 2\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_vertex_recommended_parallelism{{{job}}} 4\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_vertex_lag_records{{{job}}} 0\n")),
            "{text}"
        );
        // Job-wide metrics carry the job's labels only; the name is in the job's info.
        let job_only = r#"source="prod",job_id="j1""#;
        assert!(
            text.contains(&format!(
                "flink_autoscaler_job_heap_usage_average_ratio{{{job_only}}} 0.25\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_job_heap_usage_ratio{{{job_only}}} 0.5\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_job_task_slots_used{{{job_only}}} 8\n")),
            "{text}"
        );
        assert!(
            text.contains(
                "flink_autoscaler_job_info{source=\"prod\",job_id=\"j1\",job_name=\"orders \\\"eu\\\"\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("flink_autoscaler_scalings_total{source=\"prod\",job_id=\"j1\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("flink_autoscaler_cycles_total{source=\"prod\",job_id=\"j1\"} 1\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE flink_autoscaler_vertex_true_processing_rate_average_records_per_second gauge")
                .count(),
            1
        );
        // At the job level, none of the evaluated series.
        let job_level = ServiceMetrics::new();
        let series = job_level.job(&labels("j1", "orders"));
        series.set_evaluation(Arc::new(EvaluatedMetrics::default()));
        let text = job_level.render_jobs();
        assert!(!text.contains("flink_autoscaler_vertex_"), "{text}");
        assert!(
            text.contains("flink_autoscaler_cycles_total{source=\"prod\",job_id=\"j1\"} 0\n"),
            "{text}"
        );

        metrics.remove_job("prod/j1");
        let text = metrics.render_jobs();
        assert!(!text.contains("j1"), "{text}");
    }

    #[test]
    fn recommendations_of_vanished_vertices_go_with_the_topology_change() {
        let metrics = vertex_detail();
        let series = metrics.job(&labels("j1", "orders"));
        let topology = |ids: &[&str]| {
            JobTopology::new(ids.iter().map(|id| VertexSpec::new(*id, 1, 128)).collect(), vec![]).expect("topology")
        };
        series.set_topology(&topology(&["a", "b"]));
        series.set_gauge("a.RECOMMENDED_PARALLELISM.Current", 2.0);
        series.set_gauge("b.RECOMMENDED_PARALLELISM.Current", 3.0);
        assert!(metrics.render_jobs().contains("vertex_id=\"b\""));
        // The job was redeployed without `b`.
        series.set_topology(&topology(&["a", "c"]));
        let text = metrics.render_jobs();
        assert!(!text.contains("vertex_id=\"b\""), "{text}");
        assert!(
            text.contains(
                "flink_autoscaler_vertex_recommended_parallelism{source=\"prod\",job_id=\"j1\",vertex_id=\"a\",vertex_name=\"\"} 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn readiness_needs_a_fetch_and_a_healthy_store() {
        let metrics = ServiceMetrics::new();
        assert!(!metrics.health().is_ready());
        metrics.source_fetched("prod", Err("down"), Duration::ZERO);
        assert!(!metrics.health().is_ready());
        metrics.source_listed("prod");
        assert!(metrics.health().is_ready());
        metrics.health().set_state_ok(false);
        assert_eq!(
            metrics.health().not_ready_reason().as_deref(),
            Some("the state store is unreachable (the last flush failed)")
        );
    }

    #[test]
    fn readiness_ends_once_no_source_was_listed_within_the_staleness_bound() {
        let metrics = ServiceMetrics::with_options(MetricsDetail::Job, Duration::from_millis(50));
        metrics.source_listed("prod");
        assert!(metrics.health().is_ready());
        std::thread::sleep(Duration::from_millis(120));
        metrics.source_fetched("prod", Err("down"), Duration::ZERO);
        let reason = metrics.health().not_ready_reason().unwrap_or_default();
        assert!(reason.contains("no source has been listed successfully"), "{reason}");
        metrics.source_listed("prod");
        assert!(metrics.health().is_ready());
    }

    #[test]
    fn readiness_staleness_defaults_to_three_intervals() {
        let interval = Duration::from_secs(10);
        assert_eq!(
            readiness_max_staleness(&Configuration::new(), interval),
            Ok(Duration::from_secs(30))
        );
        let conf = Configuration::from_iter([(READINESS_MAX_STALENESS_KEY, "2 min")]);
        assert_eq!(readiness_max_staleness(&conf, interval), Ok(Duration::from_secs(120)));
        let bad = Configuration::from_iter([(READINESS_MAX_STALENESS_KEY, "soon")]);
        assert!(readiness_max_staleness(&bad, interval).is_err_and(|e| e.contains(READINESS_MAX_STALENESS_KEY)));
    }

    #[test]
    fn source_series_exist_at_zero_before_the_first_listing() {
        let metrics = ServiceMetrics::new();
        metrics.register_sources(["prod", "yarn-a"]);
        let text = metrics.render_jobs();
        for source in ["prod", "yarn-a"] {
            assert!(
                text.contains(&format!("{SOURCE_FETCH_ERRORS}{{source=\"{source}\"}} 0\n")),
                "{text}"
            );
            assert!(
                text.contains(&format!("{LAST_SUCCESSFUL_CYCLE}{{source=\"{source}\"}} 0\n")),
                "{text}"
            );
        }
        metrics.source_fetched("prod", Err("down"), Duration::ZERO);
        metrics.source_listed("yarn-a");
        let text = metrics.render_jobs();
        assert!(
            text.contains(&format!("{SOURCE_FETCH_ERRORS}{{source=\"prod\"}} 1\n")),
            "{text}"
        );
        let listed = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{LAST_SUCCESSFUL_CYCLE}{{source=\"yarn-a\"}} ")))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_default();
        assert!(listed > 1.7e9, "a Unix time: {listed}");
        assert!(
            text.contains(&format!("{BUILD_INFO}{{version=\"{}\"", env!("CARGO_PKG_VERSION"))),
            "{text}"
        );
    }

    /// Every family rendered has its HELP from the catalogue, its units in its name, and the
    /// evaluated table covers every metric but the recommended parallelism.
    #[test]
    fn every_rendered_family_is_in_the_catalogue_with_a_help_text() {
        let catalogue = catalogue();
        for metric in ScalingMetric::ALL {
            let gauges: Vec<_> = EVALUATED_GAUGES.iter().filter(|g| g.metric == metric).collect();
            if metric == ScalingMetric::RecommendedParallelism {
                assert!(gauges.is_empty());
                continue;
            }
            assert_eq!(gauges.len(), 1, "{metric}");
            assert_eq!(gauges[0].average.is_some(), metric.calculates_average(), "{metric}");
        }
        let metrics = vertex_detail();
        let series = metrics.job(&labels("j1", "orders"));
        let mut vertex = autoscaler_metrics::EvaluatedVertexMetrics::default();
        let mut evaluated = EvaluatedMetrics::default();
        for g in EVALUATED_GAUGES {
            let value = EvaluatedScalingMetric {
                current: 1.0,
                average: 2.0,
            };
            match g.scope {
                Scope::Vertex => vertex.insert(g.metric, value),
                Scope::Job => evaluated.global.insert(g.metric, value),
            }
        }
        evaluated.vertices.insert(VertexId::new("v1"), vertex);
        series.set_evaluation(Arc::new(evaluated));
        series.set_gauge("v1.RECOMMENDED_PARALLELISM.Current", 4.0);
        series.set_gauge("MemoryTuning.taskmanager.memory.process.size", 1.0);
        metrics.job(&labels("j2", "typo")).set_misconfigured(true);
        metrics.register_sources(["prod"]);
        metrics
            .health()
            .set_ownership("replica-1".into(), Arc::new(OwnershipStats::default()));
        let text = metrics.render_jobs();
        assert!(
            text.contains("flink_autoscaler_owned_jobs{replica=\"replica-1\"} 0\n"),
            "{text}"
        );
        let mut rendered = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                let entry = catalogue.iter().find(|f| f.name == name);
                assert!(entry.is_some_and(|f| f.help == help && !help.is_empty()), "{line}");
                rendered.push(name.to_owned());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                assert!(
                    rendered.last().is_some_and(|n| n == name),
                    "{name} has no HELP before it"
                );
            }
        }
        let served: Vec<&Family> = catalogue
            .iter()
            .filter(|f| f.detail.is_some() || !is_facade_series(&f.name) && !f.name.starts_with("process_"))
            .collect();
        for f in served {
            assert!(rendered.contains(&f.name), "{} is never rendered", f.name);
        }
        let units = [
            "_ratio",
            "_bytes",
            "_seconds",
            "_records_per_second",
            "_records",
            "_total",
            "_info",
            "_fds",
            "_threads",
            "parallelism",
            "_partitions",
            "_used",
            // A 0/1 state whose name the issue fixes.
            "_misconfigured",
            // Counts of things, whose names issue 22 fixes.
            "_owned_jobs",
            "_ha_replicas",
            // Jobs per group commit of state flushes.
            "_group_jobs",
        ];
        for f in &catalogue {
            assert!(
                f.name.starts_with("flink_autoscaler_") || f.name.starts_with("process_"),
                "{}",
                f.name
            );
            assert!(units.iter().any(|u| f.name.ends_with(u)), "{} names no unit", f.name);
            assert!(
                !f.help.contains("per vertex") || f.labels.contains("vertex_id"),
                "{}",
                f.name
            );
        }
    }

    /// A fleet of `jobs` jobs of `vertices` vertices with every metric evaluated, as a scrape sees
    /// it; the jobs' ids are 32 hex digits and their names 24 characters, as Flink's are.
    fn fleet(detail: MetricsDetail, jobs: usize, vertices: usize) -> ServiceMetrics {
        let metrics = ServiceMetrics::with_options(detail, Duration::from_secs(30));
        metrics.register_sources(["prod"]);
        let specs: Vec<VertexSpec> = (0..vertices)
            .map(|v| {
                VertexSpec::new(format!("{v:032x}").as_str(), 4, 128).with_name(format!("Map: enrich-orders-{v:02}"))
            })
            .collect();
        let topology = JobTopology::new(specs, vec![]).expect("topology");
        let mut evaluated = EvaluatedMetrics::default();
        for (i, g) in EVALUATED_GAUGES.iter().enumerate() {
            let value = EvaluatedScalingMetric {
                current: 1234.5 + i as f64,
                average: 1200.25 + i as f64,
            };
            if g.scope == Scope::Job {
                evaluated.global.insert(g.metric, value);
            }
        }
        for v in topology.vertices() {
            let mut vertex = autoscaler_metrics::EvaluatedVertexMetrics::default();
            for (i, g) in EVALUATED_GAUGES.iter().enumerate() {
                if g.scope == Scope::Vertex {
                    vertex.insert(
                        g.metric,
                        EvaluatedScalingMetric {
                            current: 1234.5 + i as f64,
                            average: 1200.25 + i as f64,
                        },
                    );
                }
            }
            evaluated.vertices.insert(v.id.clone(), vertex);
        }
        let evaluated = Arc::new(evaluated);
        for j in 0..jobs {
            let series = metrics.job(&JobLabels {
                job_key: format!("prod/{j:032x}"),
                source: "prod".into(),
                application: None,
                job_id: format!("{j:032x}"),
                job_name: format!("orders-enrichment-{j:06}"),
            });
            series.set_topology(&topology);
            series.set_evaluation(Arc::clone(&evaluated));
            for v in topology.vertices() {
                series.set_gauge(&format!("{}.RECOMMENDED_PARALLELISM.Current", v.id), 4.0);
            }
            for _ in 0..1234 {
                series.count_cycle();
            }
        }
        metrics
    }

    /// `/metrics` bytes per job at both levels (the README quotes these figures; run with
    /// `--nocapture` to see them): the job level keeps 10,000 jobs under 5 MB.
    #[test]
    fn metrics_bytes_per_job_at_both_levels() {
        let empty = fleet(MetricsDetail::Job, 0, 10).render_jobs().len();
        let jobs = 10_000;
        let job_level = fleet(MetricsDetail::Job, jobs, 10).render_jobs().len();
        let per_job = (job_level - empty) as f64 / jobs as f64;
        println!("job level: {job_level} bytes for {jobs} jobs, {per_job:.0} bytes per job");
        assert!(job_level < 5_000_000, "{job_level} bytes for {jobs} jobs");
        for vertices in [4, 10] {
            let n = 100;
            let bytes = fleet(MetricsDetail::Vertex, n, vertices).render_jobs().len();
            let empty = fleet(MetricsDetail::Vertex, 0, vertices).render_jobs().len();
            println!(
                "vertex level: {:.0} bytes per job of {vertices} vertices",
                (bytes - empty) as f64 / n as f64
            );
        }
    }

    /// The README's metric list is [`catalogue_markdown`] (regenerate with
    /// `UPDATE_README_METRICS=1 cargo test -p flink-autoscaler-cli --lib readme`).
    #[test]
    fn the_readme_metric_list_is_the_catalogue() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let readme = std::fs::read_to_string(path).unwrap_or_default();
        let (begin, end) = ("<!-- metrics:begin -->\n", "<!-- metrics:end -->");
        let (Some(a), Some(b)) = (readme.find(begin), readme.find(end)) else {
            panic!("README.md has no {begin:?} .. {end:?} section");
        };
        let table = catalogue_markdown();
        let current = &readme[a + begin.len()..b];
        if current != table && std::env::var_os("UPDATE_README_METRICS").is_some() {
            let updated = format!("{}{table}{}", &readme[..a + begin.len()], &readme[b..]);
            std::fs::write(path, updated).unwrap_or_else(|e| panic!("{e}"));
            return;
        }
        assert_eq!(current, table, "regenerate with UPDATE_README_METRICS=1");
    }
}
