//! The target processing capacity of a vertex (the reference's
//! `AutoScalerUtils.getTargetProcessingCapacity`, anchor §2.3.5).

use crate::config::AutoScalerOptions;
use autoscaler_metrics::{EvaluatedVertexMetrics, ScalingMetric};
use std::time::Duration;

/// Records per second the vertex must be able to process at `utilization`:
/// `round(CATCH_UP.current + restart allowance + TARGET.average / utilization)`.
///
/// NaN when either rate is unknown; +Inf at zero utilization (nothing can be scaled down). The
/// restart allowance `TARGET * restart_s / catch_up_s` is only added `with_restart` and for a
/// non-zero catch-up duration; both durations count in whole seconds (`Duration.toSeconds`).
pub(crate) fn target_processing_capacity(
    metrics: &EvaluatedVertexMetrics,
    options: &AutoScalerOptions,
    utilization: f64,
    with_restart: bool,
    restart_time: Duration,
) -> f64 {
    let catch_up_rate = metrics.get_or_absent(ScalingMetric::CatchUpDataRate).current;
    if catch_up_rate.is_nan() {
        return f64::NAN;
    }
    let catch_up_secs = options.catch_up_duration.as_secs() as f64;
    // Java's Math.max/Math.min: a NaN utilization stays NaN.
    let utilization = if utilization.is_nan() {
        utilization
    } else {
        utilization.clamp(0.0, 1.0)
    };
    let target_rate = metrics.get_or_absent(ScalingMetric::TargetDataRate).average;
    if target_rate.is_nan() {
        return f64::NAN;
    }
    if utilization == 0.0 {
        return f64::INFINITY;
    }
    let restart_allowance = if !with_restart || catch_up_secs == 0.0 {
        0.0
    } else {
        target_rate * restart_time.as_secs() as f64 / catch_up_secs
    };
    java_math_round(catch_up_rate + restart_allowance + target_rate / utilization)
}

/// Java's `Math.round(double)` (a `long`) returned as a double: the nearest integer with ties
/// towards +infinity, NaN -> 0, saturating at the `long` range (so +Inf gives 2^63 - 1).
pub(crate) fn java_math_round(x: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    // `as` saturates exactly like the Java conversion at the long range.
    if x >= i64::MAX as f64 || x <= i64::MIN as f64 {
        return (x as i64) as f64;
    }
    // `x - floor(x)` is exact, unlike `x + 0.5` (0.49999999999999994 must round to 0).
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    // A Java long has no negative zero.
    rounded + 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::EvaluatedScalingMetric;

    fn metrics(target: f64, catch_up: f64) -> EvaluatedVertexMetrics {
        let mut m = EvaluatedVertexMetrics::new();
        m.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(target));
        m.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(catch_up));
        m
    }

    #[test]
    fn capacity_matches_reference_threshold_vectors() {
        // anchor §2.3.5: TARGET 700, CATCH_UP 350, catch-up 2 s, restart 1 s.
        let options = AutoScalerOptions {
            catch_up_duration: Duration::from_secs(2),
            ..AutoScalerOptions::default()
        };
        let m = metrics(700.0, 350.0);
        let restart = Duration::from_secs(1);
        assert_eq!(target_processing_capacity(&m, &options, 0.9, false, restart), 1128.0);
        assert_eq!(target_processing_capacity(&m, &options, 0.7, true, restart), 1700.0);
        let m0 = metrics(700.0, 0.0);
        assert_eq!(target_processing_capacity(&m0, &options, 0.9, false, restart), 778.0);
        assert_eq!(target_processing_capacity(&m0, &options, 0.7, true, restart), 1350.0);
        let no_catch_up = AutoScalerOptions {
            catch_up_duration: Duration::ZERO,
            ..AutoScalerOptions::default()
        };
        assert_eq!(
            target_processing_capacity(&m0, &no_catch_up, 0.7, true, restart),
            1000.0
        );
        assert_eq!(
            target_processing_capacity(&m0, &options, 0.0, true, restart),
            f64::INFINITY
        );
        assert!(target_processing_capacity(&metrics(f64::NAN, 0.0), &options, 0.7, true, restart).is_nan());
        assert!(target_processing_capacity(&metrics(1.0, f64::NAN), &options, 0.7, true, restart).is_nan());
    }

    #[test]
    fn java_round_is_half_up_towards_positive_infinity() {
        assert_eq!(java_math_round(2.5), 3.0);
        assert_eq!(java_math_round(-2.5), -2.0);
        assert_eq!(java_math_round(2.4999), 2.0);
        assert_eq!(java_math_round(0.499_999_999_999_999_94), 0.0);
        assert_eq!(java_math_round(4_503_599_627_370_497.0), 4_503_599_627_370_497.0);
        assert_eq!(java_math_round(f64::NAN), 0.0);
        assert!(java_math_round(-0.0).is_sign_positive());
        assert_eq!(java_math_round(f64::INFINITY), i64::MAX as f64);
        assert_eq!(java_math_round(f64::NEG_INFINITY), i64::MIN as f64);
    }
}
