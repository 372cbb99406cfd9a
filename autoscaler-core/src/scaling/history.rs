//! Scaling history and tracking maintenance (the reference's `ScalingHistoryUtils` and
//! `ScalingTracking`, anchor §2.8, replay §3.3 step 1).

use super::delayed_scale_down::instant_before;
use crate::config::AutoScalerOptions;
use crate::model::state::{ScalingHistory, ScalingRecord, ScalingSummary, ScalingTracking};
use autoscaler_metrics::{JobTopology, VertexMap};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

/// The history as the reference reads it: per vertex, entries at or after `now - history.max.age`,
/// at most `history.max.count` of the newest; vertices left empty are dropped.
pub fn trim_scaling_history(
    history: &ScalingHistory,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
) -> ScalingHistory {
    let cutoff = instant_before(now, options.history_max_age);
    history
        .iter()
        .filter_map(|(vertex, entries)| {
            let recent = entries.range(cutoff..).count();
            let skip = recent.saturating_sub(options.history_max_count);
            let kept: BTreeMap<DateTime<Utc>, ScalingSummary> = if recent == entries.len() && skip == 0 {
                // Nothing of the vertex is trimmed (the usual case): a plain clone, no rebuild.
                entries.clone()
            } else {
                entries
                    .range(cutoff..)
                    .skip(skip)
                    .map(|(t, s)| (*t, s.clone()))
                    .collect()
            };
            (!kept.is_empty()).then(|| (vertex.clone(), kept))
        })
        .collect()
}

/// The tracking as the reference reads it: records before `now - history.max.age` dropped, then
/// the oldest while more than `history.max.count` remain, and the latest record always kept.
pub fn trim_scaling_tracking(
    tracking: &ScalingTracking,
    now: DateTime<Utc>,
    options: &AutoScalerOptions,
) -> ScalingTracking {
    let cutoff = instant_before(now, options.history_max_age);
    let recent = tracking.scaling_records.range(cutoff..).count();
    if recent == tracking.scaling_records.len() && recent <= options.history_max_count {
        // Nothing is trimmed (the usual case): a plain clone, no rebuild.
        return tracking.clone();
    }
    let latest = tracking.scaling_records.iter().next_back().map(|(t, r)| (*t, *r));
    let kept: Vec<(DateTime<Utc>, ScalingRecord)> = tracking
        .scaling_records
        .range(cutoff..)
        .map(|(t, r)| (*t, *r))
        .collect();
    let skip = kept.len().saturating_sub(options.history_max_count);
    let mut scaling_records: BTreeMap<DateTime<Utc>, ScalingRecord> = kept.into_iter().skip(skip).collect();
    if let Some((at, record)) = latest {
        scaling_records.insert(at, record);
    }
    ScalingTracking { scaling_records }
}

/// Records the restart duration `job_running_since - latest.at` on the latest tracking record if it
/// has none yet and every vertex scaled at that instant (per `history`) now runs at its new
/// parallelism (a vertex missing from the topology never matches; no such vertex matches
/// trivially). Returns whether a duration was recorded.
///
/// A job that was running since before the rescale started would give a negative duration, which
/// the reference stores but then ignores when taking the maximum; it is not recorded here.
pub fn record_restart_duration_if_tracked_and_parallelism_matches(
    tracking: &mut ScalingTracking,
    job_running_since: DateTime<Utc>,
    topology: &JobTopology,
    history: &ScalingHistory,
) -> bool {
    let Some((&scaled_at, record)) = tracking.scaling_records.iter_mut().next_back() else {
        return false;
    };
    if record.restart_duration.is_some() {
        return false;
    }
    let parallelism_matches = history.iter().all(|(vertex, entries)| match entries.get(&scaled_at) {
        None => true,
        Some(summary) => topology
            .get(vertex.as_str())
            .is_some_and(|info| info.parallelism.get() == summary.new_parallelism),
    });
    if !parallelism_matches {
        return false;
    }
    match (job_running_since - scaled_at).to_std() {
        Ok(duration) => {
            record.restart_duration = Some(duration);
            true
        }
        Err(_) => false,
    }
}

/// The restart time to plan with, in whole seconds: with `restart.time-tracking.enabled` and some
/// measured record, `min(max measured, restart.time-tracking.limit)`, otherwise `restart.time`.
/// A measured value below `restart.time` is used as is.
pub fn max_restart_time_or_default(tracking: &ScalingTracking, options: &AutoScalerOptions) -> Duration {
    let measured = options
        .restart_time_tracking_enabled
        .then(|| {
            tracking
                .scaling_records
                .values()
                .filter_map(|r| r.restart_duration.map(|d| d.as_secs()))
                .max()
        })
        .flatten();
    match measured {
        Some(secs) => Duration::from_secs(secs.min(options.restart_time_tracking_limit.as_secs())),
        None => Duration::from_secs(options.restart_time.as_secs()),
    }
}

