//! The jobs overview (`GET /jobs/overview`) read by hand when it has the plain shape Flink
//! writes, else by serde.
//!
//! Every source lists its jobs each cycle, so the overview is read once per cycle and holds an
//! entry (about 430 bytes) per job the JobManager knows: one per job-cycle, read whole by serde
//! until this reader. The plain shape is: an object whose keys, at every level, are strings
//! without escapes; its `jobs` at most once, an array of objects each with `jid` and `state`
//! (strings without escapes), and at most once each `name` (such a string), `start-time` (an
//! integer of at most 18 digits) and `tasks` (an object of counts, each at most once, integers that
//! fit in a `u32`); every other value of the kinds [`Cursor::skip_value`] takes. Anything else
//! (a repeated or missing field, an escape, a `null` or quoted field, a count past `u32`, a syntax
//! error, a struct written as an array) is read by serde from the start, so every such body
//! reads, or fails with its message, exactly as before.

use super::super::{JobOverview, JobsOverview, TaskCounts};
use super::scan::{Cursor, Seen, plain_or_serde};

/// The answer of `GET /jobs/overview`: read in one pass when it is of the plain shape (module
/// docs), else by serde.
///
/// # Errors
/// serde's error for a body it does not accept.
pub(crate) fn read(text: &str) -> serde_json::Result<JobsOverview> {
    plain_or_serde(text, plain)
}

/// The overview of a plain answer, `None` for any other body.
fn plain(text: &str) -> Option<JobsOverview> {
    let mut at = Cursor::new(text);
    let mut seen = Seen::default();
    let mut jobs = Vec::new();
    at.object(|at, key| {
        if key != "jobs" {
            return at.skip_value();
        }
        seen.first(0)?;
        // Sized from the body once (an entry of Flink's is about 430 bytes; at least 7 here,
        // `{"jid":` alone), rather than doubled and copied over a few thousand entries.
        jobs.reserve(text.len() / 512);
        at.array(|at| {
            jobs.push(job(at)?);
            Some(())
        })
    })?;
    at.at_end().then_some(JobsOverview { jobs })
}

/// One entry of `jobs`: `jid` and `state` once, the other fields read at most once.
fn job(at: &mut Cursor<'_>) -> Option<JobOverview> {
    let mut seen = Seen::default();
    let (mut jid, mut name, mut state, mut start_time, mut tasks) = (None, "", None, 0, TaskCounts::default());
    at.object(|at, key| {
        // The order of [`JobOverview`]'s fields.
        match key {
            "jid" => {
                seen.first(0)?;
                jid = Some(at.plain_string()?);
            }
            "name" => {
                seen.first(1)?;
                name = at.plain_string()?;
            }
            "state" => {
                seen.first(2)?;
                state = Some(at.plain_string()?);
            }
            "start-time" => {
                seen.first(3)?;
                start_time = at.integer()?;
            }
            "tasks" => {
                seen.first(4)?;
                tasks = task_counts(at)?;
            }
            _ => at.skip_value()?,
        }
        Some(())
    })?;
    Some(JobOverview {
        jid: jid?.to_owned(),
        name: name.to_owned(),
        state: state?.to_owned(),
        start_time,
        tasks,
    })
}

