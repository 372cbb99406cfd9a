//! Flink's duration syntax (`TimeUtils.parseDuration`, the parser behind every `Duration`-typed
//! option): an ISO-8601 duration such as `PT5M`, or `<integer>[ ]<unit>` with a case-insensitive
//! unit label; a bare integer is milliseconds.
//!
//! ```
//! use autoscaler_core::config::parse_duration;
//! use std::time::Duration;
//! assert_eq!(parse_duration("5 min"), Ok(Duration::from_secs(300)));
//! assert_eq!(parse_duration("PT1H30M"), Ok(Duration::from_secs(5400)));
//! assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
//! assert!(parse_duration("5 mins").is_err());
//! ```

use super::syntax::java_trim;
use std::time::Duration;

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The unit labels Flink's `TimeUtils` recognises, with their length in nanoseconds. Minutes take
/// `m`, `min` and `minute(s)` but not `mins`; `µs` is the micro sign U+00B5.
const UNIT_LABELS: &[(&str, u128)] = &[
    ("d", 86_400 * NANOS_PER_SECOND),
    ("day", 86_400 * NANOS_PER_SECOND),
    ("days", 86_400 * NANOS_PER_SECOND),
    ("h", 3_600 * NANOS_PER_SECOND),
    ("hour", 3_600 * NANOS_PER_SECOND),
    ("hours", 3_600 * NANOS_PER_SECOND),
    ("m", 60 * NANOS_PER_SECOND),
    ("min", 60 * NANOS_PER_SECOND),
    ("minute", 60 * NANOS_PER_SECOND),
    ("minutes", 60 * NANOS_PER_SECOND),
    ("s", NANOS_PER_SECOND),
    ("sec", NANOS_PER_SECOND),
    ("secs", NANOS_PER_SECOND),
    ("second", NANOS_PER_SECOND),
    ("seconds", NANOS_PER_SECOND),
    ("ms", 1_000_000),
    ("milli", 1_000_000),
    ("millis", 1_000_000),
    ("millisecond", 1_000_000),
    ("milliseconds", 1_000_000),
    ("\u{b5}s", 1_000),
    ("micro", 1_000),
    ("micros", 1_000),
    ("microsecond", 1_000),
    ("microseconds", 1_000),
    ("ns", 1),
    ("nano", 1),
    ("nanos", 1),
    ("nanosecond", 1),
    ("nanoseconds", 1),
];

/// Parses a Flink duration: first as ISO-8601 (`PT5M`, `P1DT2H`, `PT0.5S`, case-insensitive),
/// else as `<integer>[ ]<unit>` where the unit is one of `d day days h hour hours m min minute
/// minutes s sec secs second seconds ms milli millis millisecond milliseconds µs micro micros
/// microsecond microseconds ns nano nanos nanosecond nanoseconds` (case-insensitive) and no unit
/// means milliseconds. Surrounding whitespace is ignored, as Java's `String.trim` does.
///
/// The reference stores a Java `Duration` (signed seconds); a result whose seconds exceed
/// `i64::MAX` is an overflow error there and here. A negative ISO-8601 duration (`-PT5M`) parses
/// in the reference but cannot be a [`Duration`]; it is rejected with an explaining error.
///
/// # Errors
/// A message naming the text and what is wrong with it.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = java_trim(text);
    if trimmed.is_empty() {
        return Err(format!("{text:?} is an empty or whitespace-only duration"));
    }
    // TimeUtils tries java.time.Duration.parse first and falls back to the Flink syntax.
    match parse_iso8601(trimmed) {
        Some(Ok(d)) => return Ok(d),
        Some(Err(e)) => return Err(format!("{text:?}: {e}")),
        None => {}
    }
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (number, rest) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(format!("{text:?} does not start with a number"));
    }
    let label = java_trim(rest).to_lowercase();
    let unit_nanos = if label.is_empty() {
        1_000_000
    } else {
        UNIT_LABELS
            .iter()
            .find(|(l, _)| *l == label)
            .map(|&(_, n)| n)
            .ok_or_else(|| {
                format!(
                    "{text:?}: time unit {label:?} is not one of d, h, m/min/minute, s/sec/second, \
                 ms/milli/millisecond, µs/micro/microsecond, ns/nano/nanosecond (or their plurals)"
                )
            })?
    };
    let overflow = || format!("{text:?} cannot be represented as a duration (numeric overflow)");
    let value: u128 = number.parse().map_err(|_| overflow())?;
    let nanos = value.checked_mul(unit_nanos).ok_or_else(overflow)?;
    duration_from_nanos(nanos).ok_or_else(overflow)
}

