//! The aggregated-metrics answer read by hand when it has the shape Flink writes, else by serde.
//!
//! Every vertex's metrics come as `[{"id":"busyTimeMsPerSecond","min":1.0,"max":2.0,...},...]`,
//! ten or more answers per job-cycle. Read through serde, each number goes through the
//! deserializer's generic dispatch and its exact (`float_roundtrip`) decimal reading, a few
//! hundred instructions a value. [`read`] takes the answer in one pass instead, but only when
//! every part of it is of the plain shape: an array of objects whose keys are the six known
//! names, each at most once and written without escapes, whose `id` is a string without escapes
//! and whose other values are JSON numbers that are finite as doubles. Anything else (a quoted
//! or `null` value, an unknown or repeated key, an escape, a number out of range, a syntax error)
//! is read by serde from the start, so every such body reads, or fails with its message, exactly
//! as before. A number is read as the double nearest its decimal ([`Cursor::number`]), which is
//! what serde's `float_roundtrip` reading gives (an integer it reads as `u64` or `i64` and casts
//! is that same nearest double): the property tests below check that the two readings agree, bit
//! for bit, on generated answers.

use super::{AggregatedMetricValue, nan};
use std::borrow::Cow;

/// The answer of `GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics?get=...`: read in one
/// pass when it is of the plain shape (module docs), else by serde.
///
/// # Errors
/// serde's error for a body it does not accept.
pub(crate) fn read(text: &str) -> serde_json::Result<Vec<AggregatedMetricValue<'_>>> {
    match plain(text) {
        Some(values) => Ok(values),
        None => serde_json::from_str(text),
    }
}

/// The values of a plain answer, `None` for any other body.
fn plain(text: &str) -> Option<Vec<AggregatedMetricValue<'_>>> {
    let mut at = Cursor { text, pos: 0 };
    at.expect(b'[')?;
    // A first guess (a value of Flink's answers is about 95 bytes), at most 64: past it the
    // vector grows only with the values read, each at least 9 bytes of the body.
    let mut values = Vec::with_capacity((text.len() / 64).min(64));
    if !at.eat(b']') {
        loop {
            values.push(at.object()?);
            if at.eat(b']') {
                break;
            }
            at.expect(b',')?;
        }
    }
    at.skip_whitespace();
    (at.pos == text.len()).then_some(values)
}

/// A position in the body.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

/// Powers of ten exact as doubles (up to 10^22), for [`Cursor::number`]'s exact reading.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

