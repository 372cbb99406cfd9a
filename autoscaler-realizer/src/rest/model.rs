//! Typed bodies of the Flink REST endpoints the autoscaler uses (shapes as Flink 2.3 sends them; see
//! `tests/fixtures/`). Unknown fields are ignored and optional ones default, so older and newer
//! Flink versions parse as long as the fields read here keep their meaning.
//!
//! The job details also have a borrowed reading ([`view`]) for the collector, which reads them every
//! cycle; the rules both readings apply live here, once. The job details and the aggregated metrics
//! (ten answers or more per job-cycle) are read by hand when plain (`read_job_details`,
//! `read_aggregated_metrics`), else through the view; the jobs overview and the metric listings
//! too, into their owned types (`read_jobs_overview`, `read_metric_names`), else by serde.

mod view;

pub(crate) use view::aggregated::read as read_aggregated_metrics;
pub(crate) use view::details::read as read_job_details;
pub(crate) use view::names::read as read_metric_names;
pub(crate) use view::overview::read as read_jobs_overview;
pub(crate) use view::{
    AggregatedMetricValue as AggregatedMetricValueView, JobDetails as JobDetailsView, JobPlan as JobPlanView,
    JobPlanResponse as JobPlanResponseView, JobVertexDetails as JobVertexView, PlanNode as PlanNodeView,
};

use autoscaler_core::JobStatus;
use autoscaler_metrics::collection::{AggregatedMetric, IoMetrics};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// `GET /jobs/overview`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobsOverview {
    /// One entry per job the JobManager still knows (finished and cancelled jobs included).
    #[serde(default)]
    pub jobs: Vec<JobOverview>,
}

/// One job of `GET /jobs/overview`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobOverview {
    /// Job id (32 hex characters).
    pub jid: String,
    /// Job name.
    #[serde(default)]
    pub name: String,
    /// Job state as Flink spells it (`RUNNING`, `CANCELED`, ...).
    pub state: String,
    /// Submission time, epoch milliseconds.
    #[serde(rename = "start-time", default)]
    pub start_time: i64,
    /// Number of tasks per execution state.
    #[serde(default)]
    pub tasks: TaskCounts,
}

impl JobOverview {
    /// The state the autoscaler should act on (reference `JobStatusUtils.getEffectiveStatus`): a
    /// RUNNING job whose tasks are not all RUNNING or FINISHED is still deploying and counts as
    /// CREATED. `None` for a state this crate does not know.
    pub fn effective_status(&self) -> Option<JobStatus> {
        let status = JobStatus::parse(&self.state)?;
        // In u64: Flink's counts are ints, but a body claiming u32::MAX of each must not overflow.
        let all_running_or_finished =
            u64::from(self.tasks.total) == u64::from(self.tasks.running) + u64::from(self.tasks.finished);
        if status == JobStatus::Running && !all_running_or_finished {
            return Some(JobStatus::Created);
        }
        Some(status)
    }
}

/// Number of tasks per execution state (`tasks` of the jobs overview).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct TaskCounts {
    /// All tasks.
    pub total: u32,
    /// Tasks RUNNING.
    pub running: u32,
    /// Tasks FINISHED.
    pub finished: u32,
    /// Tasks CREATED.
    pub created: u32,
    /// Tasks SCHEDULED.
    pub scheduled: u32,
    /// Tasks DEPLOYING.
    pub deploying: u32,
    /// Tasks INITIALIZING.
    pub initializing: u32,
    /// Tasks CANCELING.
    pub canceling: u32,
    /// Tasks CANCELED.
    pub canceled: u32,
    /// Tasks FAILED.
    pub failed: u32,
    /// Tasks RECONCILING.
    pub reconciling: u32,
}

/// `GET /jobs/{jobid}/status`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct JobStatusInfo {
    /// Job state as Flink spells it.
    pub status: String,
}

