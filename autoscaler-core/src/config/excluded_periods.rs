//! `job.autoscaler.excluded.periods`: time windows in which scaling is only reported, never executed
//! (reference: `CalendarUtils`).
//!
//! Each list entry is one or two sub-expressions joined by `&&`, all of which must match:
//! * a daily range `HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]` (Quartz `DailyCalendar` with the time range
//!   inverted, so "inside the range, both ends included" means excluded), start strictly before end;
//! * a Quartz cron expression (6 or 7 fields starting with seconds, day-of-week 1 = Sunday, `?`, `L`,
//!   `W`, `#`, ranges, steps and `JAN`/`MON` names) matched as `CronExpression.isSatisfiedBy`.
//!
//! The reference evaluates in the JVM's default time zone; this crate evaluates in UTC
//! (replay-format §3.2).
//!
//! ```
//! use autoscaler_core::config::{ExcludedPeriod, is_excluded};
//! use chrono::{TimeZone, Utc};
//! // Mondays and Thursdays from 14:01:20 to 16:00:00.
//! let period = ExcludedPeriod::parse("* * * ? * 2,5 && 14:01:20-16:00:00").unwrap();
//! let thursday = Utc.with_ymd_and_hms(2023, 12, 14, 14, 1, 30).unwrap();
//! assert!(is_excluded(&[period.clone()], thursday));
//! assert!(!is_excluded(&[period], thursday - chrono::Duration::days(1)));
//! ```

use super::quartz_cron::QuartzCron;
use super::syntax::{java_split, java_strip, parse_int};
use chrono::{DateTime, Timelike, Utc};

/// An `excluded.periods` entry that the reference's validator rejects; the messages are the
/// reference's (`CalendarUtils.validateExcludedExpression`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExcludedPeriodError {
    /// More than two `&&`-joined parts.
    #[error("Invalid value {expression} in the autoscaler config job.autoscaler.excluded.periods")]
    TooManyParts {
        /// The whole list entry.
        expression: String,
    },
    /// A part is neither a daily range nor a Quartz cron expression.
    #[error(
        "Invalid value {expression} in the autoscaler config job.autoscaler.excluded.periods, the value is neither a \
         valid daily expression nor a valid cron expression"
    )]
    NeitherDailyNorCron {
        /// The whole list entry.
        expression: String,
    },
    /// Two daily ranges or two cron expressions joined by `&&`.
    #[error(
        "Invalid value {expression} in the autoscaler config job.autoscaler.excluded.periods, the value can not be \
         configured as dailyExpression && dailyExpression or cronExpression && cronExpression"
    )]
    SameKindTwice {
        /// The whole list entry.
        expression: String,
    },
}

impl ExcludedPeriodError {
    /// The list entry the error is about.
    pub fn expression(&self) -> &str {
        match self {
            Self::TooManyParts { expression }
            | Self::NeitherDailyNorCron { expression }
            | Self::SameKindTwice { expression } => expression,
        }
    }
}

/// One parsed `excluded.periods` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludedPeriod {
    expression: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Daily(DailyRange),
    Cron(Box<QuartzCron>),
}

impl ExcludedPeriod {
    /// Parses and validates one list entry exactly as the reference's validator does.
    ///
    /// # Errors
    /// [`ExcludedPeriodError`] with the reference's message.
    pub fn parse(expression: &str) -> Result<Self, ExcludedPeriodError> {
        // String.split("&&") semantics: trailing empty pieces are dropped, so "a&&" is just "a"
        // and a bare "&&" has no part at all (and then matches every instant, as in the reference).
        let pieces = java_split(expression, "&&");
        if pieces.len() > 2 {
            return Err(ExcludedPeriodError::TooManyParts {
                expression: expression.to_owned(),
            });
        }
        let mut parts = Vec::with_capacity(pieces.len());
        for piece in &pieces {
            let piece = java_strip(piece);
            // The reference prefers the daily reading when a part is both (none is in practice).
            if let Some(daily) = DailyRange::parse(piece) {
                parts.push(Part::Daily(daily));
            } else if let Ok(cron) = QuartzCron::parse(piece) {
                parts.push(Part::Cron(Box::new(cron)));
            } else {
                return Err(ExcludedPeriodError::NeitherDailyNorCron {
                    expression: expression.to_owned(),
                });
            }
        }
        if let [a, b] = parts.as_slice()
            && matches!(a, Part::Daily(_)) == matches!(b, Part::Daily(_))
        {
            return Err(ExcludedPeriodError::SameKindTwice {
                expression: expression.to_owned(),
            });
        }
        Ok(Self {
            expression: expression.to_owned(),
            parts,
        })
    }

