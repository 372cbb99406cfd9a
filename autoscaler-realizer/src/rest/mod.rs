//! [`FlinkRestClient`]: a typed client for the Flink REST endpoints the autoscaler uses.
//!
//! Every request has its own timeout ([`RestClientConfig::timeout`]). GETs are retried a bounded
//! number of times with exponential backoff on timeouts, connection failures and 5xx answers (a
//! missing job is not retried: Flink answers 404 on `/jobs/<id>` and 500 with a
//! `FlinkJobNotFoundException` on the resource-requirements endpoints, and neither heals). PUTs are
//! never retried. Errors are [`RestError`]s naming the endpoint and carrying Flink's message.
//!
//! Quirks of the real cluster the methods document where they matter: an aggregated metrics query
//! with a single unknown name answers `[]` for all names; per-subtask values are strings; metrics
//! right after a (re)start are stale or pinned at busy = 1000 for tens of seconds.

mod error;
mod model;
mod transport;

pub use error::RestError;
pub use model::{
    AggregatedMetricValue, Aggregation, ConfigEntry, JobConfig, JobDetails, JobOverview, JobPlan, JobPlanResponse,
    JobResourceRequirements, JobStatusInfo, JobVertexDetails, JobsOverview, MetricName, MetricValue, ParallelismBounds,
    PlanInput, PlanNode, TaskCounts, VertexIoMetrics, VertexResourceRequirements,
};
pub(crate) use model::{
    AggregatedMetricValueView, JobDetailsView, JobPlanView, JobVertexView, PlanNodeView, read_aggregated_metrics,
    read_job_details, read_jobs_overview, read_metric_names,
};

use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Name of the histogram of REST request latency, in seconds, labelled `source`, `method` and
/// `endpoint` (the route template, e.g. `/jobs/:jobid/vertices/:vertexid/subtasks/metrics`, never
/// a raw id). Every request is one sample; each attempt of a retried GET is a request.
pub const REST_REQUEST_DURATION: &str = "flink_autoscaler_rest_request_duration_seconds";
/// Name of the counter of failed REST requests, labelled like [`REST_REQUEST_DURATION`] plus
/// `kind` ([`RestError::kind`]: `status`, `timeout`, `transport`, `decode`, `body_too_large`,
/// `invalid_id`, `config`).
pub const REST_REQUEST_ERRORS: &str = "flink_autoscaler_rest_request_errors_total";
/// Route template of the subtask-metrics endpoint (listing and aggregated values).
const SUBTASK_METRICS_ROUTE: &str = "/jobs/:jobid/vertices/:vertexid/subtasks/metrics";

/// Every request the client sends, as the `method` and `endpoint` labels of
/// [`REST_REQUEST_DURATION`] and [`REST_REQUEST_ERRORS`]: a service initialises the error counter
/// of each (with each [`RestError::KINDS`]) at 0, so the first failure shows in `increase()`.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/jobs/overview"),
    ("GET", "/jobs/:jobid"),
    ("GET", "/jobs/:jobid/status"),
    ("GET", "/jobs/:jobid/metrics"),
    ("GET", "/jobs/:jobid/plan"),
    ("GET", "/jobs/:jobid/config"),
    ("GET", "/jobs/:jobid/jobmanager/config"),
    ("GET", "/jobmanager/config"),
    ("GET", SUBTASK_METRICS_ROUTE),
    ("GET", "/jobs/:jobid/vertices/:vertexid/metrics"),
    ("GET", "/taskmanagers/metrics"),
    ("GET", "/jobmanager/metrics"),
    ("GET", "/jobs/:jobid/resource-requirements"),
    ("PUT", "/jobs/:jobid/resource-requirements"),
    ("GET", "/ws/v1/cluster/apps"),
];

/// An extra header sent with every request (e.g. `Authorization: Bearer ...` in front of a proxy).
#[derive(Clone, PartialEq, Eq)]
pub struct AuthHeader {
    /// Header name.
    pub name: String,
    /// Header value (never printed by `Debug`).
    pub value: String,
}

impl AuthHeader {
    /// `Authorization: Bearer <token>`.
    pub fn bearer(token: &str) -> Self {
        Self {
            name: "Authorization".to_owned(),
            value: format!("Bearer {token}"),
        }
    }

    /// `Authorization: Basic <base64 of user:password>` (RFC 7617).
    ///
    /// ```
    /// use autoscaler_realizer::rest::AuthHeader;
    /// // "Aladdin:open sesame", RFC 7617's example.
    /// assert_eq!(AuthHeader::basic("Aladdin", "open sesame").value, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    /// ```
    pub fn basic(user: &str, password: &str) -> Self {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Self {
            name: "Authorization".to_owned(),
            value: format!("Basic {encoded}"),
        }
    }
}

impl fmt::Debug for AuthHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthHeader")
            .field("name", &self.name)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// TLS settings for an `https://` REST endpoint. The default trusts the webpki root certificates.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// Extra CA certificate(s) to trust, PEM.
    pub ca_certificate_pem: Option<Vec<u8>>,
    /// Client certificate and private key for mutual TLS, both PEM in one buffer.
    pub client_identity_pem: Option<Vec<u8>>,
    /// Accept any server certificate. Only for tests against self-signed clusters.
    pub accept_invalid_certificates: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_certificate_pem", &self.ca_certificate_pem.as_ref().map(|_| "<pem>"))
            .field(
                "client_identity_pem",
                &self.client_identity_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("accept_invalid_certificates", &self.accept_invalid_certificates)
            .finish()
    }
}

