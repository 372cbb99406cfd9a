//! The job details read in place: [`JobDetails`] borrows its strings from the answer's body
//! (a [`Cow`] owns only a string that had escapes to undo) and keeps nothing the collector does not
//! read, so a cycle allocates no copy of the plan's descriptions, the vertex names or the ids.
//!
//! Each type here mirrors the owned type of [`super`] of the same name field for field (same names,
//! order and defaults; the same type name, which serde's messages quote), so that it accepts
//! exactly the bodies the owned type accepts and rejects the others with the same message. The
//! rest of the crate knows them as `JobDetailsView`, `JobPlanView`, and so on.
//!
//! A field the collector does not read is still checked as the owned model checks it
//! ([`CheckedStr`], [`Checked`]), not skipped: a body the owned model refuses must not pass here.
//!
//! The job details and the aggregated-metrics answers, read every cycle, are read by hand when
//! they have the plain shape Flink writes ([`details`], [`aggregated`], over the cursor of
//! [`scan`]) and through these types otherwise, so both readings accept the same bodies. The
//! jobs overview, read every cycle too, and the metric listings are read by hand into their
//! owned types ([`overview`], [`names`]).

pub(crate) mod aggregated;
pub(crate) mod details;
pub(crate) mod names;
pub(crate) mod overview;
mod scan;

use super::{RUNNING_TIMESTAMP, VertexIoMetrics, is_finished, lenient_f64, nan, running_since, vertex_by_id};
use autoscaler_metrics::collection::AggregatedMetric;
use chrono::{DateTime, Utc};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, de::DeserializeOwned};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// [`super::AggregatedMetricValue`] with its name borrowed from the body (owned only when it had
/// escapes to undo). The owned type reads through this one, so both accept exactly the same bodies.
#[derive(Debug, Deserialize)]
pub(crate) struct AggregatedMetricValue<'a> {
    /// The metric name.
    #[serde(borrow)]
    pub(crate) id: Cow<'a, str>,
    /// Smallest value.
    #[serde(default = "nan", deserialize_with = "lenient_f64")]
    min: f64,
    /// Largest value.
    #[serde(default = "nan", deserialize_with = "lenient_f64")]
    max: f64,
    /// Mean.
    #[serde(default = "nan", deserialize_with = "lenient_f64")]
    avg: f64,
    /// Sum.
    #[serde(default = "nan", deserialize_with = "lenient_f64")]
    sum: f64,
    /// Skew.
    #[serde(default = "nan", deserialize_with = "lenient_f64")]
    skew: f64,
}

impl AggregatedMetricValue<'_> {
    /// The aggregates without the name.
    pub(crate) fn aggregates(&self) -> AggregatedMetric {
        AggregatedMetric {
            min: self.min,
            max: self.max,
            avg: self.avg,
            sum: self.sum,
            skew: self.skew,
        }
    }
}

/// [`super::JobDetails`] borrowed from the body of `GET /jobs/{jobid}`.
#[derive(Debug, Deserialize)]
pub(crate) struct JobDetails<'a> {
    /// Job id (not read).
    #[serde(rename = "jid")]
    _jid: CheckedStr,
    /// Job name (not read).
    #[serde(rename = "name", default)]
    _name: CheckedStr,
    /// Job state (not read).
    #[serde(rename = "state")]
    _state: CheckedStr,
    /// `timestamps`, of which only `RUNNING` is kept.
    #[serde(default)]
    timestamps: RunningTimestamp,
    /// The job vertices.
    #[serde(default, borrow)]
    pub(crate) vertices: Vec<JobVertexDetails<'a>>,
    /// The job graph.
    #[serde(default, borrow)]
    pub(crate) plan: Option<JobPlan<'a>>,
}

