//! The job details read by hand when they have the shape Flink writes, else by serde.
//!
//! The answer of `GET /jobs/{jobid}` is about 1 KB per vertex, read once per job-cycle, and most of
//! it is what the collector does not read (the task counts, the byte counters, the plan's
//! operator descriptions). Read through serde, each of its keys and values goes through the
//! deserializer's generic dispatch. [`read`] takes it in one pass instead, but only when every
//! part of it is of the plain shape:
//!
//! - an object whose keys, at every level, are strings without escapes;
//! - the fields [`JobDetails`] reads each at most once, of the types it reads them as (strings
//!   without escapes or control characters, integers that fit, numbers finite as doubles, `null`
//!   where the field is optional);
//! - the other values plain strings, numbers finite as doubles, `true`, `false`, `null`, or arrays
//!   and objects of them nested a few levels deep ([`Cursor::skip_value`]).
//!
//! Anything else (a missing required field, a repeated one, an escape, a quoted or `null`
//! counter, a syntax error, a struct written as an array) is read by serde from the start, so
//! every such body reads, or fails with its message, exactly as it did. The property tests below
//! check that the two readings agree on generated answers.

use super::scan::{Cursor, Seen, plain_or_serde};
use super::{Checked, CheckedStr, RUNNING_TIMESTAMP, nan};
use super::{JobDetails, JobPlan, JobVertexDetails, PlanInput, PlanNode, RunningTimestamp, VertexIoMetrics};
use std::borrow::Cow;
use std::marker::PhantomData;

/// The answer of `GET /jobs/{jobid}`: read in one pass when it is of the plain shape (module
/// docs), else by serde.
///
/// # Errors
/// serde's error for a body it does not accept.
pub(crate) fn read(text: &str) -> serde_json::Result<JobDetails<'_>> {
    plain_or_serde(text, plain)
}

/// The details of a plain answer, `None` for any other body.
fn plain(text: &str) -> Option<JobDetails<'_>> {
    let mut at = Cursor::new(text);
    let details = details(&mut at)?;
    at.at_end().then_some(details)
}

/// [`JobDetails`]: `jid` and `state` required.
fn details<'a>(at: &mut Cursor<'a>) -> Option<JobDetails<'a>> {
    let mut seen = Seen::default();
    let mut timestamps = RunningTimestamp::default();
    let mut vertices = Vec::new();
    let mut plan = None;
    at.object(|at, key| match key {
        "jid" => seen.first(0).and_then(|()| at.plain_string()).map(drop),
        "name" => seen.first(1).and_then(|()| at.plain_string()).map(drop),
        "state" => seen.first(2).and_then(|()| at.plain_string()).map(drop),
        "timestamps" => {
            seen.first(3)?;
            timestamps = running_timestamp(at)?;
            Some(())
        }
        "vertices" => {
            seen.first(4)?;
            at.array(|at| {
                vertices.push(vertex(at)?);
                Some(())
            })
        }
        "plan" => {
            seen.first(5)?;
            plan = if at.null() { None } else { Some(job_plan(at)?) };
            Some(())
        }
        _ => at.skip_value(),
    })?;
    (seen.has(0) && seen.has(2)).then_some(JobDetails {
        _jid: CheckedStr,
        _name: CheckedStr,
        _state: CheckedStr,
        timestamps,
        vertices,
        plan,
    })
}

/// [`RunningTimestamp`]: every value an `i64`; of repeated `RUNNING` keys the last wins.
fn running_timestamp(at: &mut Cursor<'_>) -> Option<RunningTimestamp> {
    let mut running = None;
    at.object(|at, key| {
        let ms = at.integer()?;
        if key == RUNNING_TIMESTAMP {
            running = Some(ms);
        }
        Some(())
    })?;
    Some(RunningTimestamp(running))
}