impl JobStatusInfo {
    /// The job state, if this crate knows it.
    pub fn job_status(&self) -> Option<JobStatus> {
        JobStatus::parse(&self.status)
    }
}

/// `GET /jobs/{jobid}`: the job details.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobDetails {
    /// Job id.
    pub jid: String,
    /// Job name.
    #[serde(default)]
    pub name: String,
    /// Job state as Flink spells it.
    pub state: String,
    /// Epoch milliseconds at which the job last entered each state (0 = never).
    #[serde(default)]
    pub timestamps: BTreeMap<String, i64>,
    /// The job vertices with parallelism, max parallelism, status and IO counters.
    #[serde(default)]
    pub vertices: Vec<JobVertexDetails>,
    /// The job graph (also served alone by `GET /jobs/{jobid}/plan`).
    #[serde(default)]
    pub plan: Option<JobPlan>,
}

impl JobDetails {
    /// The job state, if this crate knows it.
    pub fn status(&self) -> Option<JobStatus> {
        JobStatus::parse(&self.state)
    }

    /// When the job last switched to RUNNING (`timestamps.RUNNING`; the reference's `jobRunningTs`).
    /// A rescale moves it to the restart time. `None` when the job never ran (0) or Flink omitted it.
    pub fn running_since(&self) -> Option<DateTime<Utc>> {
        running_since(self.timestamps.get(RUNNING_TIMESTAMP).copied())
    }

    /// The vertex with id `id`.
    pub fn vertex(&self, id: &str) -> Option<&JobVertexDetails> {
        vertex_by_id(&self.vertices, id, |v| &v.id)
    }
}

/// The key of the job details' `timestamps` that holds when the job last switched to RUNNING.
const RUNNING_TIMESTAMP: &str = "RUNNING";

/// When the job last switched to RUNNING, from `timestamps.RUNNING` in epoch milliseconds: `None`
/// when Flink omitted it or sent 0 (never).
fn running_since(running_ms: Option<i64>) -> Option<DateTime<Utc>> {
    let ms = running_ms?;
    if ms <= 0 {
        return None;
    }
    DateTime::from_timestamp_millis(ms)
}

/// The first of `vertices` whose id (read by `id_of`) is `id`.
fn vertex_by_id<'v, V>(vertices: &'v [V], id: &str, id_of: impl Fn(&V) -> &str) -> Option<&'v V> {
    vertices.iter().find(|v| id_of(v) == id)
}

/// Whether a vertex whose execution state is `status` finished (every subtask FINISHED).
fn is_finished(status: &str) -> bool {
    status.eq_ignore_ascii_case("FINISHED")
}

/// One vertex of the job details.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobVertexDetails {
    /// Job vertex id (32 hex characters).
    pub id: String,
    /// Vertex name (`Source: datagen`).
    #[serde(default)]
    pub name: String,
    /// Max parallelism (key groups).
    #[serde(rename = "maxParallelism")]
    pub max_parallelism: i64,
    /// Current parallelism.
    pub parallelism: i64,
    /// Execution state of the vertex (`RUNNING`, `FINISHED`, ...).
    #[serde(default)]
    pub status: String,
    /// Slot sharing group (absent in older Flink versions).
    #[serde(rename = "slotSharingGroupId", default)]
    pub slot_sharing_group_id: Option<String>,
    /// Accumulated IO counters.
    #[serde(default)]
    pub metrics: Option<VertexIoMetrics>,
}

impl JobVertexDetails {
    /// Whether every subtask of the vertex finished (bounded sources).
    pub fn is_finished(&self) -> bool {
        is_finished(&self.status)
    }
}

/// The `metrics` of a job-details vertex.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct VertexIoMetrics {
    /// Records read by all subtasks.
    #[serde(rename = "read-records", default)]
    pub read_records: u64,
    /// Records written by all subtasks.
    #[serde(rename = "write-records", default)]
    pub write_records: u64,
    /// Busy milliseconds summed over subtasks (a float; NaN when not measured).
    #[serde(rename = "accumulated-busy-time", default = "nan", deserialize_with = "lenient_f64")]
    pub accumulated_busy_time: f64,
}