impl JobDetails<'_> {
    /// [`super::JobDetails::running_since`].
    pub(crate) fn running_since(&self) -> Option<DateTime<Utc>> {
        running_since(self.timestamps.0)
    }

    /// [`super::JobDetails::vertex`].
    pub(crate) fn vertex(&self, id: &str) -> Option<&JobVertexDetails<'_>> {
        vertex_by_id(&self.vertices, id, |v| &v.id)
    }
}

/// [`super::JobVertexDetails`], borrowed.
#[derive(Debug, Deserialize)]
pub(crate) struct JobVertexDetails<'a> {
    /// Job vertex id.
    #[serde(borrow)]
    pub(crate) id: Cow<'a, str>,
    /// Vertex name.
    #[serde(default, borrow)]
    pub(crate) name: Cow<'a, str>,
    /// Max parallelism (key groups).
    #[serde(rename = "maxParallelism")]
    pub(crate) max_parallelism: i64,
    /// Current parallelism (not read: the plan's is the topology's).
    #[serde(rename = "parallelism")]
    _parallelism: Checked<i64>,
    /// Execution state of the vertex.
    #[serde(default, borrow)]
    status: Cow<'a, str>,
    /// Slot sharing group.
    #[serde(rename = "slotSharingGroupId", default, borrow, deserialize_with = "optional_text")]
    pub(crate) slot_sharing_group_id: Option<Cow<'a, str>>,
    /// Accumulated IO counters (no strings: the owned type itself).
    #[serde(default)]
    pub(crate) metrics: Option<VertexIoMetrics>,
}

impl JobVertexDetails<'_> {
    /// [`super::JobVertexDetails::is_finished`].
    pub(crate) fn is_finished(&self) -> bool {
        is_finished(&self.status)
    }
}

/// [`super::JobPlanResponse`], borrowed.
#[derive(Debug, Deserialize)]
pub(crate) struct JobPlanResponse<'a> {
    /// The plan.
    #[serde(borrow)]
    pub(crate) plan: JobPlan<'a>,
}

/// [`super::JobPlan`], borrowed.
#[derive(Debug, Deserialize)]
pub(crate) struct JobPlan<'a> {
    /// Job id (not read).
    #[serde(rename = "jid", default)]
    _jid: CheckedStr,
    /// Job vertices with their inputs.
    #[serde(default, borrow)]
    pub(crate) nodes: Vec<PlanNode<'a>>,
}

/// [`super::PlanNode`], borrowed.
#[derive(Debug, Deserialize)]
pub(crate) struct PlanNode<'a> {
    /// Job vertex id.
    #[serde(borrow)]
    pub(crate) id: Cow<'a, str>,
    /// Parallelism.
    pub(crate) parallelism: i64,
    /// Operator description (not read; the longest string of the answer).
    #[serde(rename = "description", default)]
    _description: CheckedStr,
    /// Upstream edges.
    #[serde(default, borrow)]
    pub(crate) inputs: Vec<PlanInput<'a>>,
}

/// [`super::PlanInput`], borrowed.
#[derive(Debug, Deserialize)]
pub(crate) struct PlanInput<'a> {
    /// Upstream vertex id.
    #[serde(borrow)]
    pub(crate) id: Cow<'a, str>,
    /// Ship strategy.
    #[serde(default, borrow)]
    pub(crate) ship_strategy: Cow<'a, str>,
    /// Exchange mode (not read).
    #[serde(rename = "exchange", default)]
    _exchange: CheckedStr,
}

/// A string the view does not read: checked to be a string (as a `String` field is, UTF-8 and
/// escapes included) and dropped without a copy.
#[derive(Debug, Clone, Copy, Default)]
struct CheckedStr;

impl<'de> Deserialize<'de> for CheckedStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl Visitor<'_> for Any {
            type Value = CheckedStr;
            // `String`'s expectation, so that a wrong type reads as the owned model's error.
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<CheckedStr, E> {
                Ok(CheckedStr)
            }
        }
        d.deserialize_str(Any)
    }
}