/// `tasks`: each count at most once, unknown keys skipped.
fn task_counts(at: &mut Cursor<'_>) -> Option<TaskCounts> {
    let mut seen = Seen::default();
    let mut counts = TaskCounts::default();
    at.object(|at, key| {
        // The order of [`TaskCounts`]'s fields.
        let (index, count) = match key {
            "total" => (0, &mut counts.total),
            "running" => (1, &mut counts.running),
            "finished" => (2, &mut counts.finished),
            "created" => (3, &mut counts.created),
            "scheduled" => (4, &mut counts.scheduled),
            "deploying" => (5, &mut counts.deploying),
            "initializing" => (6, &mut counts.initializing),
            "canceling" => (7, &mut counts.canceling),
            "canceled" => (8, &mut counts.canceled),
            "failed" => (9, &mut counts.failed),
            "reconciling" => (10, &mut counts.reconciling),
            _ => return at.skip_value(),
        };
        seen.first(index)?;
        *count = u32::try_from(at.unsigned()?).ok()?;
        Some(())
    })?;
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::super::scan::testing::{both_owned, members, object, skipped, space, spliced, text};
    use super::*;
    use proptest::prelude::*;

    /// Both readings of `text`: by hand (falling back to serde) and by serde alone.
    fn both(text: &str) -> (Result<JobsOverview, String>, Result<JobsOverview, String>) {
        both_owned(read, text)
    }

    const RECORDED: [&str; 2] = [
        include_str!("../../../../tests/fixtures/jobs-overview.json"),
        include_str!("../../../../tests/fixtures/jobs-overview-after-cancel.json"),
    ];

    #[test]
    fn recorded_overviews_are_plain_and_read_as_serde_reads_them() {
        for text in RECORDED {
            assert!(plain(text).is_some(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert!(by_serde.as_ref().is_ok_and(|o| !o.jobs.is_empty()));
            assert_eq!(by_hand, by_serde);
        }
    }

    #[test]
    fn plain_overview_worked_out_by_hand() {
        let text = r#" {"x":[1,{"jobs":5}],"jobs":[
            {"tasks":{"running":3,"total":4,"finished":1,"x":-2.5,"failed":4294967295},"state":"RUNNING",
             "jid":"a1","start-time":-17,"end-time":-1,"name":"Job é"},
            {"state":"CANCELED","jid":"b2"}]} "#;
        let overview = plain(text).expect("plain");
        let [a, b] = &overview.jobs[..] else {
            panic!("two jobs: {overview:?}")
        };
        assert_eq!(
            (&*a.jid, &*a.name, &*a.state, a.start_time),
            ("a1", "Job é", "RUNNING", -17)
        );
        assert_eq!(
            a.tasks,
            TaskCounts {
                total: 4,
                running: 3,
                finished: 1,
                failed: u32::MAX,
                ..TaskCounts::default()
            }
        );
        assert_eq!(
            (&*b.jid, &*b.name, &*b.state, b.start_time, b.tasks),
            ("b2", "", "CANCELED", 0, TaskCounts::default())
        );
        let (by_hand, by_serde) = both(text);
        assert_eq!(by_hand, by_serde);
        assert_eq!(plain(" {} ").expect("plain").jobs, []);
    }

    #[test]
    fn other_shapes_are_left_to_serde() {
        let with_job = |j: &str| format!(r#"{{"jobs":[{j}]}}"#);
        for text in [
            r#"{"jobs":[],"jobs":[]}"#.to_owned(),
            r#"{"jobs":null}"#.to_owned(),
            r#"{"jobs":{}}"#.to_owned(),
            r#"{"jobs":[]"#.to_owned(),
            r#"{"jobs":[]} ]"#.to_owned(),
            r#"{"\u006aobs":[]}"#.to_owned(),
            r#"[[]]"#.to_owned(), // a struct as a sequence
            with_job(r#"{"state":"RUNNING"}"#),
            with_job(r#"{"jid":"j"}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","jid":"k"}"#),
            with_job(r#"{"jid":"j\u0031","state":"RUNNING"}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","x":"\""}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","name":null}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","name":5}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","start-time":1.0}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","start-time":-0}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","start-time":"1"}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","start-time":9223372036854775807}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":null}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":[1,2]}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":{"total":4294967296}}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":{"total":-1}}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":{"total":1,"total":2}}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","tasks":{"total":1e0}}"#),
            with_job(r#"{"jid":"j","state":"RUNNING","x":1e400}"#),
            with_job(r#"{"jid":"j","state":"RUNNING",}"#),
            with_job("{\"jid\":\"j\t\",\"state\":\"RUNNING\"}"),
            with_job(r#"["j","n","RUNNING"]"#),
        ] {
            assert!(plain(&text).is_none(), "{text}");
            let (by_hand, by_serde) = both(&text);
            assert_eq!(by_hand, by_serde, "{text}");
        }
    }

    /// Overviews of the plain shape: every field of each object in any order, the optional ones
    /// present or not, unknown ones among them.
    fn plain_overview() -> impl Strategy<Value = String> {
        let quoted = || text().prop_map(|t| format!("\"{t}\"")).boxed();
        let count = || {
            prop_oneof![0u32..100, Just(u32::MAX)]
                .prop_map(|v| v.to_string())
                .boxed()
        };
        let names = [
            "total",
            "running",
            "finished",
            "created",
            "scheduled",
            "deploying",
            "initializing",
            "canceling",
            "canceled",
            "failed",
            "reconciling",
        ];
        let tasks = members(vec![], names.iter().map(|n| (*n, count())).collect())
            .prop_map(|m| object(m, ""))
            .boxed();
        let start_time = prop_oneof![
            0i64..2_000_000_000_000,
            -999_999_999_999_999_999i64..=999_999_999_999_999_999
        ]
        .prop_map(|v| v.to_string())
        .boxed();
        let job = members(
            vec![("jid", quoted()), ("state", quoted())],
            vec![("name", quoted()), ("start-time", start_time), ("tasks", tasks)],
        )
        .prop_map(|m| object(m, ""));
        let jobs = proptest::collection::vec(job, 0..4)
            .prop_map(|v| format!("[{}]", v.join(",")))
            .boxed();
        (members(vec![], vec![("jobs", jobs)]), space()).prop_map(|(m, s)| format!("{s}{}{s}", object(m, s)))
    }

    /// A change that may take the overview out of the plain shape, or out of JSON.
    fn mutation() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("null".to_owned()),
            Just("\"1\"".to_owned()),
            Just("1.5".to_owned()),
            Just("-0".to_owned()),
            Just("4294967296".to_owned()),
            Just("9223372036854775808".to_owned()),
            Just("\"jid\":\"x\",".to_owned()),
            Just("\"total\":1,".to_owned()),
            Just("\"jobs\":[],".to_owned()),
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

        /// Whatever the body, the reading by hand gives what serde gives: the same overview, or
        /// the same error.
        #[test]
        fn reads_every_answer_as_serde_does(text in prop_oneof![plain_overview(), spliced(plain_overview(), mutation())]) {
            let (by_hand, by_serde) = both(&text);
            prop_assert_eq!(by_hand, by_serde, "{}", text);
        }

        /// Overviews of the plain shape are read by hand, never left to serde.
        #[test]
        fn plain_overviews_are_read_by_hand(text in plain_overview()) {
            prop_assert!(plain(&text).is_some(), "{}", text);
        }
    }
}
