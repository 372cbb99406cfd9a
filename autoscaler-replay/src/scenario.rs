//! Parsing a `flink-autoscaler-scenario/1` document (see `replay-format.md`) into typed values,
//! with errors that name the offending field by its JSON path.

use autoscaler_core::{
    DelayedScaleDown, RecommendedParallelism, ScalingHistory, ScalingRecord, ScalingSummary, ScalingTracking,
    VertexDelayedScaleDownInfo, config::Configuration,
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology,
    MetricValues, MetricsError, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// The format tag a scenario must carry.
pub const SCENARIO_FORMAT: &str = "flink-autoscaler-scenario/1";

/// Invalid scenario input: the JSON path of the offending field and what was wrong with it.
///
/// Displayed as one line, `invalid scenario: <path>: <message>`, with every control character
/// (newline, carriage return, the ESC of an ANSI sequence, ...) and Unicode line separator that the
/// input smuggled into a key or value escaped as `\n`, `\u{1b}`, ...: the input cannot split the
/// message or drive the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// JSON path of the offending field, e.g. `topology.vertices[1].parallelism`.
    pub path: String,
    /// What was expected and what was found.
    pub message: String,
}

impl std::error::Error for ScenarioError {}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid scenario: ")?;
        write_escaped(f, &self.path)?;
        f.write_str(": ")?;
        write_escaped(f, &self.message)
    }
}

/// `text` with control characters and line/paragraph separators escaped (`char::escape_default`).
fn write_escaped(f: &mut std::fmt::Formatter<'_>, text: &str) -> std::fmt::Result {
    use std::fmt::Write as _;
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            write!(f, "{}", c.escape_default())?;
        } else {
            f.write_char(c)?;
        }
    }
    Ok(())
}

impl ScenarioError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The job facts of a scenario (`job`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobInfo {
    /// When the job last switched to RUNNING.
    pub running_since: Option<DateTime<Utc>>,
    /// TM CPU as the context reports it.
    pub taskmanager_cpu: Option<f64>,
    /// TM process memory in bytes as the context reports it.
    pub taskmanager_memory: Option<u64>,
}

/// What the scenario hands to the pipeline: a metric history or already evaluated metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum ScenarioInput {
    /// `metrics`: collected snapshots in ascending time order, the last at `now`.
    Metrics(Vec<(DateTime<Utc>, CollectedMetrics)>),
    /// `evaluated`: metrics handed directly to the decision stage.
    Evaluated(Box<EvaluatedMetrics>),
}

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The cycle instant.
    pub now: DateTime<Utc>,
    /// Flink configuration.
    pub config: Configuration,
    /// Job facts.
    pub job: JobInfo,
    /// The job graph.
    pub topology: JobTopology,
    /// Collected metrics or evaluated metrics.
    pub input: ScenarioInput,
    /// Past scaling decisions (entries for unknown vertices dropped).
    pub scaling_history: ScalingHistory,
    /// Past rescales.
    pub scaling_tracking: ScalingTracking,
    /// Pending delayed scale-downs.
    pub delayed_scale_down: DelayedScaleDown,
}

type Res<T> = Result<T, ScenarioError>;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        other => type_name(other).to_owned(),
    }
}

fn as_object<'a>(v: &'a Value, path: &str) -> Res<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| ScenarioError::new(path, format!("expected an object, got {}", type_name(v))))
}

fn as_array<'a>(v: &'a Value, path: &str) -> Res<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| ScenarioError::new(path, format!("expected an array, got {}", type_name(v))))
}

fn as_str<'a>(v: &'a Value, path: &str) -> Res<&'a str> {
    v.as_str()
        .ok_or_else(|| ScenarioError::new(path, format!("expected a string, got {}", describe(v))))
}

fn as_bool(v: &Value, path: &str) -> Res<bool> {
    v.as_bool()
        .ok_or_else(|| ScenarioError::new(path, format!("expected a boolean, got {}", describe(v))))
}

fn as_int(v: &Value, path: &str, min: i64) -> Res<i64> {
    match v.as_i64() {
        Some(n) if n >= min => Ok(n),
        _ => Err(ScenarioError::new(
            path,
            format!("expected integer >= {min}, got {}", describe(v)),
        )),
    }
}

fn as_u32(v: &Value, path: &str, min: i64) -> Res<u32> {
    let n = as_int(v, path, min)?;
    u32::try_from(n).map_err(|_| ScenarioError::new(path, format!("expected integer <= {}, got {n}", u32::MAX)))
}

