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

mod writer;

pub use writer::{Recorder, RecorderOptions, job_file_name};

use autoscaler_core::config::Configuration;
use autoscaler_core::record::DecisionRecord;
use autoscaler_metrics::collection::RawJobMetrics;
use autoscaler_metrics::{CollectedMetrics, JobTopology};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The format tag of a recording's header line.
pub const RECORDING_FORMAT: &str = "flink-autoscaler-recording/1";

/// The largest recording file [`read_recording_file`] and [`open_recording_file`] accept (the writer rotates far below it).
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
                crate::parse_topology(field("topology")?)
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

/// The longest line a reader accepts (a snapshot of a 1000-vertex job is a few MB).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Reads a recording line by line, holding one line at a time: [`RecordingReader::job`] from the
/// header, then each entry with its 1-based line number from [`RecordingReader::next_entry`].
/// Blank lines are skipped; a truncated last line (a crash while writing: no newline and not JSON)
/// ends the recording, every other defect is an error naming its line. Lines are bounded by
/// [`MAX_LINE_BYTES`]; the caller bounds the whole input (`Read::take`).
pub struct RecordingReader<R> {
    input: R,
    line: usize,
    job: String,
    buffer: Vec<u8>,
}

impl<R: std::io::BufRead> RecordingReader<R> {
    /// Reads the header.
    ///
    /// # Errors
    /// An empty input, or a first line that is not a header of [`RECORDING_FORMAT`].
    pub fn new(input: R) -> Result<Self, RecordingError> {
        let mut reader = Self {
            input,
            line: 0,
            job: String::new(),
            buffer: Vec::new(),
        };
        let Some((line, text, _)) = reader.next_line()? else {
            return Err(invalid(1, "empty recording"));
        };
        let header: Value = serde_json::from_str(&text).map_err(|e| invalid(line, e.to_string()))?;
        if header.get("kind").and_then(Value::as_str) != Some("header")
            || header.get("format").and_then(Value::as_str) != Some(RECORDING_FORMAT)
        {
            return Err(invalid(
                line,
                format!("expected a header line with format {RECORDING_FORMAT:?}"),
            ));
        }
        reader.job = header
            .get("job")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(line, "header: missing `job`"))?
            .to_owned();
        Ok(reader)
    }

    /// The job key of the header.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// The next non-blank line: its number, its text and whether it ended with a newline.
    fn next_line(&mut self) -> Result<Option<(usize, String, bool)>, RecordingError> {
        loop {
            self.buffer.clear();
            self.line += 1;
            let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX) + 1;
            let read = std::io::BufRead::read_until(
                &mut std::io::Read::take(&mut self.input, limit),
                b'\n',
                &mut self.buffer,
            )
            .map_err(|e| RecordingError::Io(e.to_string()))?;
            if read == 0 {
                return Ok(None);
            }
            let terminated = self.buffer.last() == Some(&b'\n');
            if !terminated && self.buffer.len() > MAX_LINE_BYTES {
                return Err(invalid(
                    self.line,
                    format!("longer than the limit of {MAX_LINE_BYTES} bytes"),
                ));
            }
            let text = String::from_utf8(std::mem::take(&mut self.buffer))
                .map_err(|e| invalid(self.line, format!("not UTF-8: {e}")))?;
            if !text.trim().is_empty() {
                return Ok(Some((self.line, text, terminated)));
            }
        }
    }

    /// The next entry and its line number, `None` at the end.
    ///
    /// # Errors
    /// A line that is not an entry of the format.
    pub fn next_entry(&mut self) -> Result<Option<(usize, Entry)>, RecordingError> {
        let Some((line, text, terminated)) = self.next_line()? else {
            return Ok(None);
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) if !terminated => return Ok(None),
            Err(e) => return Err(invalid(line, e.to_string())),
        };
        parse_entry(&value, line).map(|entry| Some((line, entry)))
    }
}

/// Reads a recording from its text. Blank lines are skipped; a truncated last line (a crash while
/// writing) is ignored, every other defect is an error naming its line.
pub fn read_recording(text: &str) -> Result<Recording, RecordingError> {
    let mut reader = RecordingReader::new(text.as_bytes())?;
    let mut entries = Vec::new();
    while let Some((_, entry)) = reader.next_entry()? {
        entries.push(entry);
    }
    Ok(Recording {
        job: reader.job,
        entries,
    })
}

/// Opens the recording file at `path` for reading, bounded by [`MAX_RECORDING_BYTES`] (a larger
/// file is an error when the reader reaches the bound, so `/dev/zero` cannot exhaust memory).
///
/// # Errors
/// When the file cannot be opened or its header is not a recording's.
pub fn open_recording_file(
    path: &std::path::Path,
) -> Result<RecordingReader<impl std::io::BufRead + use<>>, RecordingError> {
    let file = std::fs::File::open(path).map_err(|e| RecordingError::Io(format!("{}: {e}", path.display())))?;
    let bounded = BoundedRead {
        inner: std::io::Read::take(file, MAX_RECORDING_BYTES + 1),
        left: MAX_RECORDING_BYTES,
    };
    RecordingReader::new(std::io::BufReader::new(bounded))
}

/// A reader that fails once more than `left` bytes were read.
struct BoundedRead<R> {
    inner: R,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for BoundedRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let len = u64::try_from(n).unwrap_or(u64::MAX);
        if len > self.left {
            return Err(std::io::Error::other(format!(
                "larger than the limit of {MAX_RECORDING_BYTES} bytes"
            )));
        }
        self.left -= len;
        Ok(n)
    }
}

/// Reads the recording file at `path` (at most [`MAX_RECORDING_BYTES`]).
pub fn read_recording_file(path: &std::path::Path) -> Result<Recording, RecordingError> {
    let mut reader = open_recording_file(path)?;
    let mut entries = Vec::new();
    while let Some((_, entry)) = reader.next_entry()? {
        entries.push(entry);
    }
    Ok(Recording {
        job: reader.job,
        entries,
    })
}