impl From<VertexIoMetrics> for IoMetrics {
    fn from(m: VertexIoMetrics) -> Self {
        IoMetrics {
            num_records_in: m.read_records,
            num_records_out: m.write_records,
            accumulated_busy_time: m.accumulated_busy_time,
        }
    }
}

/// `GET /jobs/{jobid}/plan`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobPlanResponse {
    /// The plan.
    pub plan: JobPlan,
}

/// The job graph as Flink's plan describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobPlan {
    /// Job id.
    #[serde(default)]
    pub jid: String,
    /// Job vertices with their inputs; empty while the job is not scheduled yet.
    #[serde(default)]
    pub nodes: Vec<PlanNode>,
}

/// One vertex of the plan.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PlanNode {
    /// Job vertex id.
    pub id: String,
    /// Parallelism.
    pub parallelism: i64,
    /// Operator description (`expensive-keyed<br/>`).
    #[serde(default)]
    pub description: String,
    /// Upstream edges; none for a source.
    #[serde(default)]
    pub inputs: Vec<PlanInput>,
}

/// One input edge of a plan vertex.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PlanInput {
    /// Upstream vertex id.
    pub id: String,
    /// Ship strategy (`HASH`, `REBALANCE`, `FORWARD`, ...).
    #[serde(default)]
    pub ship_strategy: String,
    /// Exchange mode (`pipelined_bounded`).
    #[serde(default)]
    pub exchange: String,
}

/// One `{key, value}` entry of `GET /jobmanager/config` or `GET /jobs/{jobid}/jobmanager/config`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConfigEntry {
    /// Config key.
    pub key: String,
    /// Config value, as a string.
    pub value: String,
}

/// `GET /jobs/{jobid}/config`: the job's execution config (only part of it is typed).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobConfig {
    /// Job id.
    #[serde(default)]
    pub jid: String,
    /// The execution config (`job-parallelism`, `user-config`, ...), untyped.
    #[serde(rename = "execution-config", default)]
    pub execution_config: serde_json::Value,
}

/// A metric name of a metrics listing (`GET .../metrics` without `get`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MetricName {
    /// The metric name.
    pub id: String,
}

/// One aggregated metric (`GET .../subtasks/metrics?get=...`, `GET /taskmanagers/metrics?get=...`).
/// Aggregates Flink did not send are NaN.
///
/// It reads exactly as its borrowed reading (`AggregatedMetricValueView`, which the collector reads
/// every cycle without copying the name) and is that reading with the name owned: the rules of
/// each field live there, once.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregatedMetricValue {
    /// The metric name.
    pub id: String,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean.
    pub avg: f64,
    /// Sum.
    pub sum: f64,
    /// Skew.
    pub skew: f64,
}

impl<'de> Deserialize<'de> for AggregatedMetricValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let view = AggregatedMetricValueView::deserialize(d)?;
        let aggregates = view.aggregates();
        Ok(Self {
            id: view.id.into_owned(),
            min: aggregates.min,
            max: aggregates.max,
            avg: aggregates.avg,
            sum: aggregates.sum,
            skew: aggregates.skew,
        })
    }
}

impl AggregatedMetricValue {
    /// The aggregates without the name.
    pub fn aggregates(&self) -> AggregatedMetric {
        AggregatedMetric {
            min: self.min,
            max: self.max,
            avg: self.avg,
            sum: self.sum,
            skew: self.skew,
        }
    }
}

/// One plain metric value (`GET /jobmanager/metrics?get=...`, per-subtask vertex metrics). Flink
/// sends the value as a string (`"1000.0"`, `"false"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MetricValue {
    /// The metric name.
    pub id: String,
    /// The value as Flink sent it.
    #[serde(deserialize_with = "string_or_number")]
    pub value: String,
}