/// How the client talks to Flink.
#[derive(Debug, Clone, PartialEq)]
pub struct RestClientConfig {
    /// Timeout of one request, connection included (the reference's `flink.rest-client.timeout`,
    /// 10 s by default).
    pub timeout: Duration,
    /// Timeout of establishing a connection.
    pub connect_timeout: Duration,
    /// How many times a failed GET is repeated (0 = tried once). A GET can thus take up to
    /// `(retries + 1) * timeout` plus the backoff sleeps.
    pub retries: u32,
    /// Sleep before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// Upper bound of one backoff sleep.
    pub max_backoff: Duration,
    /// Header added to every request.
    pub auth_header: Option<AuthHeader>,
    /// TLS settings (used for `https://` base URLs).
    pub tls: TlsConfig,
    /// Largest response body read, in bytes ([`DEFAULT_MAX_RESPONSE_BYTES`] by default). A longer
    /// body (or a `Content-Length` announcing one) fails the call with [`RestError::BodyTooLarge`]
    /// as soon as the limit is crossed, so a misbehaving server cannot grow the process.
    pub max_response_bytes: usize,
    /// The `source` label of this client's request metrics ([`REST_REQUEST_DURATION`],
    /// [`REST_REQUEST_ERRORS`]); the service sets each source's name, the default is empty.
    pub metrics_source: String,
}

/// Default of [`RestClientConfig::max_response_bytes`]: 64 MiB. The largest answers the autoscaler
/// reads are the job details and plan of a large job graph (about 2 KiB per vertex, so a few MiB for
/// a thousand vertices); 64 MiB leaves an order of magnitude of room.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

impl Default for RestClientConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            retries: 2,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            auth_header: None,
            tls: TlsConfig::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            metrics_source: String::new(),
        }
    }
}

impl RestClientConfig {
    /// The defaults with the request timeout from `job.autoscaler.flink.rest-client.timeout`
    /// (10 s when unset), as the reference's clients use it.
    pub fn from_configuration(
        conf: &autoscaler_core::config::Configuration,
    ) -> Result<Self, autoscaler_core::config::OptionsError> {
        Ok(Self {
            timeout: crate::options::rest_client_timeout(conf)?,
            ..Self::default()
        })
    }
}

/// A client of one Flink cluster's REST API. Cheap to clone (the connection pool is shared).
///
/// ```no_run
/// # async fn demo() -> Result<(), autoscaler_realizer::rest::RestError> {
/// use autoscaler_realizer::rest::{FlinkRestClient, RestClientConfig};
/// let client = FlinkRestClient::new("http://127.0.0.1:8081", RestClientConfig::default())?;
/// for job in client.jobs_overview().await?.jobs {
///     println!("{} {:?}", job.jid, job.effective_status());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FlinkRestClient {
    inner: Arc<Inner>,
    timeout: Duration,
}

struct Inner {
    transport: transport::Transport,
    base: Url,
    /// `base` without query and fragment: every request's URL is a clone of it with the path and
    /// query set, so the host is parsed once per client rather than once per request.
    request_base: Url,
    config: RestClientConfig,
    /// The [`REST_REQUEST_DURATION`] series of each of [`ROUTES`], registered on first use (not at
    /// construction: a service builds its clients before it installs its recorder).
    durations: [OnceLock<metrics::Histogram>; ROUTES.len()],
}

