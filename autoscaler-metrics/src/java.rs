//! Java semantics that the reference's arithmetic and messages depend on, one definition each:
//! `Math.max`/`Math.min` ([`max`], [`min`]: NaN propagates, −0.0 is below +0.0), `Math.round`
//! ([`round`]: ties towards +∞), `BigDecimal.setScale` on the shortest decimal ([`round_half_up`],
//! [`round_ceiling`]), `Double.toString` ([`double_to_string`]), `String.format("%.2f")`
//! ([`format_2f`]), `List.toString` ([`list_to_string`]) and `String.hashCode` ([`string_hash`]).
//!
//! Rust's own `f64::max`/`f64::min` drop a NaN operand and `f64::round` rounds ties away from
//! zero, so the reference's numbers (and its event messages, byte for byte) need these.

use std::fmt::Display;

/// Java `Math.max(a, b)`: NaN if either is NaN, and +0.0 above −0.0.
///
/// ```
/// use autoscaler_metrics::java;
/// assert!(java::max(0.0, f64::NAN).is_nan());
/// assert!(java::max(-0.0, 0.0).is_sign_positive());
/// ```
pub fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        // Only differs from `a` for (−0.0, +0.0): prefer the positive zero.
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Java `Math.min(a, b)`: NaN if either is NaN, and −0.0 below +0.0.
///
/// ```
/// use autoscaler_metrics::java;
/// assert!(java::min(f64::NAN, 0.0).is_nan());
/// assert!(java::min(0.0, -0.0).is_sign_negative());
/// ```
pub fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

/// Java `Math.round(double)` widened back to `double`: the closest integer with ties towards +∞,
/// NaN as 0, and saturation at the `long` range (so +∞ becomes 2^63); never −0.0 (a `long` has
/// no negative zero).
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::round(2.5), 3.0);
/// assert_eq!(java::round(-2.5), -2.0);
/// assert_eq!(java::round(f64::NAN), 0.0);
/// ```
pub fn round(x: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    let floor = x.floor();
    // `x - floor` is exact for every double with a fractional part (unlike `x + 0.5`, which
    // rounds 0.49999999999999994 up to 1).
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    // `+ 0.0` turns −0.0 into 0.0.
    (rounded + 0.0).clamp(i64::MIN as f64, i64::MAX as f64)
}

/// `BigDecimal.valueOf(value).setScale(decimals, RoundingMode.HALF_UP).doubleValue()`: `value`
/// rounded to `decimals` places, a tie away from zero, deciding ties on the shortest decimal
/// representation of the double (so 2.675, stored as 2.67499999..., still rounds to 2.68).
/// Non-finite values are returned unchanged.
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::round_half_up(2.675, 2), 2.68);
/// assert_eq!(java::round_half_up(-1.2345, 3), -1.235);
/// ```
#[inline]
pub fn round_half_up(value: f64, decimals: u32) -> f64 {
    // A whole number (or a non-finite value) rounds to itself at any number of places; many
    // evaluated metrics are whole (parallelisms, partitions, rounded thresholds).
    if !value.is_finite() || value as i64 as f64 == value {
        return value;
    }
    if let Some(rounded) = round_half_up_fast(value, decimals) {
        return rounded;
    }
    round_half_up_by_digits(value, decimals)
}

/// Allocation-free [`round_half_up`] for the common case: `|value| * 10^decimals` is computed in
/// binary, and when it is clearly away from a `.5` tie its rounding is the same as that of the
/// shortest decimal representation (both lie within a few ulps of the exact product). Returns `None`
/// near a tie or for magnitudes where the product is not exact enough, leaving those to the digit path.
fn round_half_up_fast(value: f64, decimals: u32) -> Option<f64> {
    let (units, scale) = half_up_units(value, decimals)?;
    // `units` is an exact integer, so this division is the correctly rounded `units e-decimals`.
    Some((units / scale).copysign(value))
}

