//! The autoscaler's Prometheus series.
//!
//! Two kinds, two paths:
//!
//! - **Per-job series** (per-vertex gauges, `cycles`/`errors`/`scalings` counters) live in
//!   [`ServiceMetrics`], one [`JobSeries`] per job, and are rendered **at scrape time** from each
//!   job's latest evaluation. A cycle only swaps one `Arc` and bumps atomics, so exporting a
//!   dag-100 job (about 3,000 series) costs the cycle nothing measurable; the work happens when
//!   Prometheus scrapes. A job's series go away with [`ServiceMetrics::remove_job`], which the
//!   service calls when the control loop cleans the job up.
//! - **Process-wide series** (cycle duration histogram, source fetch latency and failures, REST
//!   request latency and failures per endpoint, state flush latency and failures) go through the
//!   [`metrics`] facade, so a library user gets them in whatever recorder they install; the binary
//!   installs `metrics-exporter-prometheus` and appends its rendering to the per-job series. The
//!   REST series are emitted by the realizer's client ([`autoscaler_realizer::rest::FlinkRestClient`])
//!   and the flush series by the state stores ([`autoscaler_state::AnyStateStore`]) themselves, so
//!   they need no wrapper.
//!
//! Why `metrics` + `metrics-exporter-prometheus` rather than `prometheus-client`: the facade lets
//! library code emit without knowing the exporter (a platform embedding the crates can send the
//! same series to StatsD or OpenTelemetry), and the per-job series, which need removal and
//! scrape-time rendering, are rendered here without any registry.
//!
//! | series | type | labels |
//! |---|---|---|
//! | `flink_autoscaler_<metric>` (one per evaluated vertex metric, lower snake case) | gauge | `source`, `job_id`, `job_name`, `vertex_id`, `vertex_name`, `stat` (`current`/`average`) |
//! | `flink_autoscaler_<metric>` (one per evaluated job-wide metric: GC, heap, task slots) | gauge | `source`, `job_id`, `job_name`, `stat` |
//! | `flink_autoscaler_parallelism`, `flink_autoscaler_recommended_parallelism` | gauge | as above, without `stat` |
//! | `flink_autoscaler_memory_tuning_bytes` (memory tuning's last recommendation, one per size) | gauge | `source`, `job_id`, `job_name`, `key` (e.g. `taskmanager.memory.process.size`) |
//! | `flink_autoscaler_cycles_total`, `flink_autoscaler_errors_total`, `flink_autoscaler_scalings_total` | counter | `source`, `job_id` |
//! | `flink_autoscaler_job_misconfigured` (1 while the job's own options do not validate) | gauge | `source`, `job_id` |
//! | `flink_autoscaler_cycle_duration_seconds` | histogram | `source` |
//! | `flink_autoscaler_source_fetch_duration_seconds`, `flink_autoscaler_source_fetch_errors_total` | histogram, counter | `source` |
//! | `flink_autoscaler_rest_request_duration_seconds`, `flink_autoscaler_rest_request_errors_total` | histogram, counter | `source`, `method`, `endpoint` (route template, e.g. `/jobs/:jobid/vertices/:vertexid/subtasks/metrics`); errors also `kind` |
//! | `flink_autoscaler_state_flush_duration_seconds`, `flink_autoscaler_state_flush_errors_total` | histogram, counter | `store` (`sqlite`, `postgres`, `mysql`) |

use autoscaler_core::tuning::MEMORY_TUNING_GAUGE_PREFIX;
use autoscaler_core::{AutoscalerMetricsReporter, GaugeKind};
use autoscaler_metrics::{EvaluatedMetrics, JobTopology, ScalingMetric, VertexId};
use autoscaler_realizer::sources::{JobLabels, SourceObserver};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// Name of the cycle duration histogram.
pub const CYCLE_DURATION: &str = "flink_autoscaler_cycle_duration_seconds";
/// Name of the source fetch duration histogram.
pub const SOURCE_FETCH_DURATION: &str = "flink_autoscaler_source_fetch_duration_seconds";
/// Name of the source fetch failure counter.
pub const SOURCE_FETCH_ERRORS: &str = "flink_autoscaler_source_fetch_errors_total";

