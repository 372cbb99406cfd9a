//! Operations on the persisted [`DelayedScaleDown`] state (the reference's `DelayedScaleDown` and
//! `JobVertexScaler.applyScaleDownInterval`, anchor §2.6).

use super::ParallelismChange;
use crate::model::state::{DelayedScaleDown, RecommendedParallelism, VertexDelayedScaleDownInfo};
use autoscaler_metrics::VertexId;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::time::Duration;

/// Records a scale-down recommendation of `vertex` at `now` and returns its state. The deque keeps
/// parallelisms strictly decreasing from head to tail, so the head is the maximum of the window
/// (an equal older value is replaced to refresh its trigger time). Always marks the state updated.
pub(crate) fn trigger_scale_down<'a>(
    state: &'a mut DelayedScaleDown,
    vertex: &VertexId,
    now: DateTime<Utc>,
    parallelism: u32,
    outside_utilization_bound: bool,
) -> &'a mut VertexDelayedScaleDownInfo {
    state.updated = true;
    let info = state
        .delayed_vertices
        .entry(vertex.clone())
        .or_insert_with(|| VertexDelayedScaleDownInfo {
            first_trigger_time: now,
            recommended_parallelisms: VecDeque::new(),
        });
    while info
        .recommended_parallelisms
        .back()
        .is_some_and(|last| last.parallelism <= parallelism)
    {
        info.recommended_parallelisms.pop_back();
    }
    info.recommended_parallelisms.push_back(RecommendedParallelism {
        trigger_time: now,
        parallelism,
        outside_utilization_bound,
    });
    info
}

/// Evicts recommendations triggered before `window_start` and returns the window maximum.
fn max_recommended_parallelism(
    info: &mut VertexDelayedScaleDownInfo,
    window_start: DateTime<Utc>,
) -> Option<RecommendedParallelism> {
    while info
        .recommended_parallelisms
        .front()
        .is_some_and(|head| head.trigger_time < window_start)
    {
        info.recommended_parallelisms.pop_front();
    }
    info.recommended_parallelisms.front().copied()
}

/// Drops the pending scale-down of `vertex` (its recommendation went back to >= current); marks
/// the state updated only if something was removed.
pub(crate) fn clear_vertex(state: &mut DelayedScaleDown, vertex: &VertexId) {
    if state.delayed_vertices.remove(vertex).is_some() {
        state.updated = true;
    }
}

/// Drops every pending scale-down after a rescale; marks the state updated only if it was non-empty.
pub(crate) fn clear_all(state: &mut DelayedScaleDown) {
    if !state.delayed_vertices.is_empty() {
        state.delayed_vertices.clear();
        state.updated = true;
    }
}

/// `now - duration`, saturating at the earliest representable instant.
pub(crate) fn instant_before(now: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    autoscaler_metrics::time::sub_saturating(now, duration)
}

