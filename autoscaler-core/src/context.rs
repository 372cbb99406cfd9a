//! What the autoscaler knows about one job in one cycle ([`JobAutoScalerContext`]).

use crate::config::Configuration;
use autoscaler_metrics::{ScalingMetric, VertexId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Flink job status, as the REST API spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum JobStatus {
    /// Job is initializing.
    Initializing,
    /// Job was created, no task has started yet (also: RUNNING with tasks not yet running).
    Created,
    /// All tasks are running or finished.
    Running,
    /// Job is failing.
    Failing,
    /// Job failed.
    Failed,
    /// Job is being cancelled.
    Cancelling,
    /// Job was cancelled.
    Canceled,
    /// Job finished.
    Finished,
    /// Job is restarting.
    Restarting,
    /// Job was suspended.
    Suspended,
    /// Job is reconciling.
    Reconciling,
}

impl JobStatus {
    /// Parses Flink's spelling (`RUNNING`, `CANCELED`, ...), case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "INITIALIZING" => Self::Initializing,
            "CREATED" => Self::Created,
            "RUNNING" => Self::Running,
            "FAILING" => Self::Failing,
            "FAILED" => Self::Failed,
            "CANCELLING" => Self::Cancelling,
            "CANCELED" => Self::Canceled,
            "FINISHED" => Self::Finished,
            "RESTARTING" => Self::Restarting,
            "SUSPENDED" => Self::Suspended,
            "RECONCILING" => Self::Reconciling,
            _ => return None,
        })
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Initializing => "INITIALIZING",
            Self::Created => "CREATED",
            Self::Running => "RUNNING",
            Self::Failing => "FAILING",
            Self::Failed => "FAILED",
            Self::Cancelling => "CANCELLING",
            Self::Canceled => "CANCELED",
            Self::Finished => "FINISHED",
            Self::Restarting => "RESTARTING",
            Self::Suspended => "SUSPENDED",
            Self::Reconciling => "RECONCILING",
        };
        f.write_str(s)
    }
}

/// Receives the autoscaler's own metrics for a job (counters and gauges), so a platform can export
/// them through whatever metrics system it uses. Every method defaults to doing nothing.
pub trait AutoscalerMetricsReporter: Send + Sync {
    /// Increments counter `name` (`scalings`, `balanced`, `errors`).
    fn increment_counter(&self, name: &str) {
        let _ = name;
    }
    /// Sets gauge `name` (e.g. `<vertex>.TRUE_PROCESSING_RATE.Average`) to `value`.
    fn set_gauge(&self, name: &str, value: f64) {
        let _ = (name, value);
    }
    /// Sets the gauge of `metric` of `vertex`; the default names it `<vertex>.<METRIC>.<Kind>`
    /// and calls [`set_gauge`](Self::set_gauge).
    fn set_vertex_gauge(&self, vertex: &VertexId, metric: ScalingMetric, kind: GaugeKind, value: f64) {
        self.set_gauge(&format!("{vertex}.{metric}.{kind}"), value);
    }
    /// Whether this reporter keeps gauges at all; `false` lets the cycle skip computing them.
    fn wants_gauges(&self) -> bool {
        true
    }
}

/// Which value of an evaluated metric a gauge shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GaugeKind {
    /// The current value (`.Current`).
    Current,
    /// The window average (`.Average`).
    Average,
}

impl fmt::Display for GaugeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Current => "Current",
            Self::Average => "Average",
        })
    }
}

/// A reporter that drops everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetricsReporter;

impl AutoscalerMetricsReporter for NoopMetricsReporter {
    fn set_vertex_gauge(&self, _: &VertexId, _: ScalingMetric, _: GaugeKind, _: f64) {}
    fn wants_gauges(&self) -> bool {
        false
    }
}

