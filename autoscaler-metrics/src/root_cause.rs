//! Root cause of backpressure: which vertex holds the job back, and which vertices are only its
//! victims. This project's addition; the reference has no equivalent, and nothing here changes a
//! scaling decision.
//!
//! # Why the red vertex is often not the culprit
//!
//! Flink moves records with credit-based flow control: a receiving subtask announces how many
//! buffers it has free (its credit) and a sender may only send that much. When a vertex cannot keep
//! up, its input buffers fill first; its senders run out of credit and wait (Flink counts that wait
//! as `backPressuredTimeMsPerSecond`); their own input buffers then fill and the wait travels
//! upstream to the sources. So the vertices that *show* backpressure are upstream of the cause, and
//! the cause itself is busy but *not* backpressured: the first vertex downstream where the
//! backpressure stops.
//!
//! # The rule
//!
//! Inputs per vertex: `L`, the window average of `LOAD` (busy ratio), and `B`, the window average of
//! `BACKPRESSURE` (backpressured ratio), both aggregated over subtasks by the busy-time aggregator
//! (the busiest subtask by default). The thresholds ([`RootCauseThresholds`]) follow the levels
//! Flink's web UI gives the backpressure ratio: up to 0.1 is OK, above 0.1 LOW, above 0.5 HIGH.
//!
//! 1. A vertex with no `BACKPRESSURE` in any sample is `unknown`. It is never a bottleneck, never
//!    named as one, and the search of step 3 does not pass through it.
//! 2. A vertex is *backpressured* when `B > 0.1` (above Flink's OK level).
//! 3. For every backpressured vertex `v`, walk downstream through backpressured vertices. The
//!    non-backpressured, known vertices where the walk stops are the candidates for holding `v`
//!    back (the buffers that are full are theirs). The *culprit* of `v` is the candidate with the
//!    highest `L`, provided `L > 0.5` (busy more than half the time: the HIGH level applied to busy
//!    time; a vertex idle half the time has empty input buffers half the time and cannot be what
//!    blocks its senders). Ties go to the earlier vertex in topological order.
//! 4. A vertex is a `bottleneck` when it is not backpressured and either
//!    - it is the culprit of some backpressured vertex (busy, while its upstream is backpressured), or
//!    - it cannot keep up with its input with no measured upstream to show it: `L >= 0.9` (its idle
//!      and backpressured time together are within Flink's OK level of 0.1) and it is a source
//!      (its input is the external system) or one of its inputs is `unknown`. A non-source whose
//!      inputs are all measured and not backpressured keeps up, whatever its load: if it did not,
//!      its input buffers would fill and its inputs would be backpressured within seconds.
//! 5. A backpressured vertex is `backpressured`, naming its culprit as `bottleneck` (`None` when
//!    step 3 found none: no candidate is busy enough). Every other vertex is `ok`.
//!
//! `bottlenecks` lists the bottleneck vertices in topological order.
//!
//! ```
//! use autoscaler_metrics::root_cause::{Role, RootCauseThresholds, VertexSignals, classify};
//! use autoscaler_metrics::{EdgeSpec, JobTopology, ShipStrategy, VertexSpec};
//!
//! // source -> map -> sink: the sink is slow, the map shows the backpressure.
//! let topology = JobTopology::new(
//!     vec![VertexSpec::new("source", 1, 128), VertexSpec::new("map", 1, 128), VertexSpec::new("sink", 1, 128)],
//!     vec![EdgeSpec::new("source", "map", ShipStrategy::Rebalance), EdgeSpec::new("map", "sink", ShipStrategy::Hash)],
//! )
//! .unwrap();
//! let signals = [
//!     ("source".into(), VertexSignals { load: 0.1, backpressure: 0.85 }),
//!     ("map".into(), VertexSignals { load: 0.05, backpressure: 0.9 }),
//!     ("sink".into(), VertexSignals { load: 0.98, backpressure: 0.0 }),
//! ]
//! .into();
//! let explanation = classify(&topology, &signals, &RootCauseThresholds::default());
//! assert_eq!(explanation.bottlenecks, vec!["sink".into()]);
//! assert_eq!(explanation.vertices["map"].role, Role::Backpressured);
//! assert_eq!(explanation.vertices["map"].bottleneck, Some("sink".into()));
//! ```