impl fmt::Debug for FlinkRestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlinkRestClient")
            .field("base_url", &self.inner.base.as_str())
            .field("timeout", &self.timeout)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl FlinkRestClient {
    /// A client of the cluster whose REST API is at `base_url` (`http://host:8081`, optionally with a
    /// path prefix when behind a proxy). Credentials in the URL (`http://user:password@host`) become
    /// an `Authorization: Basic` header (unless `config` has an auth header) and are removed from the
    /// base URL, so that no message or `Debug` output shows them.
    pub fn new(base_url: &str, mut config: RestClientConfig) -> Result<Self, RestError> {
        let shown = autoscaler_core::secret::redact_url(base_url);
        let mut base =
            Url::parse(base_url).map_err(|e| RestError::Config(format!("base URL {shown:?} does not parse: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(RestError::Config(format!(
                "base URL {shown:?} must start with http:// or https://"
            )));
        }
        if !base.username().is_empty() || base.password().is_some() {
            let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
            if config.auth_header.is_none() {
                let user = decode(base.username());
                let password = base.password().map(decode).unwrap_or_default();
                config.auth_header = Some(AuthHeader::basic(&user, &password));
            }
            // Both only fail for URLs that cannot have credentials, which the check above excludes.
            let _ = base.set_username("");
            let _ = base.set_password(None);
        }
        // Url::join replaces the last segment unless the path ends with '/'.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let transport = transport::Transport::new(&config, &base)?;
        let mut request_base = base.clone();
        request_base.set_query(None);
        request_base.set_fragment(None);
        Ok(Self {
            timeout: config.timeout,
            inner: Arc::new(Inner {
                transport,
                base,
                request_base,
                config,
                durations: std::array::from_fn(|_| OnceLock::new()),
            }),
        })
    }

    /// The client of the standalone autoscaler's cluster: URL from
    /// `autoscaler.standalone.fetcher.flink-cluster.host`/`.port` ([`crate::flink_cluster_rest_url`]),
    /// settings from [`RestClientConfig::from_configuration`].
    pub fn from_configuration(conf: &autoscaler_core::config::Configuration) -> Result<Self, RestError> {
        let url = crate::options::flink_cluster_rest_url(conf).map_err(|e| RestError::Config(e.to_string()))?;
        let config = RestClientConfig::from_configuration(conf).map_err(|e| RestError::Config(e.to_string()))?;
        Self::new(&url, config)
    }

    /// The same client with another per-request timeout (the job's `flink.rest-client.timeout`).
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            timeout,
        }
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.inner.base.as_str()
    }

    /// The per-request timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `GET /jobs/overview`: every job the JobManager knows, with state and task counts (read in
    /// one pass when it has the plain shape Flink writes, else by serde, with serde's errors).
    pub async fn jobs_overview(&self) -> Result<JobsOverview, RestError> {
        let path = self.path(&[Part::Literal("jobs/overview")])?;
        let mut body = Vec::new();
        self.get_read(
            &self.prepare("/jobs/overview", &path, ""),
            &mut body,
            read_jobs_overview,
        )
        .await
    }

    /// `GET /jobs/{jobid}`: job details with timestamps, vertices (parallelism, max parallelism,
    /// status, IO counters) and the plan. Unknown job: 404.
    pub async fn job_details(&self, job_id: &str) -> Result<JobDetails, RestError> {
        self.get_prepared(&self.job_details_request(job_id)?).await
    }

    /// [`Self::job_details`] read in place: the answer is kept in `body` and the view borrows its
    /// strings from there (the collector's reading, every cycle), read by hand when plain
    /// ([`read_job_details`]). The same request (`request` is [`Self::job_details_request`]'s,
    /// which the collector keeps per job), retries, request metrics and errors.
    pub(crate) async fn job_details_view<'b>(
        &self,
        request: &PreparedRequest,
        body: &'b mut Vec<u8>,
    ) -> Result<JobDetailsView<'b>, RestError> {
        self.get_read(request, body, read_job_details).await
    }

    /// The request of `GET /jobs/{jobid}`.
    pub(crate) fn job_details_request(&self, job_id: &str) -> Result<PreparedRequest, RestError> {
        let path = self.path(&[Part::Literal("jobs/"), Part::Id("job id", job_id)])?;
        Ok(self.prepare("/jobs/:jobid", &path, ""))
    }

    /// `GET /jobs/{jobid}/status`: the job state straight from the dispatcher (not from the 3 s
    /// execution-graph cache that serves the job details).
    pub async fn job_status(&self, job_id: &str) -> Result<JobStatusInfo, RestError> {
        let path = self.job_path(job_id, "/status")?;
        self.get_path("/jobs/:jobid/status", &path, "").await
    }

    /// `GET /jobs/{jobid}/metrics?get=...`: job metrics, values as strings. `numRescales` going up by
    /// one (and `uptime` resetting) is the reliable sign that a requested rescale happened.
    pub async fn job_metrics(&self, job_id: &str, names: &[&str]) -> Result<Vec<MetricValue>, RestError> {
        let path = self.job_path(job_id, "/metrics")?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        self.get_path(
            "/jobs/:jobid/metrics",
            &path,
            &metrics_query(names.iter().copied(), &[]),
        )
        .await
    }

    /// `GET /jobs/{jobid}/plan`: the job graph with edges and ship strategies.
    pub async fn job_plan(&self, job_id: &str) -> Result<JobPlan, RestError> {
        let response: JobPlanResponse = self.get_prepared(&self.job_plan_request(job_id)?).await?;
        Ok(response.plan)
    }

    /// [`Self::job_plan`] read in place, as [`Self::job_details_view`] reads the details.
    pub(crate) async fn job_plan_view<'b>(
        &self,
        job_id: &str,
        body: &'b mut Vec<u8>,
    ) -> Result<JobPlanView<'b>, RestError> {
        let response: model::JobPlanResponseView<'b> = self.get_into(&self.job_plan_request(job_id)?, body).await?;
        Ok(response.plan)
    }

    /// The request of `GET /jobs/{jobid}/plan`.
    fn job_plan_request(&self, job_id: &str) -> Result<PreparedRequest, RestError> {
        let path = self.job_path(job_id, "/plan")?;
        Ok(self.prepare("/jobs/:jobid/plan", &path, ""))
    }

    /// `GET /jobs/{jobid}/config`: the job's execution config.
    pub async fn job_config(&self, job_id: &str) -> Result<JobConfig, RestError> {
        let path = self.job_path(job_id, "/config")?;
        self.get_path("/jobs/:jobid/config", &path, "").await
    }

    /// `GET /jobs/{jobid}/jobmanager/config`: the configuration the job runs with, as `{key, value}`.
    pub async fn job_jobmanager_config(&self, job_id: &str) -> Result<Vec<ConfigEntry>, RestError> {
        let path = self.job_path(job_id, "/jobmanager/config")?;
        self.get_path("/jobs/:jobid/jobmanager/config", &path, "").await
    }

    /// `GET /jobmanager/config`: the cluster configuration.
    pub async fn jobmanager_config(&self) -> Result<Vec<ConfigEntry>, RestError> {
        let path = self.path(&[Part::Literal("jobmanager/config")])?;
        self.get_path("/jobmanager/config", &path, "").await
    }

    /// `GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics`: the names of the metrics the vertex's
    /// subtasks report. Lazily registered metrics (a Kafka source's `pendingRecords`) appear late, so
    /// list again rather than caching forever. An unknown vertex answers an empty list.
    pub async fn vertex_metric_names(&self, job_id: &str, vertex_id: &str) -> Result<Vec<String>, RestError> {
        let path = self.vertex_path(job_id, vertex_id, "/subtasks/metrics")?;
        let mut body = Vec::new();
        let request = self.prepare(SUBTASK_METRICS_ROUTE, &path, "");
        let names = self.get_read(&request, &mut body, read_metric_names).await?;
        Ok(names.into_iter().map(|n| n.id).collect())
    }

    /// `GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics?get=...[&agg=...]`: the named metrics
    /// aggregated over the vertex's subtasks (all aggregates when `aggregations` is empty).
    ///
    /// If **any** name is unknown to the vertex, Flink answers `[]` for all of them: list the names
    /// first ([`Self::vertex_metric_names`]) and treat `[]` as "not available", never as zero.
    pub async fn vertex_aggregated_metrics(
        &self,
        job_id: &str,
        vertex_id: &str,
        names: &[&str],
        aggregations: &[Aggregation],
    ) -> Result<Vec<AggregatedMetricValue>, RestError> {
        let path = self.vertex_path(job_id, vertex_id, "/subtasks/metrics")?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let query = metrics_query(names.iter().copied(), aggregations);
        self.get_path(SUBTASK_METRICS_ROUTE, &path, &query).await
    }

    /// The request of [`Self::vertex_aggregated_metrics`] with the `query` [`metrics_query`] built,
    /// for [`Self::get_prepared`] (the collector keeps each vertex's).
    pub(crate) fn prepare_vertex_aggregated_metrics(
        &self,
        job_id: &str,
        vertex_id: &str,
        query: &str,
    ) -> Result<PreparedRequest, RestError> {
        let path = self.vertex_path(job_id, vertex_id, "/subtasks/metrics")?;
        Ok(self.prepare(SUBTASK_METRICS_ROUTE, &path, query))
    }

    /// Whether `request` was prepared by a client with this one's base URL.
    pub(crate) fn prepared_here(&self, request: &PreparedRequest) -> bool {
        request.target.as_bytes().get(..request.relative.start) == Some(self.inner.request_base.as_str().as_bytes())
    }

    /// `GET /jobs/{jobid}/vertices/{vertexid}/metrics?get=<subtask>.<name>,...`: per-subtask values.
    /// Names are prefixed with the subtask index (`0.busyTimeMsPerSecond`); values come back as
    /// strings ([`MetricValue::as_f64`]).
    pub async fn vertex_subtask_metric_values(
        &self,
        job_id: &str,
        vertex_id: &str,
        names: &[&str],
    ) -> Result<Vec<MetricValue>, RestError> {
        let path = self.vertex_path(job_id, vertex_id, "/metrics")?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let query = metrics_query(names.iter().copied(), &[]);
        self.get_path("/jobs/:jobid/vertices/:vertexid/metrics", &path, &query)
            .await
    }

    /// `GET /taskmanagers/metrics?get=...[&agg=...]`: the named metrics aggregated over all task
    /// managers. One unknown name empties the whole answer, as for vertices.
    pub async fn taskmanagers_aggregated_metrics(
        &self,
        names: &[&str],
        aggregations: &[Aggregation],
    ) -> Result<Vec<AggregatedMetricValue>, RestError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.path(&[Part::Literal("taskmanagers/metrics")])?;
        let query = metrics_query(names.iter().copied(), aggregations);
        self.get_path("/taskmanagers/metrics", &path, &query).await
    }

    /// `GET /jobmanager/metrics?get=...`: job manager metrics (`taskSlotsTotal`, ...), values as strings.
    pub async fn jobmanager_metrics(&self, names: &[&str]) -> Result<Vec<MetricValue>, RestError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.path(&[Part::Literal("jobmanager/metrics")])?;
        let query = metrics_query(names.iter().copied(), &[]);
        self.get_path("/jobmanager/metrics", &path, &query).await
    }

    /// `GET /jobs/{jobid}/resource-requirements` (adaptive scheduler only). Unknown or stopped job: 500.
    pub async fn resource_requirements(&self, job_id: &str) -> Result<JobResourceRequirements, RestError> {
        let path = self.job_path(job_id, "/resource-requirements")?;
        self.get_path("/jobs/:jobid/resource-requirements", &path, "").await
    }

    /// `PUT /jobs/{jobid}/resource-requirements`. The body must list every vertex of the job. Flink
    /// answers `200 {}` at once and rescales later (after its cooldown, and with checkpointing after
    /// the next completed checkpoint) while the job stays RUNNING. A bound above the max parallelism,
    /// an unknown or missing vertex answer 400 with the reason. Never retried.
    pub async fn put_resource_requirements(
        &self,
        job_id: &str,
        requirements: &JobResourceRequirements,
    ) -> Result<(), RestError> {
        let path = self.job_path(job_id, "/resource-requirements")?;
        let body = serde_json::to_vec(requirements)
            .map_err(|e| RestError::Config(format!("resource requirements do not serialize: {e}")))?;
        let request = self.prepare("/jobs/:jobid/resource-requirements", &path, "");
        self.send(Method::PUT, &request, Some(body)).await.map(|_| ())
    }

    /// The path of `parts` under the base URL: literals as they are, ids as one percent-encoded
    /// segment each ([`push_segment`]), in order (the first invalid id is the error).
    fn path(&self, parts: &[Part<'_>]) -> Result<RequestPath, RestError> {
        let base = self.inner.request_base.path();
        let mut full = String::with_capacity(base.len() + 128);
        full.push_str(base);
        for part in parts {
            match *part {
                Part::Literal(text) => full.push_str(text),
                Part::Id(kind, id) => push_segment(&mut full, kind, id)?,
            }
        }
        Ok(RequestPath {
            full,
            relative_start: base.len(),
        })
    }

    /// `jobs/<job id><rest>`.
    fn job_path(&self, job_id: &str, rest: &'static str) -> Result<RequestPath, RestError> {
        self.path(&[Part::Literal("jobs/"), Part::Id("job id", job_id), Part::Literal(rest)])
    }

    /// `jobs/<job id>/vertices/<vertex id><rest>`.
    fn vertex_path(&self, job_id: &str, vertex_id: &str, rest: &'static str) -> Result<RequestPath, RestError> {
        self.path(&[
            Part::Literal("jobs/"),
            Part::Id("job id", job_id),
            Part::Literal("/vertices/"),
            Part::Id("vertex id", vertex_id),
            Part::Literal(rest),
        ])
    }

    /// GET `path` (relative to the base URL, already encoded) with the query `pairs`, encoded as a
    /// form (retried, see the module docs); `route` is its template (`/jobs/:jobid`), the
    /// `endpoint` label of the request metrics.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        route: &'static str,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, RestError> {
        let path = self.path(&[Part::Literal(path)])?;
        let mut encoded = String::new();
        for (key, value) in query {
            if !encoded.is_empty() {
                encoded.push('&');
            }
            push_form_encoded(&mut encoded, key);
            encoded.push('=');
            push_form_encoded(&mut encoded, value);
        }
        self.get_path(route, &path, &encoded).await
    }

    /// GET `path` with the encoded `query` (none when empty), retried; see [`Self::get`].
    async fn get_path<T: DeserializeOwned>(
        &self,
        route: &'static str,
        path: &RequestPath,
        query: &str,
    ) -> Result<T, RestError> {
        self.get_prepared(&self.prepare(route, path, query)).await
    }

    /// The request of `route` (its template, the `endpoint` label of the request metrics) to
    /// `path` with the encoded `query` (none when empty): the base URL with the path and query
    /// set, so the host is never parsed again.
    fn prepare(&self, route: &'static str, path: &RequestPath, query: &str) -> PreparedRequest {
        let mut url = self.inner.request_base.clone();
        url.set_path(&path.full);
        if !query.is_empty() {
            url.set_query(Some(query));
        }
        // The text is the base's (which ends with its path), the rest of the path, then the query.
        let after_path = url.as_str().len() - url.query().map_or(0, |q| q.len() + 1);
        let before_path = after_path - url.path().len();
        PreparedRequest {
            route,
            relative: (before_path + path.relative_start).min(after_path)..after_path,
            target: self.inner.transport.target(url),
        }
    }

    /// GET the prepared `request` (retried, see the module docs).
    pub(crate) async fn get_prepared<T: DeserializeOwned>(&self, request: &PreparedRequest) -> Result<T, RestError> {
        let mut body = Vec::new();
        self.get_into(request, &mut body).await
    }

    /// GET the prepared `request` (retried, see the module docs), keep the answer in `body` and
    /// decode it into a `T`, which may borrow from it. Each attempt is one request of the request
    /// metrics; the one that answered is observed once its body is decoded, with the decode error
    /// if there is one.
    pub(crate) async fn get_into<'b, T: Deserialize<'b>>(
        &self,
        request: &PreparedRequest,
        body: &'b mut Vec<u8>,
    ) -> Result<T, RestError> {
        self.get_read(request, body, serde_json::from_str).await
    }

    /// [`get_into`](Self::get_into), the body read by `read` when it is UTF-8 (a reader that
    /// accepts exactly what serde accepts, with serde's errors, such as
    /// [`read_aggregated_metrics`]); a body that is not UTF-8 is serde's to refuse.
    pub(crate) async fn get_read<'b, T: Deserialize<'b>>(
        &self,
        request: &PreparedRequest,
        body: &'b mut Vec<u8>,
        read: fn(&'b str) -> serde_json::Result<T>,
    ) -> Result<T, RestError> {
        let config = &self.inner.config;
        let route = request.route;
        let mut attempt = 0;
        let (started, answer) = loop {
            let started = Instant::now();
            let e = match self.send_once(Method::GET, request, None).await {
                Ok(answer) => break (started, answer),
                Err(e) => e,
            };
            self.observe(&Method::GET, route, started, Some(&e));
            if attempt >= config.retries || !e.is_retryable() {
                return Err(e);
            }
            let backoff = backoff(config.initial_backoff, config.max_backoff, attempt);
            // Counted in REST_REQUEST_ERRORS by `observe` above, with the error's kind.
            tracing::debug!(
                endpoint = route,
                kind = e.kind(),
                error = %e,
                attempt = attempt + 1,
                ?backoff,
                "Flink REST GET failed; retrying"
            );
            tokio::time::sleep(backoff).await;
            attempt += 1;
        };
        // Decoded after the loop, as what it returns borrows `body` for good. A body that does not
        // parse is not worth another request ([`RestError::is_retryable`]: the same answer would come).
        *body = answer;
        let result = decode(body, read, || endpoint(&Method::GET, request.relative()));
        self.observe(&Method::GET, route, started, result.as_ref().err());
        result
    }

    /// One request, never retried, with its metrics; the body of a 2xx answer, or the error.
    async fn send(
        &self,
        method: Method,
        request: &PreparedRequest,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, RestError> {
        let started = Instant::now();
        let result = self.send_once(method.clone(), request, body).await;
        self.observe(&method, request.route, started, result.as_ref().err());
        result
    }

    /// Records one request (one attempt of a retried GET) in the [`REST_REQUEST_DURATION`]
    /// histogram and, when it failed, the [`REST_REQUEST_ERRORS`] counter.
    fn observe(&self, method: &Method, route: &'static str, started: Instant, error: Option<&RestError>) {
        let method = method_label(method);
        let seconds = started.elapsed().as_secs_f64();
        let source = &self.inner.config.metrics_source;
        let register = || {
            metrics::histogram!(
                REST_REQUEST_DURATION,
                "source" => source.clone(),
                "method" => method,
                "endpoint" => route
            )
        };
        // The route first: the routes differ in length mostly, so most are passed over without
        // comparing their text (this runs at every request).
        match ROUTES.iter().position(|&(m, r)| r == route && m == method) {
            Some(i) => self.inner.durations[i].get_or_init(register).record(seconds),
            None => {
                debug_assert!(false, "{method} {route} is missing from ROUTES");
                register().record(seconds);
            }
        }
        if let Some(error) = error {
            metrics::counter!(
                REST_REQUEST_ERRORS,
                "source" => source.clone(),
                "method" => method,
                "endpoint" => route,
                "kind" => error.kind()
            )
            .increment(1);
        }
    }

    /// One request; the body of a 2xx answer, or the error.
    async fn send_once(
        &self,
        method: Method,
        prepared: &PreparedRequest,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, RestError> {
        let endpoint = || endpoint(&method, prepared.relative());
        let limit = self.inner.config.max_response_bytes;
        let exchanged = self
            .inner
            .transport
            .exchange(&method, &prepared.target, body, self.timeout, limit)
            .await;
        let (status, bytes) = exchanged.map_err(|failure| match failure {
            transport::Failure::Timeout => RestError::Timeout {
                endpoint: endpoint(),
                timeout: self.timeout,
            },
            transport::Failure::Transport(message) => RestError::Transport {
                endpoint: endpoint(),
                message,
            },
            transport::Failure::TooLarge => RestError::BodyTooLarge {
                endpoint: endpoint(),
                limit,
            },
        })?;
        if status.is_success() {
            return Ok(bytes);
        }
        Err(status_error(endpoint(), status, &bytes))
    }
}

/// A piece of a request path ([`FlinkRestClient::path`]).
enum Part<'a> {
    /// Path text as it is (already a valid, encoded path).
    Literal(&'a str),
    /// An id (`job id`, `vertex id`) that becomes one percent-encoded segment.
    Id(&'static str, &'a str),
}

/// A request's path: the base URL's path followed by the endpoint's, in one buffer.
struct RequestPath {
    /// The whole path, base path included.
    full: String,
    /// Where the endpoint's part (`jobs/<id>`, no leading `/`) starts in `full`.
    relative_start: usize,
}

impl RequestPath {
    /// The endpoint's part of the path (`jobs/<id>`), as errors name it.
    #[cfg(test)]
    fn relative(&self) -> &str {
        self.full.get(self.relative_start..).unwrap_or_default()
    }
}

/// A request's URL, built once ([`FlinkRestClient::prepare`]) and sent as often as needed.
#[derive(Debug, Clone)]
pub(crate) struct PreparedRequest {
    /// The route template (`/jobs/:jobid`), the `endpoint` label of the request metrics.
    route: &'static str,
    /// The base URL with the path and query set, as the client sends it (one copy of its text).
    target: transport::Target,
    /// Where the endpoint's part of the path (`jobs/<id>`) lies in the URL's text.
    relative: Range<usize>,
}

impl PreparedRequest {
    /// The URL's text: the base URL with the path and query set.
    fn url(&self) -> &str {
        self.target.as_str()
    }

    /// The endpoint's part of the path (`jobs/<id>`), as errors name it.
    fn relative(&self) -> &str {
        self.url().get(self.relative.clone()).unwrap_or_default()
    }
}

/// Appends `id` to `out` as one URL path segment: every byte outside the unreserved set
/// (`A-Z a-z 0-9 - . _ ~`) is percent-encoded, so `/`, `?`, `#` and `%` cannot leave the segment; an
/// empty id, `.` and `..` (which URL resolution would drop or climb with) are refused.
fn push_segment(out: &mut String, kind: &'static str, id: &str) -> Result<(), RestError> {
    if matches!(id, "" | "." | "..") {
        return Err(RestError::InvalidId {
            kind,
            id: id.to_owned(),
        });
    }
    push_encoded(out, id, false, |byte| {
        byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
    });
    Ok(())
}

/// Appends `text` to `out` encoded as `application/x-www-form-urlencoded` does it (what
/// `Url::query_pairs_mut` writes): `A-Z a-z 0-9 * - . _` stay, a space becomes `+`, every other
/// byte `%XX`.
fn push_form_encoded(out: &mut String, text: &str) {
    push_encoded(out, text, true, |byte| {
        byte.is_ascii_alphanumeric() || matches!(byte, b'*' | b'-' | b'.' | b'_')
    });
}

/// Appends `text` to `out`, every byte `keep` refuses as `%XX` (upper-case hex; a space as `+`
/// when `space_as_plus`), runs of kept bytes copied at once.
fn push_encoded(out: &mut String, text: &str, space_as_plus: bool, keep: impl Fn(u8) -> bool) {
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        if !keep(byte) {
            // Kept bytes are ASCII, so `start..i` lies on character boundaries.
            out.push_str(text.get(start..i).unwrap_or_default());
            out.push_str(if space_as_plus && byte == b' ' {
                "+"
            } else {
                percent_encoding::percent_encode_byte(byte)
            });
            start = i + 1;
        }
    }
    out.push_str(text.get(start..).unwrap_or_default());
}

/// The `method` label: a bounded set (the client only sends GET and PUT).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

fn endpoint(method: &Method, path: &str) -> String {
    format!("{method} /{path}")
}

/// The encoded query `get=<names>[&agg=<aggregations>]` of the metrics endpoints, each list
/// joined by `,` and form-encoded (as `Url::query_pairs_mut` would write the pairs); empty
/// without names.
pub(crate) fn metrics_query<'a>(names: impl IntoIterator<Item = &'a str>, aggregations: &[Aggregation]) -> String {
    let mut query = String::new();
    for (i, name) in names.into_iter().enumerate() {
        query.push_str(if i == 0 { "get=" } else { "%2C" });
        push_form_encoded(&mut query, name);
    }
    if query.is_empty() {
        return query;
    }
    for (i, aggregation) in aggregations.iter().enumerate() {
        query.push_str(if i == 0 { "&agg=" } else { "%2C" });
        query.push_str(aggregation.as_str());
    }
    query
}

