//! The events the decision stage emits, with the reference's reasons, message templates, keys and
//! intervals (anchor §3).

use super::CycleEvent;
use crate::config::AutoScalerOptions;
use crate::model::event::{
    EventType, SCALING_REPORT_KEY, SCALING_REPORT_REASON, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED,
    SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED, scaling_report,
};
use crate::model::state::ScalingSummary;
use autoscaler_metrics::{VertexId, VertexMap, java};

/// Reason of the memory pressure event.
pub(crate) const MEMORY_PRESSURE_REASON: &str = "MemoryPressure";
/// Reason of the ineffective scale-up event.
pub(crate) const INEFFECTIVE_SCALING_REASON: &str = "IneffectiveScaling";
/// Reason of the legacy alignment event.
pub(crate) const SCALING_LIMITED_REASON: &str = "ScalingLimited";
/// Reason of the quota event.
pub(crate) const RESOURCE_QUOTA_REACHED_REASON: &str = "ResourceQuotaReached";
/// Message of the quota event.
pub(crate) const RESOURCE_QUOTA_REACHED_MESSAGE: &str =
    "Resource usage is above the allowed limit for scaling operations. Please adjust the resource quota manually.";

/// `ScalingVetoed`: a scaling executor returned no summaries (reference
/// `ScalingExecutor.applyCustomExecutors`).
pub(crate) fn scaling_vetoed_event(instance: &str, class: &str, options: &AutoScalerOptions) -> CycleEvent {
    let reason = crate::plugins::SCALING_VETOED_REASON;
    event(
        EventType::Warning,
        reason,
        format!("Scaling decision vetoed by scaling custom executor instance '{instance}' (class={class})."),
        Some(format!("{reason}:{instance}")),
        options,
    )
}

fn event(
    event_type: EventType,
    reason: &str,
    message: String,
    message_key: Option<String>,
    options: &AutoScalerOptions,
) -> CycleEvent {
    CycleEvent {
        event_type,
        reason: reason.to_owned(),
        message,
        message_key,
        interval: Some(options.scaling_event_interval),
        report_header: None,
    }
}

/// `MemoryPressure` for a GC pressure above `memory.gc-pressure.threshold`.
pub(crate) fn gc_pressure_event(gc_pressure: f64, options: &AutoScalerOptions) -> CycleEvent {
    let message = format!(
        "GC Pressure {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
        java::double_to_string(gc_pressure)
    );
    event(
        EventType::Normal,
        MEMORY_PRESSURE_REASON,
        message,
        Some("gcPressure".to_owned()),
        options,
    )
}

/// `MemoryPressure` for an average heap usage above `memory.heap-usage.threshold`.
pub(crate) fn heap_usage_event(heap_usage: f64, options: &AutoScalerOptions) -> CycleEvent {
    let message = format!(
        "Heap Usage {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
        java::double_to_string(heap_usage)
    );
    event(
        EventType::Normal,
        MEMORY_PRESSURE_REASON,
        message,
        Some("heapUsage".to_owned()),
        options,
    )
}

/// `IneffectiveScaling`; the increases are already rendered as Java doubles. The key joins the
/// vertex and the expected increase, as the reference's string concatenation does.
pub(crate) fn ineffective_scaling_event(
    vertex: &VertexId,
    expected_increase: &str,
    actual_increase: &str,
    blocking: bool,
    options: &AutoScalerOptions,
) -> CycleEvent {
    let message = format!(
        "Ineffective scaling detected for {vertex} (expected increase: {expected_increase}, actual increase \
         {actual_increase}). Blocking of ineffective scaling decisions is {}",
        if blocking { "enabled" } else { "disabled" }
    );
    let key = format!("ineffective{vertex}{expected_increase}");
    event(
        EventType::Normal,
        INEFFECTIVE_SCALING_REASON,
        message,
        Some(key),
        options,
    )
}

