//! The HTTP side of the fake: routes, answer bodies, rescales.

use crate::workload::{self, VertexRates};
use crate::{Endpoint, Job, Live, MAX_PARALLELISM, Rescale, Shared, now_ms};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

type App = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/jobs/overview", get(jobs_overview))
        .route("/jobs/{jid}", get(job_details))
        .route("/jobs/{jid}/status", get(job_status))
        .route("/jobs/{jid}/plan", get(job_plan))
        .route("/jobs/{jid}/config", get(job_config))
        .route("/jobs/{jid}/jobmanager/config", get(job_jobmanager_config))
        .route("/jobs/{jid}/metrics", get(job_metrics))
        .route("/jobs/{jid}/vertices/{vid}/subtasks/metrics", get(subtask_metrics))
        .route(
            "/jobs/{jid}/resource-requirements",
            get(resource_requirements).put(put_resource_requirements),
        )
        .route("/jobmanager/config", get(jobmanager_config))
        .route("/jobmanager/metrics", get(jobmanager_metrics))
        .route("/taskmanagers/metrics", get(taskmanagers_metrics))
        .route("/_fake/stats", get(stats))
        .route("/_fake/stall", post(stall))
        .fallback(other)
        .with_state(shared)
}

/// Counts the request and waits out a stall.
async fn enter(shared: &Shared, endpoint: Endpoint) {
    shared.count(endpoint);
    let wait = shared.stall_until_ms() - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    }
}

fn json(body: impl Into<Bytes>) -> Response {
    ([(header::CONTENT_TYPE, "application/json; charset=UTF-8")], body.into()).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "errors": [message] }).to_string();
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body,
    )
        .into_response()
}

fn job_not_found(job_id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!("org.apache.flink.runtime.rest.NotFoundException: Job {job_id} not found"),
    )
}

fn find<'a>(shared: &'a Shared, job_id: &str) -> Option<&'a Job> {
    shared.by_id.get(job_id).map(|&i| &shared.jobs[i])
}

/// The values of the query parameter `key`, split at commas and percent-decoded.
fn query_list(query: Option<&str>, key: &str) -> Option<Vec<String>> {
    let query = query?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| {
            let v = v.replace('+', " ");
            percent_encoding::percent_decode_str(&v)
                .decode_utf8_lossy()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
    })
}

/// A number as Flink's Jackson writes a double (`1000.0`, never `1e3` for these magnitudes).
fn num(out: &mut String, x: f64) {
    let x = if x.is_finite() { x } else { 0.0 };
    if x == x.trunc() && x.abs() < 1e15 {
        let _ = write!(out, "{x:.1}");
    } else {
        let _ = write!(out, "{x}");
    }
}

fn task_counts(out: &mut String, running: u32, upper_case: bool) {
    let names = [
        "running",
        "canceling",
        "canceled",
        "total",
        "created",
        "scheduled",
        "deploying",
        "reconciling",
        "finished",
        "initializing",
        "failed",
    ];
    out.push('{');
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let value = if matches!(*name, "running" | "total") {
            running
        } else {
            0
        };
        let name = if upper_case {
            name.to_ascii_uppercase()
        } else {
            (*name).to_owned()
        };
        let _ = write!(out, "\"{name}\":{value}");
    }
    out.push('}');
}

/// `GET /jobs/overview`, built once (states and task counts as at the start).
pub(crate) fn overview_body(shared: &Shared, now: i64) -> String {
    let mut out = String::with_capacity(shared.jobs.len() * 450 + 16);
    out.push_str("{\"jobs\":[");
    for (i, job) in shared.jobs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let live = job.live();
        let tasks: u32 = live.parallelism.iter().sum();
        let _ = write!(
            out,
            "{{\"jid\":\"{}\",\"name\":\"{}\",\"jobType\":\"STREAMING\",\"schedulerType\":\"Adaptive\",\"start-time\":{},\"end-time\":-1,\"duration\":{},\"state\":\"RUNNING\",\"last-modification\":{},\"tasks\":",
            job.id,
            job.name,
            live.start_ms,
            now - live.start_ms,
            live.running_since_ms
        );
        task_counts(&mut out, tasks, false);
        out.push_str(",\"pending-operators\":0}");
    }
    out.push_str("]}");
    out
}

async fn jobs_overview(State(shared): App) -> Response {
    enter(&shared, Endpoint::JobsOverview).await;
    json(shared.overview.clone())
}

