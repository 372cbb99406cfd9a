//! Recordings of live jobs: everything a cycle consumed, as JSON lines, to replay later
//! (`flink-autoscaler run --record DIR`, `flink-autoscaler replay --recording FILE`).
//!
//! The format (`flink-autoscaler-recording/1`) is documented in `docs/recording.md`. In short, one
//! JSON object per line, each with a `kind`:
//!
//! - `header`: the first line of every file: `format`, `job`, `created`;
//! - `config`: the job's effective configuration (`config`, string to string), written before the
//!   first snapshot of a file and whenever it changes;
//! - `topology`: the job graph in the replay scenario's `topology` shape, written before the
//!   first snapshot of a file and whenever it changes;
//! - `snapshot`: one collection, at `at`: `job_running_since`, the TaskManager CPU and memory the
//!   context reported, and `metrics`, either `{"flink": ...}` (the aggregated Flink metrics as
//!   collected) or `{"scaling": ...}` (scaling metrics a collector already converted);
//! - `decision`: the cycle's [`DecisionRecord`] (`record`).
//!
//! Each file is self-contained: after a rotation the new file repeats the header, the last
//! configuration and the last topology, so any one file replays on its own. [`Recorder`] writes
//! them; [`read_recording`] reads one back.

mod hooks;
mod writer;

pub use hooks::{DecisionPublisher, RecordingCollector};
pub use writer::{Recorder, RecorderOptions, job_file_name};

use autoscaler_core::Configuration;
use autoscaler_core::record::DecisionRecord;
use autoscaler_metrics::collection::RawJobMetrics;
use autoscaler_metrics::{CollectedMetrics, JobTopology};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The format tag of a recording's header line.
pub const RECORDING_FORMAT: &str = "flink-autoscaler-recording/1";

/// The largest recording file [`read_recording_file`] accepts (the writer rotates far below it).
pub const MAX_RECORDING_BYTES: u64 = 1 << 30;

/// The metrics of one recorded collection, in the form the collector returned them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedMetrics {
    /// Aggregated Flink metrics, before conversion (REST collector, simulator).
    Flink(RawJobMetrics),
    /// Scaling metrics the collector converted itself.
    Scaling(CollectedMetrics),
}

/// One collection as the cycle received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The collection instant (the cycle's `now`).
    pub at: DateTime<Utc>,
    /// When the job last switched to RUNNING.
    pub job_running_since: DateTime<Utc>,
    /// TaskManager CPU as the context reported it.
    pub task_manager_cpu: Option<f64>,
    /// TaskManager memory (bytes) as the context reported it.
    pub task_manager_memory: Option<u64>,
    /// The metrics.
    pub metrics: RecordedMetrics,
}

/// One line of a recording.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// The job's effective configuration from `at` on.
    Config {
        /// Since when.
        at: DateTime<Utc>,
        /// The configuration.
        config: Configuration,
    },
    /// The job graph from `at` on.
    Topology {
        /// Since when.
        at: DateTime<Utc>,
        /// The graph.
        topology: Box<JobTopology>,
    },
    /// A collection.
    Snapshot(Box<Snapshot>),
    /// A cycle's decision.
    Decision(Box<DecisionRecord>),
}

/// A recording read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The job key of the header.
    pub job: String,
    /// The lines after the header, in file order.
    pub entries: Vec<Entry>,
}

/// A recording that cannot be read: the line (1-based) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The file could not be read.
    #[error("cannot read the recording: {0}")]
    Io(String),
    /// A line is not what the format says.
    #[error("invalid recording: line {line}: {message}")]
    Invalid {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

fn invalid(line: usize, message: impl Into<String>) -> RecordingError {
    RecordingError::Invalid {
        line,
        message: message.into(),
    }
}

/// The topology in the replay scenario's `topology` shape.
pub fn topology_json(topology: &JobTopology) -> Value {
    let vertices: Vec<Value> = topology
        .vertices()
        .iter()
        .map(|v| {
            let mut o = Map::new();
            o.insert("id".into(), Value::from(v.id.as_str()));
            if let Some(name) = &v.name {
                o.insert("name".into(), Value::from(name.as_str()));
            }
            o.insert("parallelism".into(), Value::from(v.parallelism.get()));
            o.insert("max_parallelism".into(), Value::from(v.max_parallelism.get()));
            o.insert("num_source_partitions".into(), Value::from(v.num_source_partitions));
            o.insert("finished".into(), Value::from(v.finished));
            if let Some(group) = &v.slot_sharing_group {
                o.insert("slot_sharing_group".into(), Value::from(group.as_str()));
            }
            Value::Object(o)
        })
        .collect();
    let edges: Vec<Value> = topology
        .vertices()
        .iter()
        .flat_map(|v| {
            v.outputs.iter().map(move |(to, strategy)| {
                json!({
                    "from": v.id.as_str(),
                    "to": topology.vertices()[*to].id.as_str(),
                    "ship_strategy": serde_json::to_value(strategy).unwrap_or(Value::Null),
                })
            })
        })
        .collect();
    json!({"vertices": vertices, "edges": edges})
}

fn time(v: Option<&Value>, line: usize, key: &str) -> Result<DateTime<Utc>, RecordingError> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(line, format!("{key}: expected an RFC 3339 time")))?;
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| invalid(line, format!("{key}: {e}")))
}