/// A Number per §2: a JSON number or `"NaN"`, `"Infinity"`, `"-Infinity"`; `null` (NaN) only where allowed.
fn as_number(v: &Value, path: &str, null_allowed: bool) -> Res<f64> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| ScenarioError::new(path, "number out of range")),
        Value::String(s) => autoscaler_metrics::json_number::parse_non_finite(s).ok_or_else(|| {
            ScenarioError::new(
                path,
                format!("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", got {s:?}"),
            )
        }),
        Value::Null if null_allowed => Ok(f64::NAN),
        other => Err(ScenarioError::new(
            path,
            format!("expected a number, got {}", describe(other)),
        )),
    }
}

fn as_time(v: &Value, path: &str) -> Res<DateTime<Utc>> {
    let s = as_str(v, path)?;
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| ScenarioError::new(path, format!("expected an RFC 3339 time with offset, got {s:?} ({e})")))
}

fn metric_name(name: &str, path: &str) -> Res<ScalingMetric> {
    ScalingMetric::from_name(name).ok_or_else(|| ScenarioError::new(path, format!("unknown metric name {name:?}")))
}

fn optional<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key)
}

fn required<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Res<&'a Value> {
    obj.get(key)
        .ok_or_else(|| ScenarioError::new(path, "required field is missing"))
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Parses a `{current, average}` object (both optional Numbers, null = NaN).
fn parse_evaluated_metric(v: &Value, path: &str) -> Res<EvaluatedScalingMetric> {
    let obj = as_object(v, path)?;
    let mut m = EvaluatedScalingMetric::NAN;
    for (k, val) in obj {
        let p = join(path, k);
        match k.as_str() {
            "current" => m.current = as_number(val, &p, true)?,
            "average" => m.average = as_number(val, &p, true)?,
            _ => {}
        }
    }
    Ok(m)
}

fn parse_evaluated_map(v: &Value, path: &str) -> Res<EvaluatedVertexMetrics> {
    let obj = as_object(v, path)?;
    let mut out = EvaluatedVertexMetrics::new();
    for (name, val) in obj {
        let p = join(path, name);
        out.insert(metric_name(name, &p)?, parse_evaluated_metric(val, &p)?);
    }
    Ok(out)
}

fn parse_metric_values(v: &Value, path: &str) -> Res<MetricValues> {
    let obj = as_object(v, path)?;
    let mut out = MetricValues::new();
    for (name, val) in obj {
        let p = join(path, name);
        out.insert(metric_name(name, &p)?, as_number(val, &p, true)?);
    }
    Ok(out)
}

fn topology_error(e: MetricsError, vertex_paths: &BTreeMap<VertexId, usize>) -> ScenarioError {
    let at = |v: &VertexId| {
        vertex_paths
            .get(v)
            .map(|i| format!("topology.vertices[{i}]"))
            .unwrap_or_default()
    };
    match &e {
        MetricsError::DuplicateVertex { vertex } => {
            ScenarioError::new(format!("{}.id", at(vertex)), format!("duplicate vertex id {vertex:?}"))
        }
        MetricsError::Cycle { vertex } => ScenarioError::new(
            "topology.edges",
            format!("the graph has a cycle through vertex {vertex:?}"),
        ),
        other => ScenarioError::new("topology", other.to_string()),
    }
}