/// Seconds since the job last switched to RUNNING.
fn elapsed_s(live: &Live, now: i64) -> f64 {
    ((now - live.running_since_ms).max(0)) as f64 / 1000.0
}

fn plan_json(out: &mut String, job: &Job, live: &Live) {
    let _ = write!(
        out,
        "{{\"jid\":\"{}\",\"name\":\"{}\",\"type\":\"STREAMING\",\"nodes\":[",
        job.id, job.name
    );
    for (v, id) in job.vertex_ids.iter().enumerate() {
        if v > 0 {
            out.push(',');
        }
        let (name, _) = Job::vertex_name(v);
        let _ = write!(
            out,
            "{{\"id\":\"{id}\",\"operator\":\"\",\"parallelism\":{},\"operator_strategy\":\"\",\"description\":\"{name}<br/>\",\"optimizer_properties\":{{}}",
            live.parallelism[v]
        );
        if v > 0 {
            let strategy = if v == 1 { "REBALANCE" } else { "HASH" };
            let _ = write!(
                out,
                ",\"inputs\":[{{\"id\":\"{}\",\"num\":0,\"exchange\":\"pipelined_bounded\",\"ship_strategy\":\"{strategy}\"}}]",
                job.vertex_ids[v - 1]
            );
        }
        out.push('}');
    }
    out.push_str("]}");
}

fn details_body(job: &Job, live: &Live, now: i64) -> String {
    let elapsed = elapsed_s(live, now);
    let mut out = String::with_capacity(1200 + job.vertex_ids.len() * 1000);
    let _ = write!(
        out,
        "{{\"jid\":\"{id}\",\"application-id\":\"{id}\",\"name\":\"{name}\",\"isStoppable\":false,\"state\":\"RUNNING\",\"job-type\":\"STREAMING\",\"schedulerType\":\"Adaptive\",\"start-time\":{start},\"end-time\":-1,\"duration\":{duration},\"maxParallelism\":-1,\"now\":{now},\"timestamps\":{{\"RUNNING\":{running},\"CANCELLING\":0,\"FINISHED\":0,\"FAILED\":0,\"SUSPENDED\":0,\"RESTARTING\":0,\"CANCELED\":0,\"CREATED\":{created},\"INITIALIZING\":{start},\"FAILING\":0,\"RECONCILING\":0}},\"vertices\":[",
        id = job.id,
        name = job.name,
        start = live.start_ms,
        duration = now - live.start_ms,
        running = live.running_since_ms,
        created = live.running_since_ms - 300,
    );
    let mut tasks = 0;
    for (v, id) in job.vertex_ids.iter().enumerate() {
        if v > 0 {
            out.push(',');
        }
        let p = live.parallelism[v];
        tasks += p;
        let (name, _) = Job::vertex_name(v);
        let r = &live.rates[v];
        let records = (r.throughput * elapsed).round();
        let _ = write!(
            out,
            "{{\"id\":\"{id}\",\"slotSharingGroupId\":\"{}\",\"name\":\"{name}\",\"maxParallelism\":{MAX_PARALLELISM},\"parallelism\":{p},\"status\":\"RUNNING\",\"start-time\":{},\"end-time\":-1,\"duration\":{},\"tasks\":",
            &job.vertex_ids[0],
            live.running_since_ms + 20,
            now - live.running_since_ms - 20
        );
        task_counts(&mut out, p, true);
        let read = if v == 0 { 0.0 } else { records };
        let _ = write!(
            out,
            ",\"metrics\":{{\"read-bytes\":{},\"read-bytes-complete\":true,\"write-bytes\":{},\"write-bytes-complete\":true,\"read-records\":{},\"read-records-complete\":true,\"write-records\":{},\"write-records-complete\":true,\"accumulated-backpressured-time\":{},\"accumulated-idle-time\":{},\"accumulated-busy-time\":",
            read * 21.0,
            records * 21.0,
            read,
            records,
            (r.backpressured * elapsed * f64::from(p)).round(),
            (r.idle * elapsed * f64::from(p)).round(),
        );
        num(&mut out, (r.busy * elapsed * f64::from(p)).round());
        out.push_str("}}");
    }
    out.push_str("],\"status-counts\":");
    task_counts(&mut out, tasks, true);
    out.push_str(",\"plan\":");
    plan_json(&mut out, job, live);
    out.push_str(",\"pending-operators\":0}");
    out
}

