//! Typed autoscaler options (`job.autoscaler.*`) with the reference's defaults, and Flink's
//! duration and memory-size syntax.

use autoscaler_metrics::BusyTimeAggregator;
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
/// fallback and deprecated keys.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoScalerOptions {
    /// `enabled` (false).
    pub enabled: bool,
    /// `scaling.enabled` (true); false = recommend only.
    pub scaling_enabled: bool,
    /// `metrics.window` (15 min).
    pub metrics_window: Duration,
    /// `stabilization.interval` (5 min).
    pub stabilization_interval: Duration,
    /// `excluded.periods` ([]), raw expressions.
    pub excluded_periods: Vec<String>,
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
}

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
            rest_client_timeout: Duration::from_secs(10),
            quota_memory: None,
            quota_cpu: None,
            alignment_mode: AlignmentMode::Balanced,
            observed_scalability_enabled: false,
            observed_scalability_min_observations: 3,
            observed_scalability_coefficient_min: 0.5,
            task_slots_per_task_manager: 1,
            task_manager_process_memory: None,
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
        /// The config key.
        key: String,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// Parses a Flink memory size (`2g`, `512 mb`, `1024` = bytes) into bytes.
pub fn parse_memory_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{text:?} does not start with a number"));
    }
    let n: u64 = num.parse().map_err(|_| format!("{text:?} is too large"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        "t" | "tb" | "tebibytes" => 1 << 40,
        other => return Err(format!("unknown memory unit {other:?}")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("{text:?} is too large"))
}