/// A value the view does not read, deserialized as a `T` (same input accepted, same errors) and
/// dropped; for types that allocate nothing (numbers).
#[derive(Debug, Clone, Copy)]
struct Checked<T>(PhantomData<T>);

impl<'de, T: DeserializeOwned + Copy> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|_| Checked(PhantomData))
    }
}

/// The `RUNNING` entry of the details' `timestamps`. The other entries are checked as the owned
/// model's `BTreeMap<String, i64>` checks them (string keys, `i64` values) and dropped; of repeated
/// `RUNNING` keys the last wins, as it does in the map.
#[derive(Debug, Clone, Copy, Default)]
struct RunningTimestamp(Option<i64>);

impl<'de> Deserialize<'de> for RunningTimestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = RunningTimestamp;
            // The map's expectation, for the owned model's error.
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<RunningTimestamp, A::Error> {
                let mut running = None;
                while let Some(IsRunning(is_running)) = entries.next_key()? {
                    let ms: i64 = entries.next_value()?;
                    if is_running {
                        running = Some(ms);
                    }
                }
                Ok(RunningTimestamp(running))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// A key of `timestamps`: whether it is `RUNNING` (compared in place, escapes undone).
struct IsRunning(bool);

impl<'de> Deserialize<'de> for IsRunning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = IsRunning;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<IsRunning, E> {
                Ok(IsRunning(key == RUNNING_TIMESTAMP))
            }
        }
        d.deserialize_str(Key)
    }
}

/// An optional string, borrowed when it has no escapes (`#[serde(borrow)]` borrows a `Cow` field
/// but not one inside an `Option`).
fn optional_text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text<'a>>::deserialize(d)?.map(|text| text.0))
}

#[cfg(test)]
mod tests {
    use super::super as owned;
    use super::*;

    /// What the collector reads of `details`, either reading: the two models have the same field
    /// names and methods, so one text serves both.
    macro_rules! read {
        ($details:expr) => {{
            let details = $details;
            let vertices: Vec<String> = details
                .vertices
                .iter()
                .map(|v| {
                    format!(
                        "{} {:?} max={} finished={} group={:?} io={:?}",
                        v.id,
                        v.name,
                        v.max_parallelism,
                        v.is_finished(),
                        v.slot_sharing_group_id,
                        v.metrics
                    )
                })
                .collect();
            let plan = details.plan.as_ref().map(|plan| {
                plan.nodes
                    .iter()
                    .map(|n| {
                        let inputs: Vec<String> = n
                            .inputs
                            .iter()
                            .map(|i| format!("{}:{}", i.id, i.ship_strategy))
                            .collect();
                        let found = details.vertex(&n.id).map(|v| &*v.id);
                        format!("{} p={} inputs={inputs:?} vertex={found:?}", n.id, n.parallelism)
                    })
                    .collect::<Vec<_>>()
            });
            format!(
                "running={:?}\nvertices={vertices:#?}\nplan={plan:#?}",
                details.running_since()
            )
        }};
    }

    /// What the collector reads of the job details, as the owned model reads it.
    fn read_owned(details: &owned::JobDetails) -> String {
        read!(details)
    }

    /// The same, read through the view (by serde or by hand).
    pub(super) fn read_view(details: &JobDetails<'_>) -> String {
        read!(details)
    }

    /// Both readings of `body`: what they read, or their error message. The view's reading is
    /// checked to be the hand reader's too ([`details::read`]), when the body is text.
    fn both(body: &[u8]) -> (Result<String, String>, Result<String, String>) {
        let owned = serde_json::from_slice::<owned::JobDetails>(body)
            .map(|d| read_owned(&d))
            .map_err(|e| e.to_string());
        let view = serde_json::from_slice::<JobDetails<'_>>(body)
            .map(|d| read_view(&d))
            .map_err(|e| e.to_string());
        if let Ok(text) = std::str::from_utf8(body) {
            let by_hand = details::read(text).map(|d| read_view(&d)).map_err(|e| e.to_string());
            assert_eq!(by_hand, view, "{text}");
        }
        (owned, view)
    }

