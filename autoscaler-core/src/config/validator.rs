//! Option validation before a standalone cycle (reference: `AutoscalerValidator.validateAutoscalerOptions`).
//!
//! Runs only when `job.autoscaler.enabled` is true and reports the first problem:
//! range checks of the utilization, scale-factor and memory-threshold options; the
//! observed-scalability, scaling-effectiveness and memory-tuning ranges only when their feature is
//! enabled; then every `excluded.periods` entry must parse.
//!
//! ```
//! use autoscaler_core::config::Configuration;
//! use autoscaler_core::config::validate;
//! let conf = Configuration::from_iter([
//!     ("job.autoscaler.enabled", "true"),
//!     ("job.autoscaler.utilization.target", "0.7"),
//!     ("job.autoscaler.utilization.max", "0.5"),
//! ]);
//! assert_eq!(
//!     validate(&conf).unwrap_err().to_string(),
//!     "The AutoScalerOption job.autoscaler.utilization.max is invalid, it should be a value within the range [0.7, 1.0]"
//! );
//! ```

use super::catalog::AUTOSCALER_PREFIX;
use super::excluded_periods::{ExcludedPeriod, ExcludedPeriodError};
use super::options::{AutoScalerOptions, OptionsError, option_keys};
use super::syntax::{Configuration, parse_bool, parse_double, parse_list};
use autoscaler_metrics::java;