use crate::columns::{self, column};
use crate::history_stats::AverageAccumulator;
use crate::{JobTopology, MetricHistory, ScalingMetric, VertexId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Backpressure ratio above which a vertex is backpressured: the upper end of Flink's OK level.
pub const BACKPRESSURED_ABOVE: f64 = 0.1;
/// Busy ratio above which a vertex can be the culprit of its upstream's backpressure: the HIGH level.
pub const BUSY_ABOVE: f64 = 0.5;
/// Busy ratio from which a vertex cannot keep up even without backpressured inputs to show it:
/// idle plus backpressured time at most Flink's OK level (1 - 0.1).
pub const SATURATED_FROM: f64 = 0.9;

/// The thresholds of the rule (see the [module docs](self)); [`Default`] gives the documented ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RootCauseThresholds {
    /// `B` above this is backpressured ([`BACKPRESSURED_ABOVE`]).
    pub backpressured_above: f64,
    /// `L` above this can be a culprit ([`BUSY_ABOVE`]).
    pub busy_above: f64,
    /// `L` from this cannot keep up ([`SATURATED_FROM`]).
    pub saturated_from: f64,
}

impl Default for RootCauseThresholds {
    fn default() -> Self {
        Self {
            backpressured_above: BACKPRESSURED_ABOVE,
            busy_above: BUSY_ABOVE,
            saturated_from: SATURATED_FROM,
        }
    }
}

/// What the rule reads of one vertex: window averages, NaN when not measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VertexSignals {
    /// Window average of `LOAD` (busy ratio 0..1).
    pub load: f64,
    /// Window average of `BACKPRESSURE` (backpressured ratio 0..1); NaN: `unknown`.
    pub backpressure: f64,
}

impl VertexSignals {
    /// The signals of the window averages of `LOAD` and `BACKPRESSURE` (one finite sample is
    /// enough).
    pub(crate) fn of(load: &AverageAccumulator, backpressure: &AverageAccumulator) -> Self {
        Self {
            load: load.average(1),
            backpressure: backpressure.average(1),
        }
    }

    /// Nothing measured.
    pub const UNKNOWN: Self = Self {
        load: f64::NAN,
        backpressure: f64::NAN,
    };
}

/// The root-cause role of a vertex. Serialized in lower case (`"bottleneck"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Neither holding the job back nor held back.
    Ok,
    /// Busy and not backpressured while holding back its upstream, or unable to keep up with its input.
    Bottleneck,
    /// Held back by a bottleneck downstream.
    Backpressured,
    /// No `BACKPRESSURE` measured for the vertex.
    Unknown,
}

impl Role {
    /// The serialized name (`ok`, `bottleneck`, `backpressured`, `unknown`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Ok => "ok",
            Role::Bottleneck => "bottleneck",
            Role::Backpressured => "backpressured",
            Role::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The root cause seen from one vertex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VertexExplanation {
    /// The vertex's role.
    pub role: Role,
    /// For a backpressured vertex, the bottleneck holding it back (`None` if none was identified);
    /// `None` for every other role.
    pub bottleneck: Option<VertexId>,
    /// Window average of `LOAD` the rule read, `None` if not measured (not serialized).
    #[serde(skip)]
    pub load: Option<f64>,
    /// Window average of `BACKPRESSURE` the rule read, `None` if not measured (not serialized).
    #[serde(skip)]
    pub backpressure: Option<f64>,
}

/// The root cause of a job's backpressure. Serialized as
/// `{"bottlenecks": [id, ...], "vertices": {id: {"role": ..., "bottleneck": id|null}}}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Explanation {
    /// The bottleneck vertices in topological order, empty when there is none.
    pub bottlenecks: Vec<VertexId>,
    /// Every vertex of the topology.
    pub vertices: BTreeMap<VertexId, VertexExplanation>,
}

impl Explanation {
    /// The role of vertex `id`, if it is in the explanation.
    pub fn role(&self, id: &str) -> Option<Role> {
        self.vertices.get(id).map(|v| v.role)
    }