pub(crate) fn parse_topology(v: &Value) -> Res<JobTopology> {
    let obj = as_object(v, "topology")?;
    let vertices = as_array(required(obj, "vertices", "topology.vertices")?, "topology.vertices")?;
    if vertices.is_empty() {
        return Err(ScenarioError::new("topology.vertices", "expected at least one vertex"));
    }
    let mut specs = Vec::with_capacity(vertices.len());
    let mut seen: BTreeMap<VertexId, usize> = BTreeMap::new();
    for (i, vv) in vertices.iter().enumerate() {
        let path = format!("topology.vertices[{i}]");
        let o = as_object(vv, &path)?;
        let id_path = join(&path, "id");
        let id = as_str(required(o, "id", &id_path)?, &id_path)?;
        if id.is_empty() {
            return Err(ScenarioError::new(id_path, "expected a non-empty string"));
        }
        let id = VertexId::new(id);
        if seen.insert(id.clone(), i).is_some() {
            return Err(ScenarioError::new(
                id_path,
                format!("duplicate vertex id {:?}", id.as_str()),
            ));
        }
        let p_path = join(&path, "parallelism");
        let parallelism = as_u32(required(o, "parallelism", &p_path)?, &p_path, 1)?;
        let mp_path = join(&path, "max_parallelism");
        let max_parallelism = as_u32(required(o, "max_parallelism", &mp_path)?, &mp_path, 1)?;
        let mut spec = VertexSpec::new(id, parallelism, max_parallelism);
        if let Some(n) = optional(o, "name") {
            let p = join(&path, "name");
            if !n.is_null() {
                spec.name = Some(as_str(n, &p)?.to_owned());
            }
        }
        if let Some(n) = optional(o, "num_source_partitions") {
            spec.num_source_partitions = as_u32(n, &join(&path, "num_source_partitions"), 0)?;
        }
        if let Some(f) = optional(o, "finished") {
            spec.finished = as_bool(f, &join(&path, "finished"))?;
        }
        if let Some(g) = optional(o, "slot_sharing_group")
            && !g.is_null()
        {
            spec.slot_sharing_group = Some(as_str(g, &join(&path, "slot_sharing_group"))?.to_owned());
        }
        specs.push(spec);
    }
    let mut edges = Vec::new();
    let mut edge_pairs = std::collections::BTreeSet::new();
    if let Some(ev) = optional(obj, "edges") {
        for (i, e) in as_array(ev, "topology.edges")?.iter().enumerate() {
            let path = format!("topology.edges[{i}]");
            let o = as_object(e, &path)?;
            let end = |key: &str| -> Res<VertexId> {
                let p = join(&path, key);
                let id = as_str(required(o, key, &p)?, &p)?;
                if !seen.contains_key(id) {
                    return Err(ScenarioError::new(p, format!("unknown vertex id {id:?}")));
                }
                Ok(VertexId::new(id))
            };
            let from = end("from")?;
            let to = end("to")?;
            let strategy = match optional(o, "ship_strategy") {
                Some(s) if !s.is_null() => ShipStrategy::parse_lenient(as_str(s, &join(&path, "ship_strategy"))?),
                _ => ShipStrategy::Unknown,
            };
            if !edge_pairs.insert((from.clone(), to.clone())) {
                return Err(ScenarioError::new(path, format!("second edge from {from:?} to {to:?}")));
            }
            edges.push(EdgeSpec::new(from, to, strategy));
        }
    }
    JobTopology::new_lenient(specs, edges).map_err(|e| topology_error(e, &seen))
}

fn check_vertex(topology: &JobTopology, id: &str, path: &str) -> Res<VertexId> {
    topology
        .get(id)
        .map(|v| v.id.clone())
        .ok_or_else(|| ScenarioError::new(path, format!("unknown vertex id {id:?}")))
}

/// The `metrics` member: parsed with the rest of the document, or its snapshots still unparsed
/// (see [`parse_scenario`]), each parsed when it is converted.
enum MetricsMember<'a> {
    Parsed(Value),
    Unparsed(&'a RawValue),
}

fn parse_metrics(
    member: MetricsMember<'_>,
    topology: &JobTopology,
    now: DateTime<Utc>,
) -> Res<Vec<(DateTime<Utc>, CollectedMetrics)>> {
    let mut out: Vec<(DateTime<Utc>, CollectedMetrics)> = Vec::new();
    match member {
        MetricsMember::Parsed(v) => {
            let arr = as_array(&v, "metrics")?;
            if arr.is_empty() {
                return Err(ScenarioError::new("metrics", "expected at least one snapshot"));
            }
            out.reserve_exact(arr.len());
            for (i, s) in arr.iter().enumerate() {
                let snapshot = parse_snapshot(i, s, out.last().map(|(at, _)| *at), topology)?;
                out.push(snapshot);
            }
        }
        MetricsMember::Unparsed(raw) => {
            // The array, then one snapshot at a time; any failure sends the caller to the whole
            // document's parse, which says what is wrong.
            let not_parsed = || ScenarioError::new("metrics", "not parsed by sections");
            let arr: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|_| not_parsed())?;
            if arr.is_empty() {
                return Err(ScenarioError::new("metrics", "expected at least one snapshot"));
            }
            out.reserve_exact(arr.len());
            for (i, s) in arr.iter().enumerate() {
                let s = member_value(s, 2).ok_or_else(not_parsed)?;
                let snapshot = parse_snapshot(i, &s, out.last().map(|(at, _)| *at), topology)?;
                out.push(snapshot);
            }
        }
    }
    if let Some((last, _)) = out.last()
        && *last != now
    {
        return Err(ScenarioError::new(
            format!("metrics[{}].at", out.len() - 1),
            "the last snapshot must be at `now`",
        ));
    }
    Ok(out)
}

