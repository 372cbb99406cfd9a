//! Checked instant arithmetic: the one home of "an instant plus or minus a configured duration".
//!
//! A duration option can be as long as a Java `Duration` (`i64::MAX` seconds), far beyond what a
//! [`DateTime`] can hold (about 262 000 years), and an instant read from Flink can sit at the edge of
//! the range. chrono's `+` and `-` panic past the edge; these functions saturate instead, which keeps
//! every comparison right: an instant "100 000 000 days after now" is later than any real `now`.

use chrono::{DateTime, TimeDelta, Utc};
use std::time::Duration;

/// `at + d`, or the largest representable instant when that overflows.
///
/// ```
/// use autoscaler_metrics::time::add_saturating;
/// use chrono::{DateTime, Utc};
/// use std::time::Duration;
/// let now = DateTime::<Utc>::UNIX_EPOCH;
/// assert_eq!(add_saturating(now, Duration::from_secs(60)).timestamp(), 60);
/// assert_eq!(add_saturating(now, Duration::from_secs(100_000_000 * 86_400)), DateTime::<Utc>::MAX_UTC);
/// ```
pub fn add_saturating(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| at.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `at - d`, or the smallest representable instant when that overflows.
///
/// ```
/// use autoscaler_metrics::time::sub_saturating;
/// use chrono::{DateTime, Utc};
/// use std::time::Duration;
/// let now = DateTime::<Utc>::UNIX_EPOCH;
/// assert_eq!(sub_saturating(now, Duration::from_secs(60)).timestamp(), -60);
/// assert_eq!(sub_saturating(now, Duration::from_secs(i64::MAX as u64)), DateTime::<Utc>::MIN_UTC);
/// ```
pub fn sub_saturating(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| at.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_at_both_ends_of_the_range() {
        let max_secs = Duration::from_secs(u64::try_from(i64::MAX).unwrap_or(u64::MAX));
        assert_eq!(
            add_saturating(DateTime::<Utc>::MAX_UTC, Duration::from_nanos(1)),
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            add_saturating(DateTime::<Utc>::UNIX_EPOCH, max_secs),
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            sub_saturating(DateTime::<Utc>::MIN_UTC, Duration::from_nanos(1)),
            DateTime::<Utc>::MIN_UTC
        );
        // In range: exact. 1 day = 86 400 s.
        let t = DateTime::<Utc>::UNIX_EPOCH;
        assert_eq!(add_saturating(t, Duration::from_secs(86_400)).timestamp(), 86_400);
        assert_eq!(sub_saturating(t, Duration::from_millis(1500)).timestamp_millis(), -1500);
    }
}