/// The fast path's `(units, 10^decimals)`: `|value|` rounded half up to a whole number of
/// `10^-decimals` units, when that is decided without the digits (see [`round_half_up_fast`]).
fn half_up_units(value: f64, decimals: u32) -> Option<(f64, f64)> {
    // 10^d is exact in binary up to d = 22; keep the scaled value below 2^52 so that its fraction is exact.
    const MAX_SCALED: f64 = 4_503_599_627_370_496.0;
    const POWERS_OF_TEN: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let scale = *POWERS_OF_TEN.get(decimals as usize)?;
    let scaled = value.abs() * scale;
    if scaled >= MAX_SCALED {
        return None;
    }
    // `scaled` is non-negative and below 2^52: truncating through an integer is its exact floor
    // (and no libm call; a signed integer converts in one instruction each way).
    let floor = scaled as i64 as f64;
    let fraction = scaled - floor;
    // The binary product and the shortest decimal's product differ by at most ~3 ulps of `scaled`.
    let margin = 16.0 * f64::EPSILON * scaled.max(1.0);
    if (fraction - 0.5).abs() <= margin {
        return resolve_tie(value.abs(), floor, scale).map(|units| (units, scale));
    }
    Some((if fraction > 0.5 { floor + 1.0 } else { floor }, scale))
}

/// Rounds `magnitude` (non-negative, `floor` whole `1/scale` units plus about half a unit) half
/// up on its shortest decimal, without the digits, where the doubles there are dense enough.
///
/// `tie`, the double nearest to the decimal tie `(floor + 0.5) / scale`, is computed exactly
/// rounded from exact integers. Below 2^48 units a unit spans more than 16 ulps, so no decimal
/// with fewer digits than the tie reads back as `tie`: the shortest decimal of `tie` is the tie
/// itself (rounded up, half up), and that of any other double lies on the same side of the tie as
/// the double does.
fn resolve_tie(magnitude: f64, floor: f64, scale: f64) -> Option<f64> {
    const MAX_UNITS: f64 = 281_474_976_710_656.0; // 2^48
    if floor >= MAX_UNITS {
        return None;
    }
    let tie = (2.0 * floor + 1.0) / (2.0 * scale);
    Some(if magnitude >= tie { floor + 1.0 } else { floor })
}

/// [`round_half_up`] on the decimal digits of the shortest representation.
#[cold]
#[inline(never)]
fn round_half_up_by_digits(value: f64, decimals: u32) -> f64 {
    // Rust's `Display` for f64 prints the shortest representation that round-trips, like Java's
    // `Double.toString` digits; rounding the decimal string avoids binary-representation ties.
    let repr = format!("{:e}", value.abs());
    let (mantissa, exp) = match repr.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (repr.as_str(), 0),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect();
    // value = 0.d1d2d3... x 10^(exp+1)
    let point = exp + 1; // number of digits before the decimal point
    let keep = point + decimals as i32; // number of leading digits to keep
    if keep < 0 {
        return 0.0_f64.copysign(value);
    }
    let keep = keep as usize;
    let mut kept: Vec<u8> = digits.iter().copied().take(keep).collect();
    while kept.len() < keep {
        kept.push(0);
    }
    let round_up = digits.get(keep).is_some_and(|d| *d >= 5);
    if round_up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let mut int: u128 = 0;
    for d in &kept {
        int = int.saturating_mul(10).saturating_add(u128::from(*d));
    }
    let text = format!("{int}e-{decimals}");
    let magnitude: f64 = text.parse().unwrap_or(value.abs());
    magnitude.copysign(value)
}

