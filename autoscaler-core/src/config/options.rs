//! Typed autoscaler options (`job.autoscaler.*`) with the reference's defaults, fallback and
//! deprecated keys (reference `AutoScalerOptions`), read with Flink's value syntax (the `syntax`
//! module's parsers and [`parse_duration`]).
//!
//! ```
//! use autoscaler_core::config::{AutoScalerOptions, Configuration};
//! use std::time::Duration;
//! let conf = Configuration::from_iter([
//!     ("job.autoscaler.metrics.window", "10 min"),
//!     // The deprecated key has the lowest priority, so the legacy fallback key wins.
//!     ("kubernetes.operator.job.autoscaler.target.utilization", "0.6"),
//!     ("job.autoscaler.target.utilization", "0.5"),
//! ]);
//! let options = AutoScalerOptions::from_configuration(&conf).unwrap();
//! assert_eq!(options.metrics_window, Duration::from_secs(600));
//! assert_eq!(options.utilization_target, 0.6);
//! assert_eq!(options.scale_down_interval, Duration::from_secs(3600));
//! ```

use super::catalog::{self, AUTOSCALER_PREFIX, LEGACY_PREFIX};
use super::duration::parse_duration;
use super::excluded_periods::{ExcludedPeriod, is_excluded};
use super::syntax::{Configuration, parse_bool, parse_double, parse_enum, parse_int, parse_list, parse_memory_size};
use autoscaler_metrics::collection::CollectionConfig;
use autoscaler_metrics::{BusyTimeAggregator, EvaluationConfig};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

/// How new parallelisms are aligned to key groups or source partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlignmentMode {
    /// Accept divisors of the key-group / partition count or load-reducing values (default).
    #[default]
    Balanced,
    /// Accept only divisors.
    EvenlySpread,
    /// No alignment.
    Off,
    /// Legacy `scaling.key-group.partitions.adjust.mode=EVENLY_SPREAD` (may block, emits ScalingLimited).
    LegacyEvenlySpread,
    /// Legacy `scaling.key-group.partitions.adjust.mode=MAXIMIZE_UTILISATION`.
    LegacyMaximizeUtilisation,
}

/// Every `job.autoscaler.*` option the autoscaler reads, resolved with the reference's defaults,
/// fallback and deprecated keys. Parsed with [`AutoScalerOptions::from_configuration`]; built by
/// hand from [`Default`] (the reference's defaults), then setting fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AutoScalerOptions {
    /// `enabled` (false).
    pub enabled: bool,
    /// `scaling.enabled` (true); false = recommend only.
    pub scaling_enabled: bool,
    /// `metrics.window` (15 min).
    pub metrics_window: Duration,
    /// `stabilization.interval` (5 min).
    pub stabilization_interval: Duration,
    /// `excluded.periods` ([]), parsed once with the options (each keeps its expression).
    pub excluded_periods: Vec<ExcludedPeriod>,
    /// `utilization.target` (0.7).
    pub utilization_target: f64,
    /// `target.utilization.boundary` (0.3).
    pub target_utilization_boundary: f64,
    /// `utilization.max` (unset).
    pub utilization_max: Option<f64>,
    /// `utilization.min` (unset).
    pub utilization_min: Option<f64>,
    /// `scale-down.interval` (1 h); zero disables the delay.
    pub scale_down_interval: Duration,
    /// `vertex.min-parallelism` (1).
    pub vertex_min_parallelism: i32,
    /// `vertex.max-parallelism` (200).
    pub vertex_max_parallelism: i32,
    /// `scale-down.max-factor` (0.6).
    pub scale_down_max_factor: f64,
    /// `scale-up.max-factor` (100000).
    pub scale_up_max_factor: f64,
    /// `catch-up.duration` (30 min).
    pub catch_up_duration: Duration,
    /// `restart.time` (5 min).
    pub restart_time: Duration,
    /// `restart.time-tracking.enabled` (false).
    pub restart_time_tracking_enabled: bool,
    /// `restart.time-tracking.limit` (15 min).
    pub restart_time_tracking_limit: Duration,
    /// `backlog-processing.lag-threshold` (5 min).
    pub backlog_processing_lag_threshold: Duration,
    /// `observed-true-processing-rate.lag-threshold` (30 s).
    pub observed_tpr_lag_threshold: Duration,
    /// `observed-true-processing-rate.switch-threshold` (0.15).
    pub observed_tpr_switch_threshold: f64,
    /// `observed-true-processing-rate.min-observations` (2).
    pub observed_tpr_min_observations: usize,
    /// `scaling.effectiveness.detection.enabled` (false).
    pub scaling_effectiveness_detection_enabled: bool,
    /// `scaling.effectiveness.threshold` (0.1).
    pub scaling_effectiveness_threshold: f64,
    /// `memory.gc-pressure.threshold` (1.0).
    pub gc_pressure_threshold: f64,
    /// `memory.heap-usage.threshold` (1.0).
    pub heap_usage_threshold: f64,
    /// `memory.tuning.enabled` (false).
    pub memory_tuning_enabled: bool,
    /// `history.max.count` (3).
    pub history_max_count: usize,
    /// `history.max.age` (1 d).
    pub history_max_age: Duration,
    /// `metrics.busy-time.aggregator` (MAX).
    pub busy_time_aggregator: BusyTimeAggregator,
    /// `vertex.exclude.ids` ([]).
    pub vertex_exclude_ids: Vec<String>,
    /// `scaling.event.interval` (30 min).
    pub scaling_event_interval: Duration,
    /// `flink.rest-client.timeout` (10 s).
    pub rest_client_timeout: Duration,
    /// `quota.memory` (unset), bytes.
    pub quota_memory: Option<u64>,
    /// `quota.cpu` (unset).
    pub quota_cpu: Option<f64>,
    /// Resolved alignment mode (`scaling.parallelism-alignment.mode`, legacy adjust mode).
    pub alignment_mode: AlignmentMode,
    /// `observed-scalability.enabled` (false).
    pub observed_scalability_enabled: bool,
    /// `observed-scalability.min-observations` (3).
    pub observed_scalability_min_observations: usize,
    /// `observed-scalability.coefficient-min` (0.5).
    pub observed_scalability_coefficient_min: f64,
    /// `taskmanager.numberOfTaskSlots` (1).
    pub task_slots_per_task_manager: u32,
    /// `taskmanager.memory.process.size` (unset), bytes.
    pub task_manager_process_memory: Option<u64>,
    /// `memory.tuning.scale-down-compensation.enabled` (true).
    pub memory_tuning_scale_down_compensation_enabled: bool,
    /// `memory.tuning.overhead` (0.2).
    pub memory_tuning_overhead: f64,
    /// `memory.tuning.maximize-managed-memory` (false).
    pub memory_tuning_maximize_managed_memory: bool,
    /// The `taskmanager.memory.*` and network-buffer options memory tuning reads (Flink's defaults).
    pub memory_model: crate::tuning::MemoryModelOptions,
    /// `metrics.custom-evaluators` ([]): the custom evaluator instances (only the first is used;
    /// see [`crate::plugins`]).
    pub custom_evaluators: Vec<String>,
    /// `scaling.custom-executors` ([]): the scaling executor instances (see [`crate::plugins`]).
    pub custom_executors: Vec<String>,
    /// The name `scaling.parallelism-alignment.mode` gives when it is not a built-in: a custom
    /// alignment mode, resolved by [`PluginRegistry::resolve`](crate::plugins::PluginRegistry::resolve).
    /// [`AutoScalerOptions::alignment_mode`] is then BALANCED, the fallback when it cannot be resolved.
    pub custom_alignment_mode: Option<String>,
    /// `compat.reference-1-16` (false): this project's own option, not the reference's. True
    /// restores the reference 1.16's answers where this project departs from them on purpose: the
    /// partition cap in alignment ([`PartitionCap`](crate::scaling::PartitionCap), the reference's
    /// later fix FLINK-40389) and the observed-scalability guard (an idle vertex aborts the
    /// decision, FLINK-39890). For teams that need decision-for-decision equality with a JVM
    /// autoscaler 1.16 they still run.
    pub compat_reference_1_16: bool,
}