/// The reference's `applyScaleDownInterval`: an interval under 1 ms scales down at once; otherwise the
/// recommendation is recorded and nothing happens until the interval since the first trigger has
/// passed, after which the maximum recommendation within the last interval is used.
pub(crate) fn apply_scale_down_interval(
    state: &mut DelayedScaleDown,
    vertex: &VertexId,
    interval: Duration,
    now: DateTime<Utc>,
    change: ParallelismChange,
) -> ParallelismChange {
    // The reference disables the delay below one whole millisecond (`toMillis() <= 0`).
    if interval.as_millis() == 0 {
        return change;
    }
    let window_start = instant_before(now, interval);
    let info = trigger_scale_down(state, vertex, now, change.new, change.outside_utilization_bound);
    if window_start < info.first_trigger_time {
        return ParallelismChange::no_change(change.current);
    }
    match max_recommended_parallelism(info, window_start) {
        Some(max) => ParallelismChange {
            current: change.current,
            new: max.parallelism,
            outside_utilization_bound: max.outside_utilization_bound,
        }
        .normalized(),
        // Unreachable: the recommendation just recorded is inside the window.
        None => ParallelismChange::no_change(change.current),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
    }

    fn parallelisms(state: &DelayedScaleDown, v: &str) -> Vec<u32> {
        state.delayed_vertices[v]
            .recommended_parallelisms
            .iter()
            .map(|r| r.parallelism)
            .collect()
    }

    #[test]
    fn deque_stays_strictly_decreasing() {
        let v = VertexId::new("v");
        let mut state = DelayedScaleDown::default();
        for (t, p) in [(0, 5), (1, 8), (2, 6), (3, 4), (4, 6)] {
            trigger_scale_down(&mut state, &v, at(t), p, false);
        }
        // 5 evicted by 8; 6 then 4 appended; the second 6 evicts 4 and the first 6.
        assert_eq!(parallelisms(&state, "v"), [8, 6]);
        assert_eq!(state.delayed_vertices["v"].first_trigger_time, at(0));
        assert_eq!(
            state.delayed_vertices["v"].recommended_parallelisms[1].trigger_time,
            at(4)
        );
        assert!(state.updated);
    }

    #[test]
    fn window_start_evicts_old_maxima() {
        let v = VertexId::new("v");
        let mut state = DelayedScaleDown::default();
        trigger_scale_down(&mut state, &v, at(0), 90, true);
        trigger_scale_down(&mut state, &v, at(10), 80, false);
        let info = state
            .delayed_vertices
            .get_mut("v")
            .map(|i| max_recommended_parallelism(i, at(5)));
        let max = info.flatten().map(|r| (r.parallelism, r.outside_utilization_bound));
        assert_eq!(max, Some((80, false)));
    }

    #[test]
    fn scale_down_waits_for_the_interval_then_uses_the_window_max() {
        // DelayedScaleDownTest / JobVertexScalerTest.testMaxRecommendedParallelismUsedAfterScaleDownInterval.
        let v = VertexId::new("v");
        let mut state = DelayedScaleDown::default();
        let hour = Duration::from_secs(3600);
        let down = |new| ParallelismChange {
            current: 100,
            new,
            outside_utilization_bound: true,
        };
        assert!(apply_scale_down_interval(&mut state, &v, hour, at(0), down(80)).is_no_change());
        assert!(apply_scale_down_interval(&mut state, &v, hour, at(1800), down(90)).is_no_change());
        assert!(apply_scale_down_interval(&mut state, &v, hour, at(3599), down(70)).is_no_change());
        // At first trigger + interval the window [0, 3600] still holds 90.
        let change = apply_scale_down_interval(&mut state, &v, hour, at(3600), down(60));
        assert_eq!(
            change,
            ParallelismChange {
                current: 100,
                new: 90,
                outside_utilization_bound: true
            }
        );
        // Once 90 (t=1800) is older than the window start (1801), 70 (t=3599) is the max.
        let change = apply_scale_down_interval(&mut state, &v, hour, at(5401), down(60));
        assert_eq!(change.new, 70);
    }

    #[test]
    fn window_max_equal_to_current_is_no_change_and_zero_interval_is_immediate() {
        let v = VertexId::new("v");
        let mut state = DelayedScaleDown::default();
        let hour = Duration::from_secs(3600);
        trigger_scale_down(&mut state, &v, at(0), 100, true);
        let change = ParallelismChange {
            current: 100,
            new: 50,
            outside_utilization_bound: true,
        };
        let result = apply_scale_down_interval(&mut state, &v, hour, at(3600), change);
        assert!(result.is_no_change());
        assert!(!result.outside_utilization_bound);
        let mut fresh = DelayedScaleDown::default();
        assert_eq!(
            apply_scale_down_interval(&mut fresh, &v, Duration::ZERO, at(0), change),
            change
        );
        assert!(!fresh.updated);
    }

    #[test]
    fn clearing_marks_updated_only_when_something_is_removed() {
        let v = VertexId::new("v");
        let mut state = DelayedScaleDown::default();
        clear_vertex(&mut state, &v);
        clear_all(&mut state);
        assert!(!state.updated);
        trigger_scale_down(&mut state, &v, at(0), 1, false);
        state.updated = false;
        clear_vertex(&mut state, &VertexId::new("other"));
        assert!(!state.updated);
        clear_all(&mut state);
        assert!(state.updated && state.delayed_vertices.is_empty());
    }
}