/// Persists an executed scaling into the (already trimmed) state: every summary at `now` in the
/// history and a new tracking record whose restart duration is not yet measured. The history is
/// not re-trimmed, as the reference stores the cycle's trimmed history plus the new entries.
pub fn record_scaling(
    history: &mut ScalingHistory,
    tracking: &mut ScalingTracking,
    now: DateTime<Utc>,
    summaries: &VertexMap<ScalingSummary>,
    _options: &AutoScalerOptions,
) {
    for (vertex, summary) in summaries {
        history.entry(vertex.clone()).or_default().insert(now, summary.clone());
    }
    tracking
        .scaling_records
        .insert(now, ScalingRecord { restart_duration: None });
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::{EvaluatedVertexMetrics, VertexId, VertexSpec};
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
    }

    fn summary(current: u32, new: u32) -> ScalingSummary {
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics: EvaluatedVertexMetrics::new(),
        }
    }

    fn options(count: usize, age_secs: u64) -> AutoScalerOptions {
        AutoScalerOptions {
            history_max_count: count,
            history_max_age: Duration::from_secs(age_secs),
            ..AutoScalerOptions::default()
        }
    }

    fn tracking(records: &[(i64, Option<u64>)]) -> ScalingTracking {
        ScalingTracking {
            scaling_records: records
                .iter()
                .map(|(t, d)| {
                    (
                        at(*t),
                        ScalingRecord {
                            restart_duration: d.map(Duration::from_secs),
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn history_trimming_by_age_then_count_drops_empty_vertices() {
        let history: ScalingHistory = BTreeMap::from([
            (
                VertexId::new("a"),
                BTreeMap::from([
                    (at(0), summary(1, 2)),
                    (at(10), summary(2, 3)),
                    (at(20), summary(3, 4)),
                    (at(30), summary(4, 5)),
                ]),
            ),
            (VertexId::new("old"), BTreeMap::from([(at(0), summary(1, 2))])),
        ]);
        // Age 100 at now 110: cutoff 10 keeps 10, 20, 30 (>= cutoff); count 2 keeps 20, 30.
        let trimmed = trim_scaling_history(&history, at(110), &options(2, 100));
        assert_eq!(trimmed.len(), 1);
        assert_eq!(trimmed["a"].keys().copied().collect::<Vec<_>>(), [at(20), at(30)]);
    }

    proptest::proptest! {
        /// Whatever the entries, the trim keeps per vertex exactly the newest `count` entries at or
        /// after `now - age`, and drops vertices left empty (a model of the reference's rule).
        #[test]
        fn history_trimming_keeps_the_newest_recent_entries(
            vertices in proptest::collection::vec(proptest::collection::btree_set(0i64..200, 0..8), 0..5),
            count in 0usize..6,
            age in 0u64..150,
        ) {
            let history: ScalingHistory = vertices
                .iter()
                .enumerate()
                .map(|(i, times)| {
                    (VertexId::new(format!("v{i}")), times.iter().map(|&t| (at(t), summary(1, 2))).collect())
                })
                .collect();
            let trimmed = trim_scaling_history(&history, at(200), &options(count, age));
            let cutoff = 200 - age as i64;
            for (i, times) in vertices.iter().enumerate() {
                let recent: Vec<i64> = times.iter().copied().filter(|&t| t >= cutoff).collect();
                let expected: Vec<DateTime<Utc>> =
                    recent[recent.len().saturating_sub(count)..].iter().map(|&t| at(t)).collect();
                let kept: Vec<DateTime<Utc>> = trimmed
                    .get(format!("v{i}").as_str())
                    .map(|entries| entries.keys().copied().collect())
                    .unwrap_or_default();
                proptest::prop_assert_eq!(kept, expected);
            }
            proptest::prop_assert!(trimmed.values().all(|entries| !entries.is_empty()));
        }

        /// The tracking trim keeps exactly the newest `count` records at or after `now - age`,
        /// plus the latest record whatever its age (a model of the reference's rule), whether
        /// or not anything is trimmed.
        #[test]
        fn tracking_trimming_keeps_the_newest_recent_records_and_the_latest(
            times in proptest::collection::btree_set(0i64..200, 0..10),
            count in 0usize..12,
            age in 0u64..250,
        ) {
            let records: Vec<(i64, Option<u64>)> = times.iter().map(|&t| (t, Some(t as u64))).collect();
            let trimmed = trim_scaling_tracking(&tracking(&records), at(200), &options(count, age));
            let cutoff = 200 - age as i64;
            let recent: Vec<i64> = times.iter().copied().filter(|&t| t >= cutoff).collect();
            let mut expected: Vec<i64> = recent[recent.len().saturating_sub(count)..].to_vec();
            if let Some(&latest) = times.iter().next_back()
                && !expected.contains(&latest)
            {
                expected.push(latest);
            }
            let kept: Vec<DateTime<Utc>> = trimmed.scaling_records.keys().copied().collect();
            proptest::prop_assert_eq!(kept, expected.iter().map(|&t| at(t)).collect::<Vec<_>>());
            for (t, record) in &trimmed.scaling_records {
                proptest::prop_assert_eq!(record.restart_duration, Some(Duration::from_secs((t.timestamp() - 1_700_000_000) as u64)));
            }
        }
    }

    #[test]
    fn tracking_trimming_always_keeps_the_latest_record() {
        let t = tracking(&[(0, Some(60)), (10, Some(70)), (20, None)]);
        // Cutoff 30 would drop everything: the latest comes back.
        let trimmed = trim_scaling_tracking(&t, at(130), &options(3, 100));
        assert_eq!(trimmed.scaling_records.keys().copied().collect::<Vec<_>>(), [at(20)]);
        // Count 1 keeps the newest only.
        let trimmed = trim_scaling_tracking(&t, at(20), &options(1, 1000));
        assert_eq!(trimmed.scaling_records.len(), 1);
        // Count 0 still re-adds the latest.
        assert_eq!(
            trim_scaling_tracking(&t, at(20), &options(0, 1000))
                .scaling_records
                .len(),
            1
        );
    }

    #[test]
    fn restart_time_is_configured_or_tracked_and_capped() {
        // ScalingTrackingTest: configured unless tracking is enabled and a duration exists.
        let t = tracking(&[(0, Some(60)), (10, Some(1200)), (20, None)]);
        let mut opts = AutoScalerOptions::default();
        assert_eq!(max_restart_time_or_default(&t, &opts), Duration::from_secs(300));
        opts.restart_time_tracking_enabled = true;
        // Max 1200 s capped at the 15 min limit.
        assert_eq!(max_restart_time_or_default(&t, &opts), Duration::from_secs(900));
        // A tracked value below restart.time is used as is.
        let small = tracking(&[(0, Some(62)), (10, Some(75))]);
        assert_eq!(max_restart_time_or_default(&small, &opts), Duration::from_secs(75));
        assert_eq!(
            max_restart_time_or_default(&tracking(&[(0, None)]), &opts),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn restart_duration_is_recorded_only_when_parallelism_matches() {
        let topology = JobTopology::new(vec![VertexSpec::new("a", 4, 128), VertexSpec::new("b", 2, 128)], vec![])
            .unwrap_or_else(|e| panic!("{e}"));
        let history: ScalingHistory = BTreeMap::from([
            (VertexId::new("a"), BTreeMap::from([(at(0), summary(2, 4))])),
            (VertexId::new("b"), BTreeMap::from([(at(-100), summary(1, 3))])),
        ]);
        let mut t = tracking(&[(-100, Some(30)), (0, None)]);
        assert!(record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(75),
            &topology,
            &history
        ));
        assert_eq!(
            t.scaling_records[&at(0)].restart_duration,
            Some(Duration::from_secs(75))
        );
        // Already recorded: nothing to do.
        assert!(!record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(90),
            &topology,
            &history
        ));
        // Mismatch: a not yet at 8.
        let mismatched: ScalingHistory =
            BTreeMap::from([(VertexId::new("a"), BTreeMap::from([(at(0), summary(4, 8))]))]);
        let mut t = tracking(&[(0, None)]);
        assert!(!record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(75),
            &topology,
            &mismatched
        ));
        // A vertex gone from the topology never matches; no scaled vertex matches trivially.
        let gone: ScalingHistory = BTreeMap::from([(VertexId::new("x"), BTreeMap::from([(at(0), summary(1, 1))]))]);
        assert!(!record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(75),
            &topology,
            &gone
        ));
        assert!(record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(75),
            &topology,
            &ScalingHistory::new()
        ));
        // Running since before the rescale: not recorded.
        let mut t = tracking(&[(100, None)]);
        assert!(!record_restart_duration_if_tracked_and_parallelism_matches(
            &mut t,
            at(75),
            &topology,
            &history
        ));
    }

    #[test]
    fn record_scaling_adds_summaries_and_an_unmeasured_record() {
        let mut history = ScalingHistory::new();
        let mut t = ScalingTracking::default();
        let summaries = VertexMap::from([(VertexId::new("a"), summary(2, 4))]);
        record_scaling(&mut history, &mut t, at(5), &summaries, &AutoScalerOptions::default());
        assert_eq!(history["a"][&at(5)].new_parallelism, 4);
        assert_eq!(t.scaling_records[&at(5)].restart_duration, None);
    }
}