/// Why the options are rejected. The first three variants are the reference's validation messages
/// (the standalone loop reports them as an `AutoScaler Options Validation` warning and skips the
/// cycle); [`ValidationError::Unreadable`] is a value the reference fails to read while validating,
/// which it surfaces as an exception (an `AutoscalerError`) instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// A number outside its allowed range; an absent bound is open.
    #[error(
        "The AutoScalerOption {key} is invalid, it should be a value within the range [{}, {}]",
        java_bound(*.min, "-Infinity"),
        java_bound(*.max, "+Infinity")
    )]
    OutOfRange {
        /// The option's canonical key.
        key: String,
        /// Lower bound, if any.
        min: Option<f64>,
        /// Upper bound, if any.
        max: Option<f64>,
    },
    /// A range-checked option whose value is not a number.
    #[error("Invalid value in the autoscaler config {key}")]
    InvalidNumber {
        /// The option's canonical key.
        key: String,
        /// The offending value.
        value: String,
    },
    /// An `excluded.periods` entry that does not parse.
    #[error(transparent)]
    ExcludedPeriod(#[from] ExcludedPeriodError),
    /// A value the validator has to read but cannot parse outside a range check (`enabled`, a feature
    /// flag, `utilization.target` used as a bound, the `excluded.periods` list itself).
    #[error(transparent)]
    Unreadable(#[from] OptionsError),
}

fn java_bound(bound: Option<f64>, open: &str) -> String {
    bound.map_or_else(|| open.to_owned(), java::double_to_string)
}

/// Validates the autoscaler options of `conf` as the reference's standalone executor does before
/// each cycle. Nothing is checked when `job.autoscaler.enabled` is false.
///
/// # Errors
/// The first [`ValidationError`], in the reference's order.
pub fn validate(conf: &Configuration) -> Result<(), ValidationError> {
    match range_checks(conf)?.into_iter().next() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// One problem of a configuration: the key it is about and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionProblem {
    /// The key that was set (or the option's canonical key for a range check).
    pub key: String,
    /// What is wrong, naming the key.
    pub message: String,
}

impl std::fmt::Display for OptionProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every problem of the autoscaler options of `conf`, where [`validate`] stops at the first: each
/// value the options parser ([`AutoScalerOptions::from_configuration`]) refuses, then, with those
/// values left out, every range check of [`validate`] that fails (only when `enabled` is true).
/// Empty when the options parse and validate.
///
/// ```
/// use autoscaler_core::config::{Configuration, validate_all};
/// let conf = Configuration::from_iter([
///     ("job.autoscaler.enabled", "true"),
///     ("job.autoscaler.utilization.target", "2.5"),
///     ("job.autoscaler.metrics.window", "forever"),
///     ("job.autoscaler.scale-down.max-factor", "-1"),
/// ]);
/// let keys: Vec<String> = validate_all(&conf).into_iter().map(|p| p.key).collect();
/// assert_eq!(
///     keys,
///     ["job.autoscaler.metrics.window", "job.autoscaler.scale-down.max-factor", "job.autoscaler.utilization.target"]
/// );
/// ```
pub fn validate_all(conf: &Configuration) -> Vec<OptionProblem> {
    // The common case, a configuration that parses, costs one parse and no copy.
    if AutoScalerOptions::from_configuration(conf).is_ok() {
        let mut problems: Vec<OptionProblem> = match range_checks(conf) {
            Ok(failed) => failed.into_iter().map(OptionProblem::from).collect(),
            Err(unreadable) => vec![OptionProblem::from(unreadable)],
        };
        problems.sort_by(|a, b| a.key.cmp(&b.key));
        return problems;
    }
    let mut readable = conf.clone();
    let mut problems = Vec::new();
    // The parser stops at the first value it refuses: leave that value out and parse again, so
    // that every refused value is reported exactly as the parser words it.
    for _ in 0..=conf.len() {
        match AutoScalerOptions::from_configuration(&readable) {
            Ok(_) => break,
            Err(error) => {
                let OptionsError::InvalidValue { key, .. } = &error;
                let key = key.clone();
                problems.push(OptionProblem {
                    message: error.to_string(),
                    key: key.clone(),
                });
                if readable.remove(&key).is_none() {
                    break;
                }
            }
        }
    }
    let range = match range_checks(&readable) {
        Ok(failed) => failed,
        Err(unreadable) => vec![unreadable],
    };
    problems.extend(range.into_iter().map(OptionProblem::from));
    problems.sort_by(|a, b| a.key.cmp(&b.key));
    problems
}

impl From<ValidationError> for OptionProblem {
    fn from(error: ValidationError) -> Self {
        OptionProblem {
            key: error_key(&error),
            message: error.to_string(),
        }
    }
}

fn error_key(error: &ValidationError) -> String {
    match error {
        ValidationError::OutOfRange { key, .. } | ValidationError::InvalidNumber { key, .. } => key.clone(),
        ValidationError::ExcludedPeriod(_) => format!("{AUTOSCALER_PREFIX}excluded.periods"),
        ValidationError::Unreadable(OptionsError::InvalidValue { key, .. }) => key.clone(),
    }
}

/// Every failed check of [`validate`], in the reference's order; `Err` for a value the checks
/// cannot read at all.
fn range_checks(conf: &Configuration) -> Result<Vec<ValidationError>, ValidationError> {
    if !flag(conf, "enabled", false)? {
        return Ok(Vec::new());
    }
    let defaults = AutoScalerOptions::default();
    // The reference builds every check's result before picking the first failure, so a value it
    // cannot read outside a range check (the target as a bound, a feature flag, the period list)
    // raises even when an earlier range check already failed.
    let mut checks: Vec<Option<ValidationError>> = vec![
        check_number(
            conf,
            "scale-down.max-factor",
            Some(defaults.scale_down_max_factor),
            Some(0.0),
            None,
        ),
        check_number(
            conf,
            "scale-up.max-factor",
            Some(defaults.scale_up_max_factor),
            Some(0.0),
            None,
        ),
        check_number(
            conf,
            "utilization.target",
            Some(defaults.utilization_target),
            Some(0.0),
            Some(1.0),
        ),
        check_number(
            conf,
            "target.utilization.boundary",
            Some(defaults.target_utilization_boundary),
            Some(0.0),
            None,
        ),
    ];
    let target = number(conf, "utilization.target")?.unwrap_or(defaults.utilization_target);
    checks.push(check_number(conf, "utilization.max", None, Some(target), Some(1.0)));
    checks.push(check_number(conf, "utilization.min", None, Some(0.0), Some(target)));
    checks.push(check_number(
        conf,
        "memory.gc-pressure.threshold",
        Some(defaults.gc_pressure_threshold),
        Some(0.0),
        Some(1.0),
    ));
    checks.push(check_number(
        conf,
        "memory.heap-usage.threshold",
        Some(defaults.heap_usage_threshold),
        Some(0.0),
        Some(1.0),
    ));
    // Feature-gated: an out-of-range value is harmless while the feature is off.
    if flag(
        conf,
        "observed-scalability.enabled",
        defaults.observed_scalability_enabled,
    )? {
        checks.push(check_number(
            conf,
            "observed-scalability.coefficient-min",
            Some(defaults.observed_scalability_coefficient_min),
            Some(0.01),
            Some(1.0),
        ));
    }
    if flag(
        conf,
        "scaling.effectiveness.detection.enabled",
        defaults.scaling_effectiveness_detection_enabled,
    )? {
        checks.push(check_number(
            conf,
            "scaling.effectiveness.threshold",
            Some(defaults.scaling_effectiveness_threshold),
            Some(0.0),
            Some(1.0),
        ));
    }
    if flag(conf, "memory.tuning.enabled", defaults.memory_tuning_enabled)? {
        checks.push(check_number(
            conf,
            "memory.tuning.overhead",
            Some(defaults.memory_tuning_overhead),
            Some(0.0),
            Some(1.0),
        ));
    }
    checks.push(check_excluded_periods(conf)?);
    Ok(checks.into_iter().flatten().collect())
}

/// The raw value of option `name` and the key it came from.
fn raw<'c>(conf: &'c Configuration, name: &str) -> Option<(String, &'c str)> {
    option_keys(name)
        .into_iter()
        .find_map(|key| conf.get(&key).map(|value| (key, value)))
}