    const RECORDED: &str = include_str!("../../../tests/fixtures/job-details.json");
    const RECORDED_AFTER_RESCALE: &str = include_str!("../../../tests/fixtures/job-details-after-rescale.json");

    #[test]
    fn the_view_reads_the_recorded_details_as_the_owned_model() {
        for body in [RECORDED, RECORDED_AFTER_RESCALE] {
            let (owned, view) = both(body.as_bytes());
            let owned = owned.expect("the recorded details parse");
            assert_eq!(Ok(owned.clone()), view);
            assert!(owned.contains("expensive-keyed") && owned.contains("HASH"), "{owned}");
        }
        let view: JobDetails<'_> = serde_json::from_str(RECORDED).expect("parses");
        assert_eq!(
            view.running_since().map(|t| t.timestamp_millis()),
            Some(1_796_101_039_356)
        );
        assert_eq!(view.plan.as_ref().map(|p| p.nodes.len()), Some(4));
        // Nothing of the recorded answer has escapes: every string is borrowed.
        for vertex in &view.vertices {
            assert!(matches!(vertex.id, Cow::Borrowed(_)) && matches!(vertex.name, Cow::Borrowed(_)));
            assert!(matches!(vertex.slot_sharing_group_id, Some(Cow::Borrowed(_))));
        }
    }

    #[test]
    fn the_view_reads_the_recorded_plan_as_the_owned_model() {
        let body = include_str!("../../../tests/fixtures/job-plan.json");
        let owned: owned::JobPlanResponse = serde_json::from_str(body).expect("the recorded plan parses");
        let view: JobPlanResponse<'_> = serde_json::from_str(body).expect("the view parses");
        assert_eq!(
            owned
                .plan
                .nodes
                .iter()
                .map(|n| (
                    n.id.clone(),
                    n.inputs
                        .iter()
                        .map(|i| format!("{}:{}", i.id, i.ship_strategy))
                        .collect(),
                    n.parallelism
                ))
                .collect::<Vec<(String, Vec<String>, i64)>>(),
            view.plan
                .nodes
                .iter()
                .map(|n| (
                    n.id.to_string(),
                    n.inputs
                        .iter()
                        .map(|i| format!("{}:{}", i.id, i.ship_strategy))
                        .collect(),
                    n.parallelism
                ))
                .collect::<Vec<_>>()
        );
        assert_eq!(view.plan.nodes.len(), 4);
    }

    #[test]
    fn aggregated_metrics_borrow_their_names_and_read_as_the_owned_values() {
        let body = include_str!("../../../tests/fixtures/vertex-subtask-metrics-agg.json");
        let owned: Vec<owned::AggregatedMetricValue> = serde_json::from_str(body).expect("the recorded answer parses");
        let view: Vec<AggregatedMetricValue<'_>> = serde_json::from_str(body).expect("the view parses");
        assert!(!view.is_empty());
        assert_eq!(owned.len(), view.len());
        for (owned, view) in owned.iter().zip(&view) {
            assert!(matches!(view.id, Cow::Borrowed(_)), "{:?}", view.id);
            assert_eq!(owned.id, view.id);
            assert_eq!(format!("{:?}", owned.aggregates()), format!("{:?}", view.aggregates()));
        }
        // A name with escapes is owned, unescaped; what Flink did not send is NaN; a numeric
        // string and null read as the owned model reads them.
        let body = r#"[{"id":"a\u002eb","max":"12.5","sum":null},{"id":"c","min":1,"avg":2,"skew":3}]"#;
        let view: Vec<AggregatedMetricValue<'_>> = serde_json::from_str(body).expect("parses");
        assert!(matches!(&view[0].id, Cow::Owned(id) if id == "a.b"));
        let first = view[0].aggregates();
        assert_eq!(first.max, 12.5);
        assert!(first.min.is_nan() && first.avg.is_nan() && first.sum.is_nan() && first.skew.is_nan());
        let second = view[1].aggregates();
        assert_eq!((second.min, second.avg, second.skew), (1.0, 2.0, 3.0));
        let owned: Vec<owned::AggregatedMetricValue> = serde_json::from_str(body).expect("parses");
        assert_eq!(owned[0].id, "a.b");
        for body in [
            r#"[{"id":"a","max":true}]"#,
            r#"[{"max":1}]"#,
            r#"[{"id":5}]"#,
            r#"{"id":"a"}"#,
        ] {
            let owned = serde_json::from_str::<Vec<owned::AggregatedMetricValue>>(body).map_err(|e| e.to_string());
            let view = serde_json::from_str::<Vec<AggregatedMetricValue<'_>>>(body).map_err(|e| e.to_string());
            assert!(owned.is_err(), "{body}");
            assert_eq!(owned.map(|_| ()), view.map(|_| ()), "{body}");
        }
    }

