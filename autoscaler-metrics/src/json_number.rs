//! Serde helpers for numbers that may be NaN or infinite: written as the JSON strings `"NaN"`,
//! `"Infinity"`, `"-Infinity"` (as the reference's Jackson mapper does) and read back from those
//! strings, from plain numbers, or from `null` (= NaN).

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;

/// Serializes an `f64`, spelling non-finite values as strings.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_nan() {
        serializer.serialize_str("NaN")
    } else if *value == f64::INFINITY {
        serializer.serialize_str("Infinity")
    } else if *value == f64::NEG_INFINITY {
        serializer.serialize_str("-Infinity")
    } else {
        serializer.serialize_f64(*value)
    }
}

/// Deserializes an `f64` from a number, `"NaN"`, `"Infinity"`, `"-Infinity"` or `null` (NaN).
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    deserializer.deserialize_any(NumberVisitor)
}

/// Parses the string spellings of non-finite numbers.
pub fn parse_non_finite(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

struct NumberVisitor;

impl<'de> Visitor<'de> for NumberVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, \"NaN\", \"Infinity\", \"-Infinity\" or null")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        parse_non_finite(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }

    fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }

    fn visit_none<E: de::Error>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
}