fn unreadable(key: String, value: &str, reason: String) -> ValidationError {
    ValidationError::Unreadable(OptionsError::InvalidValue {
        key,
        value: value.to_owned(),
        reason,
    })
}

fn flag(conf: &Configuration, name: &str, default: bool) -> Result<bool, ValidationError> {
    match raw(conf, name) {
        None => Ok(default),
        Some((key, value)) => parse_bool(value).map_err(|reason| unreadable(key, value, reason)),
    }
}

fn number(conf: &Configuration, name: &str) -> Result<Option<f64>, ValidationError> {
    match raw(conf, name) {
        None => Ok(None),
        Some((key, value)) => parse_double(value)
            .map(Some)
            .map_err(|reason| unreadable(key, value, reason)),
    }
}

/// One range check (reference `validateNumber`): the option's value, or its default, must lie in
/// `[min, max]`; NaN passes because every comparison with it is false; an unset option without a
/// default passes; an unparsable value gives [`ValidationError::InvalidNumber`].
fn check_number(
    conf: &Configuration,
    name: &str,
    default: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
) -> Option<ValidationError> {
    let key = format!("{AUTOSCALER_PREFIX}{name}");
    let value = match raw(conf, name) {
        None => default?,
        Some((_, text)) => match parse_double(text) {
            Ok(v) => v,
            Err(_) => {
                return Some(ValidationError::InvalidNumber {
                    key,
                    value: text.to_owned(),
                });
            }
        },
    };
    let below = min.is_some_and(|m| value < m);
    let above = max.is_some_and(|m| value > m);
    (below || above).then_some(ValidationError::OutOfRange { key, min, max })
}