async fn job_details(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::JobDetails).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found(&jid);
    };
    let body = details_body(job, &job.live(), now_ms());
    json(body)
}

async fn job_status(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::JobStatus).await;
    match find(&shared, &jid) {
        Some(_) => json(Bytes::from_static(b"{\"status\":\"RUNNING\"}")),
        None => job_not_found(&jid),
    }
}

async fn job_plan(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::JobPlan).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found(&jid);
    };
    let mut out = String::from("{\"plan\":");
    plan_json(&mut out, job, &job.live());
    out.push('}');
    json(out)
}

async fn job_config(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::JobConfig).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found(&jid);
    };
    json(format!(
        "{{\"jid\":\"{}\",\"name\":\"{}\",\"execution-config\":{{\"execution-mode\":\"PIPELINED\",\"restart-strategy\":\"Cluster level default restart strategy\",\"job-parallelism\":1,\"object-reuse-mode\":false,\"user-config\":{{}}}}}}",
        job.id, job.name
    ))
}

async fn job_jobmanager_config(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::JobJobManagerConfig).await;
    match find(&shared, &jid) {
        Some(_) => json(shared.job_configuration.clone()),
        None => job_not_found(&jid),
    }
}

async fn jobmanager_config(State(shared): App) -> Response {
    enter(&shared, Endpoint::JobManagerConfig).await;
    json(shared.job_configuration.clone())
}

/// `[{"id": name, "value": "string"}, ...]` for the names asked that `value` knows; like Flink,
/// unknown names are left out.
fn string_values(names: &[String], value: impl Fn(&str) -> Option<f64>) -> String {
    let mut out = String::from("[");
    for name in names {
        let Some(x) = value(name) else { continue };
        if out.len() > 1 {
            out.push(',');
        }
        let _ = write!(out, "{{\"id\":\"{name}\",\"value\":\"");
        num(&mut out, x);
        out.push_str("\"}");
    }
    out.push(']');
    out
}

async fn job_metrics(State(shared): App, Path(jid): Path<String>, RawQuery(query): RawQuery) -> Response {
    enter(&shared, Endpoint::JobMetrics).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found(&jid);
    };
    let Some(names) = query_list(query.as_deref(), "get") else {
        return json(Bytes::from_static(
            b"[{\"id\":\"numRescales\"},{\"id\":\"uptime\"},{\"id\":\"numRestarts\"}]",
        ));
    };
    let now = now_ms();
    let live = job.live();
    json(string_values(&names, |name| match name {
        "numRescales" => Some(f64::from(live.rescales)),
        "uptime" => Some((now - live.running_since_ms) as f64),
        "numRestarts" => Some(0.0),
        _ => None,
    }))
}

async fn jobmanager_metrics(State(shared): App, RawQuery(query): RawQuery) -> Response {
    enter(&shared, Endpoint::JobManagerMetrics).await;
    let names = query_list(query.as_deref(), "get").unwrap_or_default();
    let total = f64::from(shared.config.task_slots);
    let jobs = shared.jobs.len() as f64;
    json(string_values(&names, |name| match name {
        "taskSlotsTotal" => Some(total),
        "taskSlotsAvailable" => Some((total / 2.0).floor()),
        "numRegisteredTaskManagers" => Some((total / 8.0).ceil()),
        "numRunningJobs" => Some(jobs),
        _ => None,
    }))
}