/// `BigDecimal.valueOf(value).setScale(decimals, RoundingMode.CEILING).doubleValue()`: `value`
/// rounded towards +∞ at `decimals` places, deciding on its shortest decimal representation (so
/// 0.71 stays 0.71 although the double is slightly above it). Non-finite values are returned
/// unchanged.
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::round_ceiling(0.833_333, 2), 0.84);
/// assert_eq!(java::round_ceiling(-0.719, 2), -0.71);
/// ```
pub fn round_ceiling(value: f64, decimals: u32) -> f64 {
    if !value.is_finite() {
        return value;
    }
    let decimals = decimals as usize;
    // `Display` prints the shortest round-tripping digits in plain notation.
    let text = format!("{}", value.abs());
    let (int_part, frac_part) = text.split_once('.').unwrap_or((text.as_str(), ""));
    if frac_part.len() <= decimals {
        return value;
    }
    let kept = &frac_part[..decimals];
    let dropped_nonzero = frac_part[decimals..].bytes().any(|b| b != b'0');
    let truncated: f64 = format!("{int_part}.{kept}").parse().unwrap_or(value.abs());
    if !dropped_nonzero {
        return truncated.copysign(value);
    }
    if value > 0.0 {
        // Add one unit in the last kept place, then re-round through text to avoid binary drift.
        let step = 10f64.powi(-(decimals as i32));
        let bumped = format!("{:.*}", decimals, truncated + step);
        bumped.parse().unwrap_or(truncated + step)
    } else {
        // Towards +∞ means truncation for negative values.
        -truncated
    }
}

/// Java `Double.toString`: `NaN`, `Infinity`, `-Infinity`, `0.0`, `-0.0`; plain decimal notation
/// with at least one fractional digit for magnitudes in [10^-3, 10^7); otherwise `d.dddE<exp>`.
/// The digits are the shortest that round-trip (as JDK 19+ prints them).
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::double_to_string(0.7), "0.7");
/// assert_eq!(java::double_to_string(100000.0), "100000.0");
/// assert_eq!(java::double_to_string(1.0e7), "1.0E7");
/// assert_eq!(java::double_to_string(1.0e-4), "1.0E-4");
/// ```
pub fn double_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // `{:e}` gives the shortest round-tripping digits as `d.ddde<exp>`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (1e-3..1e7).contains(&x.abs()) {
        let point = exponent + 1; // digits before the decimal point
        let (int_part, frac_part) = if point <= 0 {
            (
                "0".to_owned(),
                format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)),
            )
        } else {
            let point = point as usize;
            if digits.len() <= point {
                (format!("{digits:0<point$}"), String::new())
            } else {
                (digits[..point].to_owned(), digits[point..].to_owned())
            }
        };
        let frac_part = if frac_part.is_empty() {
            "0".to_owned()
        } else {
            frac_part
        };
        format!("{sign}{int_part}.{frac_part}")
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{sign}{first}.{rest}E{exponent}")
    }
}

/// Java `String.format("%.2f", value)` (root locale): [`round_half_up`] to 2 places with two
/// fraction digits; `NaN`, `Infinity`, `-Infinity` for non-finite values.
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::format_2f(2.675), "2.68");
/// assert_eq!(java::format_2f(3.0), "3.00");
/// ```
pub fn format_2f(value: f64) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_2f(&mut out, value);
    out
}

/// [`format_2f`] written to `out`, without an intermediate string.
///
/// ```
/// use autoscaler_metrics::java;
/// let mut out = String::from("rate ");
/// java::write_2f(&mut out, 0.125).unwrap();
/// assert_eq!(out, "rate 0.13");
/// ```
pub fn write_2f<W: std::fmt::Write>(out: &mut W, value: f64) -> std::fmt::Result {
    if !value.is_finite() {
        return out.write_str(&double_to_string(value));
    }
    match half_up_units(value, 2) {
        // Hundredths below 2^52: printing them as an integer is what `{:.2}` prints for the
        // double nearest to them (its error is far below 0.005), without the float formatter.
        Some((units, _)) => out.write_str(hundredths(&mut [0; 24], units as u64, value.is_sign_negative())),
        None => write!(out, "{:.2}", round_half_up(value, 2)),
    }
}