/// Histogram buckets (seconds) of the process-wide latency series.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The series of one job. It is the job's [`AutoscalerMetricsReporter`]: the core's `scalings`,
/// `errors`, `RECOMMENDED_PARALLELISM` and `MemoryTuning.*` reports land here; other gauges are
/// ignored (the evaluated metrics arrive whole through [`JobSeries::set_evaluation`]).
#[derive(Debug)]
pub struct JobSeries {
    labels: JobLabels,
    /// `source="..",job_id="..",job_name=".."`, escaped once.
    job_labels: String,
    cycles: AtomicU64,
    errors: AtomicU64,
    scalings: AtomicU64,
    /// Whether the job's own options failed the service's check this cycle.
    misconfigured: AtomicBool,
    evaluation: Mutex<Option<Arc<EvaluatedMetrics>>>,
    /// Vertex id -> name, from the last collected topology.
    vertex_names: Mutex<Arc<HashMap<String, String>>>,
    recommended: Mutex<BTreeMap<String, f64>>,
    /// Memory tuning's last recommended sizes in bytes, by configuration key.
    memory: Mutex<BTreeMap<String, f64>>,
}

impl JobSeries {
    fn new(labels: JobLabels) -> Self {
        let job_labels = format!(
            "source=\"{}\",job_id=\"{}\",job_name=\"{}\"",
            escape(&labels.source),
            escape(&labels.job_id),
            escape(&labels.job_name)
        );
        Self {
            labels,
            job_labels,
            cycles: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            scalings: AtomicU64::new(0),
            misconfigured: AtomicBool::new(false),
            evaluation: Mutex::new(None),
            vertex_names: Mutex::new(Arc::new(HashMap::new())),
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

    /// Records the vertex names of `topology` when they changed (a lookup per vertex otherwise);
    /// on a change, the recommended parallelism of vertices the job no longer has goes away.
    pub fn set_topology(&self, topology: &JobTopology) {
        let current = Arc::clone(&lock(&self.vertex_names));
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
            *lock(&self.vertex_names) = Arc::new(names);
        }
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
    fetch_succeeded: AtomicBool,
    state_ok: AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            fetch_succeeded: AtomicBool::new(false),
            state_ok: AtomicBool::new(true),
        }
    }
}

impl Health {
    /// Ready: at least one source fetch succeeded and the last state flush did not fail.
    pub fn is_ready(&self) -> bool {
        self.fetch_succeeded.load(Ordering::Relaxed) && self.state_ok.load(Ordering::Relaxed)
    }

    /// Why the service is not ready, if it is not.
    pub fn not_ready_reason(&self) -> Option<&'static str> {
        if !self.fetch_succeeded.load(Ordering::Relaxed) {
            Some("no job list fetch has succeeded yet")
        } else if !self.state_ok.load(Ordering::Relaxed) {
            Some("the state store is unreachable (the last flush failed)")
        } else {
            None
        }
    }

    /// Records a state store operation's outcome.
    pub fn set_state_ok(&self, ok: bool) {
        self.state_ok.store(ok, Ordering::Relaxed);
    }
}

/// The registry of per-job series, the health flags, and the renderer of `/metrics`.
#[derive(Debug, Default)]
pub struct ServiceMetrics {
    jobs: RwLock<HashMap<String, Arc<JobSeries>>>,
    health: Health,
}