/// `nanos` as a [`Duration`] if its whole seconds fit a Java `long`.
fn duration_from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / NANOS_PER_SECOND)
        .ok()
        .filter(|&s| i64::try_from(s).is_ok())?;
    let sub = u32::try_from(nanos % NANOS_PER_SECOND).ok()?;
    Some(Duration::new(secs, sub))
}

/// Java's `Duration.parse`: `[+-]P[nD][T[nH][nM][n[.fffffffff]S]]`, each number optionally signed,
/// letters case-insensitive, at least one section, and a `T` must be followed by a time section.
/// `None` when the text does not have that shape (the caller then tries the Flink syntax);
/// `Some(Err)` when it does but the value overflows or is negative.
fn parse_iso8601(text: &str) -> Option<Result<Duration, String>> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negate = match bytes.first() {
        Some(b'-') => {
            pos += 1;
            true
        }
        Some(b'+') => {
            pos += 1;
            false
        }
        _ => false,
    };
    if !matches!(bytes.get(pos), Some(b'P' | b'p')) {
        return None;
    }
    pos += 1;

    // A signed integer followed by one of `suffixes`; returns (value text, fraction, suffix).
    struct Section<'t> {
        number: &'t str,
        fraction: Option<&'t str>,
        unit: u8,
    }
    let read_section = |pos: &mut usize, allow_fraction: bool| -> Option<Section<'_>> {
        let start = *pos;
        let mut i = start;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let digits_start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == digits_start {
            return None;
        }
        let number = &text[start..i];
        let mut fraction = None;
        if allow_fraction && matches!(bytes.get(i), Some(b'.' | b',')) {
            let f_start = i + 1;
            let mut j = f_start;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) && j - f_start < 9 {
                j += 1;
            }
            if !matches!(bytes.get(j), Some(b'S' | b's')) {
                return None;
            }
            fraction = Some(&text[f_start..j]);
            i = j;
        }
        let unit = bytes.get(i)?.to_ascii_uppercase();
        *pos = i + 1;
        Some(Section { number, fraction, unit })
    };

    let mut days = None;
    let mut hours = None;
    let mut minutes = None;
    let mut seconds = None;
    // Day section.
    let mut probe = pos;
    if let Some(s) = read_section(&mut probe, false)
        && s.unit == b'D'
    {
        days = Some(s.number);
        pos = probe;
    }
    if matches!(bytes.get(pos), Some(b'T' | b't')) {
        pos += 1;
        let mut any_time = false;
        for wanted in [b'H', b'M', b'S'] {
            let mut probe = pos;
            if let Some(s) = read_section(&mut probe, wanted == b'S')
                && s.unit == wanted
                && (s.fraction.is_none() || wanted == b'S')
            {
                match wanted {
                    b'H' => hours = Some(s.number),
                    b'M' => minutes = Some(s.number),
                    _ => seconds = Some((s.number, s.fraction)),
                }
                pos = probe;
                any_time = true;
            }
        }
        if !any_time {
            return None;
        }
    }
    if pos != bytes.len() || (days.is_none() && hours.is_none() && minutes.is_none() && seconds.is_none()) {
        return None;
    }

    let overflow = || "ISO-8601 duration overflows".to_owned();
    let part = |n: Option<&str>, mult: i128| -> Result<i128, String> {
        match n {
            None => Ok(0),
            Some(n) => {
                // Each section is a Java long before it is scaled to seconds.
                let v: i64 = n.trim_start_matches('+').parse().map_err(|_| overflow())?;
                let scaled = i128::from(v) * mult;
                if i64::try_from(scaled).is_err() {
                    return Err(overflow());
                }
                Ok(scaled)
            }
        }
    };
    let result = (|| -> Result<Duration, String> {
        let whole = part(days, 86_400)? + part(hours, 3_600)? + part(minutes, 60)?;
        let (sec_text, frac_text) = seconds.unwrap_or(("0", None));
        let secs = part(Some(sec_text), 1)?;
        let mut nanos: i128 = match frac_text {
            Some(f) if !f.is_empty() => {
                let padded = format!("{f:0<9}");
                padded.parse::<i128>().map_err(|_| overflow())?
            }
            _ => 0,
        };
        if sec_text.starts_with('-') {
            nanos = -nanos;
        }
        let mut total = (whole + secs) * 1_000_000_000 + nanos;
        if negate {
            total = -total;
        }
        if total < 0 {
            return Err("negative durations are not supported".to_owned());
        }
        let total = u128::try_from(total).map_err(|_| overflow())?;
        duration_from_nanos(total).ok_or_else(overflow)
    })();
    Some(result)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
    }

    #[test]
    fn every_unit_label_with_and_without_space() {
        assert_eq!(ok("30 s"), Duration::from_secs(30));
        assert_eq!(ok("5min"), Duration::from_secs(300));
        assert_eq!(ok("1 h"), Duration::from_secs(3600));
        assert_eq!(ok("90 d"), Duration::from_secs(90 * 86_400));
        assert_eq!(ok("2 days"), Duration::from_secs(2 * 86_400));
        assert_eq!(ok("1 day"), Duration::from_secs(86_400));
        assert_eq!(ok("3 hours"), Duration::from_secs(3 * 3600));
        assert_eq!(ok("10 m"), Duration::from_secs(600));
        assert_eq!(ok("1 minute"), Duration::from_secs(60));
        assert_eq!(ok("15 minutes"), Duration::from_secs(900));
        assert_eq!(ok("7 sec"), Duration::from_secs(7));
        assert_eq!(ok("7 secs"), Duration::from_secs(7));
        assert_eq!(ok("1 second"), Duration::from_secs(1));
        assert_eq!(ok("2 seconds"), Duration::from_secs(2));
        assert_eq!(ok("5 ms"), Duration::from_millis(5));
        assert_eq!(ok("5 milli"), Duration::from_millis(5));
        assert_eq!(ok("5 millis"), Duration::from_millis(5));
        assert_eq!(ok("5 millisecond"), Duration::from_millis(5));
        assert_eq!(ok("5 milliseconds"), Duration::from_millis(5));
        assert_eq!(ok("5 µs"), Duration::from_micros(5));
        assert_eq!(ok("5 micro"), Duration::from_micros(5));
        assert_eq!(ok("5 micros"), Duration::from_micros(5));
        assert_eq!(ok("5 microsecond"), Duration::from_micros(5));
        assert_eq!(ok("5 microseconds"), Duration::from_micros(5));
        assert_eq!(ok("5 ns"), Duration::from_nanos(5));
        assert_eq!(ok("5 nano"), Duration::from_nanos(5));
        assert_eq!(ok("5 nanos"), Duration::from_nanos(5));
        assert_eq!(ok("5 nanosecond"), Duration::from_nanos(5));
        assert_eq!(ok("5 nanoseconds"), Duration::from_nanos(5));
    }

    #[test]
    fn units_are_case_insensitive_and_whitespace_is_trimmed() {
        assert_eq!(ok("5 MIN"), Duration::from_secs(300));
        assert_eq!(ok("5 Min"), Duration::from_secs(300));
        assert_eq!(ok("1H"), Duration::from_secs(3600));
        assert_eq!(ok("  10 s  "), Duration::from_secs(10));
        assert_eq!(ok("10   s"), Duration::from_secs(10));
        assert_eq!(ok("\t3 MS\n"), Duration::from_millis(3));
    }

    #[test]
    fn a_bare_number_is_milliseconds() {
        assert_eq!(ok("1024"), Duration::from_millis(1024));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("007"), Duration::from_millis(7));
    }

    #[test]
    fn iso8601_durations_are_accepted() {
        assert_eq!(ok("PT5M"), Duration::from_secs(300));
        assert_eq!(ok("pt5m"), Duration::from_secs(300));
        assert_eq!(ok("PT1H30M"), Duration::from_secs(5400));
        assert_eq!(ok("P1D"), Duration::from_secs(86_400));
        assert_eq!(ok("P1DT2H"), Duration::from_secs(93_600));
        assert_eq!(ok("PT0.5S"), Duration::from_millis(500));
        assert_eq!(ok("PT1,25S"), Duration::from_millis(1250));
        assert_eq!(ok("PT10S"), Duration::from_secs(10));
        assert_eq!(ok("+PT10S"), Duration::from_secs(10));
        // Signed sections add up: 1 h - 30 min.
        assert_eq!(ok("PT1H-30M"), Duration::from_secs(1800));
        // `-PT-5M` is minus minus five minutes.
        assert_eq!(ok("-PT-5M"), Duration::from_secs(300));
        assert_eq!(ok(" PT5M "), Duration::from_secs(300));
    }

    #[test]
    fn malformed_iso8601_is_rejected() {
        for text in [
            "P",
            "PT",
            "P1DT",
            "PT5",
            "PT1.5M",
            "P1H",
            "PT5M3H",
            "PT.5S",
            "PT1.1234567891S",
            "P-D",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} should not parse");
        }
        let negative = parse_duration("-PT5M").unwrap_err();
        assert!(negative.contains("negative"), "{negative}");
        assert!(parse_duration("PT-1S").is_err());
    }

    #[test]
    fn forms_flink_rejects_are_rejected() {
        for text in [
            "5 mins", "5 us", "1.5 h", "", "   ", "h", "-5 s", "+5 s", "5 s s", "5s5", "five s", "5 hr",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} should not parse");
        }
        let err = parse_duration("5 mins").unwrap_err();
        assert!(err.contains("\"5 mins\"") && err.contains("mins"), "{err}");
    }

    #[test]
    fn overflow_is_an_error_not_a_wraparound() {
        // i64::MAX milliseconds fits (9.2e15 s); i64::MAX days does not fit a Java long of seconds.
        assert_eq!(
            ok("9223372036854775807"),
            Duration::from_millis(9_223_372_036_854_775_807)
        );
        assert!(parse_duration("9223372036854775807 d").is_err());
        assert!(parse_duration("99999999999999999999999999999999999999999 ns").is_err());
        // i64::MAX seconds is the largest representable value, one more second overflows.
        assert_eq!(ok("9223372036854775807 s"), Duration::from_secs(i64::MAX as u64));
        assert!(parse_duration("9223372036854775808 s").is_err());
        assert!(parse_duration("PT9223372036854775807H").is_err());
    }

    proptest! {
        #[test]
        fn formatted_durations_round_trip(n in 0u64..=1_000_000_000_000u64, unit in 0usize..3) {
            let (text, expected) = match unit {
                0 => (format!("{n} ms"), Duration::from_millis(n)),
                1 => (format!("{n} s"), Duration::from_secs(n)),
                _ => (format!("{n} min"), Duration::from_secs(n * 60)),
            };
            prop_assert_eq!(parse_duration(&text), Ok(expected));
        }

        #[test]
        fn any_whole_millisecond_duration_round_trips(ms in 0u64..=u64::MAX / 2_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format!("{} ms", d.as_millis())), Ok(d));
            prop_assert_eq!(parse_duration(&format!("{}", d.as_millis())), Ok(d));
            if ms % 1000 == 0 {
                prop_assert_eq!(parse_duration(&format!("{} s", d.as_secs())), Ok(d));
            }
            if ms % 60_000 == 0 {
                prop_assert_eq!(parse_duration(&format!("{} min", d.as_secs() / 60)), Ok(d));
            }
        }
    }
}
