//! Writing the `flink-autoscaler-result/1` document: one [`Serialize`] view per section, written
//! straight to the output (no intermediate `serde_json::Value`).

use autoscaler_core::scaling::{CycleEvent, Decision};
use autoscaler_core::{ConfigChanges, DelayedScaleDown, EventType};
use autoscaler_metrics::root_cause::Explanation;
use autoscaler_metrics::{EvaluatedMetrics, EvaluatedVertexMetrics, JobTopology, VertexId, json_number};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;

/// The format tag of a result.
pub const RESULT_FORMAT: &str = "flink-autoscaler-result/1";

/// A time as RFC 3339 in UTC with `Z`.
struct Time(DateTime<Utc>);

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    }
}

/// One evaluated metric. A Number per the format: finite values as JSON numbers, non-finite as
/// `"NaN"`, `"Infinity"`, `"-Infinity"`.
#[derive(Serialize)]
struct Metric {
    #[serde(serialize_with = "json_number::serialize")]
    current: f64,
    #[serde(serialize_with = "json_number::serialize")]
    average: f64,
}

/// The metrics of one vertex (or the global ones) by name.
struct MetricMap<'a>(&'a EvaluatedVertexMetrics);

impl Serialize for MetricMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| {
            (
                k.name(),
                Metric {
                    current: v.current,
                    average: v.average,
                },
            )
        }))
    }
}

/// The `evaluated` section, vertices in topology declaration order.
pub(super) struct EvaluatedSection<'a> {
    /// The evaluated metrics.
    pub metrics: &'a EvaluatedMetrics,
    /// Their job graph.
    pub topology: &'a JobTopology,
}

impl Serialize for EvaluatedSection<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Vertices<'a>(&'a EvaluatedSection<'a>);
        impl Serialize for Vertices<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let EvaluatedSection { metrics, topology } = self.0;
                s.collect_map(
                    topology
                        .vertices()
                        .iter()
                        .filter_map(|v| Some((v.id.as_str(), MetricMap(metrics.vertices.get(&v.id)?)))),
                )
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("vertices", &Vertices(self))?;
        m.serialize_entry("global", &MetricMap(&self.metrics.global))?;
        m.end()
    }
}

/// Every topology vertex's parallelism in declaration order: the topology's, or the decision's
/// where it has one; vertices only the decision knows follow, in id order.
struct Parallelism<'a> {
    topology: &'a JobTopology,
    decided: Option<&'a autoscaler_metrics::VertexMap<u32>>,
}

impl Serialize for Parallelism<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let topology = self.topology;
        let decided = self.decided.into_iter().flatten();
        let of_topology = topology.vertices().iter().map(|v| {
            let p = self.decided.and_then(|d| d.get(&v.id)).copied();
            (v.id.as_str(), p.unwrap_or(v.parallelism.get()))
        });
        let others = decided
            .filter(|(id, _)| topology.get(id.as_str()).is_none())
            .map(|(id, p)| (id.as_str(), *p));
        s.collect_map(of_topology.chain(others))
    }
}

/// One vertex of a decision.
#[derive(Serialize)]
struct VertexDecisionJson {
    current: u32,
    target: u32,
    outside_utilization_bound: bool,
    excluded: bool,
    unmeasured: bool,
    #[serde(serialize_with = "json_number::serialize")]
    expected_processing_rate: f64,
}

/// The decided vertices in topology declaration order.
struct DecidedVertices<'a> {
    topology: &'a JobTopology,
    decision: &'a Decision,
}

impl Serialize for DecidedVertices<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.topology.vertices().iter().filter_map(|v| {
            let vd = self.decision.vertices.get(&v.id)?;
            Some((
                v.id.as_str(),
                VertexDecisionJson {
                    current: vd.current,
                    target: vd.target,
                    outside_utilization_bound: vd.outside_utilization_bound,
                    excluded: vd.excluded,
                    unmeasured: vd.unmeasured,
                    expected_processing_rate: vd.expected_processing_rate,
                },
            ))
        }))
    }
}

/// The `decision` section: of a decided cycle, or of an outcome without a decision stage.
pub(super) enum DecisionSection<'a> {
    /// No decision stage: the outcome and reason, the current parallelism, no vertices.
    Undecided {
        /// The job graph.
        topology: &'a JobTopology,
        /// The outcome code.
        outcome: &'a str,
        /// The reason string.
        reason: &'a str,
    },
    /// The decision stage's decision.
    Decided {
        /// The job graph.
        topology: &'a JobTopology,
        /// The decision.
        decision: &'a Decision,
    },
}

