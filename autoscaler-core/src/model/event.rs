//! The vocabulary of the autoscaler's events: their type, the scaling report and its format.

use super::state::ScalingSummary;
use autoscaler_metrics::{ScalingMetric, VertexMap, java};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Reason of the scaling report event.
pub const SCALING_REPORT_REASON: &str = "ScalingReport";
/// Message key of the scaling report event.
pub const SCALING_REPORT_KEY: &str = "ScalingExecutor";
/// Header of a report whose scaling is executed.
pub const SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED: &str = "Scaling execution enabled, begin scaling vertices:";
/// Prefix of the header of a report whose scaling is not executed.
pub const SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED: &str = "Scaling execution disabled by config ";

/// Kind of an event, as Kubernetes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something needs attention.
    Warning,
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        })
    }
}

/// A scaling report as a cycle hands it to `AutoScalerEventHandler::handle_scaling_event`: the
/// summaries it reports (a handler may deduplicate by their parallelisms, as the reference's JDBC
/// and Kubernetes handlers do), its header, its text as the decision rendered it, and the
/// cycle's root-cause line.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ScalingReport<'a> {
    /// The reported vertices' summaries.
    pub summaries: &'a VertexMap<ScalingSummary>,
    /// The header the text starts with (`Scaling execution enabled, ...` or a disabled header).
    pub header: &'a str,
    /// The reference's report text: [`scaling_report`] of `summaries` under `header`.
    pub text: &'a str,
    /// The cycle's root-cause line
    /// ([`DecisionRecord::root_cause`](crate::record::DecisionRecord::root_cause)), `None` without
    /// a bottleneck.
    pub root_cause: Option<&'a str>,
    /// The dedup interval (`scaling.event.interval`).
    pub interval: Duration,
}

impl<'a> ScalingReport<'a> {
    /// A report of `summaries` under `header` with its rendered `text` (see [`scaling_report`]),
    /// the cycle's `root_cause` line if any, and the dedup `interval`.
    pub fn new(
        summaries: &'a VertexMap<ScalingSummary>,
        header: &'a str,
        text: &'a str,
        root_cause: Option<&'a str>,
        interval: Duration,
    ) -> Self {
        Self {
            summaries,
            header,
            text,
            root_cause,
            interval,
        }
    }
}

impl ScalingReport<'_> {
    /// The report of a live cycle: the reference's text unchanged, then, when the cycle found a
    /// bottleneck, one added line naming it (e.g. `bottleneck: expensive-keyed (busy 98%),
    /// backpressuring parse-map, Source: datagen`). Replay's events keep the reference's text
    /// alone: the replay format fixes it.
    ///
    /// ```
    /// use autoscaler_core::ScalingReport;
    /// let header = "Scaling execution enabled, begin scaling vertices:";
    /// let summaries = Default::default();
    /// let root_cause = Some("bottleneck: sink (busy 98%), backpressuring Source: orders");
    /// let interval = std::time::Duration::from_secs(1800);
    /// let report = ScalingReport::new(&summaries, header, header, root_cause, interval);
    /// assert_eq!(report.message(), "Scaling execution enabled, begin scaling vertices:\nbottleneck: sink (busy 98%), backpressuring Source: orders");
    /// ```
    pub fn message(&self) -> String {
        match self.root_cause.filter(|l| !l.is_empty()) {
            Some(line) => format!("{}\n{line}", self.text),
            None => self.text.to_owned(),
        }
    }
}

/// The scaling report: `header` followed by one
/// `{ Vertex ID <v> | Parallelism <cur> -> <new> | Processing capacity <tpr> -> <expected> | Target data rate <rate>}`
/// entry per summary, concatenated without separator.
pub fn scaling_report(summaries: &VertexMap<ScalingSummary>, header: &str) -> String {
    use std::fmt::Write as _;
    // About 150 bytes an entry; writing to a String cannot fail.
    let mut out = String::with_capacity(header.len() + 160 * summaries.len());
    out.push_str(header);
    for (v, s) in summaries {
        let tpr = s.metrics.get_or_absent(ScalingMetric::TrueProcessingRate).average;
        let expected = s.metrics.get_or_absent(ScalingMetric::ExpectedProcessingRate).current;
        let target = s.metrics.get_or_absent(ScalingMetric::TargetDataRate).average;
        out.push_str("{ Vertex ID ");
        out.push_str(v.as_str());
        let _ = write!(out, " | Parallelism {} -> {}", s.current_parallelism, s.new_parallelism);
        out.push_str(" | Processing capacity ");
        let _ = java::write_2f(&mut out, tpr);
        out.push_str(" -> ");
        let _ = java::write_2f(&mut out, expected);
        out.push_str(" | Target data rate ");
        let _ = java::write_2f(&mut out, target);
        out.push('}');
    }
    out
}

/// The message key the reference uses to deduplicate "disabled" scaling reports: the Java
/// `Map.hashCode` of `{vertex -> "Parallelism <cur> -> <new>"}`, masked to a non-negative int.
pub fn parallelism_hash_code(summaries: &VertexMap<ScalingSummary>) -> String {
    let hash = summaries.iter().fold(0i32, |acc, (v, s)| {
        let value = format!("Parallelism {} -> {}", s.current_parallelism, s.new_parallelism);
        acc.wrapping_add(java::string_hash(v.as_str()) ^ java::string_hash(&value))
    });
    (hash & 0x7FFF_FFFF).to_string()
}