/// `ScalingLimited` (legacy alignment modes only). Note the full-width comma the reference's
/// template carries.
pub(crate) fn scaling_limited_event(
    vertex: &VertexId,
    expected: i64,
    actual: i64,
    num_key_groups_or_partitions: i64,
    upper_bound: i64,
    lower_limit: i64,
    options: &AutoScalerOptions,
) -> CycleEvent {
    let message = format!(
        "Scaling limited detected for {vertex} (expected parallelism: {expected}, actual parallelism {actual}). \
         Scaling limited due to numKeyGroupsOrPartitions : {num_key_groups_or_partitions}，\
         upperBoundForAlignment(maxParallelism or parallelismUpperLimit): {upper_bound}, \
         parallelismLowerLimit: {lower_limit}."
    );
    let key = format!("{SCALING_LIMITED_REASON}{vertex}");
    event(EventType::Warning, SCALING_LIMITED_REASON, message, Some(key), options)
}

/// `ResourceQuotaReached` (no message key).
pub(crate) fn resource_quota_event(options: &AutoScalerOptions) -> CycleEvent {
    event(
        EventType::Warning,
        RESOURCE_QUOTA_REACHED_REASON,
        RESOURCE_QUOTA_REACHED_MESSAGE.to_owned(),
        None,
        options,
    )
}

/// The header of a report whose scaling is blocked by `scaling.enabled=false`.
pub(crate) fn scaling_disabled_header() -> String {
    format!(
        "{SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED}job.autoscaler.scaling.enabled:false, recommended parallelism change:"
    )
}

/// The header of a report whose scaling is blocked by an excluded period; the periods are
/// rendered as Java's `List.toString`.
pub(crate) fn excluded_period_header(options: &AutoScalerOptions) -> String {
    format!(
        "{SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED}job.autoscaler.excluded.periods:{}, recommended \
         parallelism change:",
        java::list_to_string(&options.excluded_periods)
    )
}

/// The `ScalingReport` event under `header` (the default handler's key `ScalingExecutor`).
pub(crate) fn scaling_report_event(
    summaries: &VertexMap<ScalingSummary>,
    header: String,
    options: &AutoScalerOptions,
) -> CycleEvent {
    let mut report = event(
        EventType::Normal,
        SCALING_REPORT_REASON,
        scaling_report(summaries, &header),
        Some(SCALING_REPORT_KEY.to_owned()),
        options,
    );
    report.report_header = Some(header);
    report
}

/// The header of an executed scaling's report.
pub(crate) fn scaling_enabled_header() -> String {
    SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_match_the_reference() {
        assert_eq!(
            scaling_disabled_header(),
            "Scaling execution disabled by config job.autoscaler.scaling.enabled:false, recommended parallelism change:"
        );
        let options = AutoScalerOptions {
            excluded_periods: ["* * * ? * 2", "10:00-11:00"]
                .iter()
                .map(|e| crate::config::ExcludedPeriod::parse(e).expect("valid period"))
                .collect(),
            ..AutoScalerOptions::default()
        };
        assert_eq!(
            excluded_period_header(&options),
            "Scaling execution disabled by config job.autoscaler.excluded.periods:[* * * ? * 2, 10:00-11:00], \
             recommended parallelism change:"
        );
    }

    #[test]
    fn memory_pressure_messages_use_java_double_rendering() {
        let options = AutoScalerOptions::default();
        let gc = gc_pressure_event(1.5, &options);
        assert_eq!(
            gc.message,
            "GC Pressure 1.5 is above the allowed limit for scaling operations. Please adjust the available memory \
             manually."
        );
        assert_eq!(gc.message_key.as_deref(), Some("gcPressure"));
        assert_eq!(gc.interval, Some(options.scaling_event_interval));
        let heap = heap_usage_event(1.0e-4, &options);
        assert!(heap.message.starts_with("Heap Usage 1.0E-4 is above"));
        assert_eq!(heap.message_key.as_deref(), Some("heapUsage"));
    }
}
