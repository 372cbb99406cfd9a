//! The metric window: stabilization after a (re)start, when the window counts as full, and which
//! snapshots it keeps.
//!
//! Implements the windowing at the end of the reference's `ScalingMetricCollector.collect`
//! (`docs/replay-format.md` §3.3 steps 2 and 3).

use crate::MetricHistory;
use crate::time::{add_saturating, sub_saturating};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Where the metric window stands at one cycle instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowStatus {
    /// `now` is before [`WindowStatus::stable_time`]: the job is still stabilizing after its start.
    pub stabilizing: bool,
    /// `now` is at or after [`WindowStatus::window_full_time`]: the window holds enough data to scale on.
    pub window_full: bool,
    /// The job start plus the stabilization interval.
    pub stable_time: DateTime<Utc>,
    /// The first snapshot at or after `stable_time` plus the window length (or `now` plus the window
    /// length when there is no such snapshot).
    pub window_full_time: DateTime<Utc>,
}

/// Computes the stabilization and window-full rule of the reference:
/// `stable_time = job_running_since + stabilization`, `stabilizing = now < stable_time`, and
/// `window_full_time` is the first snapshot at or after `stable_time` plus `window`, or `now + window`
/// when there is none. The window is full when `now >= window_full_time`.
///
/// `history` should already contain the snapshot collected at `now` (it counts as the first stable
/// snapshot when nothing earlier qualifies, which gives the same `now + window` the reference computes
/// before inserting it).
///
/// ```
/// use autoscaler_metrics::{MetricHistory, window_status};
/// use chrono::{TimeZone, Utc};
/// use std::time::Duration;
///
/// let start = Utc.timestamp_opt(0, 0).unwrap();
/// let now = start + chrono::TimeDelta::minutes(10);
/// let status = window_status(&MetricHistory::new(), start, now, Duration::from_secs(300), Duration::from_secs(600));
/// assert!(!status.stabilizing);
/// assert!(!status.window_full);
/// assert_eq!(status.window_full_time, now + chrono::TimeDelta::minutes(10));
/// ```
pub fn window_status(
    history: &MetricHistory,
    job_running_since: DateTime<Utc>,
    now: DateTime<Utc>,
    stabilization: Duration,
    window: Duration,
) -> WindowStatus {
    let stable_time = add_saturating(job_running_since, stabilization);
    let first_stable = history.times().find(|at| *at >= stable_time);
    let window_full_time = add_saturating(first_stable.unwrap_or(now), window);
    WindowStatus {
        stabilizing: now < stable_time,
        window_full: now >= window_full_time,
        stable_time,
        window_full_time,
    }
}

/// Applies the reference's collection-time windowing to a recorded `history`, whose latest entry is
/// the snapshot collected at `now` (replay-format §3.3 steps 2 and 3):
///
/// 1. [`discard_before_restart`];
/// 2. [`window_and_trim`] on what is left.
///
/// Returns the window status; evaluation needs at least 2 remaining snapshots.
pub fn apply_window(
    history: &mut MetricHistory,
    job_running_since: DateTime<Utc>,
    now: DateTime<Utc>,
    stabilization: Duration,
    window: Duration,
) -> WindowStatus {
    discard_before_restart(history, job_running_since);
    window_and_trim(history, job_running_since, now, stabilization, window)
}

/// Computes the [`window_status`] of `history` (which already holds the snapshot collected at
/// `now`) and, when the window is full, discards the snapshots strictly before `now - window`
/// (the reference's `removeMetricsBefore(now - metricWindowSize)`).
pub fn window_and_trim(
    history: &mut MetricHistory,
    job_running_since: DateTime<Utc>,
    now: DateTime<Utc>,
    stabilization: Duration,
    window: Duration,
) -> WindowStatus {
    let status = window_status(history, job_running_since, now, stabilization, window);
    if status.window_full {
        history.remove_before(sub_saturating(now, window));
    }
    status
}

