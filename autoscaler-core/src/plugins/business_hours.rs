//! A stock scaling executor: no scale-downs during business hours ([`BusinessHoursExecutor`]).

use super::{ExecutorContext, PluginError, ScalingExecutorPlugin, ScalingSummaries};
use chrono::{NaiveTime, Timelike};

/// The name the `flink-autoscaler run` binary registers [`BusinessHoursExecutor`] under (the
/// `.class` value that selects it).
pub const BUSINESS_HOURS_EXECUTOR: &str = "business-hours";

/// Holds back scale-downs during business hours: while the cycle's instant (UTC) lies in
/// `[start, end)`, every summary that lowers a vertex's parallelism is dropped; when none is left,
/// the scaling is vetoed (a `ScalingVetoed` event). Scale-ups always pass.
///
/// Parameters (`job.autoscaler.scaling.custom-executor.<name>.<parameter>`):
/// - `start`, `end`: times of day `HH:MM` (or `HH:MM:SS`) in UTC, default `09:00` and `17:00`. A
///   window with `start` after `end` spans midnight (`22:00`–`06:00`); equal times are an empty
///   window.
///
/// A parameter that is not a time of day fails the cycle (an `AutoscalerError` event naming it).
///
/// ```
/// use autoscaler_core::plugins::{BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor, PluginRegistry};
/// use autoscaler_core::config::Configuration;
/// let registry = PluginRegistry::new().with_executor(BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor);
/// let conf = Configuration::from_iter([
///     ("job.autoscaler.scaling.custom-executors", "office"),
///     ("job.autoscaler.scaling.custom-executor.office.class", "business-hours"),
///     ("job.autoscaler.scaling.custom-executor.office.start", "08:30"),
/// ]);
/// # let options = autoscaler_core::config::AutoScalerOptions::from_configuration(&conf).unwrap();
/// # assert_eq!(registry.resolve(&conf, &options).executor_instances().collect::<Vec<_>>(), ["office"]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BusinessHoursExecutor;

impl BusinessHoursExecutor {
    /// Whether `time` lies in the window `[start, end)` (spanning midnight when `start > end`).
    pub fn in_window(start: NaiveTime, end: NaiveTime, time: NaiveTime) -> bool {
        if start <= end {
            start <= time && time < end
        } else {
            time >= start || time < end
        }
    }
}

/// Reads a time-of-day parameter, `default` when unset.
fn time_parameter(ctx: &ExecutorContext<'_>, key: &str, default: NaiveTime) -> Result<NaiveTime, PluginError> {
    let Some(text) = ctx.config.parameter(key) else {
        return Ok(default);
    };
    let text = text.trim();
    NaiveTime::parse_from_str(text, "%H:%M")
        .or_else(|_| NaiveTime::parse_from_str(text, "%H:%M:%S"))
        .map_err(|_| PluginError::failed(format!("parameter '{key}' = {text:?} is not a time of day HH:MM")))
}

impl ScalingExecutorPlugin for BusinessHoursExecutor {
    fn apply(&self, ctx: &ExecutorContext<'_>, summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
        let nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap_or_default();
        let five = NaiveTime::from_hms_opt(17, 0, 0).unwrap_or_default();
        let start = time_parameter(ctx, "start", nine)?;
        let end = time_parameter(ctx, "end", five)?;
        // Whole seconds: a cycle at 16:59:59.5 is still before 17:00.
        let time = ctx.now.time().with_nanosecond(0).unwrap_or_else(|| ctx.now.time());
        if !Self::in_window(start, end, time) {
            return Ok(summaries);
        }
        let (kept, held): (ScalingSummaries, ScalingSummaries) = summaries
            .into_iter()
            .partition(|(_, s)| s.new_parallelism >= s.current_parallelism);
        if !held.is_empty() {
            tracing::info!(
                "Business hours {start}-{end} UTC: holding back the scale-down of {:?}",
                held.keys().map(|v| v.as_str()).collect::<Vec<_>>()
            );
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AutoScalerOptions;
    use crate::config::Configuration;
    use crate::model::state::{ConfigChanges, ScalingSummary};
    use crate::plugins::{CUSTOM_EXECUTOR_PREFIX, PluginConfig};
    use autoscaler_metrics::{EvaluatedMetrics, EvaluatedVertexMetrics, JobTopology, VertexId, VertexSpec};
    use chrono::{DateTime, TimeZone, Utc};

    fn t(h: u32, m: u32) -> NaiveTime {
        NaiveTime::from_hms_opt(h, m, 0).unwrap_or_default()
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 5, h, m, s).single().unwrap_or_default()
    }

    fn summary(current: u32, new: u32) -> ScalingSummary {
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics: EvaluatedVertexMetrics::new(),
        }
    }