/// The default of [`AutoScalerOptions::rest_client_timeout`] (`flink.rest-client.timeout`).
const DEFAULT_REST_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for AutoScalerOptions {
    fn default() -> Self {
        const MIN: u64 = 60;
        Self {
            enabled: false,
            scaling_enabled: true,
            metrics_window: Duration::from_secs(15 * MIN),
            stabilization_interval: Duration::from_secs(5 * MIN),
            excluded_periods: Vec::new(),
            utilization_target: 0.7,
            target_utilization_boundary: 0.3,
            utilization_max: None,
            utilization_min: None,
            scale_down_interval: Duration::from_secs(60 * MIN),
            vertex_min_parallelism: 1,
            vertex_max_parallelism: 200,
            scale_down_max_factor: 0.6,
            scale_up_max_factor: 100_000.0,
            catch_up_duration: Duration::from_secs(30 * MIN),
            restart_time: Duration::from_secs(5 * MIN),
            restart_time_tracking_enabled: false,
            restart_time_tracking_limit: Duration::from_secs(15 * MIN),
            backlog_processing_lag_threshold: Duration::from_secs(5 * MIN),
            observed_tpr_lag_threshold: Duration::from_secs(30),
            observed_tpr_switch_threshold: 0.15,
            observed_tpr_min_observations: 2,
            scaling_effectiveness_detection_enabled: false,
            scaling_effectiveness_threshold: 0.1,
            gc_pressure_threshold: 1.0,
            heap_usage_threshold: 1.0,
            memory_tuning_enabled: false,
            history_max_count: 3,
            history_max_age: Duration::from_secs(24 * 60 * MIN),
            busy_time_aggregator: BusyTimeAggregator::Max,
            vertex_exclude_ids: Vec::new(),
            scaling_event_interval: Duration::from_secs(30 * MIN),
            rest_client_timeout: DEFAULT_REST_CLIENT_TIMEOUT,
            quota_memory: None,
            quota_cpu: None,
            alignment_mode: AlignmentMode::Balanced,
            observed_scalability_enabled: false,
            observed_scalability_min_observations: 3,
            observed_scalability_coefficient_min: 0.5,
            task_slots_per_task_manager: 1,
            task_manager_process_memory: None,
            memory_tuning_scale_down_compensation_enabled: true,
            memory_tuning_overhead: 0.2,
            memory_tuning_maximize_managed_memory: false,
            memory_model: crate::tuning::MemoryModelOptions::default(),
            custom_evaluators: Vec::new(),
            custom_executors: Vec::new(),
            custom_alignment_mode: None,
            compat_reference_1_16: false,
        }
    }
}

/// A config value that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The value of `key` does not parse as the option's type.
    #[error("invalid value {value:?} for {key}: {reason}")]
    InvalidValue {
        /// The config key that holds the value (the canonical, fallback or deprecated key that was set).
        key: String,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// The name (under [`AUTOSCALER_PREFIX`](super::AUTOSCALER_PREFIX)) of the switch back to the
/// reference 1.16's decisions ([`AutoScalerOptions::compat_reference_1_16`]).
pub const COMPAT_REFERENCE_1_16: &str = "compat.reference-1-16";

/// Every key that can set the option `job.autoscaler.<name>`, in the reference's lookup order: the
/// canonical key, its fallback keys in declared order, then its deprecated keys (Flink
/// `ConfigOption` puts fallback keys before deprecated ones). The keys come from the option table
/// ([`catalog`](super::catalog)); a plugin parameter (not in the table) has the canonical and legacy key.
///
/// ```
/// use autoscaler_core::config::option_keys;
/// assert_eq!(
///     option_keys("scale-down.interval"),
///     [
///         "job.autoscaler.scale-down.interval",
///         "kubernetes.operator.job.autoscaler.scale-up.grace-period",
///         "kubernetes.operator.job.autoscaler.scale-down.interval",
///         "job.autoscaler.scale-up.grace-period",
///     ]
/// );
/// ```
pub fn option_keys(name: &str) -> Vec<String> {
    match table_keys(name) {
        Some(keys) => keys.to_vec(),
        None => {
            // Only a plugin's own parameters are outside the table.
            debug_assert!(
                catalog::is_known(&format!("{AUTOSCALER_PREFIX}{name}")),
                "option {name} is missing from the option table"
            );
            vec![format!("{AUTOSCALER_PREFIX}{name}"), format!("{LEGACY_PREFIX}{name}")]
        }
    }
}

/// The keys of the table's option `job.autoscaler.<name>` ([`OptionSpec::keys`]), built once
/// per process: options are read per job and per cycle, and their legacy keys are formatted.
///
/// [`OptionSpec::keys`]: catalog::OptionSpec::keys
fn table_keys(name: &str) -> Option<&'static [String]> {
    static KEYS: OnceLock<HashMap<&'static str, Vec<String>>> = OnceLock::new();
    KEYS.get_or_init(|| {
        catalog::OPTIONS
            .iter()
            .filter_map(|spec| Some((spec.name()?, spec.keys())))
            .collect()
    })
    .get(name)
    .map(Vec::as_slice)
}