/// The aggregations asked (`agg=`), Flink's default (all five) when none.
fn aggregations(query: Option<&str>) -> Vec<String> {
    query_list(query, "agg").unwrap_or_else(|| {
        ["min", "max", "avg", "sum", "skew"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    })
}

/// `[{"id": name, "min": .., ...}]`: one subtask's value `per_subtask`, `sum` over `subtasks`.
fn aggregated(out: &mut String, name: &str, per_subtask: f64, subtasks: f64, aggs: &[String]) {
    if out.len() > 1 {
        out.push(',');
    }
    let _ = write!(out, "{{\"id\":\"{name}\"");
    for agg in aggs {
        let value = match agg.as_str() {
            "min" | "max" | "avg" => per_subtask,
            "sum" => per_subtask * subtasks,
            "skew" => 0.0,
            _ => continue,
        };
        let _ = write!(out, ",\"{agg}\":");
        num(out, value);
    }
    out.push('}');
}

async fn taskmanagers_metrics(State(shared): App, RawQuery(query): RawQuery) -> Response {
    enter(&shared, Endpoint::TaskManagersMetrics).await;
    let Some(names) = query_list(query.as_deref(), "get") else {
        let list: Vec<serde_json::Value> = shared
            .tm_metrics
            .iter()
            .map(|(n, _)| serde_json::json!({ "id": n }))
            .collect();
        return json(serde_json::Value::from(list).to_string());
    };
    let aggs = aggregations(query.as_deref());
    // Like Flink: one unknown name and the answer is empty.
    let values: Option<Vec<(&String, f64)>> = names
        .iter()
        .map(|n| shared.tm_metrics.iter().find(|(m, _)| m == n).map(|(_, v)| (n, *v)))
        .collect();
    let mut out = String::from("[");
    for (name, value) in values.unwrap_or_default() {
        aggregated(&mut out, name, value, 1.0, &aggs);
    }
    out.push(']');
    json(out)
}

/// One subtask's value of the vertex metric `name` (operator metrics carry the `prefix`).
fn vertex_metric(name: &str, prefix: &str, source: bool, r: &VertexRates, p: f64, elapsed: f64) -> f64 {
    let operator = name.strip_prefix(prefix).and_then(|n| n.strip_prefix('.'));
    let (metric, operator_level) = match operator {
        Some(m) => (m, true),
        None => (name, false),
    };
    // A source task reads nothing from the network: its task-level input is 0.
    let records_in = if source && !operator_level { 0.0 } else { r.throughput };
    // Flink's time gauges are whole milliseconds (`long` gauges), as the recorded answers show.
    match metric {
        "busyTimeMsPerSecond" => r.busy.round(),
        "backPressuredTimeMsPerSecond" | "softBackPressuredTimeMsPerSecond" => r.backpressured.round(),
        "idleTimeMsPerSecond" => r.idle.round(),
        "accumulateBusyTimeMs" => (r.busy * elapsed).round(),
        "accumulateBackPressuredTimeMs" => (r.backpressured * elapsed).round(),
        "accumulateIdleTimeMs" => (r.idle * elapsed).round(),
        "numRecordsInPerSecond" => records_in / p,
        "numRecordsOutPerSecond" => r.throughput / p,
        "numRecordsIn" => (records_in * elapsed / p).round(),
        "numRecordsOut" => (r.throughput * elapsed / p).round(),
        "pendingRecords" => (r.lag_rate * elapsed / p).round(),
        _ => 0.0,
    }
}

async fn subtask_metrics(
    State(shared): App,
    Path((jid, vid)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let names = query_list(query.as_deref(), "get");
    let endpoint = if names.is_some() {
        Endpoint::VertexMetricValues
    } else {
        Endpoint::VertexMetricNames
    };
    enter(&shared, endpoint).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found(&jid);
    };
    // Flink answers an unknown vertex with an empty list.
    let Some(v) = job.vertex_index(&vid) else {
        return json(Bytes::from_static(b"[]"));
    };
    let (list, known) = &shared.names[v];
    let Some(names) = names else {
        return json(list.clone());
    };
    if !names.iter().all(|n| known.contains(n)) {
        return json(Bytes::from_static(b"[]"));
    }
    let aggs = aggregations(query.as_deref());
    let (_, prefix) = Job::vertex_name(v);
    let now = now_ms();
    let live = job.live();
    let p = f64::from(live.parallelism[v]);
    let elapsed = elapsed_s(&live, now);
    let rates = live.rates[v];
    drop(live);
    let mut out = String::with_capacity(64 + names.len() * 96);
    out.push('[');
    for name in &names {
        let value = vertex_metric(name, &prefix, v == 0, &rates, p, elapsed);
        aggregated(&mut out, name, value, p, &aggs);
    }
    out.push(']');
    json(out)
}

fn requirements_body(job: &Job, live: &Live) -> String {
    let mut out = String::from("{");
    for (v, id) in job.vertex_ids.iter().enumerate() {
        if v > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "\"{id}\":{{\"parallelism\":{{\"lowerBound\":{},\"upperBound\":{}}}}}",
            live.lower[v], live.upper[v]
        );
    }
    out.push('}');
    out
}

fn job_not_found_500(job_id: &str) -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!(
            "org.apache.flink.runtime.rest.handler.RestHandlerException: org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job ({job_id})"
        ),
    )
}