impl ServiceMetrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Health flags.
    pub fn health(&self) -> &Health {
        &self.health
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

    /// The per-job series in the Prometheus text format (version 0.0.4), jobs in key order.
    pub fn render_jobs(&self) -> String {
        let mut jobs: Vec<Arc<JobSeries>> = self
            .jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        jobs.sort_by(|a, b| a.labels.job_key.cmp(&b.labels.job_key));
        let mut out = String::new();
        for (name, help, read) in [
            (
                "flink_autoscaler_cycles_total",
                "Autoscaler cycles run for the job.",
                &(|s: &JobSeries| s.cycles.load(Ordering::Relaxed)) as &dyn Fn(&JobSeries) -> u64,
            ),
            (
                "flink_autoscaler_errors_total",
                "Autoscaler cycles of the job that failed.",
                &|s: &JobSeries| s.errors.load(Ordering::Relaxed),
            ),
            (
                "flink_autoscaler_scalings_total",
                "Rescales the autoscaler decided for the job.",
                &|s: &JobSeries| s.scalings.load(Ordering::Relaxed),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for job in &jobs {
                let _ = writeln!(
                    out,
                    "{name}{{source=\"{}\",job_id=\"{}\"}} {}",
                    escape(&job.labels.source),
                    escape(&job.labels.job_id),
                    read(job)
                );
            }
        }
        render_misconfigured(&jobs, &mut out);
        // One consistent view per job for the whole rendering.
        let views: Vec<JobView<'_>> = jobs
            .iter()
            .map(|j| (&**j, lock(&j.evaluation).clone(), Arc::clone(&lock(&j.vertex_names))))
            .collect();
        for metric in ScalingMetric::ALL {
            if metric == ScalingMetric::RecommendedParallelism {
                continue;
            }
            let name = format!("flink_autoscaler_{}", metric.name().to_ascii_lowercase());
            let no_stat = metric == ScalingMetric::Parallelism;
            let mut header = false;
            for (job, evaluation, names) in &views {
                let Some(evaluation) = evaluation else { continue };
                // The vertices' values, then the job-wide one (GC pressure, heap, task slots),
                // which has the job's labels only.
                let vertex_rows = evaluation.vertices.iter().filter_map(|(vertex, values)| {
                    values
                        .get(metric)
                        .map(|value| (vertex_label(job, vertex.as_str(), names), value))
                });
                let global_row = evaluation
                    .global
                    .get(metric)
                    .map(|value| (job.job_labels.clone(), value));
                for (vertex_labels, value) in vertex_rows.chain(global_row) {
                    let mut sample = |stat: Option<&str>, v: f64| {
                        if v.is_nan() {
                            return;
                        }
                        if !header {
                            let _ = writeln!(
                                out,
                                "# HELP {name} The autoscaler's evaluated {metric} per vertex.\n# TYPE {name} gauge"
                            );
                            header = true;
                        }
                        match stat {
                            Some(stat) => {
                                let _ = writeln!(out, "{name}{{{vertex_labels},stat=\"{stat}\"}} {}", number(v));
                            }
                            None => {
                                let _ = writeln!(out, "{name}{{{vertex_labels}}} {}", number(v));
                            }
                        }
                    };
                    if no_stat {
                        sample(None, value.current);
                    } else {
                        sample(Some("current"), value.current);
                        if metric.calculates_average() {
                            sample(Some("average"), value.average);
                        }
                    }
                }
            }
        }
        let name = "flink_autoscaler_recommended_parallelism";
        let _ = writeln!(
            out,
            "# HELP {name} The parallelism the autoscaler recommends per vertex.\n# TYPE {name} gauge"
        );
        for (job, _, names) in &views {
            for (vertex, value) in lock(&job.recommended).iter() {
                let _ = writeln!(out, "{name}{{{}}} {}", vertex_label(job, vertex, names), number(*value));
            }
        }
        let name = "flink_autoscaler_memory_tuning_bytes";
        let _ = writeln!(
            out,
            "# HELP {name} The TaskManager memory sizes memory tuning last recommended (bytes).\n# TYPE {name} gauge"
        );
        for (job, _, _) in &views {
            for (key, value) in lock(&job.memory).iter() {
                let _ = writeln!(
                    out,
                    "{name}{{{},key=\"{}\"}} {}",
                    job.job_labels,
                    escape(key),
                    number(*value)
                );
            }
        }
        out
    }
}

/// `flink_autoscaler_job_misconfigured{source,job_id}`: 1 while the job's own options fail the
/// service's check, else 0.
fn render_misconfigured(jobs: &[Arc<JobSeries>], out: &mut String) {
    let name = "flink_autoscaler_job_misconfigured";
    let _ = writeln!(
        out,
        "# HELP {name} 1 while the job's own autoscaler options do not validate (the job is not scaled), else 0.\n# TYPE {name} gauge"
    );
    for job in jobs {
        let _ = writeln!(
            out,
            "{name}{{source=\"{}\",job_id=\"{}\"}} {}",
            escape(&job.labels.source),
            escape(&job.labels.job_id),
            u8::from(job.misconfigured.load(Ordering::Relaxed))
        );
    }
}

/// One job's series as seen by one rendering: labels, latest evaluation, vertex names.
type JobView<'a> = (
    &'a JobSeries,
    Option<Arc<EvaluatedMetrics>>,
    Arc<HashMap<String, String>>,
);

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