fn parse_entry(value: &Value, line: usize) -> Result<Entry, RecordingError> {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
    let field = |key: &str| {
        value
            .get(key)
            .ok_or_else(|| invalid(line, format!("{kind}: missing `{key}`")))
    };
    let typed = |key: &str, e: serde_json::Error| invalid(line, format!("{kind}.{key}: {e}"));
    match kind {
        "config" => Ok(Entry::Config {
            at: time(value.get("at"), line, "at")?,
            config: serde_json::from_value(field("config")?.clone()).map_err(|e| typed("config", e))?,
        }),
        "topology" => Ok(Entry::Topology {
            at: time(value.get("at"), line, "at")?,
            topology: Box::new(
                crate::replay::parse_topology(field("topology")?)
                    .map_err(|e| invalid(line, format!("{}: {}", e.path, e.message)))?,
            ),
        }),
        "snapshot" => {
            let optional_f64 = value.get("task_manager_cpu").and_then(Value::as_f64);
            let memory = value.get("task_manager_memory").and_then(Value::as_u64);
            Ok(Entry::Snapshot(Box::new(Snapshot {
                at: time(value.get("at"), line, "at")?,
                job_running_since: time(value.get("job_running_since"), line, "job_running_since")?,
                task_manager_cpu: optional_f64,
                task_manager_memory: memory,
                metrics: serde_json::from_value(field("metrics")?.clone()).map_err(|e| typed("metrics", e))?,
            })))
        }
        "decision" => Ok(Entry::Decision(Box::new(
            serde_json::from_value(field("record")?.clone()).map_err(|e| typed("record", e))?,
        ))),
        "header" => Err(invalid(line, "a second header (files are not to be concatenated)")),
        other => Err(invalid(line, format!("unknown kind {other:?}"))),
    }
}

/// The JSON line of an entry (without the newline).
pub fn entry_line(entry: &Entry) -> String {
    let value = match entry {
        Entry::Config { at, config } => json!({"kind": "config", "at": at, "config": config}),
        Entry::Topology { at, topology } => {
            json!({"kind": "topology", "at": at, "topology": topology_json(topology)})
        }
        Entry::Snapshot(s) => json!({
            "kind": "snapshot",
            "at": s.at,
            "job_running_since": s.job_running_since,
            "task_manager_cpu": s.task_manager_cpu,
            "task_manager_memory": s.task_manager_memory,
            "metrics": s.metrics,
        }),
        Entry::Decision(record) => json!({"kind": "decision", "at": record.at, "record": record}),
    };
    value.to_string()
}

/// The header line of a recording of `job` created at `created`.
pub fn header_line(job: &str, created: DateTime<Utc>) -> String {
    json!({"kind": "header", "format": RECORDING_FORMAT, "job": job, "created": created}).to_string()
}

/// Reads a recording from its text. Blank lines are skipped; a truncated last line (a crash while
/// writing) is ignored, every other defect is an error naming its line.
pub fn read_recording(text: &str) -> Result<Recording, RecordingError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .peekable();
    let (first, header) = lines.next().ok_or_else(|| invalid(1, "empty recording"))?;
    let header: Value = serde_json::from_str(header).map_err(|e| invalid(first + 1, e.to_string()))?;
    if header.get("kind").and_then(Value::as_str) != Some("header")
        || header.get("format").and_then(Value::as_str) != Some(RECORDING_FORMAT)
    {
        return Err(invalid(
            first + 1,
            format!("expected a header line with format {RECORDING_FORMAT:?}"),
        ));
    }
    let job = header
        .get("job")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(first + 1, "header: missing `job`"))?
        .to_owned();
    let mut entries = Vec::new();
    while let Some((i, line)) = lines.next() {
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) if lines.peek().is_none() && !text.ends_with('\n') => break,
            Err(e) => return Err(invalid(i + 1, e.to_string())),
        };
        entries.push(parse_entry(&value, i + 1)?);
    }
    Ok(Recording { job, entries })
}

/// Reads the recording file at `path` (at most [`MAX_RECORDING_BYTES`]).
pub fn read_recording_file(path: &std::path::Path) -> Result<Recording, RecordingError> {
    let size = std::fs::metadata(path)
        .map_err(|e| RecordingError::Io(format!("{}: {e}", path.display())))?
        .len();
    if size > MAX_RECORDING_BYTES {
        return Err(RecordingError::Io(format!(
            "{}: {size} bytes, more than the {MAX_RECORDING_BYTES} a recording may have",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| RecordingError::Io(format!("{}: {e}", path.display())))?;
    read_recording(&text)
}