/// [`JobVertexDetails`]: `id`, `maxParallelism` and `parallelism` required.
fn vertex<'a>(at: &mut Cursor<'a>) -> Option<JobVertexDetails<'a>> {
    let mut seen = Seen::default();
    let (mut id, mut name, mut status) = ("", "", "");
    let mut max_parallelism = 0;
    let mut group = None;
    let mut metrics = None;
    at.object(|at, key| {
        match key {
            "id" => {
                seen.first(0)?;
                id = at.plain_string()?;
            }
            "name" => {
                seen.first(1)?;
                name = at.plain_string()?;
            }
            "maxParallelism" => {
                seen.first(2)?;
                max_parallelism = at.integer()?;
            }
            "parallelism" => {
                seen.first(3)?;
                at.integer()?;
            }
            "status" => {
                seen.first(4)?;
                status = at.plain_string()?;
            }
            "slotSharingGroupId" => {
                seen.first(5)?;
                group = if at.null() { None } else { Some(at.plain_string()?) };
            }
            "metrics" => {
                seen.first(6)?;
                metrics = if at.null() { None } else { Some(io_metrics(at)?) };
            }
            _ => at.skip_value()?,
        }
        Some(())
    })?;
    (seen.has(0) && seen.has(2) && seen.has(3)).then_some(JobVertexDetails {
        id: Cow::Borrowed(id),
        name: Cow::Borrowed(name),
        max_parallelism,
        _parallelism: Checked(PhantomData),
        status: Cow::Borrowed(status),
        slot_sharing_group_id: group.map(Cow::Borrowed),
        metrics,
    })
}

/// [`VertexIoMetrics`]: the counters `u64`, the busy time a number (its lenient reading's quoted
/// and `null` forms are left to serde).
fn io_metrics(at: &mut Cursor<'_>) -> Option<VertexIoMetrics> {
    let mut seen = Seen::default();
    let mut metrics = VertexIoMetrics {
        read_records: 0,
        write_records: 0,
        accumulated_busy_time: nan(),
    };
    at.object(|at, key| {
        match key {
            "read-records" => {
                seen.first(0)?;
                metrics.read_records = at.unsigned()?;
            }
            "write-records" => {
                seen.first(1)?;
                metrics.write_records = at.unsigned()?;
            }
            "accumulated-busy-time" => {
                seen.first(2)?;
                metrics.accumulated_busy_time = at.number()?;
            }
            _ => at.skip_value()?,
        }
        Some(())
    })?;
    Some(metrics)
}

/// [`JobPlan`]: nothing required.
fn job_plan<'a>(at: &mut Cursor<'a>) -> Option<JobPlan<'a>> {
    let mut seen = Seen::default();
    let mut nodes = Vec::new();
    at.object(|at, key| match key {
        "jid" => seen.first(0).and_then(|()| at.plain_string()).map(drop),
        "nodes" => {
            seen.first(1)?;
            at.array(|at| {
                nodes.push(plan_node(at)?);
                Some(())
            })
        }
        _ => at.skip_value(),
    })?;
    Some(JobPlan {
        _jid: CheckedStr,
        nodes,
    })
}

/// [`PlanNode`]: `id` and `parallelism` required.
fn plan_node<'a>(at: &mut Cursor<'a>) -> Option<PlanNode<'a>> {
    let mut seen = Seen::default();
    let mut id = "";
    let mut parallelism = 0;
    let mut inputs = Vec::new();
    at.object(|at, key| {
        match key {
            "id" => {
                seen.first(0)?;
                id = at.plain_string()?;
            }
            "parallelism" => {
                seen.first(1)?;
                parallelism = at.integer()?;
            }
            "description" => {
                seen.first(2)?;
                at.plain_string()?;
            }
            "inputs" => {
                seen.first(3)?;
                at.array(|at| {
                    inputs.push(plan_input(at)?);
                    Some(())
                })?;
            }
            _ => at.skip_value()?,
        }
        Some(())
    })?;
    (seen.has(0) && seen.has(1)).then_some(PlanNode {
        id: Cow::Borrowed(id),
        parallelism,
        _description: CheckedStr,
        inputs,
    })
}

/// [`PlanInput`]: `id` required.
fn plan_input<'a>(at: &mut Cursor<'a>) -> Option<PlanInput<'a>> {
    let mut seen = Seen::default();
    let (mut id, mut ship_strategy) = ("", "");
    at.object(|at, key| {
        match key {
            "id" => {
                seen.first(0)?;
                id = at.plain_string()?;
            }
            "ship_strategy" => {
                seen.first(1)?;
                ship_strategy = at.plain_string()?;
            }
            "exchange" => {
                seen.first(2)?;
                at.plain_string()?;
            }
            _ => at.skip_value()?,
        }
        Some(())
    })?;
    seen.has(0).then_some(PlanInput {
        id: Cow::Borrowed(id),
        ship_strategy: Cow::Borrowed(ship_strategy),
        _exchange: CheckedStr,
    })
}