/// The restart rule: a stored window is void when the job switched to RUNNING after its first
/// snapshot (reference: `jobRunningTs.isAfter(metricHistory.firstKey())`, which clears the history
/// before the new sample is added). An empty history is never void.
pub fn voids_history(history: &MetricHistory, job_running_since: DateTime<Utc>) -> bool {
    history.first_time().is_some_and(|first| job_running_since > first)
}

/// [`voids_history`] on a recorded history whose latest snapshot is the one collected now: every
/// snapshot but the latest is dropped.
pub fn discard_before_restart(history: &mut MetricHistory, job_running_since: DateTime<Utc>) {
    if voids_history(history, job_running_since)
        && let Some(latest) = history.latest_time()
    {
        history.remove_before(latest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CollectedMetrics;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0)
            .single()
            .expect("valid instant")
    }

    fn history(at: &[i64]) -> MetricHistory {
        at.iter().map(|s| (t(*s), CollectedMetrics::default())).collect()
    }

    fn times(h: &MetricHistory) -> Vec<i64> {
        h.iter().map(|(at, _)| at.timestamp() - 1_700_000_000).collect()
    }

    const STAB: Duration = Duration::from_secs(300);
    const WIN: Duration = Duration::from_secs(600);

    #[test]
    fn stabilizing_until_start_plus_interval() {
        let h = history(&[100, 200]);
        let s = window_status(&h, t(0), t(200), STAB, WIN);
        assert!(s.stabilizing);
        assert_eq!(s.stable_time, t(300));
        // No snapshot at or after 300: window full at now + window.
        assert_eq!(s.window_full_time, t(800));
        assert!(!s.window_full);
        // Exactly at stable time the job is no longer stabilizing.
        assert!(!window_status(&h, t(0), t(300), STAB, WIN).stabilizing);
    }

    #[test]
    fn window_full_time_counts_from_first_stable_snapshot() {
        let h = history(&[100, 299, 300, 400, 900]);
        let s = window_status(&h, t(0), t(900), STAB, WIN);
        assert_eq!(s.window_full_time, t(900));
        assert!(s.window_full, "now == window_full_time is full");
        let s = window_status(&h, t(0), t(899), STAB, WIN);
        assert!(!s.window_full);
    }

    #[test]
    fn full_window_trims_samples_strictly_before_now_minus_window() {
        let mut h = history(&[100, 299, 300, 350, 400, 900]);
        let s = apply_window(&mut h, t(0), t(900), STAB, WIN);
        assert!(s.window_full);
        // Cut-off 300: the sample at 300 stays, everything earlier (stabilization samples) goes.
        assert_eq!(times(&h), [300, 350, 400, 900]);
    }

    #[test]
    fn window_not_full_keeps_every_sample() {
        let mut h = history(&[100, 299, 350, 400]);
        let s = apply_window(&mut h, t(0), t(400), STAB, WIN);
        assert!(!s.window_full);
        assert!(!s.stabilizing);
        assert_eq!(s.window_full_time, t(950));
        assert_eq!(times(&h), [100, 299, 350, 400]);
    }

    #[test]
    fn restart_after_first_snapshot_keeps_only_latest() {
        let mut h = history(&[100, 200, 1000]);
        let s = apply_window(&mut h, t(150), t(1000), STAB, WIN);
        assert_eq!(times(&h), [1000]);
        // The latest snapshot (1000) is after stable time 450, so the window is full at 1600.
        assert_eq!(s.window_full_time, t(1600));
        assert!(!s.window_full);
        // A start exactly at the first snapshot is not "after" it.
        let mut h = history(&[100, 200]);
        apply_window(&mut h, t(100), t(200), STAB, WIN);
        assert_eq!(times(&h), [100, 200]);
    }

    #[test]
    fn huge_durations_saturate_instead_of_panicking() {
        let h = history(&[100]);
        let s = window_status(&h, t(0), t(100), Duration::MAX, Duration::MAX);
        assert!(s.stabilizing);
        assert!(!s.window_full);
        let mut h = history(&[100, 200]);
        let s = apply_window(&mut h, t(0), t(200), Duration::ZERO, Duration::ZERO);
        assert!(s.window_full);
        assert_eq!(times(&h), [200]);
    }
}