impl MetricValue {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        self.value.trim().parse().ok()
    }
}

/// Which aggregates to ask for (`agg=` of the aggregated metrics endpoints; none = all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregation {
    /// `min`.
    Min,
    /// `max`.
    Max,
    /// `avg`.
    Avg,
    /// `sum`.
    Sum,
    /// `skew`.
    Skew,
}

impl Aggregation {
    /// The query spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Min => "min",
            Self::Max => "max",
            Self::Avg => "avg",
            Self::Sum => "sum",
            Self::Skew => "skew",
        }
    }
}

/// Parallelism bounds of one vertex (`{"lowerBound": 1, "upperBound": 4}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParallelismBounds {
    /// Lowest parallelism the adaptive scheduler may run the vertex at.
    #[serde(rename = "lowerBound")]
    pub lower_bound: u32,
    /// Highest parallelism (the target when slots suffice).
    #[serde(rename = "upperBound")]
    pub upper_bound: u32,
}

impl fmt::Display for ParallelismBounds {
    // The reference's event prints Flink's `Parallelism.toString`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Parallelism{{lowerBound={}, upperBound={}}}",
            self.lower_bound, self.upper_bound
        )
    }
}

/// Resource requirements of one vertex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexResourceRequirements {
    /// Its parallelism bounds.
    pub parallelism: ParallelismBounds,
}

impl fmt::Display for VertexResourceRequirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobVertexResourceRequirements{{parallelism={}}}", self.parallelism)
    }
}

/// `GET`/`PUT /jobs/{jobid}/resource-requirements`: vertex id -> requirements. A PUT must list every
/// vertex of the job.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobResourceRequirements(pub BTreeMap<String, VertexResourceRequirements>);

impl fmt::Display for JobResourceRequirements {
    /// `{<vertex>=JobVertexResourceRequirements{parallelism=Parallelism{lowerBound=1, upperBound=4}}, ...}`,
    /// as the reference's event message prints the Java map (here in vertex id order).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (vertex, requirements)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{vertex}={requirements}")?;
        }
        f.write_str("}")
    }
}

fn nan() -> f64 {
    f64::NAN
}

/// A number, a numeric string (`"1000.0"`, `"NaN"`, `"Infinity"`) or null (NaN).
fn lenient_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    // Refused here, once the value is read, not while it is: the error then points where the
    // untagged enum's did (after the enclosing object).
    d.deserialize_any(LenientF64)?
        .ok_or_else(|| serde::de::Error::custom(NOT_LENIENT_F64))
}

/// [`lenient_f64`]'s reading of one value, as it comes (`None` for a value it refuses): every aggregate of every vertex's
/// answer goes through it, and reading it through an untagged enum buffered each value first
/// (about a twentieth of the service's instructions).
struct LenientF64;

/// Why [`lenient_f64`] refuses any other value: the untagged enum's message, which it answered
/// before, so a body fails with the same text.
const NOT_LENIENT_F64: &str = "data did not match any variant of untagged enum Raw";

impl<'de> serde::de::Visitor<'de> for LenientF64 {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, a numeric string or null")
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        // As serde reads an integer into an f64.
        Ok(Some(v as f64))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(parse_java_double(v).unwrap_or(f64::NAN)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Some(f64::NAN))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // Read to its end, as the buffering did.
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }
}