    /// The entry as configured.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether `now` lies in this period (every part matches; reference
    /// `CalendarUtils.inExcludedPeriod`).
    pub fn contains(&self, now: DateTime<Utc>) -> bool {
        self.parts.iter().all(|part| match part {
            Part::Daily(daily) => daily.contains(now),
            Part::Cron(cron) => cron.is_satisfied_by(now),
        })
    }
}

impl std::fmt::Display for ExcludedPeriod {
    /// The entry as configured (so a list of periods prints as the reference lists its strings).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.expression)
    }
}

/// Parses every entry of an `excluded.periods` list, stopping at the first invalid one (reference:
/// `CalendarUtils.validateExcludedPeriods`).
///
/// # Errors
/// The first entry's [`ExcludedPeriodError`].
pub fn parse_excluded_periods<S: AsRef<str>>(expressions: &[S]) -> Result<Vec<ExcludedPeriod>, ExcludedPeriodError> {
    expressions.iter().map(|e| ExcludedPeriod::parse(e.as_ref())).collect()
}

/// Whether `now` (UTC) lies in any of `periods` (reference: `CalendarUtils.inExcludedPeriods`).
pub fn is_excluded(periods: &[ExcludedPeriod], now: DateTime<Utc>) -> bool {
    periods.iter().any(|p| p.contains(now))
}

// ------------------------------------------------------------------------------------------------
// Daily ranges (Quartz DailyCalendar with invertTimeRange = true)
// ------------------------------------------------------------------------------------------------

/// A time-of-day range in milliseconds since midnight, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DailyRange {
    start_ms: u32,
    end_ms: u32,
}

impl DailyRange {
    /// `start-end`; `None` if that is not a valid DailyCalendar range.
    fn parse(text: &str) -> Option<Self> {
        let pieces = java_split(text, "-");
        let [start, end] = pieces.as_slice() else { return None };
        let start_ms = time_of_day_ms(start)?;
        let end_ms = time_of_day_ms(end)?;
        // DailyCalendar requires the start strictly before the end (no range across midnight).
        (start_ms < end_ms).then_some(Self { start_ms, end_ms })
    }

    fn contains(&self, now: DateTime<Utc>) -> bool {
        let ms = now.num_seconds_from_midnight() * 1000 + now.timestamp_subsec_millis().min(999);
        self.start_ms <= ms && ms <= self.end_ms
    }
}

