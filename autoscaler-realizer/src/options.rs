//! The configuration the REST adapters read. The `job.autoscaler.*` options come from
//! [`AutoScalerOptions`](autoscaler_core::config::AutoScalerOptions) (reference defaults, legacy fallback keys); the Flink keys below are read
//! here.

use autoscaler_core::config::parse_duration;
use autoscaler_core::{config::Configuration, config::OptionsError};
use std::time::Duration;

/// `jobmanager.scheduler`: must be `adaptive` for the rescale API.
pub const JOBMANAGER_SCHEDULER: &str = "jobmanager.scheduler";
/// `jobmanager.adaptive-scheduler.scaling-interval.min`, read by [`crate::CooldownConfig`].
pub const SCALING_INTERVAL_MIN: &str = "jobmanager.adaptive-scheduler.scaling-interval.min";
/// `jobmanager.adaptive-scheduler.scaling-interval.max`, read by [`crate::CooldownConfig`].
pub const SCALING_INTERVAL_MAX: &str = "jobmanager.adaptive-scheduler.scaling-interval.max";

/// Flink 2.x name of [`SCALING_INTERVAL_MIN`] (the 1.x key is its deprecated fallback).
pub const COOLDOWN_AFTER_RESCALING: &str = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling";
/// Flink 2.x name of [`SCALING_INTERVAL_MAX`] (the 1.x key is its deprecated fallback).
pub const RESOURCE_STABILIZATION_TIMEOUT: &str =
    "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout";
/// Flink 2.x: how long a rescale may wait for a checkpoint.
pub const RESCALE_TRIGGER_MAX_DELAY: &str = "jobmanager.adaptive-scheduler.rescale-trigger.max-delay";

/// `autoscaler.standalone.fetcher.flink-cluster.host`: the JobManager REST host (default `localhost`).
pub const FLINK_CLUSTER_HOST: &str = "autoscaler.standalone.fetcher.flink-cluster.host";
/// Deprecated key of [`FLINK_CLUSTER_HOST`], still honoured.
pub const FLINK_CLUSTER_HOST_DEPRECATED: &str = "flinkClusterHost";
/// `autoscaler.standalone.fetcher.flink-cluster.port`: the JobManager REST port (default 8081).
pub const FLINK_CLUSTER_PORT: &str = "autoscaler.standalone.fetcher.flink-cluster.port";
/// Deprecated key of [`FLINK_CLUSTER_PORT`], still honoured.
pub const FLINK_CLUSTER_PORT_DEPRECATED: &str = "flinkClusterPort";

/// The REST URL of the cluster the standalone autoscaler watches: `http://<host>:<port>` from
/// [`FLINK_CLUSTER_HOST`] and [`FLINK_CLUSTER_PORT`] (or their deprecated keys), `localhost:8081` by
/// default. A host given with a scheme (`https://jm`) keeps it.
///
/// ```
/// use autoscaler_core::config::Configuration;
/// use autoscaler_realizer::flink_cluster_rest_url;
/// assert_eq!(flink_cluster_rest_url(&Configuration::new()).ok().as_deref(), Some("http://localhost:8081"));
/// let conf = Configuration::from_iter([("flinkClusterHost", "127.0.0.1"), ("autoscaler.standalone.fetcher.flink-cluster.port", "18081")]);
/// assert_eq!(flink_cluster_rest_url(&conf).ok().as_deref(), Some("http://127.0.0.1:18081"));
/// ```
pub fn flink_cluster_rest_url(conf: &Configuration) -> Result<String, OptionsError> {
    let first = |keys: [&'static str; 2]| keys.into_iter().find_map(|k| conf.get(k).map(|v| (k, v.trim())));
    let host = first([FLINK_CLUSTER_HOST, FLINK_CLUSTER_HOST_DEPRECATED]).map_or("localhost", |(_, v)| v);
    let port: u16 = match first([FLINK_CLUSTER_PORT, FLINK_CLUSTER_PORT_DEPRECATED]) {
        None => 8081,
        Some((key, value)) => value.parse().map_err(|_| OptionsError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: "a TCP port (1-65535)".to_owned(),
        })?,
    };
    Ok(if host.contains("://") {
        format!("{host}:{port}")
    } else {
        format!("http://{host}:{port}")
    })
}

/// `job.autoscaler.flink.rest-client.timeout` (10 s), read alone: another option's bad value is
/// the autoscaler's to report for that job, not a reason to fail a REST call.
pub(crate) fn rest_client_timeout(conf: &Configuration) -> Result<Duration, OptionsError> {
    autoscaler_core::config::rest_client_timeout(conf)
}

/// Whether the job runs the adaptive scheduler (`jobmanager.scheduler` = `adaptive`, any case).
pub(crate) fn uses_adaptive_scheduler(conf: &Configuration) -> bool {
    conf.get(JOBMANAGER_SCHEDULER)
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("adaptive"))
}

/// An optional duration (Flink syntax) under a full key.
pub(crate) fn optional_duration(conf: &Configuration, key: &str) -> Result<Option<Duration>, OptionsError> {
    conf.get(key)
        .map(|value| {
            parse_duration(value).map_err(|reason| OptionsError::InvalidValue {
                key: key.to_owned(),
                value: value.to_owned(),
                reason,
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_durations_parse_in_flink_syntax() {
        let conf = Configuration::from_iter([("a", "30 s"), ("b", "1500"), ("c", "soon")]);
        assert_eq!(optional_duration(&conf, "a").ok(), Some(Some(Duration::from_secs(30))));
        assert_eq!(
            optional_duration(&conf, "b").ok(),
            Some(Some(Duration::from_millis(1500)))
        );
        assert_eq!(optional_duration(&conf, "missing").ok(), Some(None));
        assert!(optional_duration(&conf, "c").is_err());
    }

    #[test]
    fn cluster_url_prefers_the_new_keys_and_rejects_bad_ports() {
        let conf = Configuration::from_iter([
            (FLINK_CLUSTER_HOST, "jm"),
            (FLINK_CLUSTER_HOST_DEPRECATED, "old"),
            (FLINK_CLUSTER_PORT_DEPRECATED, "9000"),
        ]);
        assert_eq!(flink_cluster_rest_url(&conf).ok().as_deref(), Some("http://jm:9000"));
        let tls = Configuration::from_iter([(FLINK_CLUSTER_HOST, "https://jm")]);
        assert_eq!(flink_cluster_rest_url(&tls).ok().as_deref(), Some("https://jm:8081"));
        let bad = Configuration::from_iter([(FLINK_CLUSTER_PORT, "eighty")]);
        assert!(flink_cluster_rest_url(&bad).is_err());
    }

    #[test]
    fn adaptive_scheduler_is_detected_case_insensitively() {
        assert!(uses_adaptive_scheduler(&Configuration::from_iter([(
            JOBMANAGER_SCHEDULER,
            "Adaptive"
        )])));
        assert!(!uses_adaptive_scheduler(&Configuration::from_iter([(
            JOBMANAGER_SCHEDULER,
            "default"
        )])));
        assert!(!uses_adaptive_scheduler(&Configuration::new()));
    }
}
