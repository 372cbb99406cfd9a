//! Configuration: Flink's configuration syntax, the typed `job.autoscaler.*` options and their
//! validation.
//!
//! The modules behind this one build on each other in one direction only:
//! * `syntax`: the [`Configuration`] map and Flink's value syntax ([`parse_bool`], [`parse_int`],
//!   [`parse_double`], [`parse_list`], [`parse_memory_size`]) with the Java string semantics its
//!   parsers rely on;
//! * `duration`: Flink's duration syntax ([`parse_duration`]);
//! * `quartz_cron`: the port of Quartz's `CronExpression` behind the cron entries of
//!   `excluded.periods`;
//! * `excluded_periods`: `job.autoscaler.excluded.periods` ([`ExcludedPeriod`]), on `syntax` and
//!   `quartz_cron`;
//! * [`catalog`]: the one table of the option keys, their types, defaults and meanings;
//! * `options`: the typed options ([`AutoScalerOptions`]), on all of the above;
//! * `validator`: the reference's option validation ([`validate`]), on `options`.

pub mod catalog;
mod duration;
mod excluded_periods;
mod options;
mod quartz_cron;
mod syntax;
mod validator;

pub use catalog::{AUTOSCALER_PREFIX, LEGACY_PREFIX};
pub use duration::parse_duration;
pub use excluded_periods::{ExcludedPeriod, ExcludedPeriodError, is_excluded, parse_excluded_periods};
pub use options::{
    AlignmentMode, AutoScalerOptions, COMPAT_REFERENCE_1_16, OptionsError, compat_reference_1_16, option_keys,
    resolve_alignment_mode, rest_client_timeout,
};
pub(crate) use syntax::java_trim;
pub use syntax::{Configuration, parse_bool, parse_double, parse_int, parse_list, parse_memory_size};
pub use validator::{OptionProblem, ValidationError, validate, validate_all};