fn check_excluded_periods(conf: &Configuration) -> Result<Option<ValidationError>, ValidationError> {
    let Some((key, value)) = raw(conf, "excluded.periods") else {
        return Ok(None);
    };
    let entries = parse_list(value).map_err(|reason| unreadable(key, value, reason))?;
    Ok(entries
        .iter()
        .find_map(|e| ExcludedPeriod::parse(e).err())
        .map(ValidationError::from))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> Configuration {
        let mut c = Configuration::from_iter([("job.autoscaler.enabled", "true")]);
        for (k, v) in pairs {
            c.set(*k, *v);
        }
        c
    }

    fn message(pairs: &[(&str, &str)]) -> Option<String> {
        validate(&conf(pairs)).err().map(|e| e.to_string())
    }

    fn range(key: &str, min: &str, max: &str) -> Option<String> {
        Some(format!(
            "The AutoScalerOption job.autoscaler.{key} is invalid, it should be a value within the range [{min}, {max}]"
        ))
    }

    #[test]
    fn defaults_are_valid_and_disabled_skips_everything() {
        assert_eq!(message(&[]), None);
        let disabled = Configuration::from_iter([
            ("job.autoscaler.enabled", "false"),
            ("job.autoscaler.utilization.target", "7"),
            ("job.autoscaler.excluded.periods", "nonsense"),
        ]);
        assert_eq!(validate(&disabled), Ok(()));
        assert_eq!(validate(&Configuration::new()), Ok(()));
    }

    #[test]
    fn range_checks_use_the_reference_message() {
        let k = "job.autoscaler.";
        assert_eq!(
            message(&[(&format!("{k}scale-down.max-factor"), "-0.1")]),
            range("scale-down.max-factor", "0.0", "+Infinity")
        );
        assert_eq!(
            message(&[(&format!("{k}scale-up.max-factor"), "-1")]),
            range("scale-up.max-factor", "0.0", "+Infinity")
        );
        assert_eq!(
            message(&[(&format!("{k}utilization.target"), "1.1")]),
            range("utilization.target", "0.0", "1.0")
        );
        assert_eq!(
            message(&[(&format!("{k}utilization.target"), "-0.1")]),
            range("utilization.target", "0.0", "1.0")
        );
        assert_eq!(
            message(&[(&format!("{k}target.utilization.boundary"), "-0.3")]),
            range("target.utilization.boundary", "0.0", "+Infinity")
        );
        // utilization.max must lie in [target, 1], utilization.min in [0, target].
        assert_eq!(
            message(&[(&format!("{k}utilization.max"), "0.6")]),
            range("utilization.max", "0.7", "1.0")
        );
        assert_eq!(
            message(&[(&format!("{k}utilization.max"), "1.01")]),
            range("utilization.max", "0.7", "1.0")
        );
        assert_eq!(
            message(&[(&format!("{k}utilization.min"), "0.8")]),
            range("utilization.min", "0.0", "0.7")
        );
        assert_eq!(
            message(&[
                (&format!("{k}utilization.target"), "0.5"),
                (&format!("{k}utilization.min"), "0.55")
            ]),
            range("utilization.min", "0.0", "0.5")
        );
        assert_eq!(
            message(&[
                (&format!("{k}utilization.max"), "0.7"),
                (&format!("{k}utilization.min"), "0.7")
            ]),
            None
        );
        assert_eq!(
            message(&[(&format!("{k}memory.gc-pressure.threshold"), "1.5")]),
            range("memory.gc-pressure.threshold", "0.0", "1.0")
        );
        assert_eq!(
            message(&[(&format!("{k}memory.heap-usage.threshold"), "-1")]),
            range("memory.heap-usage.threshold", "0.0", "1.0")
        );
        // A fallback key is read but the message names the canonical key.
        assert_eq!(
            message(&[("kubernetes.operator.job.autoscaler.scale-down.max-factor", "-2")]),
            range("scale-down.max-factor", "0.0", "+Infinity")
        );
        // NaN compares false with every bound, so it passes as in Java.
        assert_eq!(message(&[(&format!("{k}utilization.max"), "NaN")]), None);
    }

    #[test]
    fn the_first_failing_check_wins() {
        let k = "job.autoscaler.";
        assert_eq!(
            message(&[
                (&format!("{k}memory.heap-usage.threshold"), "2"),
                (&format!("{k}scale-up.max-factor"), "-1")
            ]),
            range("scale-up.max-factor", "0.0", "+Infinity")
        );
    }

    #[test]
    fn feature_gated_ranges_apply_only_when_the_feature_is_on() {
        let k = "job.autoscaler.";
        let coefficient = (format!("{k}observed-scalability.coefficient-min"), "0.001");
        let threshold = (format!("{k}scaling.effectiveness.threshold"), "1.2");
        let overhead = (format!("{k}memory.tuning.overhead"), "-0.2");
        let off: Vec<(&str, &str)> = [&coefficient, &threshold, &overhead]
            .iter()
            .map(|(a, b)| (a.as_str(), *b))
            .collect();
        assert_eq!(message(&off), None);
        let with = |flag: &str| {
            let mut pairs = off.clone();
            pairs.push((flag, "true"));
            message(&pairs)
        };
        assert_eq!(
            with("job.autoscaler.observed-scalability.enabled"),
            range("observed-scalability.coefficient-min", "0.01", "1.0")
        );
        assert_eq!(
            with("job.autoscaler.scaling.effectiveness.detection.enabled"),
            range("scaling.effectiveness.threshold", "0.0", "1.0")
        );
        assert_eq!(
            with("job.autoscaler.memory.tuning.enabled"),
            range("memory.tuning.overhead", "0.0", "1.0")
        );
    }

    #[test]
    fn bounds_are_inclusive_and_a_hair_outside_is_rejected() {
        // (option, feature flag, min, max) as in the reference's parameterised validator test.
        let bounded = [
            ("memory.gc-pressure.threshold", None, 0.0, 1.0),
            ("memory.heap-usage.threshold", None, 0.0, 1.0),
            (
                "scaling.effectiveness.threshold",
                Some("scaling.effectiveness.detection.enabled"),
                0.0,
                1.0,
            ),
            ("memory.tuning.overhead", Some("memory.tuning.enabled"), 0.0, 1.0),
            (
                "observed-scalability.coefficient-min",
                Some("observed-scalability.enabled"),
                0.01,
                1.0,
            ),
        ];
        for (name, flag, min, max) in bounded {
            let key = format!("job.autoscaler.{name}");
            let with = |value: f64| {
                let mut c = conf(&[(key.as_str(), value.to_string().as_str())]);
                if let Some(flag) = flag {
                    c.set(format!("job.autoscaler.{flag}"), "true");
                }
                validate(&c)
            };
            assert_eq!(with(min), Ok(()), "{name} = {min}");
            assert_eq!(with(max), Ok(()), "{name} = {max}");
            for outside in [min - 0.0001, max + 0.0001] {
                let err = with(outside).unwrap_err();
                assert_eq!(
                    err,
                    ValidationError::OutOfRange {
                        key: key.clone(),
                        min: Some(min),
                        max: Some(max)
                    }
                );
                assert!(err.to_string().contains(&key));
            }
        }
    }

    #[test]
    fn unparsable_numbers_and_flags() {
        assert_eq!(
            message(&[("job.autoscaler.scale-down.max-factor", "lots")]),
            Some("Invalid value in the autoscaler config job.autoscaler.scale-down.max-factor".into())
        );
        // The target is also read as a bound outside any check: the reference throws.
        let err = validate(&conf(&[("job.autoscaler.utilization.target", "high")])).unwrap_err();
        assert!(matches!(err, ValidationError::Unreadable(_)), "{err:?}");
        let err = validate(&conf(&[("job.autoscaler.memory.tuning.enabled", "yes")])).unwrap_err();
        assert!(matches!(err, ValidationError::Unreadable(_)), "{err:?}");
        let bad_enabled = Configuration::from_iter([("job.autoscaler.enabled", "1")]);
        assert!(matches!(validate(&bad_enabled), Err(ValidationError::Unreadable(_))));
    }

    #[test]
    fn excluded_periods_must_parse() {
        assert_eq!(
            message(&[("job.autoscaler.excluded.periods", "09:13:17-11:15:18;14:01:20-16:00:00")]),
            None
        );
        assert_eq!(
            message(&[("job.autoscaler.excluded.periods", "09:13:17-11:15:18;18:01:20-16:00:00")]),
            Some(
                "Invalid value 18:01:20-16:00:00 in the autoscaler config job.autoscaler.excluded.periods, the value \
                 is neither a valid daily expression nor a valid cron expression"
                    .into()
            )
        );
        assert_eq!(
            message(&[("job.autoscaler.excluded.periods", "* * * ? * 2,5 && * * 11-13 * * ?")]),
            Some(
                "Invalid value * * * ? * 2,5 && * * 11-13 * * ? in the autoscaler config \
                 job.autoscaler.excluded.periods, the value can not be configured as dailyExpression && \
                 dailyExpression or cronExpression && cronExpression"
                    .into()
            )
        );
        // Range problems come before period problems.
        assert_eq!(
            message(&[
                ("job.autoscaler.excluded.periods", "bad"),
                ("job.autoscaler.utilization.target", "2")
            ]),
            range("utilization.target", "0.0", "1.0")
        );
    }

    #[test]
    fn validate_all_reports_every_problem_once_in_key_order() {
        let all = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            validate_all(&conf(pairs))
                .into_iter()
                .map(|p| (p.key, p.message))
                .collect()
        };
        assert!(all(&[]).is_empty());
        let problems = all(&[
            ("job.autoscaler.utilization.target", "high"),
            ("job.autoscaler.scale-up.max-factor", "-2"),
            ("job.autoscaler.excluded.periods", "bad"),
            ("job.autoscaler.memory.heap-usage.threshold", "1.5"),
            ("job.autoscaler.history.max.age", "1 eon"),
        ]);
        let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "job.autoscaler.excluded.periods",
                "job.autoscaler.history.max.age",
                "job.autoscaler.memory.heap-usage.threshold",
                "job.autoscaler.scale-up.max-factor",
                "job.autoscaler.utilization.target",
            ]
        );
        // An unparsable value is one problem, worded by the parser, not also a range problem.
        assert!(
            problems[4]
                .1
                .starts_with("invalid value \"high\" for job.autoscaler.utilization.target"),
            "{problems:?}"
        );
        assert_eq!(
            problems[3].1,
            "The AutoScalerOption job.autoscaler.scale-up.max-factor is invalid, it should be a value within the range [0.0, +Infinity]"
        );
        // The first problem `validate` reports is among them.
        let first = validate(&conf(&[
            ("job.autoscaler.scale-up.max-factor", "-2"),
            ("job.autoscaler.memory.heap-usage.threshold", "1.5"),
        ]));
        let listed = all(&[
            ("job.autoscaler.scale-up.max-factor", "-2"),
            ("job.autoscaler.memory.heap-usage.threshold", "1.5"),
        ]);
        assert!(
            listed
                .iter()
                .any(|(_, m)| Some(m.clone()) == first.as_ref().err().map(ToString::to_string))
        );
        // Range checks only when enabled; a value the parser refuses always counts.
        let disabled = validate_all(&Configuration::from_iter([
            ("job.autoscaler.utilization.target", "2"),
            ("job.autoscaler.metrics.window", "x"),
        ]));
        let keys: Vec<&str> = disabled.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["job.autoscaler.metrics.window"]);
    }
}
