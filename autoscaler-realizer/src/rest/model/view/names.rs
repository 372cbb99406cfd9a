//! A metric listing (`GET .../metrics` without `get`: `[{"id":"busyTimeMsPerSecond"},...]`)
//! read by hand when it has the plain shape Flink writes, else by serde.
//!
//! The collector lists a source's metric names every minute (new partitions show there), about
//! 80 names and 3 KB, and every vertex's when a job's vertices change. The plain shape is: an
//! array of objects whose keys are strings without escapes, each with `id` once, a string without
//! escapes; every other value of the kinds [`Cursor::skip_value`] takes. Anything else (a
//! repeated or missing `id`, an escape, a `null`, a syntax error) is read by serde from the start,
//! so every such body reads, or fails with its message, exactly as before.

use super::super::MetricName;
use super::scan::{Cursor, Seen, plain_or_serde};

/// A metric listing: read in one pass when it is of the plain shape (module docs), else by serde.
///
/// # Errors
/// serde's error for a body it does not accept.
pub(crate) fn read(text: &str) -> serde_json::Result<Vec<MetricName>> {
    plain_or_serde(text, plain)
}

/// The names of a plain listing, `None` for any other body.
fn plain(text: &str) -> Option<Vec<MetricName>> {
    let mut at = Cursor::new(text);
    // Sized from the body once (a name of Flink's takes about 40 bytes of it; at least 8 here).
    let mut names = Vec::with_capacity(text.len() / 40);
    at.array(|at| {
        let mut seen = Seen::default();
        let mut id = None;
        at.object(|at, key| {
            if key != "id" {
                return at.skip_value();
            }
            seen.first(0)?;
            id = Some(at.plain_string()?);
            Some(())
        })?;
        names.push(MetricName { id: id?.to_owned() });
        Some(())
    })?;
    at.at_end().then_some(names)
}

#[cfg(test)]
mod tests {
    use super::super::scan::testing::{both_owned, members, object, skipped, space, spliced, text};
    use super::*;
    use proptest::prelude::*;

    /// Both readings of `text`: by hand (falling back to serde) and by serde alone.
    fn both(text: &str) -> (Result<Vec<MetricName>, String>, Result<Vec<MetricName>, String>) {
        both_owned(read, text)
    }

    const RECORDED: [&str; 2] = [
        include_str!("../../../../tests/fixtures/vertex-subtask-metrics-list.json"),
        include_str!("../../../../tests/fixtures/vertex-subtask-metrics-list-source.json"),
    ];

    #[test]
    fn recorded_listings_are_plain_and_read_as_serde_reads_them() {
        for text in RECORDED {
            assert!(plain(text).is_some(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert!(by_serde.as_ref().is_ok_and(|names| names.len() > 50));
            assert_eq!(by_hand, by_serde);
        }
    }

    #[test]
    fn plain_listing_worked_out_by_hand() {
        let text = r#" [ {"id":"busyTimeMsPerSecond"}, {"value":[1,{"id":2}],"id":"Source__é.pendingRecords"},
            {"id":""} ] "#;
        let names: Vec<String> = plain(text).expect("plain").into_iter().map(|n| n.id).collect();
        assert_eq!(names, ["busyTimeMsPerSecond", "Source__é.pendingRecords", ""]);
        let (by_hand, by_serde) = both(text);
        assert_eq!(by_hand, by_serde);
        assert_eq!(plain("[]"), Some(vec![]));
    }

    #[test]
    fn other_shapes_are_left_to_serde() {
        for text in [
            r#"[{}]"#,
            r#"[{"id":"a","id":"b"}]"#,
            r#"[{"id":null}]"#,
            r#"[{"id":5}]"#,
            r#"[{"id":"a\u0062"}]"#,
            r#"[{"\u0069d":"a"}]"#,
            r#"[{"id":"a","x":"\n"}]"#,
            r#"[{"id":"a","x":1e400}]"#,
            "[{\"id\":\"a\tb\"}]",
            r#"[["a"]]"#, // a struct as a sequence
            r#"[{"id":"a"},]"#,
            r#"[{"id":"a"}"#,
            r#"{"id":"a"}"#,
            r#"null"#,
            r#"[{"id":"a"}] x"#,
        ] {
            assert!(plain(text).is_none(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert_eq!(by_hand, by_serde, "{text}");
        }
    }

    /// Listings of the plain shape: `id` and unknown members in any order.
    fn plain_listing() -> impl Strategy<Value = String> {
        let quoted = || text().prop_map(|t| format!("\"{t}\"")).boxed();
        let name = members(vec![("id", quoted())], vec![]).prop_map(|m| object(m, ""));
        (proptest::collection::vec(name, 0..6), space())
            .prop_map(|(names, s)| format!("{s}[{s}{}{s}]{s}", names.join(&format!("{s},{s}"))))
    }

    /// A change that may take the listing out of the plain shape, or out of JSON.
    fn mutation() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("null".to_owned()),
            Just("1".to_owned()),
            Just("\"id\":\"x\",".to_owned()),
            Just("\\u0069".to_owned()),
            Just("\\\"".to_owned()),
            Just("\t".to_owned()),
            Just(",".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("é".to_owned()),
            "[ -~]{1,3}",
            skipped(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whatever the body, the reading by hand gives what serde gives: the same names, or the
        /// same error.
        #[test]
        fn reads_every_answer_as_serde_does(text in prop_oneof![plain_listing(), spliced(plain_listing(), mutation())]) {
            let (by_hand, by_serde) = both(&text);
            prop_assert_eq!(by_hand, by_serde, "{}", text);
        }

        /// Listings of the plain shape are read by hand, never left to serde.
        #[test]
        fn plain_listings_are_read_by_hand(text in plain_listing()) {
            prop_assert!(plain(&text).is_some(), "{}", text);
        }
    }
}
