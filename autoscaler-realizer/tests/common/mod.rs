//! Shared helpers of the mock-server tests: fixtures, ids of the recorded job, a fast client, mounts.
#![allow(dead_code)] // each test binary uses its own subset

use autoscaler_core::{
    AutoScalerEventHandler, BasicJobContext, EventType, JobAutoScalerContext, config::Configuration,
};
use autoscaler_realizer::{rest::FlinkRestClient, rest::RestClientConfig};
use std::sync::Mutex;
use std::time::Duration;
use wiremock::matchers::{method, path, path_regex, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

pub const JOB: &str = "69d8f5332ed995a1c6cf4baa8d8018bb";
pub const SOURCE: &str = "e5a72f353fc1e6bbf3bd96a41384998c";
pub const PARSE: &str = "32fced3d06182e4c52a44b8b295688ed";
pub const KEYED: &str = "435c14a7f861a9a6e12fd6e3762dfa5a";
pub const SINK: &str = "2e588ce1c86a9d46e2e85186773ce4fd";

/// `timestamps.RUNNING` of `job-details.json`.
pub const RUNNING_SINCE_MS: i64 = 1_796_101_039_356;

pub type Ctx = BasicJobContext<String, FlinkRestClient>;

/// The body of a recorded response.
pub fn fixture(name: &str) -> String {
    let file = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("fixture {file}: {e}"))
}

/// A JSON response with the recorded body `name`.
pub fn recorded(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(name), "application/json")
}

/// A JSON response with an inline body.
pub fn json(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_owned(), "application/json")
}

/// A client with short timeouts and backoffs, so failing tests stay fast.
pub fn client(server: &MockServer) -> FlinkRestClient {
    client_with(server, RestClientConfig::default())
}

/// Like [`client`] with the given retry count and timeout.
pub fn client_with(server: &MockServer, config: RestClientConfig) -> FlinkRestClient {
    let config = RestClientConfig {
        timeout: if config.timeout == RestClientConfig::default().timeout {
            Duration::from_secs(5)
        } else {
            config.timeout
        },
        connect_timeout: Duration::from_secs(2),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..config
    };
    FlinkRestClient::new(&server.uri(), config).expect("mock server URI is a valid base URL")
}

/// A RUNNING context of the recorded job with `conf`.
pub fn ctx(client: FlinkRestClient, conf: Configuration) -> Ctx {
    let mut ctx = BasicJobContext::new(JOB.to_owned(), conf, client);
    ctx.job_id = Some(JOB.to_owned());
    ctx
}

/// Mounts `GET <path>` answering `response`.
pub async fn mount_get(server: &MockServer, at: &str, response: ResponseTemplate) {
    Mock::given(method("GET"))
        .and(path(at))
        .respond_with(response)
        .mount(server)
        .await;
}

/// The path of a vertex's subtask metrics.
pub fn subtask_metrics_path(vertex: &str) -> String {
    format!("/jobs/{JOB}/vertices/{vertex}/subtasks/metrics")
}

/// Mounts the metric-name listing of every vertex: the recorded source listing for the source and
/// the recorded `expensive-keyed` listing for the three others (they report the same task metrics).
pub async fn mount_metric_name_listings(server: &MockServer) {
    Mock::given(method("GET"))
        .and(path(subtask_metrics_path(SOURCE)))
        .and(query_param_is_missing("get"))
        .respond_with(recorded(200, "vertex-subtask-metrics-list-source"))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(format!(
            "^/jobs/{JOB}/vertices/({PARSE}|{KEYED}|{SINK})/subtasks/metrics$"
        )))
        .and(query_param_is_missing("get"))
        .respond_with(recorded(200, "vertex-subtask-metrics-list"))
        .mount(server)
        .await;
}

/// An event handler that remembers every event.
#[derive(Default)]
pub struct RecordingEvents {
    pub events: Mutex<Vec<(EventType, String, String)>>,
}

impl RecordingEvents {
    pub fn events(&self) -> Vec<(EventType, String, String)> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl<K: Send + Sync, C: JobAutoScalerContext<K>> AutoScalerEventHandler<K, C> for RecordingEvents {
    async fn handle_event(
        &self,
        _ctx: &C,
        event_type: EventType,
        reason: &str,
        message: &str,
        _message_key: Option<&str>,
        _interval: Option<Duration>,
    ) {
        if let Ok(mut events) = self.events.lock() {
            events.push((event_type, reason.to_owned(), message.to_owned()));
        }
    }
}

/// Log output captured in memory (a `tracing_subscriber` writer).
#[allow(unused_imports)] // not every test file reads logs
pub use autoscaler_sim::logs::LogBuffer;