    /// `down` 4 -> 2 and `up` 2 -> 3, applied at `now` with `params`.
    fn apply(now: DateTime<Utc>, params: &[(&str, &str)]) -> Result<Vec<String>, PluginError> {
        apply_to(now, params, &[("down", 4, 2), ("up", 2, 3)])
    }

    /// The vertices left of `changes` (vertex, current, new) at `now` with `params`.
    fn apply_to(
        now: DateTime<Utc>,
        params: &[(&str, &str)],
        changes: &[(&str, u32, u32)],
    ) -> Result<Vec<String>, PluginError> {
        let conf: Configuration = params
            .iter()
            .map(|(k, v)| {
                (
                    format!("job.autoscaler.scaling.custom-executor.office.{k}"),
                    (*v).to_owned(),
                )
            })
            .collect();
        let config = PluginConfig::new(&conf, CUSTOM_EXECUTOR_PREFIX, "office", BUSINESS_HOURS_EXECUTOR);
        let topology = JobTopology::new(
            vec![VertexSpec::new("down", 4, 128), VertexSpec::new("up", 2, 128)],
            vec![],
        )
        .map_err(|e| PluginError::failed(e.to_string()))?;
        let ctx = ExecutorContext {
            config: &config,
            config_changes: &ConfigChanges::default(),
            now,
            topology: &topology,
            evaluated: &EvaluatedMetrics::default(),
            options: &AutoScalerOptions::default(),
        };
        let summaries: ScalingSummaries = changes
            .iter()
            .map(|(v, current, new)| (VertexId::new(*v), summary(*current, *new)))
            .collect();
        let out = BusinessHoursExecutor.apply(&ctx, summaries)?;
        Ok(out.keys().map(|v| v.to_string()).collect())
    }

    #[test]
    fn the_window_is_half_open_and_may_span_midnight() {
        assert!(BusinessHoursExecutor::in_window(t(9, 0), t(17, 0), t(9, 0)));
        assert!(BusinessHoursExecutor::in_window(t(9, 0), t(17, 0), t(16, 59)));
        assert!(!BusinessHoursExecutor::in_window(t(9, 0), t(17, 0), t(17, 0)));
        assert!(!BusinessHoursExecutor::in_window(t(9, 0), t(17, 0), t(8, 59)));
        assert!(BusinessHoursExecutor::in_window(t(22, 0), t(6, 0), t(23, 0)));
        assert!(BusinessHoursExecutor::in_window(t(22, 0), t(6, 0), t(5, 59)));
        assert!(!BusinessHoursExecutor::in_window(t(22, 0), t(6, 0), t(12, 0)));
        assert!(!BusinessHoursExecutor::in_window(t(9, 0), t(9, 0), t(9, 0)));
    }

    #[test]
    fn scale_downs_are_dropped_inside_the_default_window_only() -> Result<(), PluginError> {
        // 12:00 is within 09:00-17:00: the scale-down goes, the scale-up stays.
        assert_eq!(apply(at(12, 0, 0), &[])?, ["up"]);
        // 17:00:00 is the end (exclusive); 08:59:59 is before the start.
        assert_eq!(apply(at(17, 0, 0), &[])?, ["down", "up"]);
        assert_eq!(apply(at(8, 59, 59), &[])?, ["down", "up"]);
        // Own hours, with seconds.
        assert_eq!(apply(at(7, 0, 0), &[("start", "06:30:00"), ("end", "07:30")])?, ["up"]);
        // Only scale-downs, inside the window: nothing left, a veto.
        assert!(apply_to(at(12, 0, 0), &[], &[("down", 4, 2)])?.is_empty());
        Ok(())
    }

    #[test]
    fn a_bad_time_is_an_error_naming_the_parameter() {
        let Err(error) = apply(at(12, 0, 0), &[("end", "5pm")]) else {
            panic!("5pm is not HH:MM");
        };
        assert_eq!(
            error.to_string(),
            r#"parameter 'end' = "5pm" is not a time of day HH:MM"#
        );
        assert!(apply(at(12, 0, 0), &[("start", "25:00")]).is_err());
    }
}
