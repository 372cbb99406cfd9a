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

use super::scan::{Cursor, Seen, plain_or_serde};
use super::{AggregatedMetricValue, nan};
use std::borrow::Cow;

/// The answer of `GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics?get=...`: read in one
/// pass when it is of the plain shape (module docs), else by serde.
///
/// # Errors
/// serde's error for a body it does not accept.
pub(crate) fn read(text: &str) -> serde_json::Result<Vec<AggregatedMetricValue<'_>>> {
    plain_or_serde(text, plain)
}

/// The values of a plain answer, `None` for any other body.
fn plain(text: &str) -> Option<Vec<AggregatedMetricValue<'_>>> {
    let mut at = Cursor::new(text);
    // A first guess (a value of Flink's answers is about 95 bytes), at most 64: past it the
    // vector grows only with the values read, each at least 9 bytes of the body.
    let mut values = Vec::with_capacity((text.len() / 64).min(64));
    at.array(|at| {
        values.push(value(at)?);
        Some(())
    })?;
    at.at_end().then_some(values)
}

/// One object of the answer: `id` once, each aggregate at most once, nothing else.
fn value<'a>(at: &mut Cursor<'a>) -> Option<AggregatedMetricValue<'a>> {
    let mut seen = Seen::default();
    let mut id = None;
    let mut aggregates = [None; 5];
    at.object(|at, key| {
        // The order of [`AggregatedMetricValue`]'s fields after `id`.
        let slot = match key {
            "id" => {
                seen.first(5)?;
                id = Some(at.plain_string()?);
                return Some(());
            }
            "min" => 0,
            "max" => 1,
            "avg" => 2,
            "sum" => 3,
            "skew" => 4,
            _ => return None,
        };
        seen.first(slot)?;
        aggregates[slot as usize] = Some(at.number()?);
        Some(())
    })?;
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

#[cfg(test)]
mod tests {
    use super::super::scan::testing::{number, space, spliced};
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
        prop_oneof![plain_answer(), spliced(plain_answer(), mutation())]
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