/// Everything the autoscaler needs to know about one job (FLIP-334's `JobAutoScalerContext`).
///
/// Platforms implement it on their own context type, or use [`BasicJobContext`]. The platform's
/// client (REST, Kubernetes, a simulator) is reached through the implementing type, so the trait
/// is not tied to HTTP.
///
/// ```
/// use autoscaler_core::prelude::*;
///
/// /// Our platform's view of one deployment, keyed by its name.
/// struct Deployment {
///     name: String,
///     flink_job_id: Option<String>,
///     conf: Configuration,
/// }
///
/// impl JobAutoScalerContext<String> for Deployment {
///     fn job_key(&self) -> &String {
///         &self.name
///     }
///     fn job_id(&self) -> Option<&str> {
///         self.flink_job_id.as_deref()
///     }
///     fn job_status(&self) -> Option<JobStatus> {
///         self.flink_job_id.as_ref().map(|_| JobStatus::Running)
///     }
///     fn configuration(&self) -> &Configuration {
///         &self.conf
///     }
/// }
///
/// let job = Deployment {
///     name: "orders".into(),
///     flink_job_id: Some("a1b2c3".into()),
///     conf: Configuration::from_iter([("job.autoscaler.enabled", "true")]),
/// };
/// assert_eq!(job.job_status(), Some(JobStatus::Running));
/// // Without a type of its own, a platform uses `BasicJobContext` (key, configuration, client).
/// let basic = BasicJobContext::new("orders".to_owned(), Configuration::new(), ());
/// assert_eq!(basic.job_key(), "orders");
/// ```
pub trait JobAutoScalerContext<K>: Send + Sync {
    /// The platform's key of the job.
    fn job_key(&self) -> &K;
    /// Flink's job id, if the job has been submitted.
    fn job_id(&self) -> Option<&str>;
    /// The job's status, if known.
    fn job_status(&self) -> Option<JobStatus>;
    /// The job's effective configuration (job config over the autoscaler's defaults).
    fn configuration(&self) -> &Configuration;
    /// Where the autoscaler reports its own metrics for this job.
    fn metrics_reporter(&self) -> &dyn AutoscalerMetricsReporter {
        &NoopMetricsReporter
    }
    /// CPU cores of one task manager, if the platform knows it (the reference returns none).
    fn task_manager_cpu(&self) -> Option<f64> {
        None
    }
    /// Process memory of one task manager in bytes, if known (`taskmanager.memory.process.size`).
    fn task_manager_memory(&self) -> Option<u64> {
        self.configuration()
            .get("taskmanager.memory.process.size")
            .and_then(|v| crate::config::parse_memory_size(v).ok())
    }
    /// The name of the source (cluster, ResourceManager) the job was listed from, if the platform
    /// has several: the `source` field of the job's log lines.
    fn log_source(&self) -> Option<&str> {
        None
    }
}

/// A ready-made [`JobAutoScalerContext`] carrying the platform's client `C`.
#[derive(Debug, Clone)]
pub struct BasicJobContext<K, C = ()> {
    /// The job key.
    pub job_key: K,
    /// Flink's job id.
    pub job_id: Option<String>,
    /// The job status.
    pub job_status: Option<JobStatus>,
    /// The effective configuration.
    pub configuration: Configuration,
    /// TM CPU, if known.
    pub task_manager_cpu: Option<f64>,
    /// The platform's client (REST client, simulator handle, ...).
    pub client: C,
}

impl<K, C> BasicJobContext<K, C> {
    /// A context for a RUNNING job with the given configuration.
    pub fn new(job_key: K, configuration: Configuration, client: C) -> Self {
        Self {
            job_key,
            job_id: None,
            job_status: Some(JobStatus::Running),
            configuration,
            task_manager_cpu: None,
            client,
        }
    }
}

impl<K: Send + Sync, C: Send + Sync> JobAutoScalerContext<K> for BasicJobContext<K, C> {
    fn job_key(&self) -> &K {
        &self.job_key
    }
    fn job_id(&self) -> Option<&str> {
        self.job_id.as_deref()
    }
    fn job_status(&self) -> Option<JobStatus> {
        self.job_status
    }
    fn configuration(&self) -> &Configuration {
        &self.configuration
    }
    fn task_manager_cpu(&self) -> Option<f64> {
        self.task_manager_cpu
    }
}
