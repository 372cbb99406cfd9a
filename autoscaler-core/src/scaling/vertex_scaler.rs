//! The per-vertex parallelism computation (the reference's
//! `JobVertexScaler.computeScaleTargetParallelism`, anchor §2.4).
//!
//! Where this differs from the reference 1.16: the observed-scalability coefficient has a guard
//! (replay §3.5.2). An idle vertex's zero processing rate in the scaling history makes the
//! reference 1.16 divide 0 by 0 and throw while rounding the NaN, which aborts the scaling of the
//! whole job (FLINK-39890, apache/flink-kubernetes-operator PR #1134); here the coefficient is 1.0
//! (linear scaling) there. `job.autoscaler.compat.reference-1-16: true` restores the abort
//! ([`DecisionError`]).

use super::alignment::{AlignmentContext, AlignmentResult, PartitionCap, align_with};
use super::delayed_scale_down::{apply_scale_down_interval, clear_vertex};
use super::report;
use super::{CycleEvent, DecisionError, ParallelismChange, VertexConstraint};
use crate::config::AutoScalerOptions;
use crate::model::state::{DelayedScaleDown, ScalingSummary};
use crate::plugins::DecisionHooks;
use autoscaler_metrics::{
    EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, VertexId, VertexInfo, java,
    target_processing_capacity,
};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

/// One vertex's inputs to [`compute_scale_target_parallelism`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct VertexScaleInput<'a> {
    pub vertex: &'a VertexId,
    pub metrics: &'a EvaluatedVertexMetrics,
    /// Evaluated `PARALLELISM` (topology value when not evaluated).
    pub current: u32,
    /// Evaluated `MAX_PARALLELISM` (topology value when not evaluated).
    pub max_parallelism: i64,
    /// Evaluated `NUM_SOURCE_PARTITIONS` (topology value when not evaluated).
    pub num_source_partitions: i64,
    pub has_hash_input: bool,
    /// The vertex in the topology (`None` when only evaluated); custom alignment modes see its inputs.
    pub info: Option<&'a VertexInfo>,
    pub history: Option<&'a BTreeMap<DateTime<Utc>, ScalingSummary>>,
    pub restart_time: Duration,
    pub now: DateTime<Utc>,
    pub options: &'a AutoScalerOptions,
}

/// The vertex's change and the `EXPECTED_PROCESSING_RATE` recorded on the way (NaN if none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct VertexScaleResult {
    pub change: ParallelismChange,
    pub expected_processing_rate: f64,
    /// What, beyond the scale factor, shaped the result.
    pub constraint: VertexConstraint,
}

/// The reference's `computeScaleTargetParallelism`: scale factor from target capacity over true
/// processing rate, limits, alignment, then the direction-specific rules (ineffective scale-up
/// detection, delayed scale-down). Events go to `events`. Only a custom alignment mode of `plugins`
/// can fail.
pub(crate) fn compute_scale_target_parallelism<P: DecisionHooks>(
    input: &VertexScaleInput<'_>,
    plugins: &P,
    delayed_scale_down: &mut DelayedScaleDown,
    events: &mut Vec<CycleEvent>,
) -> Result<VertexScaleResult, P::Error> {
    let options = input.options;
    let current = input.current;
    let unchanged = VertexScaleResult {
        change: ParallelismChange::no_change(current),
        expected_processing_rate: f64::NAN,
        constraint: VertexConstraint::NoEstimate,
    };
    let true_processing_rate = input.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
    if true_processing_rate.is_nan() {
        return Ok(unchanged);
    }
    let target_capacity = target_processing_capacity(
        input.metrics,
        &options.evaluation_config(input.restart_time),
        options.utilization_target,
        true,
    );
    if target_capacity.is_nan() {
        return Ok(unchanged);
    }

    // An infinite true processing rate (no load) gives a zero factor, floored below.
    let mut scale_factor = target_capacity / true_processing_rate;
    if options.observed_scalability_enabled {
        let coefficient = match observed_scaling_coefficient(input.history, options) {
            Ok(coefficient) => coefficient,
            Err(UndefinedCoefficient) => {
                let error = DecisionError::UndefinedScalingCoefficient {
                    vertex: input.vertex.clone(),
                };
                match plugins.abort(error) {
                    Some(error) => return Err(error),
                    // A decision that cannot fail answers as without the compat switch.
                    None => 1.0,
                }
            }
        };
        scale_factor /= coefficient;
    }
    let min_scale_factor = 1.0 - options.scale_down_max_factor;
    let max_scale_factor = 1.0 + options.scale_up_max_factor;
    // Written as the reference's if/else-if so a NaN factor passes through unclamped.
    if scale_factor < min_scale_factor {
        scale_factor = min_scale_factor;
    } else if scale_factor > max_scale_factor {
        scale_factor = max_scale_factor;
    }

    let current_i = i64::from(current);
    // The current parallelism never forces a change (anchor §2.4 step 6).
    let lower_limit = current_i.min(i64::from(options.vertex_min_parallelism));
    let upper_limit = current_i.max(i64::from(options.vertex_max_parallelism));
    let (new, constraint) = scale(input, plugins, scale_factor, lower_limit, upper_limit, events)?;

    let new = match u32::try_from(new) {
        Ok(new) if new > 0 && new != current => new,
        // A non-positive result only comes from nonsensical limits; the reference rejects it.
        _ => {
            clear_vertex(delayed_scale_down, input.vertex);
            return Ok(VertexScaleResult {
                constraint,
                ..unchanged
            });
        }
    };

    let expected_processing_rate =
        EvaluatedScalingMetric::of(true_processing_rate / f64::from(current) * f64::from(new)).current;
    let (change, blocked) = detect_block_scaling(input, new, expected_processing_rate, delayed_scale_down, events);
    Ok(VertexScaleResult {
        change,
        expected_processing_rate,
        constraint: blocked.unwrap_or(constraint),
    })
}

