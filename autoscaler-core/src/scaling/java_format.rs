//! Java's textual renderings of numbers and lists, needed to reproduce the reference's event
//! messages byte for byte (`String.format("%s", double)`, string concatenation, `List.toString`).

use std::fmt::Display;

/// Renders `value` as Java's `Double.toString` does (shortest round-tripping digits, JDK 19+):
/// plain notation with at least one fractional digit for `1e-3 <= |x| < 1e7`, otherwise
/// `d.dddE<exp>`; `NaN`, `Infinity`, `-Infinity`, `0.0`, `-0.0`.
///
/// ```
/// use autoscaler_core::scaling::java_double_to_string;
/// assert_eq!(java_double_to_string(0.5), "0.5");
/// assert_eq!(java_double_to_string(1.0), "1.0");
/// assert_eq!(java_double_to_string(1.0e-4), "1.0E-4");
/// assert_eq!(java_double_to_string(12_345_678.0), "1.2345678E7");
/// ```
pub fn java_double_to_string(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let sign = if value.is_sign_negative() { "-" } else { "" };
    if value == 0.0 {
        return format!("{sign}0.0");
    }
    // `{:e}` prints the shortest round-tripping digits as `d[.ddd]e<exp>`.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let abs = value.abs();
    if (1e-3..1e7).contains(&abs) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            let mut int_part = digits.chars().take(int_len).collect::<String>();
            while int_part.len() < int_len {
                int_part.push('0');
            }
            let frac: String = digits.chars().skip(int_len).collect();
            let frac = if frac.is_empty() { "0".to_owned() } else { frac };
            format!("{sign}{int_part}.{frac}")
        } else {
            let zeros = "0".repeat((-exponent - 1) as usize);
            format!("{sign}0.{zeros}{digits}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{sign}{first}.{rest}E{exponent}")
    }
}

/// Renders a list as Java's `List.toString`: `[a, b, c]`, `[]` when empty.
///
/// ```
/// use autoscaler_core::scaling::java_list_to_string;
/// assert_eq!(java_list_to_string(&["a", "b"]), "[a, b]");
/// ```
pub fn java_list_to_string<T: Display>(items: &[T]) -> String {
    let inner: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", inner.join(", "))
}

/// Rounds a positive or negative `value` towards +infinity at `decimals` places, deciding on its
/// shortest decimal representation, as `BigDecimal.valueOf(x).setScale(n, RoundingMode.CEILING)`.
pub(crate) fn ceil_decimal(value: f64, decimals: usize) -> f64 {
    if !value.is_finite() {
        return value;
    }
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
        // Towards +infinity means truncation for negative values.
        -truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_to_string_matches_java_for_plain_and_scientific_ranges() {
        assert_eq!(java_double_to_string(0.5), "0.5");
        assert_eq!(java_double_to_string(1.0), "1.0");
        assert_eq!(java_double_to_string(100.0), "100.0");
        assert_eq!(java_double_to_string(0.001), "0.001");
        assert_eq!(java_double_to_string(0.0001), "1.0E-4");
        assert_eq!(java_double_to_string(1.0e-4), "1.0E-4");
        assert_eq!(java_double_to_string(1.5e-5), "1.5E-5");
        assert_eq!(java_double_to_string(9_999_999.0), "9999999.0");
        assert_eq!(java_double_to_string(10_000_000.0), "1.0E7");
        assert_eq!(java_double_to_string(12_345_678.0), "1.2345678E7");
        assert_eq!(java_double_to_string(-2.5), "-2.5");
        assert_eq!(java_double_to_string(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(java_double_to_string(123.456), "123.456");
        assert_eq!(java_double_to_string(0.0), "0.0");
        assert_eq!(java_double_to_string(-0.0), "-0.0");
        assert_eq!(java_double_to_string(f64::NAN), "NaN");
        assert_eq!(java_double_to_string(f64::INFINITY), "Infinity");
        assert_eq!(java_double_to_string(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(java_double_to_string(1.0e21), "1.0E21");
        assert_eq!(java_double_to_string(-1.0e-10), "-1.0E-10");
    }

    #[test]
    fn list_to_string_joins_with_comma_space() {
        assert_eq!(java_list_to_string::<String>(&[]), "[]");
        assert_eq!(
            java_list_to_string(&["* * * ? * 2", "10:00-11:00"]),
            "[* * * ? * 2, 10:00-11:00]"
        );
    }

    #[test]
    fn ceil_decimal_rounds_up_on_shortest_decimal() {
        assert_eq!(ceil_decimal(0.5, 2), 0.5);
        assert_eq!(ceil_decimal(0.71, 2), 0.71);
        assert_eq!(ceil_decimal(0.833_333, 2), 0.84);
        assert_eq!(ceil_decimal(0.999, 2), 1.0);
        assert_eq!(ceil_decimal(0.001, 2), 0.01);
        assert_eq!(ceil_decimal(-0.719, 2), -0.71);
        assert_eq!(ceil_decimal(1.0, 2), 1.0);
    }
}