impl SourceObserver for ServiceMetrics {
    fn job_reporter(&self, labels: &JobLabels) -> Arc<dyn AutoscalerMetricsReporter> {
        self.job(labels)
    }

    fn source_fetched(&self, source: &str, outcome: Result<usize, &str>, elapsed: Duration) {
        metrics::histogram!(SOURCE_FETCH_DURATION, "source" => source.to_owned()).record(elapsed.as_secs_f64());
        match outcome {
            Ok(_) => self.health.fetch_succeeded.store(true, Ordering::Relaxed),
            Err(_) => metrics::counter!(SOURCE_FETCH_ERRORS, "source" => source.to_owned()).increment(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, VertexSpec};

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
        let metrics = ServiceMetrics::new();
        let series = metrics.job(&labels("j1", "orders"));
        // What the core reports with a recommendation (`MemoryRecommendation::gauges`).
        series.set_gauge("MemoryTuning.taskmanager.memory.process.size", 1_079_430_352.0);
        series.set_gauge("MemoryTuning.taskmanager.memory.jvm-metaspace.size", 100_663_296.0);
        let text = metrics.render_jobs();
        let job = r#"source="prod",job_id="j1",job_name="orders""#;
        assert!(
            text.contains("# TYPE flink_autoscaler_memory_tuning_bytes gauge\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "flink_autoscaler_memory_tuning_bytes{{{job},key=\"taskmanager.memory.process.size\"}} 1079430352\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "flink_autoscaler_memory_tuning_bytes{{{job},key=\"taskmanager.memory.jvm-metaspace.size\"}} 100663296\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn per_vertex_series_render_from_the_latest_evaluation_and_vanish_with_the_job() {
        let metrics = ServiceMetrics::new();
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
        let job = r#"source="prod",job_id="j1",job_name="orders \"eu\"",vertex_id="v1",vertex_name="Sink""#;
        assert!(
            text.contains(&format!(
                "flink_autoscaler_true_processing_rate{{{job},stat=\"average\"}} 1052.5\n"
            )),
            "{text}"
        );
        // NaN current: no sample.
        assert!(!text.contains("stat=\"current\"} NaN"), "{text}");
        assert!(
            text.contains(&format!("flink_autoscaler_parallelism{{{job}}} 2\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_recommended_parallelism{{{job}}} 4\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("flink_autoscaler_lag{{{job},stat=\"current\"}} 0\n")),
            "{text}"
        );
        // Job-wide metrics carry the job's labels only.
        let job_only = r#"source="prod",job_id="j1",job_name="orders \"eu\"""#;
        assert!(
            text.contains(&format!(
                "flink_autoscaler_heap_max_usage_ratio{{{job_only},stat=\"average\"}} 0.25\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "flink_autoscaler_num_task_slots_used{{{job_only},stat=\"current\"}} 8\n"
            )),
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
            text.matches("# TYPE flink_autoscaler_true_processing_rate gauge")
                .count(),
            1
        );

        metrics.remove_job("prod/j1");
        let text = metrics.render_jobs();
        assert!(!text.contains("j1"), "{text}");
    }

    #[test]
    fn recommendations_of_vanished_vertices_go_with_the_topology_change() {
        let metrics = ServiceMetrics::new();
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
                "flink_autoscaler_recommended_parallelism{source=\"prod\",job_id=\"j1\",job_name=\"orders\",vertex_id=\"a\",vertex_name=\"\"} 2\n"
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
        metrics.source_fetched("prod", Ok(0), Duration::ZERO);
        assert!(metrics.health().is_ready());
        metrics.health().set_state_ok(false);
        assert_eq!(
            metrics.health().not_ready_reason(),
            Some("the state store is unreachable (the last flush failed)")
        );
    }
}