fn parse_java_double(text: &str) -> Option<f64> {
    match text.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `lenient_f64` was: an untagged enum, each value buffered first.
    fn lenient_f64_as_untagged<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
            Null(()),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Number(n) => n,
            Raw::Text(t) => parse_java_double(&t).unwrap_or(f64::NAN),
            Raw::Null(()) => f64::NAN,
        })
    }

    #[derive(Deserialize)]
    struct Now {
        id: String,
        #[serde(default = "nan", deserialize_with = "lenient_f64")]
        max: f64,
    }

    #[derive(Deserialize)]
    struct Before {
        id: String,
        #[serde(default = "nan", deserialize_with = "lenient_f64_as_untagged")]
        max: f64,
    }

    /// JSON values and near-values an aggregate may be.
    fn aggregate_values() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|n| format!("{n:?}")),
            "-?[0-9]{1,25}(\\.[0-9]{0,20})?([eE][+-]?[0-9]{1,4})?",
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            "\"[ -~]{0,12}\"",
            prop::sample::select(vec![
                "\"NaN\"",
                "\" Infinity \"",
                "\"-Infinity\"",
                "\"1e3\"",
                "\"\\u0031.5\"",
                "\"\\ud800\"",
                "[]",
                "[1, \"x\", [null]]",
                "{}",
                "{\"a\": [1, {}]}",
                "[1,]",
                "{\"a\" 1}",
                "[",
                "nul",
                "-",
                "1.",
                "01",
            ])
            .prop_map(str::to_owned),
        ]
    }

    proptest! {
        #[test]
        fn lenient_f64_reads_every_value_as_the_untagged_enum_did(value in aggregate_values(), tail in "[ ,}\\]x]{0,2}") {
            let body = format!("[{{\"id\": \"busy\", \"max\": {value}{tail}}}, {{\"id\": \"b\"}}]");
            let now = serde_json::from_str::<Vec<Now>>(&body)
                .map(|all| all.into_iter().map(|m| (m.id, m.max)).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            let before = serde_json::from_str::<Vec<Before>>(&body)
                .map(|all| all.into_iter().map(|m| (m.id, m.max)).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            // Debug, so that NaN equals NaN and the error texts are compared.
            prop_assert_eq!(format!("{now:?}"), format!("{before:?}"), "{}", body);
        }
    }

    #[test]
    fn effective_status_downgrades_running_with_tasks_not_running() {
        let job = |state: &str, total: u32, running: u32, finished: u32| JobOverview {
            jid: "j".into(),
            name: String::new(),
            state: state.into(),
            start_time: 0,
            tasks: TaskCounts {
                total,
                running,
                finished,
                ..TaskCounts::default()
            },
        };
        assert_eq!(job("RUNNING", 4, 4, 0).effective_status(), Some(JobStatus::Running));
        assert_eq!(job("RUNNING", 4, 2, 2).effective_status(), Some(JobStatus::Running));
        assert_eq!(job("RUNNING", 4, 3, 0).effective_status(), Some(JobStatus::Created));
        assert_eq!(job("CANCELED", 11, 0, 0).effective_status(), Some(JobStatus::Canceled));
        assert_eq!(job("WEIRD", 1, 1, 0).effective_status(), None);
    }

    #[test]
    fn aggregated_values_accept_numbers_strings_and_missing_fields() {
        let v: AggregatedMetricValue =
            serde_json::from_str(r#"{"id":"a","max":"NaN","avg":1.574E10,"sum":null}"#).expect("parses");
        assert!(v.min.is_nan() && v.max.is_nan() && v.sum.is_nan());
        assert_eq!(v.avg, 1.574e10);
    }

    #[test]
    fn requirements_print_like_the_reference_event() {
        let mut r = JobResourceRequirements::default();
        for (v, p) in [("b", 4), ("a", 1)] {
            r.0.insert(
                v.into(),
                VertexResourceRequirements {
                    parallelism: ParallelismBounds {
                        lower_bound: 1,
                        upper_bound: p,
                    },
                },
            );
        }
        assert_eq!(
            r.to_string(),
            "{a=JobVertexResourceRequirements{parallelism=Parallelism{lowerBound=1, upperBound=1}}, \
             b=JobVertexResourceRequirements{parallelism=Parallelism{lowerBound=1, upperBound=4}}}"
        );
    }
}