    /// The vertices held back by bottleneck `id`, in topological order of `topology`.
    pub fn victims<'a>(&'a self, topology: &'a JobTopology, id: &'a str) -> impl Iterator<Item = &'a VertexId> + 'a {
        topology.topological_order().iter().filter_map(move |&i| {
            let v = &topology.vertices()[i].id;
            let e = self.vertices.get(v)?;
            (e.role == Role::Backpressured && e.bottleneck.as_ref().is_some_and(|b| b.as_str() == id)).then_some(v)
        })
    }

    /// One line per job for humans, e.g.
    /// `bottleneck: expensive-keyed (busy 98%), backpressuring parse-map, Source: datagen`, using the
    /// vertices' names where the topology has them; `bottleneck: none` when there is none. Several
    /// bottlenecks are joined with `; `.
    pub fn summary(&self, topology: &JobTopology) -> String {
        let name = |id: &VertexId| {
            topology
                .get(id.as_str())
                .and_then(|v| v.name.clone())
                .unwrap_or_else(|| id.to_string())
        };
        if self.bottlenecks.is_empty() {
            return "bottleneck: none".to_owned();
        }
        let parts: Vec<String> = self
            .bottlenecks
            .iter()
            .map(|b| {
                let mut part = name(b);
                if let Some(load) = self.vertices.get(b).and_then(|v| v.load) {
                    part.push_str(&format!(" (busy {:.0}%)", load * 100.0));
                }
                let victims: Vec<String> = self.victims(topology, b.as_str()).map(name).collect();
                if !victims.is_empty() {
                    part.push_str(", backpressuring ");
                    part.push_str(&victims.join(", "));
                }
                part
            })
            .collect();
        format!("bottleneck: {}", parts.join("; "))
    }
}

/// Whether any sample of `history` has `BACKPRESSURE` for any vertex.
pub fn has_backpressure(history: &MetricHistory) -> bool {
    let bit = 1 << ScalingMetric::Backpressure.index();
    history.with_columns().any(|(_, columns)| columns.union() & bit != 0)
}

/// The window averages of `LOAD` and `BACKPRESSURE` of every vertex of `topology` over `history`
/// (NaN samples skipped, as the evaluation's averages; NaN when a vertex has no finite sample).
pub fn window_signals(topology: &JobTopology, history: &MetricHistory) -> BTreeMap<VertexId, VertexSignals> {
    const AVERAGED: [usize; 2] = [column(ScalingMetric::Load), column(ScalingMetric::Backpressure)];
    let scan = columns::scan(topology, history, AVERAGED);
    topology
        .vertices()
        .iter()
        .zip(scan.averages)
        .map(|(v, [load, backpressure])| (v.id.clone(), VertexSignals::of(&load, &backpressure)))
        .collect()
}

/// The explanation of the samples in `history` (already cut to the evaluation window), or `None`
/// when no sample has `BACKPRESSURE`.
pub fn explain(topology: &JobTopology, history: &MetricHistory) -> Option<Explanation> {
    explain_with(topology, history, || window_signals(topology, history))
}

/// [`explain`] with the window averages `signals` gives (those of [`window_signals`] for
/// `history`, e.g. an [`Evaluation`](crate::Evaluation)'s, read with the evaluation), asked only
/// when some sample has `BACKPRESSURE`.
pub fn explain_with<S>(
    topology: &JobTopology,
    history: &MetricHistory,
    signals: impl FnOnce() -> S,
) -> Option<Explanation>
where
    S: std::borrow::Borrow<BTreeMap<VertexId, VertexSignals>>,
{
    has_backpressure(history).then(|| classify(topology, signals().borrow(), &RootCauseThresholds::default()))
}

