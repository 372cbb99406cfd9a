//! A test-only loader for `flink-autoscaler-scenario/1` files in metrics mode (replay-format §3):
//! just enough of the format to drive the windowing and the evaluation.

#![allow(dead_code)]

use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluatedVertexMetrics, JobTopology, MetricHistory, MetricValues, ShipStrategy,
    VertexId, VertexSpec,
};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

#[derive(Deserialize)]
struct ScenarioFile {
    now: DateTime<Utc>,
    #[serde(default)]
    config: BTreeMap<String, String>,
    job: Job,
    topology: Topology,
    metrics: Vec<Snapshot>,
}

#[derive(Deserialize)]
struct Job {
    running_since: DateTime<Utc>,
}

#[derive(Deserialize)]
struct Topology {
    vertices: Vec<Vertex>,
    #[serde(default)]
    edges: Vec<Edge>,
}

#[derive(Deserialize)]
struct Vertex {
    id: String,
    parallelism: u32,
    max_parallelism: u32,
    #[serde(default)]
    num_source_partitions: u32,
    #[serde(default)]
    finished: bool,
}

#[derive(Deserialize)]
struct Edge {
    from: String,
    to: String,
    ship_strategy: String,
}

#[derive(Deserialize)]
struct Snapshot {
    at: DateTime<Utc>,
    #[serde(default)]
    vertices: BTreeMap<VertexId, MetricValues>,
    #[serde(default)]
    global: MetricValues,
}

/// A loaded scenario: the inputs of the windowing and the evaluation.
pub struct Scenario {
    pub now: DateTime<Utc>,
    pub running_since: DateTime<Utc>,
    pub window: Duration,
    pub stabilization: Duration,
    pub topology: JobTopology,
    pub history: MetricHistory,
}

#[derive(Deserialize)]
struct ExpectedFile {
    evaluated: Evaluated,
}

/// The `evaluated` part of a `flink-autoscaler-result/1` file.
#[derive(Deserialize)]
pub struct Evaluated {
    pub vertices: BTreeMap<VertexId, EvaluatedVertexMetrics>,
    #[serde(default)]
    pub global: EvaluatedVertexMetrics,
}

/// A bench scenario or its expected result: they live once in the repository, with the
/// workspace's bench fixtures (`tests/fixtures/bench/`).
pub fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/bench")
        .join(name)
}

pub fn load_scenario(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).expect("readable scenario");
    let file: ScenarioFile = serde_json::from_str(&text).expect("valid scenario");
    let vertices = file
        .topology
        .vertices
        .into_iter()
        .map(|v| {
            VertexSpec::new(v.id, v.parallelism, v.max_parallelism)
                .with_source_partitions(v.num_source_partitions)
                .with_finished(v.finished)
        })
        .collect();
    let edges = file
        .topology
        .edges
        .into_iter()
        .map(|e| EdgeSpec::new(e.from, e.to, ShipStrategy::parse_lenient(&e.ship_strategy)))
        .collect();
    let topology = JobTopology::new_lenient(vertices, edges).expect("valid topology");
    let history = file
        .metrics
        .into_iter()
        .map(|s| {
            (
                s.at,
                CollectedMetrics {
                    vertex_metrics: s.vertices,
                    global_metrics: s.global,
                },
            )
        })
        .collect();
    let duration = |key: &str, default: Duration| {
        file.config
            .get(&format!("job.autoscaler.{key}"))
            .map_or(default, |v| parse_duration(v))
    };
    Scenario {
        now: file.now,
        running_since: file.job.running_since,
        window: duration("metrics.window", Duration::from_secs(15 * 60)),
        stabilization: duration("stabilization.interval", Duration::from_secs(5 * 60)),
        topology,
        history,
    }
}

pub fn load_expected(path: &Path) -> Evaluated {
    let text = std::fs::read_to_string(path).expect("readable result");
    let file: ExpectedFile = serde_json::from_str(&text).expect("valid result");
    file.evaluated
}

/// `<integer>[ ]<unit>` with the units the fixtures use.
fn parse_duration(text: &str) -> Duration {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let amount: u64 = text[..split].parse().expect("duration amount");
    let unit_secs = match text[split..].trim().to_ascii_lowercase().as_str() {
        "" | "ms" => return Duration::from_millis(amount),
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        other => panic!("unsupported duration unit {other:?}"),
    };
    Duration::from_secs(amount * unit_secs)
}