/// `ceil(sf * current)` clamped to `[lower, min(max_parallelism, upper)]`, then aligned if changed
/// (with the custom alignment mode of `plugins` if there is one, else the configured built-in);
/// with the cap or the alignment when either moved the value.
fn scale<P: DecisionHooks>(
    input: &VertexScaleInput<'_>,
    plugins: &P,
    scale_factor: f64,
    lower_limit: i64,
    upper_limit: i64,
    events: &mut Vec<CycleEvent>,
) -> Result<(i64, VertexConstraint), P::Error> {
    let current = i64::from(input.current);
    // Java's `(int) Math.min(Math.ceil(x), Integer.MAX_VALUE)`: saturating, NaN -> 0, as `as i32`.
    let raw = i64::from((scale_factor * current as f64).ceil() as i32);
    let upper_bound = input.max_parallelism.min(upper_limit);
    let new = lower_limit.max(raw).min(upper_bound);
    let capped = if raw > upper_bound && new == upper_bound {
        VertexConstraint::MaxParallelism {
            computed: raw,
            cap: upper_bound,
        }
    } else {
        VertexConstraint::None
    };
    if new == current {
        return Ok((new, capped));
    }
    let ctx = AlignmentContext {
        current,
        target: new,
        num_source_partitions: input.num_source_partitions,
        max_parallelism: input.max_parallelism,
        lower_limit,
        upper_limit,
        has_hash_input: input.has_hash_input,
    };
    let aligned = match plugins.align(input.vertex, ctx, input.info, input.metrics) {
        Some(custom) => AlignmentResult {
            parallelism: custom?,
            limited: None,
        },
        None => align_with(
            input.options.alignment_mode,
            &ctx,
            PartitionCap::from_compat(input.options.compat_reference_1_16),
        ),
    };
    if let Some((expected, actual)) = aligned.limited {
        events.push(report::scaling_limited_event(
            input.vertex,
            expected,
            actual,
            ctx.num_key_groups_or_partitions(),
            input.max_parallelism.min(upper_limit),
            lower_limit,
            input.options,
        ));
    }
    let constraint = if aligned.parallelism == new {
        capped
    } else {
        VertexConstraint::Alignment { computed: new }
    };
    Ok((aligned.parallelism, constraint))
}

/// Direction-specific rules once `new != current` (the reference's `detectBlockScaling`), with
/// the rule that held the change back, if one did.
fn detect_block_scaling(
    input: &VertexScaleInput<'_>,
    new: u32,
    expected_processing_rate: f64,
    delayed_scale_down: &mut DelayedScaleDown,
    events: &mut Vec<CycleEvent>,
) -> (ParallelismChange, Option<VertexConstraint>) {
    let current = input.current;
    let change = ParallelismChange {
        current,
        new,
        outside_utilization_bound: outside_utilization_bound(input.metrics),
    };
    if new < current {
        let applied = apply_scale_down_interval(
            delayed_scale_down,
            input.vertex,
            input.options.scale_down_interval,
            input.now,
            change,
        );
        let delayed = applied.is_no_change().then(|| {
            let first = delayed_scale_down
                .delayed_vertices
                .get(input.vertex)
                .map_or(input.now, |info| info.first_trigger_time);
            VertexConstraint::ScaleDownDelayed {
                until: instant_after(first, input.options.scale_down_interval),
                recommended: new,
            }
        });
        return (applied, delayed);
    }
    clear_vertex(delayed_scale_down, input.vertex);
    let Some(last) = input.history.and_then(|h| h.values().next_back()) else {
        return (change, None);
    };
    if current == last.new_parallelism
        && last.is_scaled_up()
        && ineffective_scale_up(input, last, expected_processing_rate, events)
    {
        return (
            ParallelismChange::no_change(current),
            Some(VertexConstraint::IneffectiveScaling { recommended: new }),
        );
    }
    (change, None)
}