impl<'a> Cursor<'a> {
    /// The body's bytes.
    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The byte at the position, if any.
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    /// Skips JSON's whitespace (the four characters serde skips).
    #[inline]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Whether the next token is `byte`, taken if so.
    #[inline]
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        let found = self.peek() == Some(byte);
        self.pos += usize::from(found);
        found
    }

    /// Takes the next token, which must be `byte`.
    #[inline]
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// A string without escapes or control characters, as the text between its quotes.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        let len = self
            .bytes()
            .get(start..)?
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        let end = start + len;
        // Stopped at an escape or a control character (a tab too: inside a string it is refused,
        // not skipped as whitespace): not plain.
        if self.bytes()[end] != b'"' {
            return None;
        }
        self.pos = end + 1;
        // Between two ASCII quotes: on character boundaries.
        self.text.get(start..end)
    }

    /// One object of the answer: `id` once, each aggregate at most once, nothing else.
    fn object(&mut self) -> Option<AggregatedMetricValue<'a>> {
        self.expect(b'{')?;
        let mut id = None;
        let mut aggregates = [None; 5];
        if !self.eat(b'}') {
            loop {
                let key = self.plain_string()?;
                self.expect(b':')?;
                // The order of [`AggregatedMetricValue`]'s fields after `id`.
                let slot = match key {
                    "id" => {
                        if id.is_some() {
                            return None;
                        }
                        id = Some(self.plain_string()?);
                        None
                    }
                    "min" => Some(0),
                    "max" => Some(1),
                    "avg" => Some(2),
                    "sum" => Some(3),
                    "skew" => Some(4),
                    _ => return None,
                };
                if let Some(slot) = slot {
                    if aggregates[slot].is_some() {
                        return None;
                    }
                    aggregates[slot] = Some(self.number()?);
                }
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',')?;
            }
        }
        let [min, max, avg, sum, skew] = aggregates.map(|value| value.unwrap_or_else(nan));
        Some(AggregatedMetricValue {
            id: Cow::Borrowed(id?),
            min,
            max,
            avg,
            sum,
            skew,
        })
    }

    /// A JSON number (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`) that is finite as a
    /// double, as the nearest double.
    ///
    /// A number of at most 19 digits whose digits as an integer `m` are below 2^53, scaled by at
    /// most 10^22 either way, is `m * 10^e` or `m / 10^e`: both operands exact, so the one
    /// rounding of the operation gives the nearest double (Clinger's fast path). Any other is read
    /// by the standard library's parser, which is exact for all.
    fn number(&mut self) -> Option<f64> {
        self.skip_whitespace();
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        self.pos += usize::from(negative);
        // The digits as one integer, while it has at most 19 of them (below 10^19 < 2^64).
        let mut digits = 0u64;
        let mut count = 0u32;
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => count += self.digits(&mut digits),
            _ => return None,
        }
        let mut scale = 0i64;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let fraction = self.digits(&mut digits);
            if fraction == 0 {
                return None;
            }
            count += fraction;
            scale = -i64::from(fraction);
        }
        let mut exponent_digits = 0;
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            let sign = match self.peek() {
                Some(b'-') => -1,
                Some(b'+') => 1,
                _ => 0,
            };
            self.pos += usize::from(sign != 0);
            let mut exponent = 0u64;
            exponent_digits = self.digits(&mut exponent);
            if exponent_digits == 0 {
                return None;
            }
            // Bounded, so the sum cannot overflow; past 10^22 either way the exact reading is not taken.
            let exponent = exponent.min(1 << 20) as i64;
            scale += if sign < 0 { -exponent } else { exponent };
        }
        let exact = count <= 19 && exponent_digits <= 19 && digits < 1 << 53 && scale.abs() <= 22;
        let value = if exact {
            let power = EXACT_POWERS_OF_TEN[scale.unsigned_abs() as usize];
            let magnitude = if scale < 0 {
                digits as f64 / power
            } else {
                digits as f64 * power
            };
            if negative { -magnitude } else { magnitude }
        } else {
            self.text.get(start..self.pos)?.parse().ok()?
        };
        // serde refuses a number beyond the doubles ("number out of range"): its message, then.
        value.is_finite().then_some(value)
    }

    /// Skips the digits at the position, appending them to `value` (wrapping: its caller uses it
    /// only when there were at most 19), and returns how many there were.
    #[inline]
    fn digits(&mut self, value: &mut u64) -> u32 {
        let mut count = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            *value = value.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
            self.pos += 1;
            count += 1;
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a reading gives: each value's id and its aggregates' bits, or the error's message.
    fn outcome(result: serde_json::Result<Vec<AggregatedMetricValue<'_>>>) -> Result<Vec<String>, String> {
        result
            .map(|values| {
                values
                    .iter()
                    .map(|v| {
                        let a = v.aggregates();
                        format!(
                            "{:?} {:x} {:x} {:x} {:x} {:x}",
                            v.id,
                            a.min.to_bits(),
                            a.max.to_bits(),
                            a.avg.to_bits(),
                            a.sum.to_bits(),
                            a.skew.to_bits()
                        )
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    /// Both readings of `text`: by hand (falling back to serde) and by serde alone.
    fn both(text: &str) -> (Result<Vec<String>, String>, Result<Vec<String>, String>) {
        (outcome(read(text)), outcome(serde_json::from_str(text)))
    }

    const RECORDED: [&str; 3] = [
        include_str!("../../../../tests/fixtures/vertex-subtask-metrics-agg.json"),
        include_str!("../../../../tests/fixtures/vertex-subtask-metrics-agg-source.json"),
        include_str!("../../../../tests/fixtures/vertex-subtask-metrics-agg-upstream.json"),
    ];

    #[test]
    fn recorded_answers_are_plain_and_read_as_serde_reads_them() {
        for text in RECORDED {
            assert!(plain(text).is_some(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert!(by_serde.is_ok());
            assert_eq!(by_hand, by_serde);
        }
    }

    #[test]
    fn plain_values_worked_out_by_hand() {
        let values = plain(r#" [ {"max":984.0, "id":"a.b" } ,{"id":"x","min":-0,"sum":1e2,"skew":-1.5E-1,"avg":7}]  "#)
            .expect("plain");
        assert_eq!(values.len(), 2);
        assert_eq!(values[0].id, "a.b");
        let a = values[0].aggregates();
        assert_eq!(a.max, 984.0);
        assert!(a.min.is_nan() && a.avg.is_nan() && a.sum.is_nan() && a.skew.is_nan());
        let b = values[1].aggregates();
        assert_eq!(values[1].id, "x");
        // "-0" is negative zero in both readings.
        assert_eq!(b.min.to_bits(), (-0.0f64).to_bits());
        assert_eq!((b.sum, b.skew, b.avg), (100.0, -0.15, 7.0));
        assert!(b.max.is_nan());
        assert!(plain("[]").is_some_and(|v| v.is_empty()));
    }

    #[test]
    fn other_shapes_are_left_to_serde() {
        for text in [
            r#"[{"id":"a","min":"1.5"}]"#,     // a quoted number
            r#"[{"id":"a","min":null}]"#,      // null
            r#"[{"id":"a","other":1}]"#,       // an unknown key
            r#"[{"id":"a","min":1,"min":2}]"#, // a repeated key
            r#"[{"id":"a","id":"b"}]"#,        // a repeated id
            r#"[{"id":"a\u0062"}]"#,           // an escape in the id
            r#"[{"\u0069d":"a"}]"#,            // an escape in a key
            r#"[{"min":1}]"#,                  // no id
            r#"[{"id":"a","min":1e400}]"#,     // out of range
            r#"[{"id":"a","min":01}]"#,        // a leading zero
            r#"[{"id":"a","min":1.}]"#,        // no fraction digits
            r#"[{"id":"a","min":-}]"#,         // no digits
            r#"[{"id":"a",}]"#,                // a trailing comma
            r#"[{"id":"a"},]"#,                // a trailing comma
            r#"[{"id":"a"}] x"#,               // trailing characters
            r#"[{"id":"a"}"#,                  // truncated
            r#"[["a",1,2,3,4,5]]"#,            // a struct as a sequence
            "[{\"id\":\"a\tb\"}]",             // a control character
            "[{\"id\":\"a\t\"}]",              // one just before the closing quote
        ] {
            assert!(plain(text).is_none(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert_eq!(by_hand, by_serde, "{text}");
        }
    }

    /// A JSON number, mostly of the kinds Flink writes, with the grammar's corners.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<f64>().prop_map(|v| format!("{v:?}")),
            any::<f64>().prop_map(|v| format!("{v:e}")),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            "-?(0|[1-9][0-9]{0,30})(\\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?",
            // Within and around the exact reading's bounds (2^53, 19 digits, 10^22).
            "-?(0|[1-9][0-9]{0,17})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,2})?",
            Just("-0".to_owned()),
            Just("-0.0".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("-9223372036854775808".to_owned()),
            Just("-9223372036854775809".to_owned()),
            Just("2.2250738585072011e-308".to_owned()),
            Just("4.9e-325".to_owned()),
            Just("1.7976931348623158e308".to_owned()),
            Just("1.7976931348623159e308".to_owned()),
        ]
    }

    /// JSON whitespace, mostly none.
    fn space() -> impl Strategy<Value = &'static str> {
        prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just("\n\t"), 1 => Just("\r ")]
    }

    /// An answer of the plain shape: objects with an id and some of the aggregates, each once, in
    /// any order.
    fn plain_answer() -> impl Strategy<Value = String> {
        let object = (
            "[a-zA-Z0-9._]{1,24}",
            proptest::sample::subsequence(vec!["min", "max", "avg", "sum", "skew"], 0..=5).prop_shuffle(),
            // Numbers finite as doubles (past them is serde's "number out of range"), others as 0.
            proptest::collection::vec(
                number().prop_map(|n| {
                    if n.parse::<f64>().is_ok_and(f64::is_finite) {
                        n
                    } else {
                        "0".to_owned()
                    }
                }),
                5,
            ),
            0usize..6,
            space(),
        )
            .prop_map(|(id, keys, numbers, id_at, s)| {
                let mut members: Vec<String> = keys
                    .iter()
                    .zip(numbers)
                    .map(|(key, n)| format!("\"{key}\"{s}:{s}{n}"))
                    .collect();
                members.insert(id_at.min(members.len()), format!("\"id\":{s}\"{id}\""));
                format!("{{{s}{}{s}}}", members.join(&format!("{s},{s}")))
            });
        (proptest::collection::vec(object, 0..5), space())
            .prop_map(|(objects, s)| format!("{s}[{s}{}{s}]{s}", objects.join(&format!(",{s}"))))
    }

    /// A change that may take an answer out of the plain shape, or out of JSON.
    fn mutation() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("null".to_owned()),
            Just("\"1.5\"".to_owned()),
            Just("\"other\":1,".to_owned()),
            Just("\"min\":2,".to_owned()),
            Just("\"id\":\"b\",".to_owned()),
            Just("\\u0069".to_owned()),
            Just("\\\"".to_owned()),
            Just("\t".to_owned()),
            Just(",".to_owned()),
            Just("[".to_owned()),
            Just("}".to_owned()),
            Just("-".to_owned()),
            Just("1e400".to_owned()),
            Just("é".to_owned()),
            "[ -~]{1,3}",
        ]
    }

    /// An answer: plain, or plain with a part replaced by a [`mutation`].
    fn answer() -> impl Strategy<Value = String> {
        prop_oneof![
            plain_answer(),
            (plain_answer(), any::<proptest::sample::Index>(), 0usize..4, mutation()).prop_map(
                |(text, at, len, with)| {
                    // On character boundaries: the body is text.
                    let mut start = at.index(text.len() + 1);
                    while !text.is_char_boundary(start) {
                        start -= 1;
                    }
                    let mut end = (start + len).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    format!("{}{with}{}", &text[..start], &text[end..])
                }
            ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Whatever the body, the reading by hand gives what serde gives: the same values bit for
        /// bit, or the same error.
        #[test]
        fn reads_every_answer_as_serde_does(text in answer()) {
            let (by_hand, by_serde) = both(&text);
            prop_assert_eq!(by_hand, by_serde, "{}", text);
        }

        /// An answer of the plain shape is read by hand, never left to serde.
        #[test]
        fn plain_answers_are_read_by_hand(text in plain_answer()) {
            prop_assert!(plain(&text).is_some(), "{}", text);
        }

        /// A double written as Rust writes it reads back as itself.
        #[test]
        fn plain_numbers_are_read_by_hand(values in proptest::collection::vec(any::<f64>().prop_filter("finite", |v| v.is_finite()), 5)) {
            let text = format!(
                r#"[{{"id":"m","min":{:?},"max":{:?},"avg":{:?},"sum":{:?},"skew":{:?}}}]"#,
                values[0], values[1], values[2], values[3], values[4]
            );
            let read = plain(&text).expect("plain");
            let a = read[0].aggregates();
            prop_assert_eq!(
                [a.min, a.max, a.avg, a.sum, a.skew].map(f64::to_bits),
                [values[0], values[1], values[2], values[3], values[4]].map(f64::to_bits)
            );
        }
    }
}