#[cfg(test)]
mod tests {
    use super::super::scan::testing::{finite, members, object, space, spliced, text};
    use super::super::tests::read_view;
    use super::*;
    use proptest::prelude::*;

    /// What a reading gives: what the collector reads of it, or the error's message.
    fn outcome(result: serde_json::Result<JobDetails<'_>>) -> Result<String, String> {
        result.map(|details| read_view(&details)).map_err(|e| e.to_string())
    }

    /// Both readings of `text`: by hand (falling back to serde) and by serde alone.
    fn both(text: &str) -> (Result<String, String>, Result<String, String>) {
        (outcome(read(text)), outcome(serde_json::from_str(text)))
    }

    const RECORDED: [&str; 2] = [
        include_str!("../../../../tests/fixtures/job-details.json"),
        include_str!("../../../../tests/fixtures/job-details-after-rescale.json"),
    ];

    #[test]
    fn recorded_details_are_plain_and_read_as_serde_reads_them() {
        for text in RECORDED {
            assert!(plain(text).is_some(), "{text}");
            let (by_hand, by_serde) = both(text);
            assert!(by_serde.is_ok());
            assert_eq!(by_hand, by_serde);
        }
    }

    #[test]
    fn plain_details_worked_out_by_hand() {
        let text = r#" {"jid":"j1","extra":[1,-2.5e3,{"a":[true,false,null]},"s"],"state":"RUNNING",
            "timestamps":{"RUNNING":1700000000000,"CREATED":5,"RUNNING":1700000000123},
            "vertices":[
              {"tasks":{"RUNNING":2},"id":"a","name":"Source: x<br/>","maxParallelism":128,"parallelism":2,
               "status":"FINISHED","slotSharingGroupId":null,
               "metrics":{"read-bytes":9,"read-records":0,"write-records":18446744073709551,"accumulated-busy-time":-0,"x":true}},
              {"id":"b","maxParallelism":-3,"parallelism":0,"metrics":{"accumulated-busy-time":1483.5}},
              {"id":"c","maxParallelism":1,"parallelism":1,"slotSharingGroupId":"g","metrics":null}],
            "plan":{"nodes":[{"id":"b","parallelism":4,"description":"d","inputs":[{"id":"a","ship_strategy":"HASH","exchange":"pipelined_bounded"}],"optimizer_properties":{}},
                             {"parallelism":1,"id":"a"}]}} "#;
        let details = plain(text).expect("plain");
        assert_eq!(
            details.running_since().map(|t| t.timestamp_millis()),
            Some(1_700_000_000_123)
        );
        let [a, b, c] = &details.vertices[..] else {
            panic!("three vertices: {:?}", details.vertices)
        };
        assert_eq!((&*a.id, &*a.name, a.max_parallelism), ("a", "Source: x<br/>", 128));
        assert!(a.is_finished() && a.slot_sharing_group_id.is_none());
        let io = a.metrics.expect("metrics");
        assert_eq!((io.read_records, io.write_records), (0, 18_446_744_073_709_551));
        assert_eq!(io.accumulated_busy_time.to_bits(), (-0.0f64).to_bits());
        assert_eq!((&*b.name, b.max_parallelism, b.is_finished()), ("", -3, false));
        let io = b.metrics.expect("metrics");
        assert_eq!(
            (io.read_records, io.write_records, io.accumulated_busy_time),
            (0, 0, 1483.5)
        );
        assert_eq!((c.slot_sharing_group_id.as_deref(), c.metrics), (Some("g"), None));
        let plan = details.plan.as_ref().expect("a plan");
        assert_eq!(plan.nodes.len(), 2);
        assert_eq!((&*plan.nodes[0].id, plan.nodes[0].parallelism), ("b", 4));
        let input = &plan.nodes[0].inputs[0];
        assert_eq!((&*input.id, &*input.ship_strategy), ("a", "HASH"));
        assert!(plan.nodes[1].inputs.is_empty());
        // What serde reads, too.
        let (by_hand, by_serde) = both(text);
        assert_eq!(by_hand, by_serde);

