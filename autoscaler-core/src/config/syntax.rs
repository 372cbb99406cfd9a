//! Flink's configuration syntax: the [`Configuration`] map of string keys to string values, and
//! Flink's value syntax for booleans, numbers, enums, lists and memory sizes, with the Java string
//! semantics its parsers rely on.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A Flink `Configuration`: `key -> value` strings, e.g. `job.autoscaler.metrics.window -> "10 min"`.
///
/// ```
/// use autoscaler_core::config::Configuration;
/// let base = Configuration::from_iter([("job.autoscaler.utilization.target", "0.7")]);
/// let job = Configuration::from_iter([("job.autoscaler.utilization.target", "0.6")]);
/// assert_eq!(base.overlay(&job).get("job.autoscaler.utilization.target"), Some("0.6"));
/// ```
///
/// The entries are shared: a clone costs a reference count, and a change copies them first
/// (a job's context carries its configuration, cloned with the context every cycle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Configuration(Arc<BTreeMap<String, String>>);

impl Configuration {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        Arc::make_mut(&mut self.0).insert(key.into(), value.into());
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        if !self.0.contains_key(key) {
            return None;
        }
        Arc::make_mut(&mut self.0).remove(key)
    }

    /// A copy of `self` with every entry of `overrides` set on top (the overrides win).
    pub fn overlay(&self, overrides: &Configuration) -> Configuration {
        if overrides.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return overrides.clone();
        }
        let mut merged = (*self.0).clone();
        for (k, v) in overrides.0.iter() {
            merged.insert(k.clone(), v.clone());
        }
        Configuration(Arc::new(merged))
    }

    /// Whether `self` and `other` share their entries (one is a clone of the other, neither
    /// changed since): a test in constant time that they are equal. Equal configurations built
    /// apart do not share.
    pub fn shares_entries_with(&self, other: &Configuration) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The address of the shared entries: the same for clones, while neither changed. Paired with
    /// a kept clone (which keeps the entries alive, so no other configuration can take the address)
    /// and [`Self::shares_entries_with`], it names a configuration without hashing its entries.
    pub(crate) fn entries_address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Configuration {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(Arc::new(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect()))
    }
}

// ------------------------------------------------------------------------------------------------
// Flink value syntax (ConfigurationUtils.convertValue and friends)
// ------------------------------------------------------------------------------------------------

/// A boolean as Flink reads it: `true`/`false` in any case, nothing else (no trimming).
///
/// # Errors
/// A message naming the value.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_uppercase().as_str() {
        "TRUE" => Ok(true),
        "FALSE" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a boolean; expected true or false (case-insensitive)"
        )),
    }
}

/// An `int` as Java's `Integer.parseInt` reads it: optional sign, decimal digits, no whitespace.
///
/// # Errors
/// A message naming the value.
pub fn parse_int(text: &str) -> Result<i32, String> {
    text.parse().map_err(|_| format!("{text:?} is not a 32-bit integer"))
}

