//! Flink `MemorySize` arithmetic and the two value spellings memory tuning writes: sizes as
//! `MemorySize.toString` prints them and fractions as the reference's `getFraction` produces them.

const KIB: i64 = 1 << 10;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;
const TIB: i64 = 1 << 40;

/// A non-negative finite double as the exact decimal of its shortest representation (what Java's
/// `BigDecimal.valueOf(double)` holds): `(mantissa, scale)` with value `mantissa / 10^scale`.
/// `None` for NaN, infinities, negative values and mantissas beyond `u128`.
fn shortest_decimal(x: f64) -> Option<(u128, u32)> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    // Rust's `Display` of an f64 is the shortest round-tripping decimal, never in exponent form.
    let text = x.to_string();
    let (int_part, frac_part) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let mut mantissa: u128 = 0;
    for digit in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(u128::from(digit.checked_sub(b'0')?))?;
    }
    Some((mantissa, u32::try_from(frac_part.len()).ok()?))
}

/// Flink `MemorySize.multiply(double)`: `floor(bytes × dec(multiplier))` in exact decimal
/// arithmetic, where `dec` is the multiplier's shortest decimal representation (Java
/// `BigDecimal.valueOf`). `None` where Flink throws: a negative or non-finite multiplier, or a
/// product beyond `i64::MAX`.
///
/// ```
/// use autoscaler_core::tuning::multiply;
/// // 0.1f widened to double is 0.10000000149011612: 1 gb × that = 107374184.0000..., floored.
/// assert_eq!(multiply(1 << 30, f64::from(0.1f32)), Some(107_374_184));
/// assert_eq!(multiply(1000, 0.5), Some(500));
/// ```
pub fn multiply(bytes: i64, multiplier: f64) -> Option<i64> {
    let bytes = u128::try_from(bytes).ok()?;
    let (mantissa, scale) = shortest_decimal(multiplier)?;
    let product = bytes.checked_mul(mantissa)?;
    // A product below 2^128 divided by 10^39 or more is 0.
    let quotient = 10u128.checked_pow(scale).map_or(0, |divisor| product / divisor);
    i64::try_from(quotient).ok()
}

/// Flink `MemorySize.toString`: the count in the largest of `kb`, `mb`, `gb` that divides it
/// exactly, else in `bytes`; a count divisible by 1 tb (0 included) is written in `bytes`.
///
/// ```
/// use autoscaler_core::tuning::format_memory_size;
/// assert_eq!(format_memory_size(0), "0 bytes");
/// assert_eq!(format_memory_size(120 << 20), "120 mb");
/// assert_eq!(format_memory_size(20_108_162_027), "20108162027 bytes");
/// assert_eq!(format_memory_size(1 << 40), "1099511627776 bytes");
/// ```
pub fn format_memory_size(bytes: i64) -> String {
    // Flink walks bytes, kb, mb, gb, tb and stops before the first unit that does not divide the
    // count; when every unit divides it, it falls back to bytes.
    if bytes % TIB == 0 {
        return format!("{bytes} bytes");
    }
    let (divisor, unit) = [(GIB, "gb"), (MIB, "mb"), (KIB, "kb")]
        .into_iter()
        .find(|(divisor, _)| bytes % divisor == 0)
        .unwrap_or((1, "bytes"));
    format!("{} {unit}", bytes / divisor)
}