/// Snapshot `i` of `metrics`, taken after `prev` (the previous snapshot's time).
fn parse_snapshot(
    i: usize,
    s: &Value,
    prev: Option<DateTime<Utc>>,
    topology: &JobTopology,
) -> Res<(DateTime<Utc>, CollectedMetrics)> {
    let path = format!("metrics[{i}]");
    let o = as_object(s, &path)?;
    let at_path = join(&path, "at");
    let at = as_time(required(o, "at", &at_path)?, &at_path)?;
    if let Some(prev) = prev
        && at <= prev
    {
        return Err(ScenarioError::new(
            at_path,
            "snapshots must be in strictly ascending time order",
        ));
    }
    let mut snapshot = CollectedMetrics::default();
    if let Some(vs) = optional(o, "vertices") {
        let vp = join(&path, "vertices");
        for (id, m) in as_object(vs, &vp)? {
            let p = join(&vp, id);
            let vid = check_vertex(topology, id, &p)?;
            snapshot.vertex_metrics.insert(vid, parse_metric_values(m, &p)?);
        }
    }
    if let Some(g) = optional(o, "global") {
        snapshot.global_metrics = parse_metric_values(g, &join(&path, "global"))?;
    }
    Ok((at, snapshot))
}

fn parse_evaluated(v: &Value, topology: &JobTopology) -> Res<EvaluatedMetrics> {
    let obj = as_object(v, "evaluated")?;
    let vs = required(obj, "vertices", "evaluated.vertices")?;
    let mut out = EvaluatedMetrics::default();
    for (id, m) in as_object(vs, "evaluated.vertices")? {
        let p = format!("evaluated.vertices.{id}");
        let vid = check_vertex(topology, id, &p)?;
        out.vertices.insert(vid, parse_evaluated_map(m, &p)?);
    }
    if let Some(g) = optional(obj, "global")
        && !g.is_null()
    {
        out.global = parse_evaluated_map(g, "evaluated.global")?;
    }
    Ok(out)
}

fn parse_history(v: &Value, topology: &JobTopology) -> Res<ScalingHistory> {
    let mut out = ScalingHistory::new();
    for (id, entries) in as_object(v, "scaling_history")? {
        let path = format!("scaling_history.{id}");
        let mut per_vertex = BTreeMap::new();
        for (i, e) in as_array(entries, &path)?.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let o = as_object(e, &p)?;
            let at = as_time(required(o, "at", &join(&p, "at"))?, &join(&p, "at"))?;
            let cp = join(&p, "current_parallelism");
            let current = as_u32(required(o, "current_parallelism", &cp)?, &cp, 0)?;
            let np = join(&p, "new_parallelism");
            let new = as_u32(required(o, "new_parallelism", &np)?, &np, 0)?;
            let metrics = match optional(o, "metrics") {
                Some(m) if !m.is_null() => parse_evaluated_map(m, &join(&p, "metrics"))?,
                _ => EvaluatedVertexMetrics::new(),
            };
            per_vertex.insert(
                at,
                ScalingSummary {
                    current_parallelism: current,
                    new_parallelism: new,
                    metrics,
                },
            );
        }
        // Entries for vertices that are not in the topology are dropped (§3.1).
        if let Some(v) = topology.get(id)
            && !per_vertex.is_empty()
        {
            out.insert(v.id.clone(), per_vertex);
        }
    }
    Ok(out)
}

fn parse_tracking(v: &Value) -> Res<ScalingTracking> {
    let mut out = ScalingTracking::default();
    for (i, r) in as_array(v, "scaling_tracking")?.iter().enumerate() {
        let p = format!("scaling_tracking[{i}]");
        let o = as_object(r, &p)?;
        let at = as_time(required(o, "at", &join(&p, "at"))?, &join(&p, "at"))?;
        let restart_duration = match optional(o, "restart_duration_ms") {
            None | Some(Value::Null) => None,
            Some(d) => {
                let ms = as_int(d, &join(&p, "restart_duration_ms"), 0)?;
                Some(Duration::from_millis(ms.unsigned_abs()))
            }
        };
        out.scaling_records.insert(at, ScalingRecord { restart_duration });
    }
    Ok(out)
}