impl Serialize for DecisionSection<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        match *self {
            Self::Undecided {
                topology,
                outcome,
                reason,
            } => {
                m.serialize_entry("outcome", outcome)?;
                m.serialize_entry("reason", reason)?;
                m.serialize_entry(
                    "parallelism",
                    &Parallelism {
                        topology,
                        decided: None,
                    },
                )?;
                m.serialize_entry("vertices", &BTreeMap::<&str, ()>::new())?;
            }
            Self::Decided { topology, decision } => {
                m.serialize_entry("outcome", decision.outcome.as_str())?;
                m.serialize_entry("reason", &decision.outcome.reason())?;
                let parallelism = Parallelism {
                    topology,
                    decided: Some(&decision.parallelism),
                };
                m.serialize_entry("parallelism", &parallelism)?;
                m.serialize_entry("vertices", &DecidedVertices { topology, decision })?;
            }
        }
        m.end()
    }
}

/// One entry of `events`.
#[derive(Serialize)]
pub(super) struct EventJson<'a> {
    /// `Normal` or `Warning`.
    #[serde(rename = "type", serialize_with = "display")]
    pub event_type: EventType,
    /// The reference's reason.
    pub reason: &'a str,
    /// The message.
    pub message: &'a str,
}

fn display<S: Serializer>(value: &impl std::fmt::Display, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

impl<'a> EventJson<'a> {
    /// The entry of a decision's event.
    pub fn of(e: &'a CycleEvent) -> Self {
        Self {
            event_type: e.event_type,
            reason: &e.reason,
            message: &e.message,
        }
    }
}

/// The `delayed_scale_down` section.
pub(super) struct DelayedScaleDownSection<'a>(pub &'a DelayedScaleDown);

impl Serialize for DelayedScaleDownSection<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Recommended {
            trigger_time: Time,
            parallelism: u32,
            outside_utilization_bound: bool,
        }
        struct Recommendations<'a>(&'a autoscaler_core::VertexDelayedScaleDownInfo);
        impl Serialize for Recommendations<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.recommended_parallelisms.iter().map(|r| Recommended {
                    trigger_time: Time(r.trigger_time),
                    parallelism: r.parallelism,
                    outside_utilization_bound: r.outside_utilization_bound,
                }))
            }
        }
        #[derive(Serialize)]
        struct Vertex<'a> {
            first_trigger_time: Time,
            recommended_parallelisms: Recommendations<'a>,
        }
        s.collect_map(self.0.delayed_vertices.iter().map(|(id, info)| {
            (
                id.as_str(),
                Vertex {
                    first_trigger_time: Time(info.first_trigger_time),
                    recommended_parallelisms: Recommendations(info),
                },
            )
        }))
    }
}

/// The `config_changes` section: overrides by key, removals sorted ascending (a `BTreeSet`
/// iterates in byte order).
#[derive(Serialize)]
pub(super) struct ConfigChangesSection<'a> {
    overrides: &'a BTreeMap<String, String>,
    removals: &'a std::collections::BTreeSet<String>,
}

impl<'a> ConfigChangesSection<'a> {
    /// The section of `changes`.
    pub fn of(changes: &'a ConfigChanges) -> Self {
        Self {
            overrides: &changes.overrides,
            removals: &changes.removals,
        }
    }
}

/// The `explanation` section: an [`Explanation`] as `{"bottlenecks": [...], "vertices": {...}}`,
/// vertices in topology declaration order.
pub(super) struct ExplanationSection<'a> {
    /// The root cause.
    pub explanation: &'a Explanation,
    /// Its job graph.
    pub topology: &'a JobTopology,
}

impl Serialize for ExplanationSection<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct VertexJson<'a> {
            role: &'a str,
            bottleneck: Option<&'a str>,
        }
        struct Vertices<'a>(&'a ExplanationSection<'a>);
        impl Serialize for Vertices<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let ExplanationSection { explanation, topology } = self.0;
                s.collect_map(topology.vertices().iter().filter_map(|v| {
                    let x = explanation.vertices.get(&v.id)?;
                    Some((
                        v.id.as_str(),
                        VertexJson {
                            role: x.role.as_str(),
                            bottleneck: x.bottleneck.as_ref().map(VertexId::as_str),
                        },
                    ))
                }))
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        let bottlenecks: Vec<&str> = self.explanation.bottlenecks.iter().map(VertexId::as_str).collect();
        m.serialize_entry("bottlenecks", &bottlenecks)?;
        m.serialize_entry("vertices", &Vertices(self))?;
        m.end()
    }
}

/// An [`Explanation`] as `{"bottlenecks": [...], "vertices": {...}}`, vertices in topology
/// declaration order (the result's `explanation` section).
pub fn explanation_json(e: &Explanation, topology: &JobTopology) -> Value {
    // Infallible: every key is a string.
    serde_json::to_value(ExplanationSection {
        explanation: e,
        topology,
    })
    .unwrap_or(Value::Null)
}