/// A JSON answer's value. A body that is UTF-8 as a whole (every answer Flink sends) is checked
/// once and read as text: serde_json then does not check each string again, which was about a
/// twelfth of the service's instructions (one short string after another). Any other body is
/// read as bytes, as it always was, so every body gives the same value or the same error either
/// way (serde_json reads both the same, text only skipping the check of each string).
fn decode<'b, T: Deserialize<'b>>(
    body: &'b [u8],
    read: fn(&'b str) -> serde_json::Result<T>,
    endpoint: impl FnOnce() -> String,
) -> Result<T, RestError> {
    match std::str::from_utf8(body) {
        Ok(text) => read(text),
        Err(_) => serde_json::from_slice(body),
    }
    .map_err(|e| RestError::Decode {
        endpoint: endpoint(),
        message: e.to_string(),
    })
}

fn status_error(endpoint: String, status: StatusCode, body: &[u8]) -> RestError {
    RestError::Status {
        endpoint,
        status: status.as_u16(),
        message: error::flink_error_message(&String::from_utf8_lossy(body)),
    }
}

fn backoff(initial: Duration, max: Duration, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
    initial.saturating_mul(factor).min(max)
}

/// The error with its sources, which carry the useful part (`connection refused`).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `decode` read as text or as bytes, against serde_json reading bytes (as it did before):
    /// the same value or the same error text.
    fn decodes_as_bytes<'b, T: Deserialize<'b> + fmt::Debug>(body: &'b [u8]) -> Result<(), TestCaseError> {
        let decoded = decode::<T>(body, serde_json::from_str, || "GET x".to_owned()).map_err(|e| match e {
            RestError::Decode { message, .. } => message,
            other => panic!("{other:?}"),
        });
        let bytes = serde_json::from_slice::<T>(body).map_err(|e| e.to_string());
        prop_assert_eq!(format!("{decoded:?}"), format!("{bytes:?}"));
        Ok(())
    }

    /// Bytes a mutation puts into a recorded answer: invalid UTF-8 alone and in a sequence, a
    /// two-byte character, JSON's structure and escapes.
    const MUTATIONS: [&[u8]; 12] = [
        b"\xff",
        b"\xc3",
        b"\xc3\xa9",
        b"\xe2\x82",
        b"\"",
        b"\\",
        b"\\u00e9",
        b"\\ud800",
        b"}",
        b",",
        b"1e999",
        b"\x00",
    ];

    proptest! {
        #[test]
        fn answers_decode_as_text_exactly_as_they_did_as_bytes(
            which in 0usize..4,
            at in any::<prop::sample::Index>(),
            mutation in 0..MUTATIONS.len(),
            replace in any::<bool>(),
            mutate in any::<bool>(),
        ) {
            let recorded: &[u8] = match which {
                0 => include_bytes!("../../tests/fixtures/job-details.json"),
                1 => include_bytes!("../../tests/fixtures/jobs-overview.json"),
                2 => include_bytes!("../../tests/fixtures/vertex-subtask-metrics-agg.json"),
                _ => include_bytes!("../../tests/fixtures/job-plan.json"),
            };
            let mut body = recorded.to_vec();
            if mutate {
                let at = at.index(body.len());
                if replace {
                    body.remove(at);
                }
                body.splice(at..at, MUTATIONS[mutation].iter().copied());
            }
            match which {
                0 => {
                    decodes_as_bytes::<model::JobDetails>(&body)?;
                    decodes_as_bytes::<model::JobDetailsView<'_>>(&body)?;
                }
                1 => decodes_as_bytes::<JobsOverview>(&body)?,
                2 => {
                    decodes_as_bytes::<Vec<AggregatedMetricValue>>(&body)?;
                    decodes_as_bytes::<Vec<model::AggregatedMetricValueView<'_>>>(&body)?;
                }
                _ => decodes_as_bytes::<model::JobPlanResponseView<'_>>(&body)?,
            }
        }
    }

    /// Runs `work` on a current-thread runtime with a Prometheus recorder of its own; what it
    /// returned and the recorder's rendering afterwards.
    fn with_recorder<T>(work: impl std::future::Future<Output = T>) -> (T, String) {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let out = metrics::with_local_recorder(&recorder, || rt.block_on(work));
        (out, handle.render())
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(ms(100), ms(1000), 0), ms(100));
        assert_eq!(backoff(ms(100), ms(1000), 1), ms(200));
        assert_eq!(backoff(ms(100), ms(1000), 3), ms(800));
        assert_eq!(backoff(ms(100), ms(1000), 4), ms(1000));
        assert_eq!(backoff(ms(100), ms(1000), 40), ms(1000));
    }

    #[test]
    fn base_url_must_be_http() {
        assert!(matches!(
            FlinkRestClient::new("ftp://x", RestClientConfig::default()),
            Err(RestError::Config(_))
        ));
        assert!(matches!(
            FlinkRestClient::new("not a url", RestClientConfig::default()),
            Err(RestError::Config(_))
        ));
        let client = FlinkRestClient::new("http://127.0.0.1:8081/proxy", RestClientConfig::default());
        assert_eq!(
            client.map(|c| c.base_url().to_owned()).ok().as_deref(),
            Some("http://127.0.0.1:8081/proxy/")
        );
    }

    #[test]
    fn bad_tls_material_and_headers_are_config_errors() {
        let with = |tls: TlsConfig, auth_header: Option<AuthHeader>| {
            FlinkRestClient::new(
                "https://127.0.0.1:8081",
                RestClientConfig {
                    tls,
                    auth_header,
                    ..RestClientConfig::default()
                },
            )
        };
        let identity = TlsConfig {
            client_identity_pem: Some(b"not a pem".to_vec()),
            ..TlsConfig::default()
        };
        assert!(matches!(with(identity, None), Err(RestError::Config(_))));
        let header = AuthHeader {
            name: "bad header".to_owned(),
            value: "x".to_owned(),
        };
        assert!(matches!(
            with(TlsConfig::default(), Some(header)),
            Err(RestError::Config(_))
        ));
        let insecure = TlsConfig {
            accept_invalid_certificates: true,
            ..TlsConfig::default()
        };
        assert!(with(insecure, Some(AuthHeader::bearer("t"))).is_ok());
    }

    /// `id` as one path segment, or `None` when it is refused.
    fn path_segment(id: &str) -> Option<String> {
        let mut out = String::new();
        push_segment(&mut out, "job id", id).ok().map(|()| out)
    }

    #[test]
    fn ids_stay_one_path_segment() {
        let segment = path_segment;
        assert_eq!(
            segment("69d8f5332ed995a1c6cf4baa8d8018bb").as_deref(),
            Some("69d8f5332ed995a1c6cf4baa8d8018bb")
        );
        // '/' = 0x2F, '?' = 0x3F, '=' = 0x3D, '%' = 0x25, ' ' = 0x20
        assert_eq!(
            segment("../../jobs/overview?x=").as_deref(),
            Some("..%2F..%2Fjobs%2Foverview%3Fx%3D")
        );
        assert_eq!(segment("a%2e b").as_deref(), Some("a%252e%20b"));
        assert_eq!(segment(""), None);
        assert_eq!(segment("."), None);
        assert_eq!(segment(".."), None);
    }

    #[test]
    fn request_urls_are_the_joined_base_and_form_encoded_query() {
        let names = [
            "busyTimeMsPerSecond",
            "Source__a b.pendingRecords",
            "x,y&z=1",
            "ä/%+*~",
            "",
        ];
        for base in ["http://127.0.0.1:8081", "http://user:pw@flink.example:8081/proxy?x=1#f"] {
            let client = FlinkRestClient::new(base, RestClientConfig::default()).expect("client");
            let relative = "jobs/a%2Fb/vertices/v/subtasks/metrics";
            // What the client did before: join the relative path, append the pairs.
            let mut expected = client.inner.base.join(relative).expect("joins");
            expected
                .query_pairs_mut()
                .append_pair("get", &names.join(","))
                .append_pair("agg", "min,max");
            let path = client
                .path(&[
                    Part::Literal("jobs/"),
                    Part::Id("job id", "a/b"),
                    Part::Literal("/vertices/"),
                    Part::Id("vertex id", "v"),
                    Part::Literal("/subtasks/metrics"),
                ])
                .expect("valid ids");
            assert_eq!(path.relative(), relative);
            let query = metrics_query(names, &[Aggregation::Min, Aggregation::Max]);
            let request = client.prepare(SUBTASK_METRICS_ROUTE, &path, &query);
            assert_eq!(request.url(), expected.as_str());
            // The direct connections' URI is the URL's path and query, in the same text, not
            // a copy of it.
            match &request.target {
                transport::Target::Uri { text, origin } => {
                    let path = origin.path_and_query().expect("a path").as_str();
                    assert!(
                        expected.as_str().ends_with(path) && path.starts_with('/'),
                        "{path} ends {expected}"
                    );
                    assert_eq!(origin.authority(), None, "{origin} is in origin form");
                    assert!(text.as_ptr_range().contains(&path.as_ptr()), "{path} is in {text:?}");
                }
                other => panic!("the plain client takes a URI, not {other:?}"),
            }
            assert_eq!(request.relative(), relative);
            assert!(client.prepared_here(&request));
            let other = FlinkRestClient::new("http://127.0.0.1:8081/other", RestClientConfig::default());
            assert!(!other.expect("client").prepared_here(&request));
        }
        assert_eq!(metrics_query([], &[Aggregation::Min]), "");
        let mut form = String::new();
        push_form_encoded(&mut form, "RUNNING Apache Flink");
        assert_eq!(form, "RUNNING+Apache+Flink");
    }

    /// The duration series is registered at the first request, so a client built before the
    /// recorder is installed (as the service builds its clients) still records.
    #[test]
    fn request_series_are_registered_at_the_first_request() {
        let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free port");
        let config = RestClientConfig {
            retries: 0,
            metrics_source: "early".to_owned(),
            ..RestClientConfig::default()
        };
        let client = FlinkRestClient::new(&format!("http://127.0.0.1:{closed_port}"), config).expect("client");
        let ((), text) = with_recorder(async {
            for _ in 0..2 {
                assert!(client.job_details("j").await.is_err(), "nothing listens");
            }
        });
        let labels = r#"{source="early",method="GET",endpoint="/jobs/:jobid"}"#;
        assert!(
            text.contains(&format!("{REST_REQUEST_DURATION}_count{labels} 2")),
            "{text}"
        );
    }

    /// The details read in place are asked, retried, counted and refused as
    /// [`FlinkRestClient::job_details`] asks, retries, counts and refuses them.
    #[test]
    fn the_details_view_is_requested_and_fails_as_the_owned_details() {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let answer =
            |status: u16, body: &str| ResponseTemplate::new(status).set_body_raw(body.to_owned(), "application/json");
        let (requests, text) = with_recorder(async {
            let server = MockServer::start().await;
            for (at, response) in [
                (
                    "/jobs/truncated",
                    answer(200, r#"{"jid": "69d8", "state": "RUNNING", "vertices": [{"id": "#),
                ),
                (
                    "/jobs/mistyped",
                    answer(
                        200,
                        r#"{"jid":"t","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":"1"}]}}"#,
                    ),
                ),
                ("/jobs/mistyped/plan", answer(200, r#"{"plan":{"nodes":[{"id":"v"}]}}"#)),
                ("/jobs/gone", answer(404, r#"{"errors":["Job gone not found"]}"#)),
            ] {
                Mock::given(method("GET"))
                    .and(path(at))
                    .respond_with(response)
                    .mount(&server)
                    .await;
            }
            Mock::given(method("GET"))
                .and(path("/jobs/flaky"))
                .respond_with(answer(503, r#"{"errors":["Internal server error."]}"#))
                .up_to_n_times(1)
                .mount(&server)
                .await;
            Mock::given(method("GET"))
                .and(path("/jobs/flaky"))
                .respond_with(answer(
                    200,
                    r#"{"jid":"flaky","state":"RUNNING","timestamps":{"RUNNING":5}}"#,
                ))
                .mount(&server)
                .await;
            let config = RestClientConfig {
                retries: 2,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
                metrics_source: "view".to_owned(),
                ..RestClientConfig::default()
            };
            let client = FlinkRestClient::new(&server.uri(), config).expect("client");

            for job in ["truncated", "mistyped", "gone"] {
                let owned = client.job_details(job).await.expect_err("refused");
                let mut body = Vec::new();
                let view = match client.job_details_request(job) {
                    Ok(request) => client.job_details_view(&request, &mut body).await.map(|_| ()),
                    Err(e) => Err(e),
                }
                .expect_err("refused");
                assert_eq!(view.kind(), owned.kind(), "{job}");
                assert_eq!(view.to_string(), owned.to_string(), "{job}");
                assert_eq!(view.is_job_not_found(), owned.is_job_not_found(), "{job}");
            }
            let owned = client.job_plan("mistyped").await.expect_err("refused");
            let mut body = Vec::new();
            let view = client.job_plan_view("mistyped", &mut body).await.expect_err("refused");
            assert!(matches!(view, RestError::Decode { .. }), "{view}");
            assert_eq!(view.to_string(), owned.to_string());

            let mut body = Vec::new();
            let request = client.job_details_request("flaky").expect("a valid id");
            let flaky = client
                .job_details_view(&request, &mut body)
                .await
                .expect("the retry answers");
            assert_eq!(flaky.running_since().map(|t| t.timestamp_millis()), Some(5));
            server.received_requests().await.map_or(0, |r| r.len())
        });
        // Two per refused job (one each way, none retried), two of the plan, two of the flaky job.
        assert_eq!(requests, 10);
        let labels = |kind: &str| format!(r#"{{source="view",method="GET",endpoint="/jobs/:jobid",kind="{kind}"}}"#);
        assert!(
            text.contains(&format!("{REST_REQUEST_ERRORS}{} 4", labels("decode"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{REST_REQUEST_ERRORS}{} 3", labels("status"))),
            "{text}"
        );
        let timed = r#"{source="view",method="GET",endpoint="/jobs/:jobid"}"#;
        assert!(
            text.contains(&format!("{REST_REQUEST_DURATION}_count{timed} 8")),
            "{text}"
        );
    }

    #[test]
    fn auth_header_is_redacted_in_debug() {
        let text = format!("{:?}", AuthHeader::bearer("secret"));
        assert!(!text.contains("secret"));
    }
}