/// A `double` as Java's `Double.parseDouble` reads it: surrounding whitespace (chars up to U+0020)
/// ignored, optional sign, decimal digits with optional fraction and exponent, an optional `d`/`f`
/// suffix, or exactly `NaN` / `Infinity`. Hexadecimal floating-point literals are not supported.
///
/// # Errors
/// A message naming the value.
pub fn parse_double(text: &str) -> Result<f64, String> {
    let err = || format!("{text:?} is not a number");
    let t = java_trim(text);
    let (negative, unsigned) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let magnitude = match unsigned {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let body = unsigned.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(unsigned);
            // Only the Java decimal grammar: Rust would also take "inf", "nan" and "infinity".
            if body.is_empty()
                || !body
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                return Err(err());
            }
            if body.starts_with(['+', '-']) {
                return Err(err());
            }
            body.parse::<f64>().map_err(|_| err())?
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// The index in `names` of an enum constant, matched case-insensitively as Flink does (no trimming).
pub(super) fn parse_enum(text: &str, names: &[&str]) -> Result<usize, String> {
    let upper = text.to_uppercase();
    names
        .iter()
        .position(|n| *n == upper)
        .ok_or_else(|| format!("{text:?} is not one of [{}] (case-insensitive)", names.join(", ")))
}

/// A list option as Flink splits it (`StructuredOptionsSplitter.splitEscaped(value, ';')`):
/// whitespace between entries is skipped and unquoted entries are trimmed; an entry may be quoted
/// with `'` or `"` (a doubled quote inside is a literal quote) so that it can contain `;`; a
/// delimiter directly after another yields an empty entry, a leading or trailing one does not.
///
/// ```
/// use autoscaler_core::config::parse_list;
/// assert_eq!(parse_list(" a ; b;;'c;d' "), Ok(vec!["a".into(), "b".into(), "".into(), "c;d".into()]));
/// assert_eq!(parse_list(""), Ok(vec![]));
/// ```
///
/// # Errors
/// A message for an unclosed quote or text after a closing quote.
pub fn parse_list(text: &str) -> Result<Vec<String>, String> {
    #[derive(PartialEq)]
    enum Token {
        Quoted(String),
        Unquoted(String),
        Delimiter,
    }
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let mut value = String::new();
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err(format!("{text:?}: a quote is not closed")),
                    Some(&q) if q == c => {
                        if chars.get(j + 1) == Some(&c) {
                            value.push(c);
                            j += 2;
                        } else {
                            j += 1;
                            break;
                        }
                    }
                    Some(&other) => {
                        value.push(other);
                        j += 1;
                    }
                }
            }
            tokens.push((Token::Quoted(value), i));
            i = j;
        } else if c == ';' {
            tokens.push((Token::Delimiter, i));
            i += 1;
        } else if java_is_whitespace(c) {
            i += 1;
        } else {
            let start = i;
            while i < chars.len() && chars[i] != ';' {
                i += 1;
            }
            let raw: String = chars[start..i].iter().collect();
            tokens.push((Token::Unquoted(java_trim(&raw).to_owned()), start));
        }
    }
    let mut entries = Vec::new();
    for (k, (token, _)) in tokens.iter().enumerate() {
        let next = tokens.get(k + 1);
        match token {
            Token::Quoted(value) => {
                if let Some((t, pos)) = next
                    && *t != Token::Delimiter
                {
                    return Err(format!(
                        "{text:?}: unexpected text after a closing quote at position {}",
                        pos - 1
                    ));
                }
                entries.push(value.clone());
            }
            Token::Unquoted(value) => entries.push(value.clone()),
            Token::Delimiter => {
                if matches!(next, Some((Token::Delimiter, _))) {
                    entries.push(String::new());
                }
            }
        }
    }
    Ok(entries)
}

/// Parses a Flink memory size (`MemorySize.parseBytes`) into bytes: an integer and an optional
/// case-insensitive unit `b`/`bytes`, `k`/`kb`/`kibibytes`, `m`/`mb`/`mebibytes`,
/// `g`/`gb`/`gibibytes`, `t`/`tb`/`tebibytes` (powers of 1024), with optional whitespace between;
/// a bare number is bytes. The result must fit a Java `long`.
///
/// ```
/// use autoscaler_core::config::parse_memory_size;
/// assert_eq!(parse_memory_size("2g"), Ok(2 << 30));
/// assert_eq!(parse_memory_size("512 MB"), Ok(512 << 20));
/// assert_eq!(parse_memory_size("1024"), Ok(1024));
/// ```
///
/// # Errors
/// A message naming the value.
pub fn parse_memory_size(text: &str) -> Result<u64, String> {
    let t = java_trim(text);
    if t.is_empty() {
        return Err(format!("{text:?} is an empty or whitespace-only memory size"));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{text:?} does not start with a number"));
    }
    let too_large = || format!("{text:?} is too large (numeric overflow)");
    let n: i64 = num.parse().map_err(|_| too_large())?;
    let mult: i64 = match java_trim(unit).to_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        "t" | "tb" | "tebibytes" => 1 << 40,
        other => {
            return Err(format!(
                "{text:?}: memory unit {other:?} is not one of b/bytes, k/kb/kibibytes, m/mb/mebibytes, \
                 g/gb/gibibytes, t/tb/tebibytes"
            ));
        }
    };
    let bytes = n.checked_mul(mult).ok_or_else(too_large)?;
    u64::try_from(bytes).map_err(|_| too_large())
}

