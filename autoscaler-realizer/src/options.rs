//! The few configuration keys the REST adapters read, with the reference's defaults and key rules
//! (`job.autoscaler.X` falls back to the legacy `kubernetes.operator.job.autoscaler.X`; durations in
//! Flink syntax, a bare number meaning milliseconds).

use autoscaler_core::{Configuration, OptionsError};
use autoscaler_metrics::BusyTimeAggregator;
use autoscaler_metrics::collection::CollectionConfig;
use std::time::Duration;

const PREFIX: &str = "job.autoscaler.";
const LEGACY_PREFIX: &str = "kubernetes.operator.job.autoscaler.";

/// `jobmanager.scheduler`: must be `adaptive` for the rescale API.
pub const JOBMANAGER_SCHEDULER: &str = "jobmanager.scheduler";
/// `jobmanager.adaptive-scheduler.scaling-interval.min`, read by [`crate::CooldownConfig`].
pub const SCALING_INTERVAL_MIN: &str = "jobmanager.adaptive-scheduler.scaling-interval.min";
/// `jobmanager.adaptive-scheduler.scaling-interval.max`, read by [`crate::CooldownConfig`].
pub const SCALING_INTERVAL_MAX: &str = "jobmanager.adaptive-scheduler.scaling-interval.max";

/// The autoscaler options metric collection needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CollectorOptions {
    /// `stabilization.interval` (5 min).
    pub stabilization_interval: Duration,
    /// The conversion options.
    pub collection: CollectionConfig,
}

impl CollectorOptions {
    pub(crate) fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        let busy_time_aggregator = match autoscaler_value(conf, "metrics.busy-time.aggregator") {
            None => BusyTimeAggregator::Max,
            Some((key, value)) => match value.trim().to_ascii_uppercase().as_str() {
                "MAX" => BusyTimeAggregator::Max,
                "MIN" => BusyTimeAggregator::Min,
                "AVG" => BusyTimeAggregator::Avg,
                _ => return Err(invalid(&key, value, "one of MAX, MIN, AVG")),
            },
        };
        let min_observations = match autoscaler_value(conf, "observed-true-processing-rate.min-observations") {
            None => 2,
            Some((key, value)) => value
                .trim()
                .parse()
                .map_err(|_| invalid(&key, value, "a non-negative integer"))?,
        };
        Ok(Self {
            stabilization_interval: autoscaler_duration(conf, "stabilization.interval", Duration::from_secs(300))?,
            collection: CollectionConfig {
                busy_time_aggregator,
                observed_tpr_lag_threshold: autoscaler_duration(
                    conf,
                    "observed-true-processing-rate.lag-threshold",
                    Duration::from_secs(30),
                )?,
                observed_tpr_min_observations: min_observations,
            },
        })
    }
}

/// `job.autoscaler.flink.rest-client.timeout` (10 s).
pub(crate) fn rest_client_timeout(conf: &Configuration) -> Result<Duration, OptionsError> {
    autoscaler_duration(conf, "flink.rest-client.timeout", Duration::from_secs(10))
}

/// Whether the job runs the adaptive scheduler (`jobmanager.scheduler` = `adaptive`, any case).
pub(crate) fn uses_adaptive_scheduler(conf: &Configuration) -> bool {
    conf.get(JOBMANAGER_SCHEDULER)
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("adaptive"))
}

/// The value of `job.autoscaler.<suffix>` or its legacy fallback, with the key it came from.
fn autoscaler_value<'a>(conf: &'a Configuration, suffix: &str) -> Option<(String, &'a str)> {
    [format!("{PREFIX}{suffix}"), format!("{LEGACY_PREFIX}{suffix}")]
        .into_iter()
        .find_map(|key| conf.get(&key).map(|v| (key, v)))
}

fn autoscaler_duration(conf: &Configuration, suffix: &str, default: Duration) -> Result<Duration, OptionsError> {
    match autoscaler_value(conf, suffix) {
        None => Ok(default),
        Some((key, value)) => parse_duration(value).map_err(|reason| invalid(&key, value, &reason)),
    }
}

/// An optional duration under a full key.
pub(crate) fn optional_duration(conf: &Configuration, key: &str) -> Result<Option<Duration>, OptionsError> {
    conf.get(key)
        .map(|value| parse_duration(value).map_err(|reason| invalid(key, value, &reason)))
        .transpose()
}

fn invalid(key: &str, value: &str, reason: &str) -> OptionsError {
    OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Parses a Flink duration (`30 s`, `5min`, `1 h`, `2 d`, `500ms`); a bare number is milliseconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err("a duration such as \"30 s\" or \"5 min\"".to_owned());
    }
    let n: u64 = number
        .parse()
        .map_err(|_| "a duration that fits in 64 bits".to_owned())?;
    let millis_per_unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        other => return Err(format!("a duration with a known unit (not {other:?})")),
    };
    n.checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| "a duration that fits in 64 bits".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_flink_syntax() {
        assert_eq!(parse_duration("30 s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2 d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 weeks").is_err());
    }

    #[test]
    fn collector_options_default_and_fall_back_to_legacy_keys() {
        let defaults = CollectorOptions::from_configuration(&Configuration::new()).expect("defaults");
        assert_eq!(defaults.stabilization_interval, Duration::from_secs(300));
        assert_eq!(defaults.collection, CollectionConfig::default());

        let conf = Configuration::from_iter([
            ("kubernetes.operator.job.autoscaler.stabilization.interval", "1 min"),
            ("job.autoscaler.metrics.busy-time.aggregator", "avg"),
            ("job.autoscaler.observed-true-processing-rate.min-observations", "3"),
        ]);
        let o = CollectorOptions::from_configuration(&conf).expect("valid");
        assert_eq!(o.stabilization_interval, Duration::from_secs(60));
        assert_eq!(o.collection.busy_time_aggregator, BusyTimeAggregator::Avg);
        assert_eq!(o.collection.observed_tpr_min_observations, 3);

        let bad = Configuration::from_iter([("job.autoscaler.metrics.busy-time.aggregator", "median")]);
        assert!(CollectorOptions::from_configuration(&bad).is_err());
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