    #[test]
    fn escaped_strings_read_as_the_owned_model_reads_them() {
        // Escapes in ids, names, group, status (`FINISHED`), ship strategy (`HASH`), a description
        // and the `RUNNING` key itself.
        let body = r#"{"jid":"j\"1","name":"caf\u00e9","state":"RUNNING",
            "timestamps":{"RUNN\u0049NG":1700000000000,"CREATED":1},
            "vertices":[
              {"id":"a\"b","name":"Source: caf\u00e9 \"q\"","maxParallelism":128,"parallelism":2,
               "status":"FINI\u0053HED","slotSharingGroupId":"g\u00e9"},
              {"id":"c","name":"sink","maxParallelism":64,"parallelism":1,"status":"RUNNING"}],
            "plan":{"jid":"j\"1","nodes":[
              {"id":"a\"b","parallelism":2,"description":"Source: caf\u00e9<br/>\"x\"","inputs":[]},
              {"id":"c","parallelism":1,"description":"sink",
               "inputs":[{"id":"a\"b","ship_strategy":"HA\u0053H","exchange":"pipelined\u005fbounded"}]}]}}"#;
        let (owned, view) = both(body.as_bytes());
        let owned = owned.expect("parses");
        assert_eq!(Ok(owned.clone()), view);
        assert!(owned.contains("HASH") && owned.contains("finished=true"), "{owned}");