/// `HH:mm[:ss[:SSS]]` as DailyCalendar reads it: `:`-separated with empty pieces skipped
/// (StringTokenizer), each an integer as `Integer.parseInt` reads it, hour 0-23, minute and second
/// 0-59, millisecond 0-999.
fn time_of_day_ms(text: &str) -> Option<u32> {
    let fields: Vec<&str> = text.split(':').filter(|f| !f.is_empty()).collect();
    if !(2..=4).contains(&fields.len()) {
        return None;
    }
    let limits = [23, 59, 59, 999];
    let mut values = [0u32; 4];
    for (i, field) in fields.iter().enumerate() {
        let v = parse_int(field).ok()?;
        values[i] = u32::try_from(v).ok().filter(|&v| v <= limits[i])?;
    }
    let [h, m, s, ms] = values;
    Some(((h * 60 + m) * 60 + s) * 1000 + ms)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn period(e: &str) -> ExcludedPeriod {
        ExcludedPeriod::parse(e).unwrap_or_else(|err| panic!("{e:?} should parse: {err}"))
    }

    // 2023-12-14 is a Thursday (Quartz day-of-week 5).
    const THU: (i32, u32, u32) = (2023, 12, 14);

    #[test]
    fn daily_ranges_include_both_ends() {
        let p = period("09:13:17-11:15:18");
        let (y, m, d) = THU;
        assert!(!p.contains(at(y, m, d, 9, 13, 16)));
        assert!(p.contains(at(y, m, d, 9, 13, 17)));
        assert!(p.contains(at(y, m, d, 10, 0, 0)));
        assert!(p.contains(at(y, m, d, 11, 15, 18)));
        let just_after = at(y, m, d, 11, 15, 18) + chrono::Duration::milliseconds(1);
        assert!(!p.contains(just_after));
        // Minutes-only and millisecond forms.
        assert!(period("9:30-10:00").contains(at(y, m, d, 9, 45, 0)));
        let ms = period("10:00:00:500-10:00:01");
        assert!(!ms.contains(at(y, m, d, 10, 0, 0)));
        assert!(ms.contains(at(y, m, d, 10, 0, 0) + chrono::Duration::milliseconds(500)));
    }

    #[test]
    fn the_reference_excluded_periods_test_in_utc() {
        let (y, m, d) = THU;
        let now = at(y, m, d, 14, 1, 30);
        let two = parse_excluded_periods(&["09:13:17-11:15:18", "14:01:20-16:00:00"]).unwrap();
        assert!(is_excluded(&two, now));
        assert!(!is_excluded(&two, now - chrono::Duration::seconds(20))); // 14:01:10
        assert!(is_excluded(&two, now - chrono::Duration::hours(4))); // 10:01:30

        let hours = [period("* * 14-16 * * ?")];
        assert!(is_excluded(&hours, now));
        assert!(!is_excluded(&hours, now - chrono::Duration::seconds(100))); // 13:59:50

        // Mondays and Thursdays, 14:01:20-16:00:00.
        let mon_thu = [period("* * * ? * 2,5 && 14:01:20-16:00:00")];
        assert!(is_excluded(&mon_thu, now));
        assert!(!is_excluded(&mon_thu, now - chrono::Duration::days(1))); // Wednesday
        assert!(is_excluded(&mon_thu, now - chrono::Duration::days(3))); // Monday
        assert!(!is_excluded(&mon_thu, at(y, m, d, 16, 0, 1)));
        assert!(!is_excluded(&mon_thu, at(y, m, d, 14, 1, 19)));
        // The order of the two parts does not matter.
        assert!(is_excluded(&[period("14:01:20-16:00:00&&* * * ? * MON,THU")], now));
    }

    #[test]
    fn invalid_entries_get_the_reference_messages() {
        let neither = |e: &str| ExcludedPeriodError::NeitherDailyNorCron {
            expression: e.to_owned(),
        };
        let same = |e: &str| ExcludedPeriodError::SameKindTwice {
            expression: e.to_owned(),
        };
        for e in [
            "09:13:17-08:15:18",
            "09:13:17-25:15:18",
            "18:01:20-16:00:00",
            "* * * ? * 2,5555",
            "10:00-10:00",
        ] {
            assert_eq!(ExcludedPeriod::parse(e), Err(neither(e)), "{e}");
        }
        for e in [
            "09:13:17-11:15:18 && 12:01:20-16:00:00",
            "* * * ? * 2,5 && * * 11-13 * * ?",
        ] {
            assert_eq!(ExcludedPeriod::parse(e), Err(same(e)), "{e}");
        }
        let e = "* * * ? * 2,5 && 18:01:20-16:00:00";
        assert_eq!(ExcludedPeriod::parse(e), Err(neither(e)));
        let e = "10:00-11:00 && * * * ? * 2 && 12:00-13:00";
        assert_eq!(
            ExcludedPeriod::parse(e),
            Err(ExcludedPeriodError::TooManyParts {
                expression: e.to_owned()
            })
        );
        assert_eq!(
            ExcludedPeriod::parse("09:13:17-08:15:18").unwrap_err().to_string(),
            "Invalid value 09:13:17-08:15:18 in the autoscaler config job.autoscaler.excluded.periods, the value is \
             neither a valid daily expression nor a valid cron expression"
        );
        for e in [
            "",
            "garbage",
            "10:00 - 11:00",
            "10-11",
            "10:00:00:00:00-11:00",
            "-10:00",
            "&&10:00-11:00",
        ] {
            assert!(ExcludedPeriod::parse(e).is_err(), "{e:?} should be rejected");
        }
        assert_eq!(
            parse_excluded_periods(&["10:00-11:00", "bad"])
                .unwrap_err()
                .expression(),
            "bad"
        );
    }

    #[test]
    fn split_quirks_follow_java() {
        // A trailing "&&" or "-" leaves an empty last piece that String.split drops.
        assert!(period("10:00-11:00&&").contains(at(2024, 1, 1, 10, 30, 0)));
        assert!(period("10:00-11:00-").contains(at(2024, 1, 1, 10, 30, 0)));
        // A bare "&&" has no part, so every instant is excluded, as in the reference.
        assert!(period("&&").contains(at(2024, 1, 1, 0, 0, 0)));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn instant() -> impl Strategy<Value = DateTime<Utc>> {
            // 2000-01-01 .. 2100-01-01, millisecond resolution.
            (946_684_800_000i64..4_102_444_800_000i64).prop_map(|ms| DateTime::from_timestamp_millis(ms).unwrap())
        }

        proptest! {
            #[test]
            fn a_daily_range_contains_exactly_its_times_of_day(
                a in 0u32..86_400, b in 0u32..86_400, now in instant()
            ) {
                prop_assume!(a != b);
                let (start, end) = (a.min(b), a.max(b));
                let hms = |t: u32| format!("{}:{}:{}", t / 3600, t / 60 % 60, t % 60);
                let p = period(&format!("{}-{}", hms(start), hms(end)));
                let tod_ms = now.num_seconds_from_midnight() * 1000 + now.timestamp_subsec_millis();
                prop_assert_eq!(p.contains(now), start * 1000 <= tod_ms && tod_ms <= end * 1000);
            }
        }
    }
}