/// The reference's `MemoryTuning.getFraction`: `numerator / denominator` as a double, its
/// shortest decimal rounded up (ceiling) to 3 decimals, printed as Java's `Float.toString`
/// prints that value (no trailing zeros, at least one digit after the point). `None` when the
/// quotient is not a finite non-negative number (the reference throws there).
///
/// ```
/// use autoscaler_core::tuning::format_fraction;
/// // 1 gb / 20108162027 bytes = 0.05339...: rounded up to 0.054.
/// assert_eq!(format_fraction(1 << 30, 20_108_162_027).as_deref(), Some("0.054"));
/// assert_eq!(format_fraction(1, 10).as_deref(), Some("0.1"));
/// assert_eq!(format_fraction(0, 10).as_deref(), Some("0.0"));
/// ```
pub fn format_fraction(numerator: i64, denominator: i64) -> Option<String> {
    let quotient = numerator as f64 / denominator as f64;
    let (mantissa, scale) = shortest_decimal(quotient)?;
    // thousandths = ceil(mantissa × 1000 / 10^scale).
    let thousandths = if scale <= 3 {
        mantissa.checked_mul(10u128.pow(3 - scale))?
    } else {
        match 10u128.checked_pow(scale - 3) {
            Some(divisor) => mantissa.div_ceil(divisor),
            // The value is below 10^-35: any positive value rounds up to one thousandth.
            None => u128::from(mantissa > 0),
        }
    };
    // Every multiple of 0.001 up to well beyond 1 is the shortest representation of the float
    // nearest to it, so Float.toString prints exactly these digits.
    let integer = thousandths / 1000;
    let fraction = format!("{:03}", thousandths % 1000);
    let fraction = fraction.trim_end_matches('0');
    Some(format!(
        "{integer}.{}",
        if fraction.is_empty() { "0" } else { fraction }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiply_uses_the_shortest_decimal_of_the_multiplier() {
        // 0.4f as double = 0.4000000059604645; 30870077440 × 0.4000000059604645
        // = 12348030976 + 30870077440 × 0.0000000059604645 = 12348030976 + 184.0000007 floored:
        // 12348031160 (the managed size of a 30 gb process, see the tuning tests).
        assert_eq!(multiply(30_870_077_440, f64::from(0.4f32)), Some(12_348_031_160));
        // 0.1 exactly (a double literal, not a float): 32212254720 × 0.1 = 3221225472.
        assert_eq!(multiply(32_212_254_720, 0.1), Some(3_221_225_472));
        // Flooring, not rounding: 3 × 0.5 = 1.5 -> 1.
        assert_eq!(multiply(3, 0.5), Some(1));
        // fraction / (1 - fraction) for 0.1f: 0.10000000149011612 / 0.8999999985098839
        // = 0.11111111295076065 (double arithmetic); 1 gb × that = 119304649.086... -> 119304649.
        let inverse = f64::from(0.1f32) / (1.0 - f64::from(0.1f32));
        assert_eq!(inverse.to_string(), "0.11111111295076065");
        assert_eq!(multiply(1 << 30, inverse), Some(119_304_649));
        // A multiplier whose shortest form needs 45 decimals: the product is below 1.
        assert_eq!(multiply(1 << 40, f64::from(f32::from_bits(1))), Some(0));
        assert_eq!(multiply(0, 0.7), Some(0));
        // Where Flink throws.
        assert_eq!(multiply(10, -0.5), None);
        assert_eq!(multiply(10, f64::NAN), None);
        assert_eq!(multiply(i64::MAX, 2.0), None);
        assert_eq!(multiply(-1, 0.5), None);
    }

    #[test]
    fn memory_sizes_use_the_largest_exact_unit_below_tb() {
        assert_eq!(format_memory_size(0), "0 bytes");
        assert_eq!(format_memory_size(1), "1 bytes");
        assert_eq!(format_memory_size(1024), "1 kb");
        // 13760 kb = 14090240 bytes: divisible by 1024 but not by 1 mb.
        assert_eq!(format_memory_size(14_090_240), "13760 kb");
        assert_eq!(format_memory_size(125_829_120), "120 mb");
        assert_eq!(format_memory_size(30 << 30), "30 gb");
        assert_eq!(format_memory_size(1025 << 30), "1025 gb");
        assert_eq!(format_memory_size(322_122_547), "322122547 bytes");
        // Multiples of 1 tb are written in bytes (Flink's fallback), so "tb" never appears.
        assert_eq!(format_memory_size(1 << 40), "1099511627776 bytes");
        assert_eq!(format_memory_size(3 << 40), "3298534883328 bytes");
    }

    #[test]
    fn fractions_round_up_to_three_decimals() {
        // 12348031160 / 18908591083 = 0.65303...: up to 0.654 (ceiling, not half-up).
        assert_eq!(
            format_fraction(12_348_031_160, 18_908_591_083).as_deref(),
            Some("0.654")
        );
        // 0.0002 -> 0.001 (ceiling, never 0.0 for a positive value).
        assert_eq!(format_fraction(2, 10_000).as_deref(), Some("0.001"));
        // Exact thousandths stay as they are; trailing zeros go.
        assert_eq!(format_fraction(1, 20).as_deref(), Some("0.05"));
        assert_eq!(format_fraction(1, 2).as_deref(), Some("0.5"));
        assert_eq!(format_fraction(5, 5).as_deref(), Some("1.0"));
        assert_eq!(format_fraction(0, 5).as_deref(), Some("0.0"));
        // 1/3 = 0.3333333333333333 -> 0.334.
        assert_eq!(format_fraction(1, 3).as_deref(), Some("0.334"));
        // A tiny positive quotient still rounds up to 0.001.
        assert_eq!(format_fraction(1, i64::MAX).as_deref(), Some("0.001"));
        // 0/0 is NaN: the reference's BigDecimal.valueOf throws.
        assert_eq!(format_fraction(0, 0), None);
    }

    #[test]
    fn fraction_digits_are_what_float_to_string_prints() {
        // Java's Float.toString and Rust's f32 Display both print the shortest decimal that
        // identifies the float; for every thousandth the nearest float prints as that thousandth.
        for k in 0..=1000u32 {
            let value = k as f32 / 1000.0;
            let mut shortest = value.to_string();
            if !shortest.contains('.') {
                shortest.push_str(".0");
            }
            assert_eq!(
                format_fraction(i64::from(k), 1000).as_deref(),
                Some(shortest.as_str()),
                "{k}/1000"
            );
        }
    }
}