/// Classifies every vertex of `topology` by the rule of the [module docs](self). A vertex missing
/// from `signals` is `unknown`.
pub fn classify(
    topology: &JobTopology,
    signals: &BTreeMap<VertexId, VertexSignals>,
    thresholds: &RootCauseThresholds,
) -> Explanation {
    let vertices = topology.vertices();
    let n = vertices.len();
    let signal: Vec<VertexSignals> = vertices
        .iter()
        .map(|v| signals.get(&v.id).copied().unwrap_or(VertexSignals::UNKNOWN))
        .collect();
    let known: Vec<bool> = signal.iter().map(|s| s.backpressure.is_finite()).collect();
    let backpressured: Vec<bool> = (0..n)
        .map(|i| known[i] && signal[i].backpressure > thresholds.backpressured_above)
        .collect();
    // Topological rank, for deterministic tie-breaking and the output order.
    let mut rank = vec![0; n];
    for (r, &i) in topology.topological_order().iter().enumerate() {
        rank[i] = r;
    }

    // Step 3: the culprit of every backpressured vertex.
    let mut culprit: Vec<Option<usize>> = vec![None; n];
    for v in (0..n).filter(|&v| backpressured[v]) {
        let mut seen = vec![false; n];
        let mut stack = vec![v];
        seen[v] = true;
        let mut best: Option<usize> = None;
        while let Some(u) = stack.pop() {
            for &(w, _) in &vertices[u].outputs {
                if seen[w] || !known[w] {
                    continue;
                }
                seen[w] = true;
                if backpressured[w] {
                    stack.push(w);
                } else if signal[w].load > thresholds.busy_above {
                    let better = best.is_none_or(|b| {
                        signal[w].load > signal[b].load || (signal[w].load == signal[b].load && rank[w] < rank[b])
                    });
                    if better {
                        best = Some(w);
                    }
                }
            }
        }
        culprit[v] = best;
    }

    // Step 4: bottlenecks.
    let mut bottleneck = vec![false; n];
    for c in culprit.iter().flatten() {
        bottleneck[*c] = true;
    }
    for (i, v) in vertices.iter().enumerate() {
        let unmeasured_input = v.inputs.iter().any(|(u, _)| !known[*u]);
        let cannot_keep_up = signal[i].load >= thresholds.saturated_from && (v.is_source() || unmeasured_input);
        if known[i] && !backpressured[i] && cannot_keep_up {
            bottleneck[i] = true;
        }
    }

    // Step 5: roles.
    let finite = |x: f64| x.is_finite().then_some(x);
    let mut out = Explanation::default();
    for (i, v) in vertices.iter().enumerate() {
        let (role, named) = if !known[i] {
            (Role::Unknown, None)
        } else if bottleneck[i] {
            (Role::Bottleneck, None)
        } else if backpressured[i] {
            (Role::Backpressured, culprit[i].map(|c| vertices[c].id.clone()))
        } else {
            (Role::Ok, None)
        };
        out.vertices.insert(
            v.id.clone(),
            VertexExplanation {
                role,
                bottleneck: named,
                load: finite(signal[i].load),
                backpressure: finite(signal[i].backpressure),
            },
        );
    }
    out.bottlenecks = topology
        .topological_order()
        .iter()
        .filter(|&&i| bottleneck[i])
        .map(|&i| vertices[i].id.clone())
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollectedMetrics, EdgeSpec, MetricValues, ShipStrategy, VertexSpec};
    use chrono::{TimeZone, Utc};

    fn topology(vertices: &[&str], edges: &[(&str, &str)]) -> JobTopology {
        JobTopology::new(
            vertices.iter().map(|v| VertexSpec::new(*v, 1, 128)).collect(),
            edges
                .iter()
                .map(|(a, b)| EdgeSpec::new(*a, *b, ShipStrategy::Hash))
                .collect(),
        )
        .expect("valid topology")
    }

    /// `(id, LOAD, BACKPRESSURE)`; NaN backpressure = not measured.
    fn signals(list: &[(&str, f64, f64)]) -> BTreeMap<VertexId, VertexSignals> {
        list.iter()
            .map(|(id, load, backpressure)| {
                (
                    VertexId::new(id),
                    VertexSignals {
                        load: *load,
                        backpressure: *backpressure,
                    },
                )
            })
            .collect()
    }

    fn run(t: &JobTopology, s: &[(&str, f64, f64)]) -> Explanation {
        classify(t, &signals(s), &RootCauseThresholds::default())
    }

    fn roles(e: &Explanation) -> Vec<(String, Role, Option<String>)> {
        e.vertices
            .iter()
            .map(|(id, v)| (id.to_string(), v.role, v.bottleneck.as_ref().map(|b| b.to_string())))
            .collect()
    }

    fn ids(list: &[&str]) -> Vec<VertexId> {
        list.iter().map(VertexId::new).collect()
    }

    #[test]
    fn slow_sink_behind_a_red_map_is_the_bottleneck() {
        let t = topology(&["src", "map", "sink"], &[("src", "map"), ("map", "sink")]);
        let e = run(&t, &[("src", 0.1, 0.8), ("map", 0.05, 0.95), ("sink", 0.98, 0.0)]);
        assert_eq!(e.bottlenecks, ids(&["sink"]));
        assert_eq!(
            roles(&e),
            vec![
                ("map".into(), Role::Backpressured, Some("sink".into())),
                ("sink".into(), Role::Bottleneck, None),
                ("src".into(), Role::Backpressured, Some("sink".into())),
            ]
        );
    }

    #[test]
    fn a_busy_vertex_backpressured_by_a_busier_one_is_a_victim() {
        // v2 is 60% busy but backpressured 35% of the time (above 0.1): v3 holds it back.
        let t = topology(&["v1", "v2", "v3"], &[("v1", "v2"), ("v2", "v3")]);
        let e = run(&t, &[("v1", 0.2, 0.7), ("v2", 0.6, 0.35), ("v3", 0.97, 0.01)]);
        assert_eq!(e.bottlenecks, ids(&["v3"]));
        assert_eq!(e.vertices["v2"].role, Role::Backpressured);
        assert_eq!(e.vertices["v2"].bottleneck, Some("v3".into()));
        assert_eq!(e.vertices["v1"].bottleneck, Some("v3".into()));
    }

    #[test]
    fn a_saturated_source_is_the_bottleneck() {
        let t = topology(&["src", "map", "sink"], &[("src", "map"), ("map", "sink")]);
        let e = run(&t, &[("src", 0.95, 0.0), ("map", 0.4, 0.0), ("sink", 0.2, 0.0)]);
        assert_eq!(e.bottlenecks, ids(&["src"]));
        assert_eq!(e.vertices["map"].role, Role::Ok);
        // 0.9 is saturated (>=), 0.89 is not; a backpressured source is never the bottleneck.
        assert_eq!(run(&t, &[("src", 0.9, 0.0)]).role("src"), Some(Role::Bottleneck));
        assert_eq!(run(&t, &[("src", 0.89, 0.0)]).role("src"), Some(Role::Ok));
        assert_eq!(run(&t, &[("src", 0.95, 0.2)]).role("src"), Some(Role::Backpressured));
    }

    #[test]
    fn one_slow_branch_of_a_dag_is_named_not_its_busy_sibling() {
        // src fans out to a (slow) and b (60% busy, but idle 40%: its buffers are not full).
        let t = topology(
            &["src", "a", "b", "sink"],
            &[("src", "a"), ("src", "b"), ("a", "sink"), ("b", "sink")],
        );
        let e = run(
            &t,
            &[("src", 0.3, 0.6), ("a", 0.99, 0.0), ("b", 0.6, 0.0), ("sink", 0.3, 0.0)],
        );
        assert_eq!(e.bottlenecks, ids(&["a"]));
        assert_eq!(e.vertices["b"].role, Role::Ok);
        assert_eq!(e.vertices["src"].bottleneck, Some("a".into()));
    }

    #[test]
    fn a_healthy_job_has_no_bottleneck() {
        let t = topology(&["src", "map", "sink"], &[("src", "map"), ("map", "sink")]);
        // A hot map (0.95) whose input is measured and not backpressured keeps up.
        let e = run(&t, &[("src", 0.3, 0.05), ("map", 0.95, 0.1), ("sink", 0.5, 0.0)]);
        assert!(e.bottlenecks.is_empty());
        assert!(
            e.vertices
                .values()
                .all(|v| v.role == Role::Ok && v.bottleneck.is_none())
        );
    }

    #[test]
    fn thresholds_are_strict_where_documented() {
        let t = topology(&["src", "sink"], &[("src", "sink")]);
        // B = 0.1 is still OK; B = 0.1001 is backpressured.
        assert_eq!(
            run(&t, &[("src", 0.1, 0.1), ("sink", 0.99, 0.0)]).role("src"),
            Some(Role::Ok)
        );
        let e = run(&t, &[("src", 0.1, 0.1001), ("sink", 0.99, 0.0)]);
        assert_eq!(e.bottlenecks, ids(&["sink"]));
        // A culprit must be busy more than half the time: 0.5 is not enough.
        let e = run(&t, &[("src", 0.1, 0.5), ("sink", 0.5, 0.0)]);
        assert!(e.bottlenecks.is_empty());
        assert_eq!(e.vertices["src"].role, Role::Backpressured);
        assert_eq!(e.vertices["src"].bottleneck, None, "no culprit identified");
        assert_eq!(
            run(&t, &[("src", 0.1, 0.5), ("sink", 0.51, 0.0)]).bottlenecks,
            ids(&["sink"])
        );
    }

    #[test]
    fn unknown_vertices_are_neither_named_nor_crossed() {
        let t = topology(&["src", "map", "sink"], &[("src", "map"), ("map", "sink")]);
        // map has no BACKPRESSURE: unknown; src's search stops there; sink is saturated behind an
        // unmeasured input, so it cannot be shown keeping up: bottleneck.
        let e = run(&t, &[("src", 0.1, 0.8), ("map", 0.99, f64::NAN), ("sink", 0.95, 0.0)]);
        assert_eq!(e.vertices["map"].role, Role::Unknown);
        assert_eq!(e.vertices["src"].role, Role::Backpressured);
        assert_eq!(e.vertices["src"].bottleneck, None);
        assert_eq!(e.bottlenecks, ids(&["sink"]));
        // Missing from the signals entirely: unknown too.
        let e = run(&t, &[("src", 0.1, 0.0)]);
        assert_eq!(e.role("map"), Some(Role::Unknown));
        assert_eq!(e.role("sink"), Some(Role::Unknown));
    }

    #[test]
    fn the_busiest_candidate_wins_and_ties_go_to_topological_order() {
        let t = topology(&["src", "a", "b"], &[("src", "a"), ("src", "b")]);
        let e = run(&t, &[("src", 0.1, 0.9), ("a", 0.8, 0.0), ("b", 0.95, 0.0)]);
        assert_eq!(e.bottlenecks, ids(&["b"]));
        let e = run(&t, &[("src", 0.1, 0.9), ("a", 0.95, 0.0), ("b", 0.95, 0.0)]);
        assert_eq!(e.bottlenecks, ids(&["a"]));
    }

    #[test]
    fn two_sources_into_a_slow_join_both_name_it() {
        let t = topology(
            &["a", "b", "join", "sink"],
            &[("a", "join"), ("b", "join"), ("join", "sink")],
        );
        let e = run(
            &t,
            &[("a", 0.2, 0.7), ("b", 0.1, 0.8), ("join", 1.0, 0.0), ("sink", 0.1, 0.0)],
        );
        assert_eq!(e.bottlenecks, ids(&["join"]));
        assert_eq!(e.vertices["a"].bottleneck, Some("join".into()));
        assert_eq!(e.vertices["b"].bottleneck, Some("join".into()));
    }

    #[test]
    fn serializes_in_the_documented_shape() {
        let t = topology(&["v1", "v2", "v3"], &[("v1", "v2"), ("v1", "v3")]);
        let e = run(&t, &[("v1", 0.1, 0.9), ("v2", 0.2, 0.0), ("v3", 0.99, 0.0)]);
        let json = serde_json::to_value(&e).expect("serializable");
        assert_eq!(
            json,
            serde_json::json!({"bottlenecks": ["v3"],
                "vertices": {"v1": {"role": "backpressured", "bottleneck": "v3"},
                             "v2": {"role": "ok", "bottleneck": null},
                             "v3": {"role": "bottleneck", "bottleneck": null}}})
        );
        let back: Explanation = serde_json::from_value(json).expect("deserializable");
        assert_eq!(back.bottlenecks, e.bottlenecks);
        assert_eq!(back.role("v1"), Some(Role::Backpressured));
    }

    #[test]
    fn summary_names_the_bottleneck_and_its_victims() {
        let mut specs: Vec<VertexSpec> = ["src", "map", "keyed"]
            .iter()
            .map(|v| VertexSpec::new(*v, 1, 128))
            .collect();
        specs[0].name = Some("Source: datagen".into());
        specs[2].name = Some("expensive-keyed".into());
        let t = JobTopology::new(
            specs,
            vec![
                EdgeSpec::new("src", "map", ShipStrategy::Forward),
                EdgeSpec::new("map", "keyed", ShipStrategy::Hash),
            ],
        )
        .expect("valid");
        let e = run(&t, &[("src", 0.1, 0.9), ("map", 0.3, 0.6), ("keyed", 0.984, 0.0)]);
        assert_eq!(
            e.summary(&t),
            "bottleneck: expensive-keyed (busy 98%), backpressuring Source: datagen, map"
        );
        let healthy = run(&t, &[("src", 0.1, 0.0), ("map", 0.3, 0.0), ("keyed", 0.4, 0.0)]);
        assert_eq!(healthy.summary(&t), "bottleneck: none");
    }

    #[test]
    fn explain_averages_the_window_and_is_none_without_backpressure() {
        let t = topology(&["src", "sink"], &[("src", "sink")]);
        let at = |s: i64| Utc.timestamp_opt(s, 0).single().expect("valid time");
        let snap = |src: &[(ScalingMetric, f64)], sink: &[(ScalingMetric, f64)]| CollectedMetrics {
            vertex_metrics: [
                ("src".into(), MetricValues::from_iter(src.iter().copied())),
                ("sink".into(), MetricValues::from_iter(sink.iter().copied())),
            ]
            .into(),
            ..Default::default()
        };
        use ScalingMetric::{Backpressure as BP, Load as L};
        // src BACKPRESSURE 0.0, 0.3 (NaN skipped) -> 0.15 > 0.1; sink LOAD 0.9, 1.0 -> 0.95.
        let history: MetricHistory = [
            (at(0), snap(&[(L, 0.1), (BP, 0.0)], &[(L, 0.9), (BP, 0.0)])),
            (at(10), snap(&[(L, 0.1), (BP, f64::NAN)], &[(L, f64::NAN)])),
            (at(20), snap(&[(L, 0.1), (BP, 0.3)], &[(L, 1.0)])),
        ]
        .into_iter()
        .collect();
        let s = window_signals(&t, &history);
        assert!((s["src"].backpressure - 0.15).abs() < 1e-12);
        assert!((s["sink"].load - 0.95).abs() < 1e-12);
        let e = explain(&t, &history).expect("has backpressure");
        assert_eq!(e.bottlenecks, ids(&["sink"]));
        assert_eq!(e.vertices["src"].backpressure, Some(0.15));

        let without: MetricHistory = [(at(0), snap(&[(L, 0.1)], &[(L, 0.9)]))].into_iter().collect();
        assert!(explain(&t, &without).is_none());
    }

    proptest::proptest! {
        /// On any chain, roles are consistent: at most the named vertices are culprits, every named
        /// bottleneck has role bottleneck and is downstream of its victim, and bottlenecks are in
        /// topological order.
        #[test]
        fn roles_are_consistent_on_chains(values in proptest::collection::vec((0.0..1.0f64, 0.0..1.0f64), 1..7)) {
            let names: Vec<String> = (0..values.len()).map(|i| format!("v{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let edges: Vec<(&str, &str)> = refs.windows(2).map(|w| (w[0], w[1])).collect();
            let t = topology(&refs, &edges);
            let list: Vec<(&str, f64, f64)> = refs.iter().zip(&values).map(|(n, (l, b))| (*n, *l, *b)).collect();
            let e = run(&t, &list);
            for (i, name) in refs.iter().enumerate() {
                let v = &e.vertices[*name];
                let (load, bp) = values[i];
                match v.role {
                    Role::Bottleneck => {
                        proptest::prop_assert!(bp <= BACKPRESSURED_ABOVE);
                        proptest::prop_assert!(load > BUSY_ABOVE);
                    }
                    Role::Backpressured => proptest::prop_assert!(bp > BACKPRESSURED_ABOVE),
                    Role::Ok => proptest::prop_assert!(v.bottleneck.is_none()),
                    Role::Unknown => proptest::prop_assert!(false, "every vertex is measured"),
                }
                if let Some(b) = &v.bottleneck {
                    let j = refs.iter().position(|r| *r == b.as_str()).unwrap_or(0);
                    proptest::prop_assert!(j > i);
                    proptest::prop_assert_eq!(e.role(b.as_str()), Some(Role::Bottleneck));
                }
            }
            let order: Vec<usize> = e.bottlenecks.iter().filter_map(|b| refs.iter().position(|r| *r == b.as_str())).collect();
            proptest::prop_assert!(order.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
