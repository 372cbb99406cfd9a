//! # autoscaler-realizer
//!
//! Adapters between the autoscaler and a real Flink cluster, all over Flink's REST API:
//!
//! | part | does | reference |
//! |---|---|---|
//! | [`rest::FlinkRestClient`] | typed client of the endpoints below; per-request timeouts, bounded retries with backoff for GETs, TLS, an auth header; [`rest::RestError`] names endpoint and status | Flink `RestClusterClient` |
//! | [`RestMetricsCollector`] | [`MetricsCollector`](autoscaler_core::MetricsCollector): topology, `job_running_since` and the scaling metrics of one job | `RestApiMetricsCollector`, `ScalingMetricCollector` |
//! | [`RescaleApiScalingRealizer`] | [`ScalingRealizer`](autoscaler_core::ScalingRealizer): in-place rescale through `PUT /jobs/<id>/resource-requirements` | standalone `RescaleApiScalingRealizer` |
//! | [`CooldownRealizer`] | wraps any realizer with the adaptive scheduler's `scaling-interval.min`/`.max` cooldown | adaptive scheduler |
//! | [`FlinkClusterJobListFetcher`] | [`JobListFetcher`](autoscaler_core::JobListFetcher): the jobs of one cluster with their configuration | standalone `FlinkClusterJobListFetcher` |
//! | [`sources::MultiSourceJobListFetcher`] | the jobs of many clusters and YARN ResourceManagers, keyed by source, a failing source skipped alone | FLIP-334 §5.2 (none in the reference) |
//! | [`yarn::YarnResourceManagerClient`] | the RUNNING Flink applications of a YARN RM and their JobManagers' REST addresses | none in the reference |
//!
//! The conversion from aggregated Flink metrics to scaling metrics is pure and lives in
//! [`autoscaler_metrics::collection`], so simulators reuse it without HTTP.
//!
//! Endpoints covered: `GET /jobs/overview`, `GET /jobs/<id>` (details with vertices and plan),
//! `GET /jobs/<id>/status`, `GET /jobs/<id>/metrics?get=..`, `GET /jobs/<id>/plan`, `GET /jobs/<id>/config`, `GET /jobs/<id>/jobmanager/config`,
//! `GET /jobmanager/config`, `GET /jobs/<id>/vertices/<vid>/subtasks/metrics[?get=..&agg=..]`,
//! `GET /jobs/<id>/vertices/<vid>/metrics?get=..`, `GET /taskmanagers/metrics?get=..&agg=..`,
//! `GET /jobmanager/metrics?get=..`, `GET`/`PUT /jobs/<id>/resource-requirements`.
//!
//! # Wiring
//!
//! [`rest::FlinkRestClient::from_configuration`] builds the client of the standalone autoscaler's cluster
//! from `autoscaler.standalone.fetcher.flink-cluster.host`/`.port` and
//! `job.autoscaler.flink.rest-client.timeout`. The fetcher produces [`BasicJobContext<String, rest::FlinkRestClient>`](autoscaler_core::BasicJobContext)
//! (job key = job id); the collector and realizer reach the client through [`FlinkRestContext`],
//! implemented for that context (implement it on your own context type to reuse them).
//!
//! ```no_run
//! use autoscaler_core::config::Configuration;
//! use autoscaler_core::{BasicJobContext, JobListFetcher, LoggingEventHandler, MetricsCollector, ScalingRealizer};
//! use autoscaler_realizer::rest::{FlinkRestClient, RestClientConfig};
//! use autoscaler_realizer::{
//!     CooldownConfig, CooldownRealizer, FlinkClusterJobListFetcher, RescaleApiScalingRealizer, RestMetricsCollector,
//! };
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! type Ctx = BasicJobContext<String, FlinkRestClient>;
//! # async fn wire() -> Result<(), Box<dyn std::error::Error>> {
//! let client = FlinkRestClient::new(
//!     "http://127.0.0.1:8081",
//!     RestClientConfig { timeout: Duration::from_secs(10), retries: 2, ..RestClientConfig::default() },
//! )?;
//! let fetcher = FlinkClusterJobListFetcher::new(client);
//! let collector: Arc<dyn MetricsCollector<String, Ctx>> = Arc::new(RestMetricsCollector::<String>::new());
//! let events = Arc::new(LoggingEventHandler);
//! let realizer: Arc<dyn ScalingRealizer<String, Ctx>> = Arc::new(CooldownRealizer::new(
//!     RescaleApiScalingRealizer::with_event_handler(events),
//!     CooldownConfig::default(),
//! ));
//! // Each cycle: for every job of `fetcher.fetch(&base)`, run the autoscaler (JobAutoScalerImpl)
//! // built from `collector`, a state store, `realizer` and an event handler.
//! let base = Configuration::new();
//! for ctx in fetcher.fetch(&base).await? {
//!     println!("{} {:?}", ctx.job_key, ctx.job_status);
//! }
//! # let _ = (collector, realizer);
//! # Ok(()) }
//! ```
//!
//! # What the real cluster does (and how the parts cope)
//!
//! - An aggregated metrics query with one name the vertex lacks answers `[]` for all names: the
//!   collector lists each vertex's names first and asks only for those it found.
//! - Per-subtask and job-manager metric values are strings; they are parsed where used.
//! - An unknown or cancelled job answers 500 (`FlinkJobNotFoundException`) on the
//!   resource-requirements endpoints and 404 on `/jobs/<id>`: [`rest::RestError::is_job_not_found`].
//! - Right after a start or rescale, metrics are stale or pinned at busy = 1000 for tens of seconds:
//!   the caller's stabilization interval (default 5 min) covers it; during it a missing required
//!   metric is "not ready", not an error.
//! - `PUT resource-requirements` answers `200 {}` at once; the rescale happens later (after the
//!   scheduler's cooldown and, with checkpointing, the next checkpoint) while the job stays RUNNING.
//! - A source whose operator reports `numRecordsInPerSecond` = 0 (the datagen and rate sources of
//!   Flink 2.3 do) gets `OBSERVED_TPR` = +Inf: the reference's fallback to `numRecordsOutPerSecond`
//!   exists in its conversion but the metric is never queried, and this crate keeps that behaviour.
//!
//! # Where this crate deliberately differs from the reference
//!
//! - A job that disappeared between the job list and the collection (404, or 500 with
//!   `FlinkJobNotFoundException`) is [`CollectError::NotReady`](autoscaler_core::CollectError),
//!   not an error event: the next job list drops it and the control loop cleans it up.
//! - When an aggregated query answers `[]` the job's metric-name cache is dropped so the next cycle
//!   lists every vertex again (the reference keeps asking for the stale names).
//! - A source's metric names are listed once per cycle and used both for partition counting and for
//!   the metric-name cache (the reference lists them twice).
//! - Metric queries have the client's per-request timeout (the reference's have none).
//! - The `Scaling` event prints the requirements in vertex id order (the reference: hash order).

mod collector;
mod context;
mod cooldown;
mod error;
mod fetcher;
mod options;
mod realizer;
pub mod rest;
pub mod sources;
pub mod yarn;

pub use collector::RestMetricsCollector;
pub use context::FlinkRestContext;
pub use cooldown::{
    CooldownConfig, CooldownRealizer, IN_FLIGHT_GRACE, InFlight, RescaleInFlightGuard, parallelism_applied,
};
pub use error::{Error, Result};
pub use fetcher::FlinkClusterJobListFetcher;
pub use options::{
    COOLDOWN_AFTER_RESCALING, FLINK_CLUSTER_HOST, FLINK_CLUSTER_HOST_DEPRECATED, FLINK_CLUSTER_PORT,
    FLINK_CLUSTER_PORT_DEPRECATED, JOBMANAGER_SCHEDULER, RESCALE_TRIGGER_MAX_DELAY, RESOURCE_STABILIZATION_TIMEOUT,
    SCALING_INTERVAL_MAX, SCALING_INTERVAL_MIN, flink_cluster_rest_url,
};
pub use realizer::{RescaleApiScalingRealizer, SCALING_EVENT_REASON, updated_requirements};