fn parse_delayed(v: &Value, topology: &JobTopology) -> Res<DelayedScaleDown> {
    let mut out = DelayedScaleDown::default();
    for (id, info) in as_object(v, "delayed_scale_down")? {
        let path = format!("delayed_scale_down.{id}");
        let vid = check_vertex(topology, id, &path)?;
        let o = as_object(info, &path)?;
        let ftp = join(&path, "first_trigger_time");
        let first_trigger_time = as_time(required(o, "first_trigger_time", &ftp)?, &ftp)?;
        let mut recommended = VecDeque::new();
        if let Some(list) = optional(o, "recommended_parallelisms") {
            let lp = join(&path, "recommended_parallelisms");
            for (i, r) in as_array(list, &lp)?.iter().enumerate() {
                let p = format!("{lp}[{i}]");
                let ro = as_object(r, &p)?;
                let tt = join(&p, "trigger_time");
                let trigger_time = as_time(required(ro, "trigger_time", &tt)?, &tt)?;
                let pp = join(&p, "parallelism");
                let parallelism = as_u32(required(ro, "parallelism", &pp)?, &pp, 0)?;
                let ob = join(&p, "outside_utilization_bound");
                let outside_utilization_bound = match optional(ro, "outside_utilization_bound") {
                    Some(b) => as_bool(b, &ob)?,
                    None => false,
                };
                recommended.push_back(RecommendedParallelism {
                    trigger_time,
                    parallelism,
                    outside_utilization_bound,
                });
            }
        }
        out.delayed_vertices.insert(
            vid,
            VertexDelayedScaleDownInfo {
                first_trigger_time,
                recommended_parallelisms: recommended,
            },
        );
    }
    Ok(out)
}

fn parse_job(v: Option<&Value>) -> Res<JobInfo> {
    let mut job = JobInfo::default();
    let Some(v) = v else { return Ok(job) };
    if v.is_null() {
        return Ok(job);
    }
    let o = as_object(v, "job")?;
    if let Some(t) = optional(o, "running_since")
        && !t.is_null()
    {
        job.running_since = Some(as_time(t, "job.running_since")?);
    }
    if let Some(c) = optional(o, "taskmanager_cpu")
        && !c.is_null()
    {
        job.taskmanager_cpu = Some(as_number(c, "job.taskmanager_cpu", false)?);
    }
    if let Some(m) = optional(o, "taskmanager_memory")
        && !m.is_null()
    {
        let s = as_str(m, "job.taskmanager_memory")?;
        job.taskmanager_memory = Some(
            autoscaler_core::config::parse_memory_size(s)
                .map_err(|e| ScenarioError::new("job.taskmanager_memory", e))?,
        );
    }
    Ok(job)
}

fn parse_config(v: Option<&Value>) -> Res<Configuration> {
    let mut conf = Configuration::new();
    let Some(v) = v else { return Ok(conf) };
    if v.is_null() {
        return Ok(conf);
    }
    for (k, val) in as_object(v, "config")? {
        let p = format!("config.{k}");
        conf.set(k.clone(), as_str(val, &p)?);
    }
    Ok(conf)
}

/// Parses and validates a scenario document.
///
/// The document is parsed one top-level member at a time, and its `metrics` one snapshot at a time,
/// each converted and dropped before the next is parsed: the parsed JSON of a whole document takes
/// many times its text. A document that fails that way (invalid JSON, an invalid field) is parsed
/// again as a whole, as it always was, so the scenario and every error are exactly those of the
/// whole document's parse.
pub fn parse_scenario(text: &str) -> Res<Scenario> {
    parse_by_members(text).map_or_else(|| parse_whole(text), Ok)
}

/// [`parse_scenario`] on the document parsed as a whole.
fn parse_whole(text: &str) -> Res<Scenario> {
    let root: Value =
        serde_json::from_str(text).map_err(|e| ScenarioError::new("$", format!("not valid JSON: {e}")))?;
    let mut obj = match root {
        Value::Object(obj) => obj,
        other => {
            return Err(ScenarioError::new(
                "$",
                format!("expected an object, got {}", type_name(&other)),
            ));
        }
    };
    let metrics = obj.remove("metrics").map(MetricsMember::Parsed);
    build(obj, metrics)
}