/// `units` hundredths as `[-]integer.ff` in `buf` (`units` below 2^52 has at most 16 digits, so
/// sign, digits and point fit), without the formatting machinery.
fn hundredths(buf: &mut [u8; 24], mut units: u64, negative: bool) -> &str {
    let mut at = buf.len();
    let mut digits = 0;
    // At least three digits: two fraction digits and the integer part's `0`.
    while units > 0 || digits < 3 {
        if digits == 2 {
            at -= 1;
            buf[at] = b'.';
        }
        at -= 1;
        buf[at] = b'0' + (units % 10) as u8;
        units /= 10;
        digits += 1;
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    // Only ASCII digits, `.` and `-` were written.
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

/// Java `List.toString` (`AbstractCollection.toString`): `[a, b, c]`, `[]` when empty.
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::list_to_string(&["a", "b"]), "[a, b]");
/// ```
pub fn list_to_string<T: Display>(items: &[T]) -> String {
    let inner: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", inner.join(", "))
}

/// Java `String.hashCode`: `s[0]·31^(n−1) + … + s[n−1]` over the UTF-16 code units (each an
/// unsigned `char`), in wrapping 32-bit arithmetic.
///
/// ```
/// use autoscaler_metrics::java;
/// assert_eq!(java::string_hash("hello"), 99_162_322);
/// ```
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_and_min_propagate_nan_and_order_the_zeros() {
        for (a, b) in [
            (f64::NAN, 1.0),
            (1.0, f64::NAN),
            (f64::NAN, f64::NAN),
            (f64::NAN, f64::INFINITY),
        ] {
            assert!(max(a, b).is_nan(), "max({a}, {b})");
            assert!(min(a, b).is_nan(), "min({a}, {b})");
        }
        // Either argument order: max picks +0.0, min picks -0.0.
        for (a, b) in [(0.0, -0.0), (-0.0, 0.0)] {
            assert!(max(a, b) == 0.0 && max(a, b).is_sign_positive(), "max({a:?}, {b:?})");
            assert!(min(a, b) == 0.0 && min(a, b).is_sign_negative(), "min({a:?}, {b:?})");
        }
        assert!(max(-0.0, -0.0).is_sign_negative());
        assert!(min(0.0, 0.0).is_sign_positive());
        assert_eq!(max(0.0, -3.0), 0.0);
        assert_eq!(max(-1.5, -2.5), -1.5);
        assert_eq!(min(1.0, 0.9), 0.9);
        assert_eq!(min(f64::NEG_INFINITY, -1e308), f64::NEG_INFINITY);
        // The reference's clamp of a utilization: Math.min(1, Math.max(0, u)).
        assert_eq!(min(1.0, max(0.0, 1.7)), 1.0);
        assert!(min(1.0, max(0.0, -0.0)).is_sign_positive());
    }

    #[test]
    fn round_is_half_up_towards_positive_infinity() {
        assert_eq!(round(2.5), 3.0);
        assert_eq!(round(-2.5), -2.0);
        assert_eq!(round(2.4999), 2.0);
        assert_eq!(round(-2.5001), -3.0);
        assert_eq!(round(1127.78), 1128.0);
        // The largest double below 0.5: floor(x + 0.5) would give 1.
        assert_eq!(round(0.499_999_999_999_999_94), 0.0);
        // 2^52 + 1 has no fraction; adding 0.5 would round it to 2^52 + 2.
        assert_eq!(round(4_503_599_627_370_497.0), 4_503_599_627_370_497.0);
        assert_eq!(round(f64::NAN), 0.0);
        // A long has no -0.0: -0.5 and -0.2 both round to +0.
        assert!(round(-0.5) == 0.0 && round(-0.5).is_sign_positive());
        assert!(round(-0.2).is_sign_positive());
        assert!(round(-0.0).is_sign_positive());
        // Saturation at the long range, as the (long) conversion does.
        assert_eq!(round(f64::INFINITY), 9.223_372_036_854_776e18);
        assert_eq!(round(f64::NEG_INFINITY), -9.223_372_036_854_776e18);
        assert_eq!(round(1e300), i64::MAX as f64);
    }

    #[test]
    fn round_half_up_decides_on_the_shortest_decimal() {
        assert_eq!(round_half_up(0.125, 2), 0.13);
        // 2.675 is 2.67499999999999982236431605997495353221893310546875 in binary.
        assert_eq!(round_half_up(2.675, 2), 2.68);
        assert_eq!(round_half_up(-2.675, 2), -2.68);
        assert_eq!(round_half_up(9.9995, 3), 10.0);
        assert_eq!(round_half_up(1.2344, 3), 1.234);
        assert_eq!(round_half_up(1e-7, 3), 0.0);
        assert_eq!(round_half_up(1_408_596_540.0, 3), 1_408_596_540.0);
        assert_eq!(round_half_up(f64::INFINITY, 3), f64::INFINITY);
        assert!(round_half_up(f64::NAN, 3).is_nan());
    }

    proptest::proptest! {
        #[test]
        fn fast_rounding_agrees_with_digit_rounding(
            x in proptest::prop_oneof![-1.0e7..1.0e7f64, -1.0..1.0f64, proptest::num::f64::NORMAL],
            decimals in 0u32..7,
        ) {
            if let Some(fast) = round_half_up_fast(x, decimals) {
                proptest::prop_assert_eq!(fast.to_bits(), round_half_up_by_digits(x, decimals).to_bits());
            }
        }

        #[test]
        fn fast_rounding_agrees_near_ties(units in -10_000_000_000i64..10_000_000_000, ulps in -40i64..40) {
            // Values within a few ulps of a 3-decimal tie `units.5 / 1000`.
            let tie = (units as f64 + 0.5) / 1000.0;
            let x = f64::from_bits((tie.to_bits() as i64 + ulps) as u64);
            if let Some(fast) = round_half_up_fast(x, 3) {
                proptest::prop_assert_eq!(fast.to_bits(), round_half_up_by_digits(x, 3).to_bits());
            }
            proptest::prop_assert_eq!(round_half_up(x, 3).to_bits(), round_half_up_by_digits(x, 3).to_bits());
        }

        #[test]
        fn fast_rounding_agrees_near_ties_of_any_scale(
            units in 0i64..281_474_976_710_656,
            ulps in -40i64..40,
            decimals in 0u32..8,
            negative in proptest::bool::ANY,
        ) {
            // Values within a few ulps of the tie `units.5 / 10^decimals`, over the whole range the
            // tie resolution covers, both signs.
            let tie = (2.0 * units as f64 + 1.0) / (2.0 * 10f64.powi(decimals as i32));
            let x = f64::from_bits((tie.to_bits() as i64 + ulps) as u64);
            let x = if negative { -x } else { x };
            if let Some(fast) = round_half_up_fast(x, decimals) {
                proptest::prop_assert_eq!(fast.to_bits(), round_half_up_by_digits(x, decimals).to_bits(), "{:e}", x);
            }
        }

        #[test]
        fn two_places_of_three_place_metrics(thousandths in -100_000_000_000i64..100_000_000_000) {
            // What the scaling report prints: metrics already rounded to 3 places, a tenth of them
            // ties at 2.
            let x = round_half_up(thousandths as f64 / 1000.0, 3);
            proptest::prop_assert_eq!(round_half_up(x, 2).to_bits(), round_half_up_by_digits(x, 2).to_bits(), "{:e}", x);
        }
    }

    #[test]
    fn round_ceiling_rounds_up_on_the_shortest_decimal() {
        assert_eq!(round_ceiling(0.5, 2), 0.5);
        // 0.71 is 0.70999999999999996447... in binary: its shortest decimal needs no rounding.
        assert_eq!(round_ceiling(0.71, 2), 0.71);
        assert_eq!(round_ceiling(0.833_333, 2), 0.84);
        assert_eq!(round_ceiling(0.999, 2), 1.0);
        assert_eq!(round_ceiling(0.001, 2), 0.01);
        assert_eq!(round_ceiling(0.0100, 2), 0.01);
        // Towards +inf: a negative value is truncated.
        assert_eq!(round_ceiling(-0.719, 2), -0.71);
        assert_eq!(round_ceiling(1.0, 2), 1.0);
        assert_eq!(round_ceiling(f64::NEG_INFINITY, 2), f64::NEG_INFINITY);
    }

    #[test]
    fn double_to_string_plain_and_scientific_ranges() {
        for (x, s) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.5, "0.5"),
            (0.7, "0.7"),
            (-2.5, "-2.5"),
            (100.0, "100.0"),
            (0.01, "0.01"),
            (100_000.0, "100000.0"),
            (123.456, "123.456"),
            (0.1 + 0.2, "0.30000000000000004"),
            // The plain range is [1e-3, 1e7): both ends.
            (0.001, "0.001"),
            (0.000_999_9, "9.999E-4"),
            (0.0001, "1.0E-4"),
            (1.5e-5, "1.5E-5"),
            (-1.0e-10, "-1.0E-10"),
            (9_999_999.0, "9999999.0"),
            (9_999_999.5, "9999999.5"),
            (10_000_000.0, "1.0E7"),
            (12_345_678.0, "1.2345678E7"),
            (1.5e10, "1.5E10"),
            (1.0e21, "1.0E21"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(double_to_string(x), s, "{x:e}");
        }
    }

    #[test]
    fn format_2f_rounds_half_up_on_the_shortest_decimal() {
        assert_eq!(format_2f(0.125), "0.13");
        assert_eq!(format_2f(2.675), "2.68");
        assert_eq!(format_2f(10666.385), "10666.39");
        assert_eq!(format_2f(3.0), "3.00");
        assert_eq!(format_2f(-0.004), "-0.00");
        assert_eq!(format_2f(f64::NAN), "NaN");
        assert_eq!(format_2f(f64::INFINITY), "Infinity");
        assert_eq!(format_2f(f64::NEG_INFINITY), "-Infinity");
        // 12.345 is a decimal tie (the digit path rounds it up); 1e13 and -7 take the integer path.
        assert_eq!(format_2f(12.345), "12.35");
        assert_eq!(format_2f(1e13), "10000000000000.00");
        assert_eq!(format_2f(-7.0), "-7.00");
    }

    proptest::proptest! {
        /// The integer rendering of the fast path prints what the float formatter prints for the
        /// rounded value, over magnitudes up to and past the fast path's limit.
        #[test]
        fn format_2f_is_the_float_formatter_on_the_rounded_value(
            mantissa in -1.0f64..1.0,
            exponent in -6i32..17,
        ) {
            let value = mantissa * 10f64.powi(exponent);
            proptest::prop_assert_eq!(format_2f(value), format!("{:.2}", round_half_up(value, 2)));
        }
    }

    #[test]
    fn list_to_string_joins_with_comma_space() {
        assert_eq!(list_to_string::<String>(&[]), "[]");
        assert_eq!(list_to_string(&[1]), "[1]");
        assert_eq!(
            list_to_string(&["* * * ? * 2", "10:00-11:00"]),
            "[* * * ? * 2, 10:00-11:00]"
        );
    }

    #[test]
    fn string_hash_matches_java() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        // 'h'·31^4 + 'e'·31^3 + 'l'·31^2 + 'l'·31 + 'o'.
        assert_eq!(string_hash("hello"), 99_162_322);
        // Overflow wraps: Java's "polygenelubricants".hashCode() is Integer.MIN_VALUE.
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
        // UTF-16 code units, unsigned: U+1F600 is 0xD83D 0xDE00 = 55357·31 + 56832.
        assert_eq!(string_hash("\u{1F600}"), 1_772_899);
    }
}