/// `at + duration`, saturating at the latest representable instant.
fn instant_after(at: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(duration)
        .ok()
        .and_then(|delta| at.checked_add_signed(delta))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `TPR.avg < SCALE_UP_RATE_THRESHOLD || TPR.avg > SCALE_DOWN_RATE_THRESHOLD` (NaN compares false).
fn outside_utilization_bound(metrics: &EvaluatedVertexMetrics) -> bool {
    let tpr = metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
    let up = metrics.get_or_absent(ScalingMetric::ScaleUpRateThreshold).current;
    let down = metrics.get_or_absent(ScalingMetric::ScaleDownRateThreshold).current;
    tpr < up || tpr > down
}

/// Whether the last scale-up achieved less than `scaling.effectiveness.threshold` of its expected
/// increase; emits `IneffectiveScaling` whenever it did, and blocks only when detection is enabled.
fn ineffective_scale_up(
    input: &VertexScaleInput<'_>,
    last: &ScalingSummary,
    _expected_processing_rate: f64,
    events: &mut Vec<CycleEvent>,
) -> bool {
    let last_tpr = last.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
    let last_expected = last
        .metrics
        .get_or_absent(ScalingMetric::ExpectedProcessingRate)
        .current;
    let tpr = input.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
    let expected_increase = last_expected - last_tpr;
    let actual_increase = tpr - last_tpr;
    // NaN ratios compare false, i.e. count as ineffective, as in the reference.
    if actual_increase / expected_increase >= input.options.scaling_effectiveness_threshold {
        return false;
    }
    let blocking = input.options.scaling_effectiveness_detection_enabled;
    events.push(report::ineffective_scaling_event(
        input.vertex,
        &java::double_to_string(expected_increase),
        &java::double_to_string(actual_increase),
        blocking,
        input.options,
    ));
    blocking
}

/// The coefficient is undefined where the reference 1.16 throws: only reported under
/// `job.autoscaler.compat.reference-1-16` ([`observed_scaling_coefficient`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UndefinedCoefficient;

/// The observed scalability coefficient α (anchor §2.4 step 4): a least-squares fit of
/// `R = β·α·P` over the history, `α = Σ(P·R) / (Σ(P²)·β)`, clamped to `[coefficient-min, 1]` and
/// rounded up to 2 decimals; 1 (linear) when there are too few observations or a rate is unknown.
///
/// **Where this differs from the reference 1.16: the guard (replay §3.5.2).** When
/// `Σ(P²)·β` is 0 (the baseline rate β of an idle vertex is 0) α is 1.0. The reference 1.16
/// divides by it: 0 / 0 is NaN, which its `BigDecimal.valueOf` rejects with a
/// `NumberFormatException` that aborts the scaling of the whole job (FLINK-39890,
/// apache/flink-kubernetes-operator PR #1134, not in 1.16). Any other NaN fit (∞ / ∞ from
/// infinite rates of idle vertices) is also taken as linear. Under
/// `job.autoscaler.compat.reference-1-16` the division happens as in 1.16 and a NaN fit is
/// [`UndefinedCoefficient`], on which the decision aborts.
pub(crate) fn observed_scaling_coefficient(
    history: Option<&BTreeMap<DateTime<Utc>, ScalingSummary>>,
    options: &AutoScalerOptions,
) -> Result<f64, UndefinedCoefficient> {
    let Some(history) = history else { return Ok(1.0) };
    if history.is_empty() || history.len() < options.observed_scalability_min_observations {
        return Ok(1.0);
    }
    let baseline = baseline_processing_rate(history);
    if baseline.is_nan() {
        return Ok(1.0);
    }
    let mut weighted = 0.0;
    let mut squares = 0.0;
    for summary in history.values() {
        let parallelism = f64::from(summary.current_parallelism);
        let rate = summary.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
        if rate.is_nan() {
            return Ok(1.0);
        }
        weighted += parallelism * rate;
        squares += parallelism * parallelism;
    }
    if squares == 0.0 {
        return Ok(1.0);
    }
    let compat = options.compat_reference_1_16;
    let denominator = squares * baseline;
    // The guard: no fit through a zero baseline (FLINK-39890).
    if denominator == 0.0 && !compat {
        return Ok(1.0);
    }
    let alpha = weighted / denominator;
    if alpha.is_nan() {
        // 1.16 rounds the NaN with BigDecimal, which throws; linear scaling is the safe reading.
        return if compat { Err(UndefinedCoefficient) } else { Ok(1.0) };
    }
    // As Java's Math.max(min, Math.min(1, α)) for every non-NaN α (±∞ included).
    let clamped = alpha.min(1.0).max(options.observed_scalability_coefficient_min);
    Ok(java::round_ceiling(clamped, 2))
}

/// β: the rate per subtask of the most recent summary with the smallest parallelism; a summary at
/// parallelism 1 (the most recent one) gives its rate directly.
fn baseline_processing_rate(history: &BTreeMap<DateTime<Utc>, ScalingSummary>) -> f64 {
    let mut smallest: Option<&ScalingSummary> = None;
    for summary in history.values().rev() {
        if summary.current_parallelism == 1 {
            return summary.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
        }
        if smallest.is_none_or(|s| summary.current_parallelism < s.current_parallelism) {
            smallest = Some(summary);
        }
    }
    smallest.map_or(f64::NAN, |s| {
        s.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average / f64::from(s.current_parallelism)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AlignmentMode;
    use crate::plugins::{NoPlugins, NoPluginsOrAbort};
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
    }

    /// Metrics whose target capacity at the default options is exactly `capacity`: catch-up rate
    /// `capacity - target/0.7` with target 700, no restart allowance (restart 0 s).
    fn metrics(tpr: f64, capacity: f64) -> EvaluatedVertexMetrics {
        let mut m = EvaluatedVertexMetrics::new();
        m.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
        m.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(700.0));
        m.insert(
            ScalingMetric::CatchUpDataRate,
            EvaluatedScalingMetric::of(capacity - 1000.0),
        );
        m.insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(0.0));
        m.insert(
            ScalingMetric::ScaleDownRateThreshold,
            EvaluatedScalingMetric::of(f64::INFINITY),
        );
        m
    }

    struct Case<'a> {
        metrics: EvaluatedVertexMetrics,
        current: u32,
        max_parallelism: i64,
        partitions: i64,
        hash: bool,
        history: Option<&'a BTreeMap<DateTime<Utc>, ScalingSummary>>,
        options: AutoScalerOptions,
    }

    impl Case<'_> {
        fn new(tpr: f64, capacity: f64, current: u32) -> Self {
            Case {
                metrics: metrics(tpr, capacity),
                current,
                max_parallelism: 128,
                partitions: 0,
                hash: false,
                history: None,
                options: AutoScalerOptions {
                    scale_down_interval: Duration::ZERO,
                    ..AutoScalerOptions::default()
                },
            }
        }

        fn run(&self, state: &mut DelayedScaleDown, events: &mut Vec<CycleEvent>) -> VertexScaleResult {
            let vertex = VertexId::new("v");
            let input = VertexScaleInput {
                vertex: &vertex,
                metrics: &self.metrics,
                current: self.current,
                max_parallelism: self.max_parallelism,
                num_source_partitions: self.partitions,
                has_hash_input: self.hash,
                info: None,
                history: self.history,
                restart_time: Duration::ZERO,
                now: at(0),
                options: &self.options,
            };
            let Ok(result) = compute_scale_target_parallelism(&input, &NoPlugins, state, events);
            result
        }

        fn new_parallelism(&self) -> u32 {
            self.run(&mut DelayedScaleDown::default(), &mut Vec::new()).change.new
        }
    }

    #[test]
    fn parallelism_is_ceil_of_scale_factor_times_current() {
        // JobVertexScalerTest.testParallelismComputation: sf 1.5 at 16 -> 24; sf 0.1 at 2 -> floor
        // factor 0.4 -> ceil(0.8) = 1.
        let mut case = Case::new(1000.0, 1500.0, 16);
        case.options.alignment_mode = AlignmentMode::Off;
        assert_eq!(case.new_parallelism(), 24);
        let case = Case::new(1000.0, 100.0, 2);
        assert_eq!(case.new_parallelism(), 1);
        // Same capacity as rate: no change.
        assert_eq!(Case::new(1000.0, 1000.0, 7).new_parallelism(), 7);
    }

    #[test]
    fn limits_and_max_parallelism_cap() {
        // sf 10 at 10 -> 100, capped by vertex.max-parallelism 50.
        let mut case = Case::new(100.0, 1000.0, 10);
        case.options.vertex_max_parallelism = 50;
        assert_eq!(case.new_parallelism(), 50);
        // max parallelism 30 wins over the limit.
        case.max_parallelism = 30;
        assert_eq!(case.new_parallelism(), 30);
        // min-parallelism 5 lifts a scale-down of 10 -> 4 (sf 0.4) to 5.
        let mut case = Case::new(1000.0, 100.0, 10);
        case.options.vertex_min_parallelism = 5;
        assert_eq!(case.new_parallelism(), 5);
        // maxParallelism (3) wins over min-parallelism (5): ensureMinParallelismDoesNotExceedMax.
        let mut case = Case::new(1000.0, 2000.0, 2);
        case.options.vertex_min_parallelism = 5;
        case.max_parallelism = 3;
        assert_eq!(case.new_parallelism(), 3);
        // The current parallelism above vertex.max-parallelism never forces a change.
        let mut case = Case::new(1000.0, 1000.0, 300);
        case.max_parallelism = 1000;
        assert_eq!(case.new_parallelism(), 300);
    }

    #[test]
    fn max_factors_bound_the_scale_factor() {
        // scale-up.max-factor 0.5: sf 4 -> 1.5; 10 -> 15.
        let mut case = Case::new(100.0, 400.0, 10);
        case.options.scale_up_max_factor = 0.5;
        assert_eq!(case.new_parallelism(), 15);
        // scale-down.max-factor 0.2: sf 0.1 -> 0.8; 10 -> 8.
        let mut case = Case::new(1000.0, 100.0, 10);
        case.options.scale_down_max_factor = 0.2;
        assert_eq!(case.new_parallelism(), 8);
    }

    #[test]
    fn nan_rates_mean_no_change() {
        let case = Case::new(f64::NAN, 1000.0, 4);
        assert_eq!(case.new_parallelism(), 4);
        let mut case = Case::new(100.0, 1000.0, 4);
        case.metrics.remove(ScalingMetric::TargetDataRate);
        assert_eq!(case.new_parallelism(), 4);
    }

    #[test]
    fn expected_processing_rate_is_tpr_per_subtask_times_new() {
        // testExpectedProcessingRateComputation: 100 at 2 -> 4 gives 200.
        let case = Case::new(100.0, 200.0, 2);
        let result = case.run(&mut DelayedScaleDown::default(), &mut Vec::new());
        assert_eq!(result.change.new, 4);
        assert_eq!(result.expected_processing_rate, 200.0);
        // 3 -> 1 from 1000/3: rounded to 3 decimals.
        let case = Case::new(1000.0, 100.0, 3);
        let result = case.run(&mut DelayedScaleDown::default(), &mut Vec::new());
        assert_eq!(result.change.new, 2);
        assert_eq!(result.expected_processing_rate, 666.667);
    }

    #[test]
    fn outside_bound_flag_follows_thresholds() {
        let mut case = Case::new(100.0, 200.0, 2);
        case.metrics
            .insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(50.0));
        case.metrics
            .insert(ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(150.0));
        assert!(
            !case
                .run(&mut DelayedScaleDown::default(), &mut Vec::new())
                .change
                .outside_utilization_bound
        );
        case.metrics
            .insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(101.0));
        assert!(
            case.run(&mut DelayedScaleDown::default(), &mut Vec::new())
                .change
                .outside_utilization_bound
        );
    }

    fn summary(current: u32, new: u32, tpr: f64, expected: f64) -> ScalingSummary {
        let mut metrics = EvaluatedVertexMetrics::new();
        metrics.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
        metrics.insert(
            ScalingMetric::ExpectedProcessingRate,
            EvaluatedScalingMetric::of(expected),
        );
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics,
        }
    }

    #[test]
    fn ineffective_scale_up_emits_always_and_blocks_only_when_enabled() {
        // Last: 2 -> 4 expecting 100 -> 200; now 105 at 4: achieved 5 % of the increase.
        let history = BTreeMap::from([(at(-600), summary(2, 4, 100.0, 200.0))]);
        let mut case = Case::new(105.0, 210.0, 4);
        case.history = Some(&history);
        let mut events = Vec::new();
        let result = case.run(&mut DelayedScaleDown::default(), &mut events);
        assert_eq!(result.change.new, 8);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "IneffectiveScaling");
        assert_eq!(
            events[0].message,
            "Ineffective scaling detected for v (expected increase: 100.0, actual increase 5.0). \
             Blocking of ineffective scaling decisions is disabled"
        );
        assert_eq!(events[0].message_key.as_deref(), Some("ineffectivev100.0"));
        case.options.scaling_effectiveness_detection_enabled = true;
        let mut events = Vec::new();
        let result = case.run(&mut DelayedScaleDown::default(), &mut events);
        assert!(result.change.is_no_change());
        assert_eq!(result.expected_processing_rate, 210.0);
        assert!(events[0].message.ends_with("is enabled"));
        // An effective scale-up (60 % of the increase) emits nothing.
        let mut case = Case::new(160.0, 320.0, 4);
        case.history = Some(&history);
        case.options.scaling_effectiveness_detection_enabled = true;
        let mut events = Vec::new();
        assert_eq!(case.run(&mut DelayedScaleDown::default(), &mut events).change.new, 8);
        assert!(events.is_empty());
    }

    #[test]
    fn scale_up_and_no_change_clear_the_pending_scale_down() {
        let mut state = DelayedScaleDown::default();
        let mut case = Case::new(1000.0, 500.0, 10);
        case.options.scale_down_interval = Duration::from_secs(3600);
        assert!(case.run(&mut state, &mut Vec::new()).change.is_no_change());
        assert!(state.delayed_vertices.contains_key("v"));
        let case = Case::new(1000.0, 1000.0, 10);
        case.run(&mut state, &mut Vec::new());
        assert!(state.delayed_vertices.is_empty());
        let mut case = Case::new(1000.0, 500.0, 10);
        case.options.scale_down_interval = Duration::from_secs(3600);
        case.run(&mut state, &mut Vec::new());
        let case = Case::new(1000.0, 2000.0, 10);
        assert_eq!(case.run(&mut state, &mut Vec::new()).change.new, 20);
        assert!(state.delayed_vertices.is_empty());
    }

    #[test]
    fn observed_scaling_coefficient_fits_and_rounds_up() {
        let options = AutoScalerOptions {
            observed_scalability_enabled: true,
            ..AutoScalerOptions::default()
        };
        // P = 1, 2, 4 with R = 100, 180, 300 (β = 100 at P 1):
        // α = (100 + 360 + 1200) / ((1 + 4 + 16) · 100) = 1660 / 2100 = 0.7904... -> 0.80.
        let history = BTreeMap::from([
            (at(0), summary(1, 2, 100.0, 200.0)),
            (at(1), summary(2, 4, 180.0, 360.0)),
            (at(2), summary(4, 8, 300.0, 600.0)),
        ]);
        assert_eq!(observed_scaling_coefficient(Some(&history), &options), Ok(0.8));
        // Too few observations: linear.
        let short: BTreeMap<_, _> = history.iter().take(2).map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(observed_scaling_coefficient(Some(&short), &options), Ok(1.0));
        // Clamped at coefficient-min: R flat at 100 -> α = 700 / 2100 = 0.33 -> 0.5.
        let flat = BTreeMap::from([
            (at(0), summary(1, 2, 100.0, 200.0)),
            (at(1), summary(2, 4, 100.0, 200.0)),
            (at(2), summary(4, 8, 100.0, 200.0)),
        ]);
        assert_eq!(observed_scaling_coefficient(Some(&flat), &options), Ok(0.5));
        // A NaN rate means linear.
        let mut with_nan = history.clone();
        with_nan.insert(at(3), summary(8, 16, f64::NAN, 1.0));
        assert_eq!(observed_scaling_coefficient(Some(&with_nan), &options), Ok(1.0));
        // Baseline without P = 1: the most recent summary among the smallest P (t=1, not t=0) ->
        // 180 / 2 = 90.
        let no_one = BTreeMap::from([
            (at(0), summary(2, 4, 200.0, 400.0)),
            (at(1), summary(2, 4, 180.0, 360.0)),
            (at(2), summary(4, 8, 300.0, 600.0)),
        ]);
        assert_eq!(baseline_processing_rate(&no_one), 90.0);
    }

    #[test]
    fn observed_scaling_coefficient_scales_the_factor() {
        // α 0.8 above: sf 2 / 0.8 = 2.5 at 4 -> 10.
        let history = BTreeMap::from([
            (at(-3), summary(1, 2, 100.0, 200.0)),
            (at(-2), summary(2, 4, 180.0, 360.0)),
            (at(-1), summary(4, 8, 300.0, 600.0)),
        ]);
        let mut case = Case::new(1000.0, 2000.0, 4);
        case.options.observed_scalability_enabled = true;
        case.options.alignment_mode = AlignmentMode::Off;
        case.history = Some(&history);
        assert_eq!(case.new_parallelism(), 10);
    }

    #[test]
    fn alignment_applies_to_keyed_vertices_and_legacy_limits_emit() {
        let mut case = Case::new(1000.0, 1500.0, 16);
        case.hash = true;
        assert_eq!(case.new_parallelism(), 26);
        case.options.alignment_mode = AlignmentMode::EvenlySpread;
        assert_eq!(case.new_parallelism(), 32);
        // Legacy: N=12 (max parallelism), cur 5, sf 1.4 -> 7, upper 8 via vertex.max-parallelism.
        let mut case = Case::new(1000.0, 1400.0, 5);
        case.hash = true;
        case.max_parallelism = 12;
        case.options.vertex_max_parallelism = 8;
        case.options.alignment_mode = AlignmentMode::LegacyEvenlySpread;
        let mut events = Vec::new();
        assert_eq!(case.run(&mut DelayedScaleDown::default(), &mut events).change.new, 6);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "ScalingLimited");
        assert_eq!(
            events[0].message,
            "Scaling limited detected for v (expected parallelism: 7, actual parallelism 6). Scaling limited due to \
             numKeyGroupsOrPartitions : 12，upperBoundForAlignment(maxParallelism or parallelismUpperLimit): 8, \
             parallelismLowerLimit: 1."
        );
        assert_eq!(events[0].message_key.as_deref(), Some("ScalingLimitedv"));
    }

    /// FLINK-40389's table through the whole vertex scaler: a source with 15 partitions at 100,
    /// max parallelism 180, target capacities 1800, 500 and 100 for a true processing rate of
    /// 1000 give the raw targets ceil(1.8 × 100) = 180, ceil(0.5 × 100) = 50 and ceil(0.1 × 100) = 10
    /// (scale-down.max-factor 1 lets the factor go below 0.4; no scale-down delay).
    #[test]
    fn a_source_never_scales_above_its_partitions() {
        let case = |capacity: f64, mode: AlignmentMode, compat: bool| {
            let mut case = Case::new(1000.0, capacity, 100);
            case.max_parallelism = 180;
            case.partitions = 15;
            case.options.scale_down_max_factor = 1.0;
            case.options.alignment_mode = mode;
            case.options.compat_reference_1_16 = compat;
            let mut events = Vec::new();
            let result = case.run(&mut DelayedScaleDown::default(), &mut events);
            let limited: Vec<String> = events
                .iter()
                .map(|e| {
                    assert_eq!(e.reason, "ScalingLimited");
                    e.message
                        .split(" Scaling limited due")
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            (result.change.new, limited)
        };
        let event = |expected: u32, actual: u32| {
            vec![format!(
                "Scaling limited detected for v (expected parallelism: {expected}, actual parallelism {actual})."
            )]
        };
        let built_in = [AlignmentMode::Balanced, AlignmentMode::EvenlySpread];
        let legacy = [
            AlignmentMode::LegacyEvenlySpread,
            AlignmentMode::LegacyMaximizeUtilisation,
        ];
        for mode in built_in {
            // The cap: min(target, 15).
            assert_eq!(case(1800.0, mode, false), (15, vec![]), "{mode:?}");
            assert_eq!(case(500.0, mode, false), (15, vec![]), "{mode:?}");
            assert_eq!(case(100.0, mode, false), (15, vec![]), "{mode:?}");
            // 1.16 keeps the targets above the partitions.
            assert_eq!(case(1800.0, mode, true), (180, vec![]), "{mode:?}");
            assert_eq!(case(500.0, mode, true), (50, vec![]), "{mode:?}");
            assert_eq!(case(100.0, mode, true), (15, vec![]), "{mode:?}");
        }
        for mode in legacy {
            assert_eq!(case(1800.0, mode, false), (15, event(180, 15)), "{mode:?}");
            assert_eq!(case(500.0, mode, false), (15, event(50, 15)), "{mode:?}");
            assert_eq!(case(100.0, mode, false), (15, vec![]), "{mode:?}");
            // 1.16 blocks the scale-up at the current 100 (no change), reporting (180, 100).
            assert_eq!(case(1800.0, mode, true), (100, event(180, 100)), "{mode:?}");
            assert_eq!(case(500.0, mode, true), (15, event(50, 15)), "{mode:?}");
            assert_eq!(case(100.0, mode, true), (15, vec![]), "{mode:?}");
        }
        // OFF keeps every raw target.
        for compat in [false, true] {
            assert_eq!(case(1800.0, AlignmentMode::Off, compat).0, 180);
            assert_eq!(case(500.0, AlignmentMode::Off, compat).0, 50);
            assert_eq!(case(100.0, AlignmentMode::Off, compat).0, 10);
        }
    }

    /// FLINK-39890's history: an idle vertex whose true processing rate was 0 at 2, 4 and 8.
    fn idle_history() -> BTreeMap<DateTime<Utc>, ScalingSummary> {
        BTreeMap::from([
            (at(-30), summary(2, 4, 0.0, 0.0)),
            (at(-20), summary(4, 8, 0.0, 0.0)),
            (at(-10), summary(8, 16, 0.0, 0.0)),
        ])
    }

    #[test]
    fn the_coefficient_is_linear_where_the_baseline_rate_is_zero() {
        let mut options = AutoScalerOptions {
            observed_scalability_enabled: true,
            ..AutoScalerOptions::default()
        };
        // No summary at P = 1; the most recent at the smallest P (2) gives β = 0 / 2 = 0.
        // Σ(P·R) = 0, Σ(P²) = 4 + 16 + 64 = 84, Σ(P²)·β = 0: α = 0 / 0 is undefined, the guard says 1.
        let history = idle_history();
        assert_eq!(baseline_processing_rate(&history), 0.0);
        assert_eq!(observed_scaling_coefficient(Some(&history), &options), Ok(1.0));
        // 1.16 divides: NaN, which it cannot round (the decision aborts).
        options.compat_reference_1_16 = true;
        assert_eq!(
            observed_scaling_coefficient(Some(&history), &options),
            Err(UndefinedCoefficient)
        );

        // β = 0 (the P = 2 summary was idle) but later summaries processed: Σ(P·R) = 0 + 4·100 +
        // 8·300 = 2800 over 0. The guard says 1; 1.16's 2800 / 0 = ∞ is clamped to 1 as well.
        let busier = BTreeMap::from([
            (at(-30), summary(2, 4, 0.0, 0.0)),
            (at(-20), summary(4, 8, 100.0, 200.0)),
            (at(-10), summary(8, 16, 300.0, 600.0)),
        ]);
        for compat in [false, true] {
            options.compat_reference_1_16 = compat;
            assert_eq!(
                observed_scaling_coefficient(Some(&busier), &options),
                Ok(1.0),
                "{compat}"
            );
        }
        // A defined fit is the same in both: α 0.8 (see observed_scaling_coefficient_fits_and_rounds_up).
        let fitted = BTreeMap::from([
            (at(0), summary(1, 2, 100.0, 200.0)),
            (at(1), summary(2, 4, 180.0, 360.0)),
            (at(2), summary(4, 8, 300.0, 600.0)),
        ]);
        for compat in [false, true] {
            options.compat_reference_1_16 = compat;
            assert_eq!(
                observed_scaling_coefficient(Some(&fitted), &options),
                Ok(0.8),
                "{compat}"
            );
        }
    }

    #[test]
    fn an_idle_history_scales_linearly_or_aborts_in_compat_mode() {
        // sf 2 at 4 with the idle history: linear (α 1) -> 8.
        let history = idle_history();
        let mut case = Case::new(1000.0, 2000.0, 4);
        case.options.observed_scalability_enabled = true;
        case.options.alignment_mode = AlignmentMode::Off;
        case.history = Some(&history);
        assert_eq!(case.new_parallelism(), 8);

        let vertex = VertexId::new("v");
        let input = VertexScaleInput {
            vertex: &vertex,
            metrics: &case.metrics,
            current: case.current,
            max_parallelism: case.max_parallelism,
            num_source_partitions: 0,
            has_hash_input: false,
            info: None,
            history: case.history,
            restart_time: Duration::ZERO,
            now: at(0),
            options: &case.options,
        };
        let run = |input: &VertexScaleInput<'_>| {
            compute_scale_target_parallelism(
                input,
                &NoPluginsOrAbort,
                &mut DelayedScaleDown::default(),
                &mut Vec::new(),
            )
            .map(|r| r.change.new)
        };
        assert_eq!(run(&input), Ok(8));
        let compat = AutoScalerOptions {
            compat_reference_1_16: true,
            ..case.options.clone()
        };
        let input = VertexScaleInput {
            options: &compat,
            ..input
        };
        let aborted = run(&input);
        assert_eq!(
            aborted,
            Err(DecisionError::UndefinedScalingCoefficient { vertex: vertex.clone() })
        );
        // The message a JVM autoscaler 1.16 reports in its AutoscalerError event.
        assert_eq!(
            aborted.err().map(|e| e.to_string()).unwrap_or_default(),
            "Character N is neither a decimal digit number, decimal point, nor \"e\" notation exponential mark."
        );
        // A decision that cannot fail (NoPlugins) answers as without the switch.
        let Ok(result) =
            compute_scale_target_parallelism(&input, &NoPlugins, &mut DelayedScaleDown::default(), &mut Vec::new());
        assert_eq!(result.change.new, 8);
    }
}