/// The deepest nesting of arrays and objects serde_json parses (its recursion limit): a document
/// nested deeper is not valid JSON to it.
const MAX_NESTING: usize = 127;

/// The members of a JSON object in document order, their values unparsed.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Entries<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'a RawValue>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        deserializer.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// The value of `raw`, a member `enclosing` levels deep in the document; `None` when the whole
/// document's parse would fail on it (invalid, or nested deeper than [`MAX_NESTING`] with its
/// enclosing levels).
fn member_value(raw: &RawValue, enclosing: usize) -> Option<Value> {
    if nesting_depth(raw.get()) + enclosing > MAX_NESTING {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// The deepest nesting of arrays and objects in `json` (the text of one JSON value).
fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    deepest
}

/// [`parse_scenario`] one member at a time: every top-level member but `metrics` parsed (a
/// repeated key's last value kept, as a parsed object keeps it), `metrics` left to
/// [`parse_metrics`]. `None` on any failure.
fn parse_by_members(text: &str) -> Option<Scenario> {
    let Members(members) = serde_json::from_str(text).ok()?;
    let last_metrics = members.iter().rposition(|(k, _)| k == "metrics");
    let mut obj = Map::new();
    let mut metrics = None;
    for (i, (key, raw)) in members.into_iter().enumerate() {
        if Some(i) == last_metrics {
            metrics = Some(MetricsMember::Unparsed(raw));
        } else {
            let value = member_value(raw, 1)?;
            if key != "metrics" {
                obj.insert(key, value);
            }
        }
    }
    build(obj, metrics).ok()
}

/// The scenario of a document's members (`metrics` apart), each converted in turn; the topology
/// is dropped once converted.
fn build(mut obj: Map<String, Value>, metrics: Option<MetricsMember<'_>>) -> Res<Scenario> {
    match obj.get("format") {
        Some(Value::String(f)) if f == SCENARIO_FORMAT => {}
        Some(other) => {
            return Err(ScenarioError::new(
                "format",
                format!("expected {SCENARIO_FORMAT:?}, got {}", describe(other)),
            ));
        }
        None => return Err(ScenarioError::new("format", "required field is missing")),
    }
    let now = as_time(required(&obj, "now", "now")?, "now")?;
    let config = parse_config(obj.get("config"))?;
    let job = parse_job(obj.get("job"))?;
    // Its parsed JSON is dropped here, before the metrics are parsed.
    let topology = parse_topology(
        &obj.remove("topology")
            .ok_or_else(|| ScenarioError::new("topology", "required field is missing"))?,
    )?;
    let input = match (metrics, obj.get("evaluated")) {
        (Some(_), Some(_)) => {
            return Err(ScenarioError::new(
                "metrics",
                "exactly one of `metrics` and `evaluated` may be given, not both",
            ));
        }
        (None, None) => {
            return Err(ScenarioError::new(
                "metrics",
                "one of `metrics` and `evaluated` is required",
            ));
        }
        (Some(m), None) => {
            if job.running_since.is_none() {
                return Err(ScenarioError::new("job.running_since", "required with `metrics`"));
            }
            ScenarioInput::Metrics(parse_metrics(m, &topology, now)?)
        }
        (None, Some(e)) => ScenarioInput::Evaluated(Box::new(parse_evaluated(e, &topology)?)),
    };
    let scaling_history = match obj.get("scaling_history") {
        Some(v) if !v.is_null() => parse_history(v, &topology)?,
        _ => ScalingHistory::new(),
    };
    let scaling_tracking = match obj.get("scaling_tracking") {
        Some(v) if !v.is_null() => parse_tracking(v)?,
        _ => ScalingTracking::default(),
    };
    let delayed_scale_down = match obj.get("delayed_scale_down") {
        Some(v) if !v.is_null() => parse_delayed(v, &topology)?,
        _ => DelayedScaleDown::default(),
    };
    Ok(Scenario {
        now,
        config,
        job,
        topology,
        input,
        scaling_history,
        scaling_tracking,
        delayed_scale_down,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario_files() -> Vec<std::path::PathBuf> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["tests/scenarios", "tests/fixtures/bench", "tests/invalid"] {
            for entry in std::fs::read_dir(root.join(dir)).expect("test directory") {
                let path = entry.expect("entry").path();
                if path.extension().is_some_and(|e| e == "json") && !path.to_string_lossy().ends_with(".expected.json")
                {
                    files.push(path);
                }
            }
        }
        files.sort();
        files
    }

    /// The result (or the error) of replaying what `parse` made of `text`.
    fn replayed(parsed: Res<Scenario>) -> Result<String, ScenarioError> {
        let result = crate::replay_result(parsed?)?;
        Ok(serde_json::to_string(&result).expect("serializable"))
    }

    /// Parsing member by member gives what the whole document's parse gives, or gives up.
    fn assert_same_parse(text: &str, what: &str) {
        let whole = parse_whole(text);
        match parse_by_members(text) {
            Some(by_members) => {
                assert!(whole.is_ok(), "{what}: by members parsed, the whole failed: {whole:?}");
                assert_eq!(replayed(Ok(by_members)), replayed(whole), "{what}");
            }
            None => assert!(whole.is_err(), "{what}: by members gave up on a valid document"),
        }
    }

    #[test]
    fn every_test_scenario_parses_by_members_as_a_whole() {
        for file in scenario_files() {
            let text = std::fs::read_to_string(&file).expect("readable");
            let what = file.display().to_string();
            assert_same_parse(&text, &what);
            if !what.contains("invalid") {
                assert!(parse_by_members(&text).is_some(), "{what}: not parsed by members");
            }
        }
    }

    const BASE: &str = r#"{"format": "flink-autoscaler-scenario/1", "now": "2024-05-01T10:01:00Z",
        "job": {"running_since": "2024-05-01T09:00:00Z"},
        "topology": {"vertices": [{"id": "a", "parallelism": 1, "max_parallelism": 8}]},
        "metrics": [
          {"at": "2024-05-01T10:00:00Z", "vertices": {"a": {"LOAD": 0.5}}, "x": X1},
          {"at": "2024-05-01T10:01:00Z", "vertices": {"a": {"LOAD": 0.5}}}
        ], "extra": X2}"#;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_at_the_recursion_limit_is_judged_as_the_whole_document_judges_it() {
        for depth in 120..=130 {
            let in_snapshot = BASE.replace("X1", &nested(depth)).replace("X2", "0");
            assert_same_parse(&in_snapshot, &format!("depth {depth} in a snapshot"));
            let in_member = BASE.replace("X1", "0").replace("X2", &nested(depth));
            assert_same_parse(&in_member, &format!("depth {depth} in a member"));
            // Brackets in strings do not nest.
            let in_string = BASE
                .replace("X1", &format!("\"\\\"{}\"", "[".repeat(depth)))
                .replace("X2", "0");
            assert_same_parse(&in_string, &format!("{depth} brackets in a string"));
        }
        let limit = (120..=130)
            .find(|d| parse_whole(&BASE.replace("X1", &nested(*d)).replace("X2", "0")).is_err())
            .expect("a depth the whole parse refuses");
        // Inside the root, `metrics` and the snapshot: 3 levels.
        assert_eq!(limit - 1 + 3, MAX_NESTING, "serde_json's recursion limit moved");
    }

    #[test]
    fn repeated_members_invalid_numbers_and_invalid_json_are_judged_as_the_whole_document_judges_them() {
        let cases = [
            // A repeated member: the last one counts, the earlier ones must be valid JSON.
            BASE.replace("X1", "0")
                .replace(r#", "extra": X2"#, r#", "metrics": 5, "metrics": []"#),
            BASE.replace("X1", "0")
                .replace(r#""extra": X2"#, r#""extra": 0, "metrics": [1e999]"#),
            BASE.replacen(r#""metrics""#, r#""metrics": [1e999], "metrics""#, 1)
                .replace("X1", "0")
                .replace("X2", "0"),
            BASE.replace("X1", "0")
                .replace("X2", r#"{"now": 1}, "now": "2024-05-01T10:01:00Z""#),
            // Numbers out of range where nothing reads them.
            BASE.replace("X1", "1e999").replace("X2", "0"),
            BASE.replace("X1", "0").replace("X2", "-1e999"),
            // Not valid JSON, not an object, escaped keys, trailing input.
            BASE.replace("X1", "0").replace("X2", "[1,"),
            BASE.replace("X1", "0").replace("X2", "0} x"),
            BASE.replace("X1", "0")
                .replace("X2", "0")
                .replace(r#""format""#, r#""for\u006dat""#),
            "[]".to_owned(),
            String::new(),
        ];
        for (i, text) in cases.iter().enumerate() {
            assert_same_parse(text, &format!("case {i}: {text}"));
        }
    }
}