        let least = plain(r#"{"state":"CREATED","jid":"j","plan":null}"#).expect("plain");
        assert!(least.vertices.is_empty() && least.plan.is_none() && least.running_since().is_none());
    }

    #[test]
    fn other_shapes_are_left_to_serde() {
        let vertex = r#"{"id":"v","maxParallelism":1,"parallelism":1}"#;
        let with_vertex = |v: &str| format!(r#"{{"jid":"j","state":"RUNNING","vertices":[{v}]}}"#);
        let with_plan = |p: &str| format!(r#"{{"jid":"j","state":"RUNNING","plan":{p}}}"#);
        for text in [
            r#"{"state":"RUNNING"}"#.to_owned(),                       // no jid
            r#"{"jid":"j"}"#.to_owned(),                               // no state
            r#"{"jid":"j","state":"RUNNING","jid":"k"}"#.to_owned(),   // a repeated field
            r#"{"jid":"j\u0031","state":"RUNNING"}"#.to_owned(),       // an escape in a string read
            r#"{"jid":"j","state":"RUNNING","x":"\""}"#.to_owned(),    // an escape in one skipped
            r#"{"\u006aid":"j","state":"RUNNING"}"#.to_owned(),        // an escape in a key
            r#"{"jid":"j","state":"RUNNING","name":null}"#.to_owned(), // null for a string
            r#"{"jid":"j","state":"RUNNING","timestamps":null}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":{"RUNNING":1.0}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":{"RUNNING":-0}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":{"RUNNING":9223372036854775808}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":null}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","x":1e400}"#.to_owned(), // out of range, skipped
            r#"{"jid":"j","state":"RUNNING","x":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}"#.to_owned(), // deep
            r#"{"jid":"j","state":"RUNNING","x":tru}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING",}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING"} x"#.to_owned(),
            r#"["j","n","RUNNING"]"#.to_owned(), // a struct as a sequence
            with_vertex(r#"{"id":"v","parallelism":1}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1}"#),
            with_vertex(r#"{"maxParallelism":1,"parallelism":1}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":"1"}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1e2,"parallelism":1}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"status":null}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"slotSharingGroupId":5}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"read-records":-1}}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"read-records":1.5}}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"accumulated-busy-time":"NaN"}}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"accumulated-busy-time":null}}"#),
            with_vertex(r#"{"id":"v","maxParallelism":1,"parallelism":1,"metrics":[]}"#),
            with_vertex(&format!(
                "{vertex},{{\"id\":\"w\",\"maxParallelism\":1,\"parallelism\":1,\"id\":\"x\"}}"
            )),
            with_vertex("{\"id\":\"v\t\",\"maxParallelism\":1,\"parallelism\":1}"), // a control character
            with_plan("5"),
            with_plan(r#"{"jid":1}"#),
            with_plan(r#"{"nodes":[{"parallelism":1}]}"#),
            with_plan(r#"{"nodes":[{"id":"v"}]}"#),
            with_plan(r#"{"nodes":[{"id":"v","parallelism":1,"description":"a","description":"b"}]}"#),
            with_plan(r#"{"nodes":[{"id":"v","parallelism":1,"inputs":[{"ship_strategy":"HASH"}]}]}"#),
            with_plan(r#"{"nodes":[{"id":"v","parallelism":1,"inputs":[{"id":"u","exchange":[]}]}]}"#),
            String::new(),
        ] {
            assert!(plain(&text).is_none(), "{text}");
            let (by_hand, by_serde) = both(&text);
            assert_eq!(by_hand, by_serde, "{text}");
        }
    }

    /// Job details of the plain shape, as Flink writes them and beyond: every field of each
    /// object in any order, the optional ones present or not, unknown ones among them.
    fn plain_details() -> impl Strategy<Value = String> {
        let quoted = || text().prop_map(|t| format!("\"{t}\"")).boxed();
        // Integers as Flink writes them, and up to 18 digits either way (serde's corners past
        // them come by the mutations).
        let int = || {
            prop_oneof![0i64..100_000, -999_999_999_999_999_999i64..=999_999_999_999_999_999]
                .prop_map(|v| v.to_string())
                .boxed()
        };
        let unsigned = || {
            prop_oneof![0u64..100_000, 0u64..=9_999_999_999_999_999_999]
                .prop_map(|v| v.to_string())
                .boxed()
        };
        let finite = || finite().boxed();
        let or_null = |v: BoxedStrategy<String>| prop_oneof![1 => Just("null".to_owned()), 3 => v].boxed();
        let metrics = members(
            vec![],
            vec![
                ("read-records", unsigned()),
                ("write-records", unsigned()),
                ("accumulated-busy-time", finite()),
            ],
        )
        .prop_map(|m| object(m, ""))
        .boxed();
        let status = prop_oneof![
            Just("\"RUNNING\"".to_owned()),
            Just("\"FINISHED\"".to_owned()),
            Just("\"finished\"".to_owned())
        ]
        .boxed();
        let vertex = members(
            vec![("id", quoted()), ("maxParallelism", int()), ("parallelism", int())],
            vec![
                ("name", quoted()),
                ("status", status),
                ("slotSharingGroupId", or_null(quoted())),
                ("metrics", or_null(metrics)),
            ],
        )
        .prop_map(|m| object(m, ""));
        let input = members(
            vec![("id", quoted())],
            vec![("ship_strategy", quoted()), ("exchange", quoted())],
        )
        .prop_map(|m| object(m, ""));
        let node = members(
            vec![("id", quoted()), ("parallelism", int())],
            vec![
                ("description", quoted()),
                (
                    "inputs",
                    proptest::collection::vec(input, 0..3)
                        .prop_map(|v| format!("[{}]", v.join(",")))
                        .boxed(),
                ),
            ],
        )
        .prop_map(|m| object(m, ""));
        let plan = members(
            vec![],
            vec![
                ("jid", quoted()),
                (
                    "nodes",
                    proptest::collection::vec(node, 0..3)
                        .prop_map(|v| format!("[{}]", v.join(",")))
                        .boxed(),
                ),
            ],
        )
        .prop_map(|m| object(m, ""))
        .boxed();
        let timestamps =
            proptest::collection::vec((prop_oneof![Just("RUNNING".to_owned()), "[A-Z]{1,9}"], int()), 0..4)
                .prop_map(|entries| {
                    let entries: Vec<String> = entries.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", entries.join(","))
                })
                .boxed();
        (
            members(
                vec![("jid", quoted()), ("state", quoted())],
                vec![
                    ("name", quoted()),
                    ("timestamps", timestamps),
                    (
                        "vertices",
                        proptest::collection::vec(vertex, 0..4)
                            .prop_map(|v| format!("[{}]", v.join(",")))
                            .boxed(),
                    ),
                    ("plan", or_null(plan)),
                ],
            ),
            space(),
        )
            .prop_map(|(m, s)| format!("{s}{}{s}", object(m, s)))
    }

    /// A change that may take the details out of the plain shape, or out of JSON.
    fn mutation() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("null".to_owned()),
            Just("\"1\"".to_owned()),
            Just("1.5".to_owned()),
            Just("-0".to_owned()),
            Just("1e400".to_owned()),
            Just("9223372036854775808".to_owned()),
            Just("true".to_owned()),
            Just("\"jid\":\"x\",".to_owned()),
            Just("\"id\":\"b\",".to_owned()),
            Just("\"parallelism\":1,".to_owned()),
            Just("\"metrics\":{},".to_owned()),
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
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whatever the body, the reading by hand gives what serde gives: the same reading, or
        /// the same error.
        #[test]
        fn reads_every_answer_as_serde_does(text in prop_oneof![plain_details(), spliced(plain_details(), mutation())]) {
            let (by_hand, by_serde) = both(&text);
            prop_assert_eq!(by_hand, by_serde, "{}", text);
        }

        /// Details of the plain shape are read by hand, never left to serde.
        #[test]
        fn plain_details_are_read_by_hand(text in plain_details()) {
            prop_assert!(plain(&text).is_some(), "{}", text);
        }
    }
}