async fn resource_requirements(State(shared): App, Path(jid): Path<String>) -> Response {
    enter(&shared, Endpoint::ResourceRequirementsGet).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found_500(&jid);
    };
    let body = requirements_body(job, &job.live());
    json(body)
}

#[derive(serde::Deserialize)]
struct Requirement {
    parallelism: Bounds,
}

#[derive(serde::Deserialize)]
struct Bounds {
    #[serde(rename = "lowerBound")]
    lower: i64,
    #[serde(rename = "upperBound")]
    upper: i64,
}

fn bad_request(message: String) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        &format!("org.apache.flink.runtime.rest.handler.RestHandlerException: {message}"),
    )
}

async fn put_resource_requirements(State(shared): App, Path(jid): Path<String>, body: Bytes) -> Response {
    enter(&shared, Endpoint::ResourceRequirementsPut).await;
    let Some(job) = find(&shared, &jid) else {
        return job_not_found_500(&jid);
    };
    let requested: BTreeMap<String, Requirement> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(format!("Request did not match expected format: {e}")),
    };
    let mut lower = vec![0; job.vertex_ids.len()];
    let mut upper = vec![0; job.vertex_ids.len()];
    for (id, requirement) in &requested {
        let Some(v) = job.vertex_index(id) else {
            return bad_request(format!("Job vertex [{id}] was not found in the JobGraph."));
        };
        let Bounds { lower: lo, upper: hi } = requirement.parallelism;
        if hi > i64::from(MAX_PARALLELISM) {
            return bad_request(format!(
                "The upper bound {hi} of vertex {id} exceeds its max parallelism {MAX_PARALLELISM}."
            ));
        }
        if lo < 1 || hi < lo {
            return bad_request(format!("Invalid parallelism bounds [{lo}, {hi}] of vertex {id}."));
        }
        // Both are within 1..=128 here.
        lower[v] = u32::try_from(lo).unwrap_or(1);
        upper[v] = u32::try_from(hi).unwrap_or(1);
    }
    if let Some(v) = upper.iter().position(|u| *u == 0) {
        return bad_request(format!(
            "The request is incomplete: the vertex {} is missing.",
            job.vertex_ids[v]
        ));
    }
    let now = now_ms();
    {
        let mut live = job.live();
        live.lower = lower;
        live.parallelism = upper.clone();
        live.upper = upper.clone();
        live.running_since_ms = now;
        live.rescales += 1;
        live.rates = workload::vertex_rates(job.index, job.hot, &live.parallelism);
    }
    shared.record_rescale(Rescale {
        job_id: job.id.clone(),
        parallelism: job.vertex_ids.iter().cloned().zip(upper).collect(),
        at_ms: now,
    });
    json(Bytes::from_static(b"{}"))
}

async fn stats(State(shared): App) -> Response {
    json(serde_json::to_string(&shared.stats()).unwrap_or_default())
}

async fn stall(State(shared): App, RawQuery(query): RawQuery) -> Response {
    let ms = query_list(query.as_deref(), "ms")
        .and_then(|v| v.first().and_then(|s| s.parse::<u64>().ok()))
        .unwrap_or(0);
    shared.stall_for(Duration::from_millis(ms));
    json(Bytes::from_static(b"{}"))
}

async fn other(State(shared): App) -> Response {
    enter(&shared, Endpoint::Other).await;
    error(
        StatusCode::NOT_FOUND,
        "Not found: the fake JobManager does not serve this",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_look_like_jacksons_doubles() {
        let mut s = String::new();
        num(&mut s, 1000.0);
        s.push(' ');
        num(&mut s, 21041.316666666666);
        s.push(' ');
        num(&mut s, f64::NAN);
        assert_eq!(s, "1000.0 21041.316666666666 0.0");
    }

    #[test]
    fn query_lists_are_decoded() {
        let q = Some("get=busyTimeMsPerSecond%2CSource__src.numRecordsIn&agg=min,max");
        assert_eq!(
            query_list(q, "get"),
            Some(vec![
                "busyTimeMsPerSecond".to_owned(),
                "Source__src.numRecordsIn".to_owned()
            ])
        );
        assert_eq!(query_list(q, "agg"), Some(vec!["min".to_owned(), "max".to_owned()]));
        assert_eq!(query_list(q, "x"), None);
        assert_eq!(query_list(None, "get"), None);
    }
}