// ------------------------------------------------------------------------------------------------
// Java string semantics the reference's parsers rely on
// ------------------------------------------------------------------------------------------------

/// Java `String.trim`: strips every char up to U+0020 (spaces and ASCII control characters) from
/// both ends, and nothing else.
pub(crate) fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// Java `Character.isWhitespace`: Unicode space separators except the no-break ones, plus tab,
/// line feed, vertical tab, form feed, carriage return and U+001C-U+001F.
pub(super) fn java_is_whitespace(c: char) -> bool {
    match c {
        '\u{a0}' | '\u{2007}' | '\u{202f}' => false,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | '\u{1c}'..='\u{1f}' => true,
        ' ' | '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{205f}' | '\u{3000}' => true,
        _ => false,
    }
}

/// Java `String.strip`: strips [`java_is_whitespace`] chars from both ends.
pub(super) fn java_strip(text: &str) -> &str {
    text.trim_matches(java_is_whitespace)
}

/// Java `String.split` with a literal delimiter: all pieces, then trailing empty pieces removed;
/// a text without the delimiter is returned whole (even when empty).
pub(super) fn java_split<'t>(text: &'t str, delimiter: &str) -> Vec<&'t str> {
    if !text.contains(delimiter) {
        return vec![text];
    }
    let mut pieces: Vec<&str> = text.split(delimiter).collect();
    while pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;

    #[test]
    fn clones_share_entries_until_one_changes() {
        let base = Configuration::from_iter([("a", "1"), ("b", "2")]);
        let mut copy = base.clone();
        assert!(copy.shares_entries_with(&base));
        assert!(base.overlay(&Configuration::new()).shares_entries_with(&base));
        assert!(Configuration::new().overlay(&base).shares_entries_with(&base));
        copy.set("b", "3");
        assert!(!copy.shares_entries_with(&base));
        assert_eq!((base.get("b"), copy.get("b")), (Some("2"), Some("3")));
        let mut removed = base.clone();
        assert_eq!(removed.remove("missing"), None);
        assert!(removed.shares_entries_with(&base), "removing nothing copies nothing");
        assert_eq!(removed.remove("a").as_deref(), Some("1"));
        assert_eq!((base.len(), removed.len()), (2, 1));
        // Equal but built apart: equal, not shared.
        let twin = Configuration::from_iter([("a", "1"), ("b", "2")]);
        assert_eq!(twin, base);
        assert!(!twin.shares_entries_with(&base));
        let merged = base.overlay(&Configuration::from_iter([("b", "9"), ("c", "4")]));
        assert_eq!(
            merged.iter().collect::<Vec<_>>(),
            vec![("a", "1"), ("b", "9"), ("c", "4")]
        );
    }

    #[test]
    fn doubles_follow_java_parse_double() {
        for (text, value) in [
            ("0.7", 0.7),
            (" 0.7 ", 0.7),
            ("1e-3", 0.001),
            ("1E3", 1000.0),
            ("+2", 2.0),
            ("-0.5", -0.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("0.25d", 0.25),
            ("3F", 3.0),
            ("Infinity", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ] {
            assert_eq!(parse_double(text), Ok(value), "{text:?}");
        }
        assert!(parse_double("NaN").unwrap().is_nan());
        for text in [
            "", " ", "inf", "infinity", "nan", "NAN", "1,5", "1e", "--1", "+-1", "0x1p3", "1.2.3", "d",
        ] {
            assert!(parse_double(text).is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn booleans_and_integers_follow_flink() {
        assert_eq!(parse_bool("true"), Ok(true));
        assert_eq!(parse_bool("TrUe"), Ok(true));
        assert_eq!(parse_bool("FALSE"), Ok(false));
        for text in ["yes", "1", " true", "true ", ""] {
            assert!(parse_bool(text).is_err(), "{text:?}");
        }
        assert_eq!(parse_int("42"), Ok(42));
        assert_eq!(parse_int("+42"), Ok(42));
        assert_eq!(parse_int("-3"), Ok(-3));
        assert_eq!(parse_int("2147483647"), Ok(i32::MAX));
        for text in ["2147483648", "4.0", " 4", "4 ", "", "0x10"] {
            assert!(parse_int(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn lists_split_like_flink() {
        assert_eq!(parse_list("a;b;c").unwrap(), ["a", "b", "c"]);
        assert_eq!(parse_list("  a ;  b  ").unwrap(), ["a", "b"]);
        assert_eq!(parse_list("a;;b").unwrap(), ["a", "", "b"]);
        assert_eq!(parse_list("a; ;b").unwrap(), ["a", "", "b"]);
        assert_eq!(parse_list(";a;").unwrap(), ["a"]);
        assert_eq!(parse_list("").unwrap(), Vec::<String>::new());
        assert_eq!(parse_list("'a;b';\"c\"").unwrap(), ["a;b", "c"]);
        assert_eq!(parse_list("'it''s'").unwrap(), ["it's"]);
        assert_eq!(parse_list("x'y").unwrap(), ["x'y"]);
        assert!(parse_list("'open").is_err());
        assert!(parse_list("'a'b;c").is_err());
        // Cron expressions keep their inner spaces.
        assert_eq!(
            parse_list("* * 9-17 ? * MON-FRI ; 10:00-11:00").unwrap(),
            ["* * 9-17 ? * MON-FRI", "10:00-11:00"]
        );
    }

    #[test]
    fn memory_sizes_follow_flink() {
        for (text, bytes) in [
            ("1024", 1024),
            ("0", 0),
            ("1b", 1),
            ("7 bytes", 7),
            ("1k", 1 << 10),
            ("1 kb", 1 << 10),
            ("1 kibibytes", 1 << 10),
            ("512 mb", 512 << 20),
            ("512m", 512 << 20),
            ("3 mebibytes", 3 << 20),
            ("2g", 2 << 30),
            ("2 GB", 2 << 30),
            ("2 gibibytes", 2 << 30),
            ("1t", 1 << 40),
            ("1 TB", 1 << 40),
            ("1 tebibytes", 1 << 40),
            ("  4 m  ", 4 << 20),
        ] {
            assert_eq!(parse_memory_size(text), Ok(bytes), "{text:?}");
        }
        for text in [
            "",
            "g",
            "1.5g",
            "-1g",
            "1 pb",
            "1 gib",
            "9223372036854775807 k",
            "99999999999999999999",
        ] {
            assert!(parse_memory_size(text).is_err(), "{text:?} should not parse");
        }
        assert_eq!(parse_memory_size("9223372036854775807"), Ok(i64::MAX as u64));
    }

    #[test]
    fn java_text_helpers() {
        assert_eq!(java_trim("\u{1}\t a b \n"), "a b");
        assert_eq!(java_trim("\u{a0}x\u{a0}"), "\u{a0}x\u{a0}");
        assert_eq!(java_strip("\u{2003}x\t"), "x");
        assert_eq!(java_strip("\u{a0}x"), "\u{a0}x");
        assert_eq!(java_split("a-b", "-"), ["a", "b"]);
        assert_eq!(java_split("a-b--", "-"), ["a", "b"]);
        assert_eq!(java_split("-a", "-"), ["", "a"]);
        assert_eq!(java_split("", "-"), [""]);
        assert_eq!(java_split("--", "-"), Vec::<&str>::new());
    }
}