/// The first key of [`option_keys`] that is set, with its value (Flink `getOptional`).
fn lookup<'c>(conf: &'c Configuration, name: &str) -> Option<(String, &'c str)> {
    match table_keys(name) {
        Some(keys) => keys
            .iter()
            .find_map(|key| conf.get(key).map(|value| (key.clone(), value))),
        None => option_keys(name)
            .into_iter()
            .find_map(|key| conf.get(&key).map(|value| (key, value))),
    }
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> OptionsError {
    OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// Reads the option `job.autoscaler.<name>` with `parse`, `None` when no key of it is set.
fn read<T>(
    conf: &Configuration,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, OptionsError> {
    match lookup(conf, name) {
        None => Ok(None),
        Some((key, value)) => parse(value).map(Some).map_err(|reason| invalid(&key, value, reason)),
    }
}

/// `job.autoscaler.flink.rest-client.timeout` alone (10 s when unset), so that a caller needing
/// only the timeout (the job list fetcher) is not failed by another option's bad value. A zero
/// timeout would fail every call at once, so it is refused.
///
/// ```
/// use autoscaler_core::config::Configuration;
/// use autoscaler_core::config::rest_client_timeout;
/// let conf = Configuration::from_iter([("job.autoscaler.metrics.window", "forever")]);
/// assert_eq!(rest_client_timeout(&conf), Ok(std::time::Duration::from_secs(10)));
/// let zero = Configuration::from_iter([("job.autoscaler.flink.rest-client.timeout", "0 s")]);
/// assert!(rest_client_timeout(&zero).is_err());
/// ```
///
/// # Errors
/// [`OptionsError::InvalidValue`] when the value does not parse or is zero.
pub fn rest_client_timeout(conf: &Configuration) -> Result<Duration, OptionsError> {
    let parse = |text: &str| match parse_duration(text)? {
        Duration::ZERO => Err("the REST client timeout must be longer than zero".to_owned()),
        d => Ok(d),
    };
    Ok(read(conf, "flink.rest-client.timeout", parse)?.unwrap_or(DEFAULT_REST_CLIENT_TIMEOUT))
}

/// `job.autoscaler.compat.reference-1-16` alone (false when unset): whether the reference 1.16's
/// decisions are restored where this project departs from them
/// ([`AutoScalerOptions::compat_reference_1_16`]). Read here once for the options and for the
/// built-in alignment modes a custom mode delegates to.
///
/// ```
/// use autoscaler_core::config::{Configuration, compat_reference_1_16};
/// let conf = Configuration::from_iter([("job.autoscaler.compat.reference-1-16", "true")]);
/// assert_eq!(compat_reference_1_16(&conf), Ok(true));
/// assert_eq!(compat_reference_1_16(&Configuration::new()), Ok(false));
/// ```
///
/// # Errors
/// [`OptionsError::InvalidValue`] when the value is not `true`/`false`.
pub fn compat_reference_1_16(conf: &Configuration) -> Result<bool, OptionsError> {
    Ok(read(conf, COMPAT_REFERENCE_1_16, parse_bool)?.unwrap_or(false))
}

/// [`parse_double`] without NaN.
fn parse_number(text: &str) -> Result<f64, String> {
    match parse_double(text)? {
        x if x.is_nan() => Err("NaN is not a valid value".to_owned()),
        x => Ok(x),
    }
}

/// [`parse_int`], at least 1.
fn parse_positive_int(text: &str) -> Result<i32, String> {
    match parse_int(text)? {
        n if n >= 1 => Ok(n),
        n => Err(format!("{n} is not a positive integer")),
    }
}

/// Reads a non-autoscaler Flink option that has no fallback keys.
fn read_plain<T>(
    conf: &Configuration,
    key: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, OptionsError> {
    match conf.get(key) {
        None => Ok(None),
        Some(value) => parse(value).map(Some).map_err(|reason| invalid(key, value, reason)),
    }
}

/// A Java `int` count option as `usize`. A negative count behaves like 0 wherever the reference
/// compares a size against it (`size > count`, `size < min`), so it is clamped to 0.
fn count(value: i32) -> usize {
    usize::try_from(value).unwrap_or(0)
}

impl AutoScalerOptions {
    /// Reads every `job.autoscaler.*` option (and the few Flink options the autoscaler uses) from
    /// `conf`, applying the reference's defaults, legacy fallback keys and deprecated keys.
    ///
    /// `utilization.max`, `utilization.min` and the quotas stay `None` unless some key of them is
    /// set (the reference reads them with `getOptional`). The alignment mode is resolved as
    /// [`resolve_alignment_mode`] describes. Every `excluded.periods` entry is parsed here, once, so
    /// that [`AutoScalerOptions::is_excluded_period`] is a plain check.
    ///
    /// # Errors
    /// [`OptionsError::InvalidValue`] naming the first key whose value does not parse.
    pub fn from_configuration(conf: &Configuration) -> Result<AutoScalerOptions, OptionsError> {
        let d = AutoScalerOptions::default();
        let bool_or =
            |name: &str, default: bool| Ok::<_, OptionsError>(read(conf, name, parse_bool)?.unwrap_or(default));
        let int_or = |name: &str, default: i32| Ok::<_, OptionsError>(read(conf, name, parse_int)?.unwrap_or(default));
        // No option means anything by NaN, and it would slip through every range check.
        let double_or =
            |name: &str, default: f64| Ok::<_, OptionsError>(read(conf, name, parse_number)?.unwrap_or(default));
        let duration_or =
            |name: &str, default: Duration| Ok::<_, OptionsError>(read(conf, name, parse_duration)?.unwrap_or(default));
        let list = |name: &str| Ok::<_, OptionsError>(read(conf, name, parse_list)?.unwrap_or_default());

        let excluded_periods = list("excluded.periods")?
            .iter()
            .map(|e| ExcludedPeriod::parse(e))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|bad| {
                let (key, value) = lookup(conf, "excluded.periods").unwrap_or_default();
                invalid(&key, value, bad.to_string())
            })?;

        let task_slots = read_plain(conf, "taskmanager.numberOfTaskSlots", parse_int)?.unwrap_or(1);
        let task_slots_per_task_manager = u32::try_from(task_slots).map_err(|_| {
            invalid(
                "taskmanager.numberOfTaskSlots",
                &task_slots.to_string(),
                "the number of task slots is negative",
            )
        })?;

        let memory_model = crate::tuning::MemoryModelOptions::from_configuration(conf)?;
        Ok(AutoScalerOptions {
            enabled: bool_or("enabled", d.enabled)?,
            scaling_enabled: bool_or("scaling.enabled", d.scaling_enabled)?,
            metrics_window: duration_or("metrics.window", d.metrics_window)?,
            stabilization_interval: duration_or("stabilization.interval", d.stabilization_interval)?,
            excluded_periods,
            utilization_target: double_or("utilization.target", d.utilization_target)?,
            target_utilization_boundary: double_or("target.utilization.boundary", d.target_utilization_boundary)?,
            utilization_max: read(conf, "utilization.max", parse_double)?,
            utilization_min: read(conf, "utilization.min", parse_double)?,
            scale_down_interval: duration_or("scale-down.interval", d.scale_down_interval)?,
            vertex_min_parallelism: int_or("vertex.min-parallelism", d.vertex_min_parallelism)?,
            vertex_max_parallelism: read(conf, "vertex.max-parallelism", parse_positive_int)?
                .unwrap_or(d.vertex_max_parallelism),
            scale_down_max_factor: double_or("scale-down.max-factor", d.scale_down_max_factor)?,
            scale_up_max_factor: double_or("scale-up.max-factor", d.scale_up_max_factor)?,
            catch_up_duration: duration_or("catch-up.duration", d.catch_up_duration)?,
            restart_time: duration_or("restart.time", d.restart_time)?,
            restart_time_tracking_enabled: bool_or("restart.time-tracking.enabled", d.restart_time_tracking_enabled)?,
            restart_time_tracking_limit: duration_or("restart.time-tracking.limit", d.restart_time_tracking_limit)?,
            backlog_processing_lag_threshold: duration_or(
                "backlog-processing.lag-threshold",
                d.backlog_processing_lag_threshold,
            )?,
            observed_tpr_lag_threshold: duration_or(
                "observed-true-processing-rate.lag-threshold",
                d.observed_tpr_lag_threshold,
            )?,
            observed_tpr_switch_threshold: double_or(
                "observed-true-processing-rate.switch-threshold",
                d.observed_tpr_switch_threshold,
            )?,
            observed_tpr_min_observations: count(int_or("observed-true-processing-rate.min-observations", 2)?),
            scaling_effectiveness_detection_enabled: bool_or(
                "scaling.effectiveness.detection.enabled",
                d.scaling_effectiveness_detection_enabled,
            )?,
            scaling_effectiveness_threshold: double_or(
                "scaling.effectiveness.threshold",
                d.scaling_effectiveness_threshold,
            )?,
            gc_pressure_threshold: double_or("memory.gc-pressure.threshold", d.gc_pressure_threshold)?,
            heap_usage_threshold: double_or("memory.heap-usage.threshold", d.heap_usage_threshold)?,
            memory_tuning_enabled: bool_or("memory.tuning.enabled", d.memory_tuning_enabled)?,
            history_max_count: count(int_or("history.max.count", 3)?),
            history_max_age: duration_or("history.max.age", d.history_max_age)?,
            busy_time_aggregator: read(conf, "metrics.busy-time.aggregator", parse_busy_time_aggregator)?
                .unwrap_or(d.busy_time_aggregator),
            vertex_exclude_ids: list("vertex.exclude.ids")?,
            scaling_event_interval: duration_or("scaling.event.interval", d.scaling_event_interval)?,
            rest_client_timeout: rest_client_timeout(conf)?,
            quota_memory: read(conf, "quota.memory", parse_memory_size)?,
            quota_cpu: read(conf, "quota.cpu", parse_double)?,
            alignment_mode: resolve_alignment_mode(conf)?,
            observed_scalability_enabled: bool_or("observed-scalability.enabled", d.observed_scalability_enabled)?,
            observed_scalability_min_observations: count(int_or("observed-scalability.min-observations", 3)?),
            observed_scalability_coefficient_min: double_or(
                "observed-scalability.coefficient-min",
                d.observed_scalability_coefficient_min,
            )?,
            task_slots_per_task_manager,
            task_manager_process_memory: memory_model.process_size.and_then(|b| u64::try_from(b).ok()),
            memory_tuning_scale_down_compensation_enabled: bool_or(
                "memory.tuning.scale-down-compensation.enabled",
                d.memory_tuning_scale_down_compensation_enabled,
            )?,
            memory_tuning_overhead: double_or("memory.tuning.overhead", d.memory_tuning_overhead)?,
            memory_tuning_maximize_managed_memory: bool_or(
                "memory.tuning.maximize-managed-memory",
                d.memory_tuning_maximize_managed_memory,
            )?,
            memory_model,
            custom_evaluators: list("metrics.custom-evaluators")?,
            custom_executors: list("scaling.custom-executors")?,
            custom_alignment_mode: lookup(conf, "scaling.parallelism-alignment.mode")
                .map(|(_, name)| name)
                .filter(|name| !BUILT_IN_ALIGNMENT_MODES.contains(name))
                .map(str::to_owned),
            compat_reference_1_16: compat_reference_1_16(conf)?,
        })
    }

    /// Reads only `job.autoscaler.enabled` (default false): when it is false the reference clears the
    /// job's state and reads nothing else, so a caller can check it before
    /// [`AutoScalerOptions::from_configuration`].
    ///
    /// # Errors
    /// [`OptionsError::InvalidValue`] when the value is not `true`/`false`.
    pub fn is_enabled(conf: &Configuration) -> Result<bool, OptionsError> {
        Ok(read(conf, "enabled", parse_bool)?.unwrap_or(false))
    }

    /// The upper utilization bound: `utilization.max`, or target + boundary.
    pub fn resolved_utilization_max(&self) -> f64 {
        self.utilization_max
            .unwrap_or(self.utilization_target + self.target_utilization_boundary)
    }

    /// The lower utilization bound: `utilization.min`, or target - boundary.
    pub fn resolved_utilization_min(&self) -> f64 {
        self.utilization_min
            .unwrap_or(self.utilization_target - self.target_utilization_boundary)
    }

    /// The options the metric evaluation reads, with `restart_time` decided by the cycle
    /// (`restart.time` or the tracked maximum).
    pub fn evaluation_config(&self, restart_time: Duration) -> EvaluationConfig {
        EvaluationConfig {
            busy_time_aggregator: self.busy_time_aggregator,
            utilization_target: self.utilization_target,
            utilization_max: self.resolved_utilization_max(),
            utilization_min: self.resolved_utilization_min(),
            catch_up_duration: self.catch_up_duration,
            restart_time,
            backlog_lag_threshold: self.backlog_processing_lag_threshold,
            observed_tpr_switch_threshold: self.observed_tpr_switch_threshold,
            observed_tpr_min_observations: self.observed_tpr_min_observations,
        }
    }

    /// Whether `now` lies in one of the `excluded.periods` (evaluated in UTC).
    pub fn is_excluded_period(&self, now: DateTime<Utc>) -> bool {
        is_excluded(&self.excluded_periods, now)
    }

    /// The options the conversion of Flink metrics into scaling metrics reads.
    pub fn collection_config(&self) -> CollectionConfig {
        CollectionConfig {
            busy_time_aggregator: self.busy_time_aggregator,
            observed_tpr_lag_threshold: self.observed_tpr_lag_threshold,
            observed_tpr_min_observations: self.observed_tpr_min_observations,
        }
    }
}

/// The names `scaling.parallelism-alignment.mode` selects a built-in mode with (case-sensitive).
const BUILT_IN_ALIGNMENT_MODES: [&str; 3] = ["BALANCED", "EVENLY_SPREAD", "OFF"];

/// Resolves the alignment mode (reference
/// `ParallelismAligner.resolve`):
/// 1. `scaling.parallelism-alignment.mode` explicitly set: `BALANCED`, `EVENLY_SPREAD` or `OFF`
///    compared case-sensitively; any other value names a custom mode
///    ([`AutoScalerOptions::custom_alignment_mode`]), for which this returns BALANCED, the
///    reference's fallback when the mode cannot be resolved;
/// 2. else the deprecated `scaling.key-group.partitions.adjust.mode` if explicitly set (enum,
///    case-insensitive `EVENLY_SPREAD` / `MAXIMIZE_UTILISATION`) selects the blocking legacy mode;
/// 3. else BALANCED.
///
/// # Errors
/// [`OptionsError::InvalidValue`] when the legacy key is consulted and is not one of its names.
pub fn resolve_alignment_mode(conf: &Configuration) -> Result<AlignmentMode, OptionsError> {
    if let Some((_, name)) = lookup(conf, "scaling.parallelism-alignment.mode") {
        return Ok(match name {
            "BALANCED" => AlignmentMode::Balanced,
            "EVENLY_SPREAD" => AlignmentMode::EvenlySpread,
            "OFF" => AlignmentMode::Off,
            // A custom mode: the plugin registry resolves it (and warns when it cannot).
            _ => AlignmentMode::Balanced,
        });
    }
    let legacy = read(conf, "scaling.key-group.partitions.adjust.mode", |v| match parse_enum(
        v,
        &["EVENLY_SPREAD", "MAXIMIZE_UTILISATION"],
    )? {
        0 => Ok(AlignmentMode::LegacyEvenlySpread),
        _ => Ok(AlignmentMode::LegacyMaximizeUtilisation),
    })?;
    Ok(legacy.unwrap_or(AlignmentMode::Balanced))
}

fn parse_busy_time_aggregator(text: &str) -> Result<BusyTimeAggregator, String> {
    Ok(match parse_enum(text, &["AVG", "MAX", "MIN"])? {
        0 => BusyTimeAggregator::Avg,
        1 => BusyTimeAggregator::Max,
        _ => BusyTimeAggregator::Min,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;
    use chrono::TimeZone;

    const MIN: u64 = 60;

    fn options(pairs: &[(&str, &str)]) -> AutoScalerOptions {
        AutoScalerOptions::from_configuration(&Configuration::from_iter(pairs.iter().copied())).unwrap()
    }

    fn error(pairs: &[(&str, &str)]) -> OptionsError {
        AutoScalerOptions::from_configuration(&Configuration::from_iter(pairs.iter().copied())).unwrap_err()
    }

    #[test]
    fn an_empty_configuration_gives_the_reference_defaults() {
        let o = options(&[]);
        assert_eq!(o, AutoScalerOptions::default());
        assert!(!o.enabled);
        assert!(o.scaling_enabled);
        assert_eq!(o.metrics_window, Duration::from_secs(15 * MIN));
        assert_eq!(o.stabilization_interval, Duration::from_secs(5 * MIN));
        assert!(o.excluded_periods.is_empty());
        assert_eq!(o.utilization_target, 0.7);
        assert_eq!(o.target_utilization_boundary, 0.3);
        assert_eq!((o.utilization_max, o.utilization_min), (None, None));
        assert_eq!(o.scale_down_interval, Duration::from_secs(60 * MIN));
        assert_eq!((o.vertex_min_parallelism, o.vertex_max_parallelism), (1, 200));
        assert_eq!((o.scale_down_max_factor, o.scale_up_max_factor), (0.6, 100_000.0));
        assert_eq!(o.catch_up_duration, Duration::from_secs(30 * MIN));
        assert_eq!(o.restart_time, Duration::from_secs(5 * MIN));
        assert!(!o.restart_time_tracking_enabled);
        assert_eq!(o.restart_time_tracking_limit, Duration::from_secs(15 * MIN));
        assert_eq!(o.backlog_processing_lag_threshold, Duration::from_secs(5 * MIN));
        assert_eq!(o.observed_tpr_lag_threshold, Duration::from_secs(30));
        assert_eq!(o.observed_tpr_switch_threshold, 0.15);
        assert_eq!(o.observed_tpr_min_observations, 2);
        assert!(!o.scaling_effectiveness_detection_enabled);
        assert_eq!(o.scaling_effectiveness_threshold, 0.1);
        assert_eq!((o.gc_pressure_threshold, o.heap_usage_threshold), (1.0, 1.0));
        assert!(!o.memory_tuning_enabled);
        assert!(o.memory_tuning_scale_down_compensation_enabled);
        assert_eq!(o.memory_tuning_overhead, 0.2);
        assert!(!o.memory_tuning_maximize_managed_memory);
        assert_eq!(o.history_max_count, 3);
        assert_eq!(o.history_max_age, Duration::from_secs(24 * 60 * MIN));
        assert_eq!(o.busy_time_aggregator, BusyTimeAggregator::Max);
        assert!(o.vertex_exclude_ids.is_empty());
        assert_eq!(o.scaling_event_interval, Duration::from_secs(30 * MIN));
        assert_eq!(o.rest_client_timeout, Duration::from_secs(10));
        assert_eq!((o.quota_memory, o.quota_cpu), (None, None));
        assert_eq!(o.alignment_mode, AlignmentMode::Balanced);
        assert!(!o.observed_scalability_enabled);
        assert_eq!(o.observed_scalability_min_observations, 3);
        assert_eq!(o.observed_scalability_coefficient_min, 0.5);
        assert_eq!(o.task_slots_per_task_manager, 1);
        assert_eq!(o.task_manager_process_memory, None);
        assert!(o.custom_evaluators.is_empty() && o.custom_executors.is_empty());
    }

    #[test]
    fn every_canonical_key_is_read() {
        let o = options(&[
            ("job.autoscaler.enabled", "true"),
            ("job.autoscaler.scaling.enabled", "FALSE"),
            ("job.autoscaler.metrics.window", "10 min"),
            ("job.autoscaler.stabilization.interval", "1 m"),
            ("job.autoscaler.excluded.periods", "10:00-11:00; * * * ? * 2"),
            ("job.autoscaler.utilization.target", "0.8"),
            ("job.autoscaler.target.utilization.boundary", "0.1"),
            ("job.autoscaler.utilization.max", "0.95"),
            ("job.autoscaler.utilization.min", "0.2"),
            ("job.autoscaler.scale-down.interval", "0"),
            ("job.autoscaler.vertex.min-parallelism", "2"),
            ("job.autoscaler.vertex.max-parallelism", "64"),
            ("job.autoscaler.scale-down.max-factor", "0.5"),
            ("job.autoscaler.scale-up.max-factor", "2.0"),
            ("job.autoscaler.catch-up.duration", "PT10M"),
            ("job.autoscaler.restart.time", "30 s"),
            ("job.autoscaler.restart.time-tracking.enabled", "true"),
            ("job.autoscaler.restart.time-tracking.limit", "2 min"),
            ("job.autoscaler.backlog-processing.lag-threshold", "1 min"),
            ("job.autoscaler.observed-true-processing-rate.lag-threshold", "10 s"),
            ("job.autoscaler.observed-true-processing-rate.switch-threshold", "0.2"),
            ("job.autoscaler.observed-true-processing-rate.min-observations", "5"),
            ("job.autoscaler.scaling.effectiveness.detection.enabled", "true"),
            ("job.autoscaler.scaling.effectiveness.threshold", "0.3"),
            ("job.autoscaler.memory.gc-pressure.threshold", "0.9"),
            ("job.autoscaler.memory.heap-usage.threshold", "0.95"),
            ("job.autoscaler.memory.tuning.enabled", "true"),
            ("job.autoscaler.memory.tuning.scale-down-compensation.enabled", "false"),
            ("job.autoscaler.memory.tuning.overhead", "0.5"),
            ("job.autoscaler.memory.tuning.maximize-managed-memory", "true"),
            ("job.autoscaler.history.max.count", "7"),
            ("job.autoscaler.history.max.age", "2 d"),
            ("job.autoscaler.metrics.busy-time.aggregator", "avg"),
            ("job.autoscaler.vertex.exclude.ids", "a1;b2"),
            ("job.autoscaler.scaling.event.interval", "5 min"),
            ("job.autoscaler.flink.rest-client.timeout", "3 s"),
            ("job.autoscaler.quota.memory", "64 gb"),
            ("job.autoscaler.quota.cpu", "16"),
            ("job.autoscaler.scaling.parallelism-alignment.mode", "OFF"),
            ("job.autoscaler.observed-scalability.enabled", "true"),
            ("job.autoscaler.observed-scalability.min-observations", "4"),
            ("job.autoscaler.observed-scalability.coefficient-min", "0.25"),
            ("job.autoscaler.metrics.custom-evaluators", "e1"),
            ("job.autoscaler.scaling.custom-executors", "x1;x2"),
            ("taskmanager.numberOfTaskSlots", "4"),
            ("taskmanager.memory.process.size", "2g"),
        ]);
        assert!(o.enabled);
        assert!(!o.scaling_enabled);
        assert_eq!(o.metrics_window, Duration::from_secs(600));
        assert_eq!(o.stabilization_interval, Duration::from_secs(60));
        let expressions: Vec<&str> = o.excluded_periods.iter().map(ExcludedPeriod::expression).collect();
        assert_eq!(expressions, ["10:00-11:00", "* * * ? * 2"]);
        assert_eq!(o.utilization_target, 0.8);
        assert_eq!(o.target_utilization_boundary, 0.1);
        assert_eq!((o.utilization_max, o.utilization_min), (Some(0.95), Some(0.2)));
        assert_eq!(o.scale_down_interval, Duration::ZERO);
        assert_eq!((o.vertex_min_parallelism, o.vertex_max_parallelism), (2, 64));
        assert_eq!((o.scale_down_max_factor, o.scale_up_max_factor), (0.5, 2.0));
        assert_eq!(o.catch_up_duration, Duration::from_secs(600));
        assert_eq!(o.restart_time, Duration::from_secs(30));
        assert!(o.restart_time_tracking_enabled);
        assert_eq!(o.restart_time_tracking_limit, Duration::from_secs(120));
        assert_eq!(o.backlog_processing_lag_threshold, Duration::from_secs(60));
        assert_eq!(o.observed_tpr_lag_threshold, Duration::from_secs(10));
        assert_eq!(o.observed_tpr_switch_threshold, 0.2);
        assert_eq!(o.observed_tpr_min_observations, 5);
        assert!(o.scaling_effectiveness_detection_enabled);
        assert_eq!(o.scaling_effectiveness_threshold, 0.3);
        assert_eq!((o.gc_pressure_threshold, o.heap_usage_threshold), (0.9, 0.95));
        assert!(o.memory_tuning_enabled);
        assert!(!o.memory_tuning_scale_down_compensation_enabled);
        assert_eq!(o.memory_tuning_overhead, 0.5);
        assert!(o.memory_tuning_maximize_managed_memory);
        assert_eq!(o.history_max_count, 7);
        assert_eq!(o.history_max_age, Duration::from_secs(2 * 86_400));
        assert_eq!(o.busy_time_aggregator, BusyTimeAggregator::Avg);
        assert_eq!(o.vertex_exclude_ids, ["a1", "b2"]);
        assert_eq!(o.scaling_event_interval, Duration::from_secs(300));
        assert_eq!(o.rest_client_timeout, Duration::from_secs(3));
        assert_eq!(o.quota_memory, Some(64 << 30));
        assert_eq!(o.quota_cpu, Some(16.0));
        assert_eq!(o.alignment_mode, AlignmentMode::Off);
        assert!(o.observed_scalability_enabled);
        assert_eq!(o.observed_scalability_min_observations, 4);
        assert_eq!(o.observed_scalability_coefficient_min, 0.25);
        assert_eq!(o.custom_evaluators, ["e1"]);
        assert_eq!(o.custom_executors, ["x1", "x2"]);
        assert_eq!(o.task_slots_per_task_manager, 4);
        assert_eq!(o.task_manager_process_memory, Some(2 << 30));
    }

    #[test]
    fn the_compat_switch_defaults_off_and_reads_its_keys() {
        assert!(!options(&[]).compat_reference_1_16);
        assert!(options(&[("job.autoscaler.compat.reference-1-16", "true")]).compat_reference_1_16);
        assert!(options(&[("job.autoscaler.compat.reference-1-16", "TRUE")]).compat_reference_1_16);
        assert!(!options(&[("job.autoscaler.compat.reference-1-16", "false")]).compat_reference_1_16);
        assert!(options(&[("kubernetes.operator.job.autoscaler.compat.reference-1-16", "true")]).compat_reference_1_16);
        assert_eq!(
            error(&[("job.autoscaler.compat.reference-1-16", "yes")]),
            OptionsError::InvalidValue {
                key: "job.autoscaler.compat.reference-1-16".to_owned(),
                value: "yes".to_owned(),
                reason: parse_bool("yes").unwrap_err(),
            }
        );
    }

    #[test]
    fn every_option_reads_its_legacy_fallback_key() {
        let o = options(&[
            ("kubernetes.operator.job.autoscaler.enabled", "true"),
            ("kubernetes.operator.job.autoscaler.metrics.window", "20 min"),
            ("kubernetes.operator.job.autoscaler.utilization.max", "0.9"),
            ("kubernetes.operator.job.autoscaler.quota.cpu", "8"),
            ("kubernetes.operator.job.autoscaler.vertex.exclude.ids", "v"),
            ("kubernetes.operator.job.autoscaler.metrics.busy-time.aggregator", "MIN"),
            (
                "kubernetes.operator.job.autoscaler.scaling.parallelism-alignment.mode",
                "EVENLY_SPREAD",
            ),
        ]);
        assert!(o.enabled);
        assert_eq!(o.metrics_window, Duration::from_secs(20 * MIN));
        assert_eq!(o.utilization_max, Some(0.9));
        assert_eq!(o.quota_cpu, Some(8.0));
        assert_eq!(o.vertex_exclude_ids, ["v"]);
        assert_eq!(o.busy_time_aggregator, BusyTimeAggregator::Min);
        assert_eq!(o.alignment_mode, AlignmentMode::EvenlySpread);
        // The canonical key wins over the fallback.
        let o = options(&[
            ("job.autoscaler.metrics.window", "1 min"),
            ("kubernetes.operator.job.autoscaler.metrics.window", "20 min"),
        ]);
        assert_eq!(o.metrics_window, Duration::from_secs(60));
    }

    #[test]
    fn utilization_target_key_priority() {
        let canonical = ("job.autoscaler.utilization.target", "0.1");
        let legacy = ("kubernetes.operator.job.autoscaler.utilization.target", "0.2");
        let legacy_old_name = ("kubernetes.operator.job.autoscaler.target.utilization", "0.3");
        let deprecated = ("job.autoscaler.target.utilization", "0.4");
        let all = [canonical, legacy, legacy_old_name, deprecated];
        for (i, expected) in [0.1, 0.2, 0.3, 0.4].into_iter().enumerate() {
            assert_eq!(options(&all[i..]).utilization_target, expected, "keys {:?}", &all[i..]);
        }
        // The documented deprecated key alone still works; it only loses to every other key.
        assert_eq!(options(&[deprecated]).utilization_target, 0.4);
        assert_eq!(options(&[deprecated, legacy_old_name]).utilization_target, 0.3);
    }

    #[test]
    fn scale_down_interval_key_priority() {
        let canonical = ("job.autoscaler.scale-down.interval", "1 min");
        let legacy_grace = ("kubernetes.operator.job.autoscaler.scale-up.grace-period", "2 min");
        let legacy = ("kubernetes.operator.job.autoscaler.scale-down.interval", "3 min");
        let deprecated = ("job.autoscaler.scale-up.grace-period", "4 min");
        let all = [canonical, legacy_grace, legacy, deprecated];
        for (i, minutes) in [1, 2, 3, 4].into_iter().enumerate() {
            assert_eq!(
                options(&all[i..]).scale_down_interval,
                Duration::from_secs(minutes * MIN),
                "{:?}",
                &all[i..]
            );
        }
        assert_eq!(options(&[deprecated]).scale_down_interval, Duration::from_secs(4 * MIN));
    }

    #[test]
    fn alignment_mode_resolution() {
        let mode = |pairs: &[(&str, &str)]| options(pairs).alignment_mode;
        let key = "job.autoscaler.scaling.parallelism-alignment.mode";
        let legacy = "job.autoscaler.scaling.key-group.partitions.adjust.mode";
        assert_eq!(mode(&[(key, "BALANCED")]), AlignmentMode::Balanced);
        assert_eq!(mode(&[(key, "EVENLY_SPREAD")]), AlignmentMode::EvenlySpread);
        assert_eq!(mode(&[(key, "OFF")]), AlignmentMode::Off);
        // A string option compared case-sensitively: anything else is a (missing) custom mode.
        assert_eq!(mode(&[(key, "evenly_spread")]), AlignmentMode::Balanced);
        assert_eq!(mode(&[(key, "off")]), AlignmentMode::Balanced);
        assert_eq!(mode(&[(key, "my-plugin")]), AlignmentMode::Balanced);
        // The legacy enum key is case-insensitive and only counts when the new key is unset.
        assert_eq!(mode(&[(legacy, "EVENLY_SPREAD")]), AlignmentMode::LegacyEvenlySpread);
        assert_eq!(mode(&[(legacy, "evenly_spread")]), AlignmentMode::LegacyEvenlySpread);
        assert_eq!(
            mode(&[(legacy, "Maximize_Utilisation")]),
            AlignmentMode::LegacyMaximizeUtilisation
        );
        assert_eq!(
            mode(&[(
                "kubernetes.operator.job.autoscaler.scaling.key-group.partitions.adjust.mode",
                "MAXIMIZE_UTILISATION"
            )]),
            AlignmentMode::LegacyMaximizeUtilisation
        );
        assert_eq!(
            mode(&[(legacy, "MAXIMIZE_UTILISATION"), (key, "OFF")]),
            AlignmentMode::Off
        );
        assert_eq!(
            mode(&[(legacy, "MAXIMIZE_UTILISATION"), (key, "custom")]),
            AlignmentMode::Balanced
        );
        // A bad legacy value only matters when it is consulted.
        assert_eq!(mode(&[(legacy, "SOMETIMES"), (key, "OFF")]), AlignmentMode::Off);
        assert_eq!(
            error(&[(legacy, "SOMETIMES")]),
            invalid(
                legacy,
                "SOMETIMES",
                "\"SOMETIMES\" is not one of [EVENLY_SPREAD, MAXIMIZE_UTILISATION] (case-insensitive)"
            )
        );
    }

    #[test]
    fn unparsable_values_name_the_key_that_was_set() {
        let err = error(&[("job.autoscaler.metrics.window", "5 mins")]);
        let OptionsError::InvalidValue { key, value, reason } = err;
        assert_eq!(
            (key.as_str(), value.as_str()),
            ("job.autoscaler.metrics.window", "5 mins")
        );
        assert!(reason.contains("mins"), "{reason}");
        for (key, value) in [
            ("job.autoscaler.target.utilization", "high"),
            ("kubernetes.operator.job.autoscaler.scale-up.grace-period", "1.5 h"),
            ("job.autoscaler.enabled", "yes"),
            ("job.autoscaler.scaling.enabled", " true"),
            ("job.autoscaler.vertex.max-parallelism", "2.5"),
            ("job.autoscaler.vertex.min-parallelism", " 2"),
            ("job.autoscaler.history.max.count", "99999999999"),
            ("job.autoscaler.metrics.busy-time.aggregator", "MEDIAN"),
            ("job.autoscaler.quota.memory", "1 pb"),
            ("job.autoscaler.quota.cpu", "inf"),
            ("job.autoscaler.utilization.min", ""),
            ("job.autoscaler.vertex.exclude.ids", "'unclosed"),
            ("job.autoscaler.excluded.periods", "25:00-26:00"),
            ("taskmanager.numberOfTaskSlots", "-1"),
            ("taskmanager.memory.process.size", "lots"),
        ] {
            match error(&[(key, value)]) {
                OptionsError::InvalidValue { key: k, value: v, .. } => {
                    assert_eq!((k.as_str(), v.as_str()), (key, value))
                }
            }
        }
    }

    #[test]
    fn negative_counts_behave_like_zero() {
        let o = options(&[
            ("job.autoscaler.history.max.count", "-1"),
            ("job.autoscaler.observed-true-processing-rate.min-observations", "-5"),
        ]);
        assert_eq!((o.history_max_count, o.observed_tpr_min_observations), (0, 0));
    }

    #[test]
    fn evaluation_config_resolves_the_utilization_bounds() {
        let restart = Duration::from_secs(42);
        let c = options(&[]).evaluation_config(restart);
        assert_eq!(c.utilization_target, 0.7);
        assert!((c.utilization_max - 1.0).abs() < 1e-12 && (c.utilization_min - 0.4).abs() < 1e-12);
        assert_eq!(c.restart_time, restart);
        assert_eq!(c.catch_up_duration, Duration::from_secs(30 * MIN));
        assert_eq!(c.backlog_lag_threshold, Duration::from_secs(5 * MIN));
        assert_eq!(
            (c.observed_tpr_switch_threshold, c.observed_tpr_min_observations),
            (0.15, 2)
        );
        assert_eq!(c.busy_time_aggregator, BusyTimeAggregator::Max);

        // Target 0.5 with boundary 0.25: bounds 0.75 / 0.25 unless max/min are set explicitly.
        let o = options(&[
            ("job.autoscaler.utilization.target", "0.5"),
            ("job.autoscaler.target.utilization.boundary", "0.25"),
        ]);
        let c = o.evaluation_config(restart);
        assert_eq!((c.utilization_max, c.utilization_min), (0.75, 0.25));
        let o = options(&[
            ("job.autoscaler.utilization.target", "0.5"),
            ("job.autoscaler.target.utilization.boundary", "0.25"),
            ("job.autoscaler.utilization.max", "0.6"),
        ]);
        let c = o.evaluation_config(restart);
        assert_eq!((c.utilization_max, c.utilization_min), (0.6, 0.25));
    }

    #[test]
    fn collection_config_defaults_and_falls_back_to_legacy_keys() {
        assert_eq!(options(&[]).collection_config(), CollectionConfig::default());
        let o = options(&[
            ("kubernetes.operator.job.autoscaler.metrics.busy-time.aggregator", "avg"),
            ("job.autoscaler.observed-true-processing-rate.min-observations", "3"),
            ("job.autoscaler.observed-true-processing-rate.lag-threshold", "1 min"),
        ]);
        let c = o.collection_config();
        assert_eq!(c.busy_time_aggregator, BusyTimeAggregator::Avg);
        assert_eq!(c.observed_tpr_min_observations, 3);
        assert_eq!(c.observed_tpr_lag_threshold, Duration::from_secs(60));
    }

    #[test]
    fn excluded_periods_are_checked_in_utc() {
        let o = options(&[("job.autoscaler.excluded.periods", "* * * ? * 2,5 && 14:01:20-16:00:00")]);
        let thursday = Utc.with_ymd_and_hms(2023, 12, 14, 14, 1, 30).unwrap();
        assert!(o.is_excluded_period(thursday));
        assert!(!o.is_excluded_period(thursday - chrono::Duration::days(1)));
        assert!(!options(&[]).is_excluded_period(thursday));
    }

    #[test]
    fn is_enabled_reads_only_the_switch() {
        let conf = Configuration::from_iter([
            ("job.autoscaler.enabled", "TRUE"),
            ("job.autoscaler.metrics.window", "garbage"),
        ]);
        assert_eq!(AutoScalerOptions::is_enabled(&conf), Ok(true));
        assert_eq!(AutoScalerOptions::is_enabled(&Configuration::new()), Ok(false));
    }
}
