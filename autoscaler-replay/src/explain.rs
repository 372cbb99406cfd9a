//! `flink-autoscaler explain`: a decision record ([`DecisionRecord`]) in words.
//!
//! [`render`] writes one record as a short text: the job's outcome and its reason, the utilization
//! band, the root cause when one was found, then one paragraph per vertex with its parallelism, its
//! reason code and why, the true processing rate and which estimate it came from, the rates and
//! where its utilization lies against the bounds. [`records_in`] finds the records in the JSON
//! documents `explain` accepts.

use autoscaler_core::record::{DecisionRecord, UtilizationBound, VertexRecord};
use serde_json::Value;
use std::fmt::Write as _;

/// Why a document holds no decision record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExplainError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but without a record where one was expected.
    #[error(
        "no decision record in the document (expected a record, a replay result with `record`, or a `/jobs/{{key}}` answer)"
    )]
    NoRecord,
    /// A record that does not have the record's shape.
    #[error("invalid decision record at {path}: {message}")]
    Invalid {
        /// Where in the document.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn parse_record(v: &Value, path: &str) -> Result<DecisionRecord, ExplainError> {
    serde_json::from_value(v.clone()).map_err(|e| ExplainError::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// The decision records of a JSON document: a record itself (`format` =
/// `flink-autoscaler-decision/1`), a replay result's `record`, a `/jobs/{key}` answer's `record`,
/// or a `replay --recording` output's `cycles[*].record`.
pub fn records_in(document: &Value) -> Result<Vec<DecisionRecord>, ExplainError> {
    if document.get("format").and_then(Value::as_str) == Some(autoscaler_core::record::DECISION_RECORD_FORMAT) {
        return Ok(vec![parse_record(document, "$")?]);
    }
    if let Some(record) = document.get("record").filter(|r| !r.is_null()) {
        return Ok(vec![parse_record(record, "record")?]);
    }
    if let Some(cycles) = document.get("cycles").and_then(Value::as_array) {
        return cycles
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.get("record").map(|r| (i, r)))
            .map(|(i, r)| parse_record(r, &format!("cycles[{i}].record")))
            .collect();
    }
    Err(ExplainError::NoRecord)
}

/// A rate in records per second, or what stands for an unknown one.
fn rate(v: f64) -> String {
    if v.is_nan() {
        "unknown".to_owned()
    } else if v.is_infinite() {
        "unbounded".to_owned()
    } else {
        format!("{v:.2}/s")
    }
}

fn percent(v: f64) -> String {
    if v.is_finite() {
        format!("{:.0}%", v * 100.0)
    } else {
        "unknown".to_owned()
    }
}

fn utilization_line(v: &VertexRecord) -> String {
    let tpr = v.true_processing_rate.value;
    match v.utilization {
        UtilizationBound::AboveMax => format!(
            "above the band: processing rate {} < scale-up threshold {}",
            rate(tpr),
            rate(v.scale_up_threshold)
        ),
        UtilizationBound::BelowMin => format!(
            "below the band: processing rate {} > scale-down threshold {}",
            rate(tpr),
            rate(v.scale_down_threshold)
        ),
        UtilizationBound::Within => format!(
            "within the band: scale-up threshold {} <= processing rate {} <= scale-down threshold {}",
            rate(v.scale_up_threshold),
            rate(tpr),
            rate(v.scale_down_threshold)
        ),
        UtilizationBound::Unknown => "unknown: no processing rate or thresholds".to_owned(),
    }
}

/// One record in words (ends with a newline).
pub fn render(record: &DecisionRecord) -> String {
    let mut out = String::new();
    let job = record.job.as_deref().unwrap_or("job");
    let at = record.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    let _ = writeln!(out, "{job} at {at}: {}", record.summary);
    let _ = writeln!(
        out,
        "outcome: {}{}",
        record.outcome.as_str(),
        record.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    );
    let band = record.utilization;
    let _ = writeln!(
        out,
        "utilization band: {:.2} .. {:.2} (target {:.2}); restart time {} s",
        band.min, band.max, band.target, record.restart_time_s
    );
    if let Some(line) = &record.root_cause {
        let _ = writeln!(out, "{line}");
    }
    for (id, v) in &record.vertices {
        let _ = writeln!(out);
        let parallelism = if v.target_parallelism == v.current_parallelism {
            format!("parallelism {}", v.current_parallelism)
        } else {
            format!("parallelism {} -> {}", v.current_parallelism, v.target_parallelism)
        };
        let role = match (&v.role, &v.bottleneck) {
            (Some(role), Some(b)) => {
                let by = record.vertices.get(b).map_or_else(|| b.clone(), |v| v.label(b));
                format!(", {} by {by}", role.as_str())
            }
            (Some(role), None) => format!(", {}", role.as_str()),
            _ => String::new(),
        };
        let _ = writeln!(out, "{}: {parallelism}{role}", v.label(id));
        let _ = writeln!(out, "  {}: {}", v.reason.as_str(), v.detail);
        let source = v
            .true_processing_rate
            .source
            .map(|_| format!(" ({})", v.true_processing_rate.why))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  true processing rate {}{source}",
            rate(v.true_processing_rate.value)
        );
        let _ = writeln!(
            out,
            "  target rate {}, catch-up rate {}, busy {}",
            rate(v.target_rate),
            rate(v.catch_up_rate),
            percent(v.load)
        );
        let _ = writeln!(out, "  utilization {}", utilization_line(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_without_records_are_named() {
        let err = records_in(&serde_json::json!({"format": "flink-autoscaler-result/1"}));
        assert!(matches!(err, Err(ExplainError::NoRecord)));
        let err = records_in(&serde_json::json!({"record": {"format": "x"}}));
        assert!(matches!(err, Err(ExplainError::Invalid { ref path, .. }) if path == "record"));
    }

    #[test]
    fn rates_and_percentages() {
        assert_eq!(rate(1052.6316), "1052.63/s");
        assert_eq!(rate(f64::NAN), "unknown");
        assert_eq!(rate(f64::INFINITY), "unbounded");
        assert_eq!(percent(0.984), "98%");
    }
}