        let view: JobDetails<'_> = serde_json::from_str(body).expect("parses");
        assert_eq!(
            view.running_since().map(|t| t.timestamp_millis()),
            Some(1_700_000_000_000)
        );
        let source = view.vertex("a\"b").expect("the escaped id is found");
        assert_eq!(source.name, "Source: café \"q\"");
        assert_eq!(source.slot_sharing_group_id.as_deref(), Some("gé"));
        assert!(source.is_finished());
        let input = view
            .plan
            .as_ref()
            .and_then(|plan| plan.nodes.get(1))
            .and_then(|sink| sink.inputs.first())
            .expect("the sink's input");
        assert_eq!((&*input.id, &*input.ship_strategy), ("a\"b", "HASH"));
        // Only what had escapes is owned.
        assert!(matches!(source.id, Cow::Owned(_)));
        assert!(matches!(view.vertices[1].id, Cow::Borrowed("c")));
    }

    #[test]
    fn missing_fields_take_the_owned_models_defaults() {
        for body in [
            r#"{"jid":"j","state":"CREATED"}"#,
            r#"{"jid":"j","state":"CREATED","plan":null,"timestamps":{"RUNNING":0}}"#,
            r#"{"jid":"j","state":"RUNNING","timestamps":{"CREATED":5},
                "vertices":[{"id":"v","maxParallelism":1,"parallelism":1}],
                "plan":{"nodes":[{"id":"v","parallelism":1}]}}"#,
            r#"{"jid":"j","state":"RUNNING","timestamps":{"RUNNING":1,"RUNNING":7},"plan":{},
                "vertices":[{"id":"v","maxParallelism":1,"parallelism":1,"slotSharingGroupId":null,
                             "metrics":{"accumulated-busy-time":"NaN","read-records":3}},
                            {"id":"w","maxParallelism":1,"parallelism":1,"metrics":{"accumulated-busy-time":null}},
                            {"id":"x","maxParallelism":1,"parallelism":1,"metrics":{"accumulated-busy-time":"1.5"}},
                            {"id":"y","maxParallelism":1,"parallelism":1,"metrics":{}}],
                "unknown":{"nested":[1,"two"]}}"#,
            // A struct may come as a sequence of its fields, in order.
            r#"["j","n","RUNNING",{"RUNNING":3},[["v","name",4,2,"FINISHED",null,null]],null]"#,
        ] {
            let (owned, view) = both(body.as_bytes());
            assert!(owned.is_ok(), "{body}: {owned:?}");
            assert_eq!(owned, view, "{body}");
        }
        let view: JobDetails<'_> = serde_json::from_str(r#"{"jid":"j","state":"CREATED"}"#).expect("parses");
        assert!(view.plan.is_none() && view.vertices.is_empty() && view.running_since().is_none());
    }

    #[test]
    fn malformed_details_fail_with_the_owned_models_message() {
        let valid_vertex = r#"{"id":"v","maxParallelism":1,"parallelism":1}"#;
        let bodies: Vec<Vec<u8>> = [
            r#"{"jid": "69d8", "state": "RUNNING", "vertices": [{"id": "#.to_owned(),
            r#"{"state":"RUNNING"}"#.to_owned(),
            r#"{"jid":"j"}"#.to_owned(),
            r#"{"jid":5,"state":"RUNNING"}"#.to_owned(),
            r#"{"jid":"j","name":null,"state":"RUNNING"}"#.to_owned(),
            r#"{"jid":"j","jid":"k","state":"RUNNING"}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":null}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":[]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":{"RUNNING":"1"}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","timestamps":{"CREATED":1.5}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":{}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","parallelism":1}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","maxParallelism":1}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","maxParallelism":1,"parallelism":"1"}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":7,"maxParallelism":1,"parallelism":1}]}"#.to_owned(),
            format!(r#"{{"jid":"j","state":"RUNNING","vertices":[{valid_vertex},{{"id":"w","maxParallelism":1,"parallelism":1,"status":3}}]}}"#),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","maxParallelism":1,"parallelism":1,"slotSharingGroupId":5}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"read-records":-1}}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","vertices":[{"id":"v","maxParallelism":1,"parallelism":1,"metrics":{"accumulated-busy-time":[]}}]}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":5}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"jid":1}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"parallelism":1}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":1,"description":5}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":1,"description":"a","description":"b"}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":1,"inputs":[{"ship_strategy":"HASH"}]}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":1,"inputs":[{"id":"u","exchange":[]}]}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING","plan":{"nodes":[{"id":"v","parallelism":1,"inputs":[{"id":"u","ship_strategy":"\x"}]}]}}"#.to_owned(),
            r#"{"jid":"j","state":"RUNNING"} trailing"#.to_owned(),
            r#"["j","n"]"#.to_owned(),
            r#"[]"#.to_owned(),
            r#""details""#.to_owned(),
            String::new(),
        ]
        .into_iter()
        .map(String::into_bytes)
        // Bytes that are not UTF-8, in a string the view does not read.
        .chain([b"{\"jid\":\"j\",\"state\":\"RUNNING\",\"plan\":{\"nodes\":[{\"id\":\"v\",\"parallelism\":1,\"description\":\"\xff\"}]}}".to_vec()])
        .collect();
        for body in &bodies {
            let (owned, view) = both(body);
            let shown = String::from_utf8_lossy(body);
            assert!(owned.is_err(), "{shown} is refused by the owned model: {owned:?}");
            assert_eq!(owned, view, "{shown}");
        }
    }
}
