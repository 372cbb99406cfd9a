//! Window statistics of one metric: the reference's `getRate` and `getAverage`.
//!
//! Both follow Java `double` semantics exactly: NaN samples are skipped,
//! infinite samples are skipped by averages but remembered, and the rate of an accumulated counter
//! is taken between its first and last non-NaN samples.

use crate::columns::column_of;
use crate::{MetricHistory, ScalingMetric};
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// Running state of the reference's `getRate` over a series: the first and the last non-NaN sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateAccumulator {
    first: f64,
    first_at: Option<DateTime<Utc>>,
    last: f64,
    last_at: Option<DateTime<Utc>>,
}

impl Default for RateAccumulator {
    fn default() -> Self {
        Self {
            first: f64::NAN,
            first_at: None,
            last: f64::NAN,
            last_at: None,
        }
    }
}

impl RateAccumulator {
    /// Feeds the next sample in time order.
    #[inline]
    pub(crate) fn push(&mut self, at: DateTime<Utc>, value: f64) {
        if value.is_nan() {
            return;
        }
        if self.first_at.is_none() {
            self.first = value;
            self.first_at = Some(at);
        } else {
            self.last = value;
            self.last_at = Some(at);
        }
    }

    /// Per-second rate between the first and the last non-NaN sample, or NaN with fewer than two.
    ///
    /// Reference: `1000 * (last - first) / max(1, elapsed ms)`, the elapsed time truncated to whole
    /// milliseconds (`Duration.toMillis`).
    pub(crate) fn rate(&self) -> f64 {
        let (Some(first_at), Some(last_at)) = (self.first_at, self.last_at) else {
            return f64::NAN;
        };
        rate_between(self.first, self.last, elapsed_millis(first_at, last_at))
    }
}

/// The reference's elapsed time of a rate: `Duration.between(first, last).toMillis()`, truncated
/// to whole milliseconds and at least 1.
#[inline]
pub(crate) fn elapsed_millis(first_at: DateTime<Utc>, last_at: DateTime<Utc>) -> i64 {
    (last_at - first_at).num_milliseconds().max(1)
}

/// `1000 * (last - first) / elapsed_ms`, the per-second rate of a counter ([`elapsed_millis`]).
#[inline]
pub(crate) fn rate_between(first: f64, last: f64, elapsed_ms: i64) -> f64 {
    1000.0 * (last - first) / elapsed_ms as f64
}

/// Running state of the reference's `getAverage` over a series.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AverageAccumulator {
    sum: f64,
    count: u64,
    /// 1 once some sample was infinite.
    infinite: u64,
}

/// The one rule of the reference's `getAverage` loop, for one sample: a finite sample is added, an
/// infinite one remembered, NaN skipped.
///
/// Branch-free, so that a window read runs down whole columns: a skipped sample adds `+0.0`,
/// which leaves the sum unchanged bit for bit (the sum starts at `+0.0` and, rounding to nearest,
/// a sum of finite doubles is never `-0.0`; `±Inf + 0.0` is itself).
#[inline(always)]
fn accumulate(sum: &mut f64, count: &mut u64, infinite: &mut u64, value: f64) {
    let finite = value.is_finite();
    *sum += if finite { value } else { 0.0 };
    *count += u64::from(finite);
    *infinite |= u64::from(value.is_infinite());
}

impl AverageAccumulator {
    /// Feeds the next sample in time order ([`accumulate`]).
    #[inline]
    pub(crate) fn push(&mut self, value: f64) {
        accumulate(&mut self.sum, &mut self.count, &mut self.infinite, value);
    }

    /// Mean of the finite samples; +Inf when there is none but some sample was infinite, NaN when
    /// there is no sample at all or fewer finite samples than `min_observations`.
    pub(crate) fn average(&self, min_observations: usize) -> f64 {
        if self.count == 0 {
            return if self.infinite != 0 { f64::INFINITY } else { f64::NAN };
        }
        if self.count < min_observations as u64 {
            return f64::NAN;
        }
        self.sum / self.count as f64
    }
}

/// Many [`AverageAccumulator`]s side by side, one per position, fed a whole column of samples
/// (one per position) at a time: the state is laid out field by field so the loop vectorizes.
#[derive(Debug, Default)]
pub(crate) struct AverageColumn {
    sum: Vec<f64>,
    count: Vec<u64>,
    infinite: Vec<u64>,
    /// Scratch of [`push_columns`](Self::push_columns): the skipped positions' state.
    saved: Vec<(usize, AverageAccumulator)>,
}

impl AverageColumn {
    /// Starts over with one accumulator per item of `states`.
    pub(crate) fn reset(&mut self, states: impl Iterator<Item = AverageAccumulator>) {
        self.sum.clear();
        self.count.clear();
        self.infinite.clear();
        for state in states {
            self.sum.push(state.sum);
            self.count.push(state.count);
            self.infinite.push(state.infinite);
        }
    }

    /// The accumulator at position `k`.
    pub(crate) fn get(&self, k: usize) -> AverageAccumulator {
        AverageAccumulator {
            sum: self.sum[k],
            count: self.count[k],
            infinite: self.infinite[k],
        }
    }

    /// Feeds each column of `columns` in turn (in time order): `column[k]` to the accumulator at
    /// position `k`, for the positions every column and the accumulators have.
    ///
    /// `nan_only_at`, when given, says that every column is NaN at those positions (ascending)
    /// and finite everywhere else. Those positions then take no sample, and every other one adds
    /// its samples without the per-sample rule: the columns are plainly summed, and the skipped
    /// positions' state put back after. Without it each sample goes through [`accumulate`].
    ///
    /// The columns are taken a block of positions at a time, so that a block's accumulators stay
    /// in registers through all the columns. Either way each accumulator takes its samples one by
    /// one, in order.
    pub(crate) fn push_columns(&mut self, columns: &[&[f64]], nan_only_at: Option<&[u32]>) {
        let n = columns.iter().fold(self.sum.len(), |n, c| n.min(c.len()));
        match nan_only_at {
            Some(skipped) => {
                let mut saved = std::mem::take(&mut self.saved);
                saved.clear();
                saved.extend(
                    skipped
                        .iter()
                        .map(|&k| k as usize)
                        .take_while(|&k| k < n)
                        .map(|k| (k, self.get(k))),
                );
                self.feed::<true>(columns, n);
                for &(k, state) in &saved {
                    (self.sum[k], self.count[k], self.infinite[k]) = (state.sum, state.count, state.infinite);
                }
                self.saved = saved;
            }
            None => self.feed::<false>(columns, n),
        }
    }

    /// Feeds the first `n` positions of `columns`, a block at a time with the block's state in
    /// registers through all the columns, then the positions left one by one. `ALL_FINITE`
    /// plainly adds every value and counts each as a finite sample; otherwise each value goes
    /// through [`accumulate`].
    fn feed<const ALL_FINITE: bool>(&mut self, columns: &[&[f64]], n: usize) {
        #[inline(always)]
        fn take<const ALL_FINITE: bool>(sum: &mut f64, count: &mut u64, infinite: &mut u64, value: f64) {
            if ALL_FINITE {
                *sum += value;
            } else {
                accumulate(sum, count, infinite, value);
            }
        }
        let samples = if ALL_FINITE { columns.len() as u64 } else { 0 };
        let (sum, count, infinite) = (&mut self.sum[..n], &mut self.count[..n], &mut self.infinite[..n]);
        let whole = n - n % BLOCK;
        for at in (0..whole).step_by(BLOCK) {
            let mut s: [f64; BLOCK] = std::array::from_fn(|j| sum[at + j]);
            let mut c: [u64; BLOCK] = std::array::from_fn(|j| count[at + j] + samples);
            let mut inf: [u64; BLOCK] = std::array::from_fn(|j| infinite[at + j]);
            for column in columns {
                let values = &column[at..at + BLOCK];
                for j in 0..BLOCK {
                    take::<ALL_FINITE>(&mut s[j], &mut c[j], &mut inf[j], values[j]);
                }
            }
            sum[at..at + BLOCK].copy_from_slice(&s);
            count[at..at + BLOCK].copy_from_slice(&c);
            infinite[at..at + BLOCK].copy_from_slice(&inf);
        }
        for k in whole..n {
            count[k] += samples;
            for column in columns {
                take::<ALL_FINITE>(&mut sum[k], &mut count[k], &mut infinite[k], column[k]);
            }
        }
    }
}

/// Positions summed together by [`AverageColumn`]'s kernels.
const BLOCK: usize = 8;

/// The per-second rate of an accumulated counter (`NUM_RECORDS_IN`, `LAG`, ...) of vertex `vertex`
/// over the window: `1000 * (last - first) / max(1 ms, elapsed)` between its first and last non-NaN
/// samples, NaN with fewer than two. A vertex missing from a snapshot counts as a NaN sample.
/// Reference: `ScalingMetricEvaluator.getRate`.
///
/// ```
/// use autoscaler_metrics::{CollectedMetrics, MetricHistory, MetricValues, ScalingMetric, metric_rate};
/// use chrono::{TimeZone, Utc};
///
/// let snapshot = |records: f64| CollectedMetrics {
///     vertex_metrics: [("v".into(), MetricValues::from_iter([(ScalingMetric::NumRecordsIn, records)]))].into(),
///     ..Default::default()
/// };
/// let history: MetricHistory = [
///     (Utc.timestamp_millis_opt(1_000).unwrap(), snapshot(0.0)),
///     (Utc.timestamp_millis_opt(3_000).unwrap(), snapshot(4.0)),
/// ]
/// .into_iter()
/// .collect();
/// assert_eq!(metric_rate(&history, "v", ScalingMetric::NumRecordsIn), 2.0);
/// assert!(metric_rate(&history, "w", ScalingMetric::NumRecordsIn).is_nan());
/// ```
pub fn metric_rate(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> f64 {
    let mut acc = RateAccumulator::default();
    for_each_sample(history, Some(vertex), metric, |at, value| acc.push(at, value));
    acc.rate()
}

/// The window mean of `metric` for vertex `vertex`, or of the job-wide metric when `vertex` is
/// `None`: NaN and infinite samples are skipped; with no finite sample the result is +Inf if some
/// sample was infinite and NaN otherwise; with fewer than `min_observations` finite samples it is NaN.
/// Reference: `ScalingMetricEvaluator.getAverage`.
pub fn metric_average(
    history: &MetricHistory,
    vertex: Option<&str>,
    metric: ScalingMetric,
    min_observations: usize,
) -> f64 {
    let mut acc = AverageAccumulator::default();
    for_each_sample(history, vertex, metric, |_, value| acc.push(value));
    acc.average(min_observations)
}

/// Feeds `f` the samples of `metric` in time order: vertex `vertex`'s, or the job-wide one's when
/// `vertex` is `None`, NaN where the vertex or the metric is absent. A NaN sample is fed as
/// `f64::NAN`, whatever its payload: every caller only skips NaN samples.
///
/// The samples are read from the compact snapshots: the vertex's position is looked up once per
/// run of snapshots listing the same vertices, and a window column's values are read from the
/// digest. So a full window costs a few contiguous reads per snapshot rather than a search of
/// each snapshot's vertex map (scattered over memory, one cache miss after another).
fn for_each_sample(
    history: &MetricHistory,
    vertex: Option<&str>,
    metric: ScalingMetric,
    mut f: impl FnMut(DateTime<Utc>, f64),
) {
    let Some(id) = vertex else {
        for (at, entry) in history.entries() {
            f(at, entry.global_value(metric));
        }
        return;
    };
    let column = column_of(metric);
    // The last id list seen and the vertex's position in it.
    let mut at_position: Option<(&Arc<[crate::VertexId]>, Option<usize>)> = None;
    // The last NaN positions seen of an averaged column, the vertex's position then and whether
    // it is among them: those shared lists answer without reading the snapshot's own bytes.
    let mut nan_at: Option<(&Arc<[u32]>, usize, bool)> = None;
    for (at, entry) in history.entries() {
        let columns = entry.columns();
        let k = match at_position {
            Some((seen, k)) if Arc::ptr_eq(seen, &columns.ids) => k,
            _ => {
                let k = columns.position(id);
                at_position = Some((&columns.ids, k));
                k
            }
        };
        let Some(k) = k else {
            f(at, f64::NAN);
            continue;
        };
        if let Some(nan) = column.and_then(|c| columns.nan_positions(c)) {
            let is_nan = match nan_at {
                Some((seen, at_k, is_nan)) if at_k == k && Arc::ptr_eq(seen, nan) => is_nan,
                _ => {
                    let is_nan = u32::try_from(k).is_ok_and(|k| nan.binary_search(&k).is_ok());
                    nan_at = Some((nan, k, is_nan));
                    is_nan
                }
            };
            if is_nan {
                f(at, f64::NAN);
                continue;
            }
        }
        f(at, entry.vertex_value(k, metric, column));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollectedMetrics, MetricValues};
    use ScalingMetric::{NumRecordsIn as IN, NumRecordsOut as OUT};
    use chrono::TimeZone;

    fn ms(millis: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(millis).single().expect("valid instant")
    }

    fn snapshot(vertices: &[(&str, &[(ScalingMetric, f64)])], global: &[(ScalingMetric, f64)]) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: vertices
                .iter()
                .map(|(id, m)| ((*id).into(), m.iter().copied().collect()))
                .collect(),
            global_metrics: global.iter().copied().collect(),
        }
    }

    #[test]
    fn rate_uses_first_and_last_non_nan_samples() {
        // Reference getRateTest: v1 IN 0,0,4 at 1,2,3 s -> 2/s; OUT only at 2 and 3 s -> 10/s.
        let history: MetricHistory = [
            (ms(1000), snapshot(&[("v1", &[(IN, 0.0)]), ("v2", &[])], &[])),
            (
                ms(2000),
                snapshot(&[("v1", &[(IN, 0.0), (OUT, 10.0)]), ("v2", &[])], &[]),
            ),
            (
                ms(3000),
                snapshot(&[("v1", &[(IN, 4.0), (OUT, 20.0)]), ("v2", &[(IN, 1.0)])], &[]),
            ),
        ]
        .into_iter()
        .collect();
        assert_eq!(metric_rate(&history, "v1", IN), 2.0);
        assert_eq!(metric_rate(&history, "v1", OUT), 10.0);
        // A single sample has no rate, and an unknown vertex has none either.
        assert!(metric_rate(&history, "v2", IN).is_nan());
        assert!(metric_rate(&history, "v2", OUT).is_nan());
        assert!(metric_rate(&history, "nope", IN).is_nan());
    }

    #[test]
    fn rate_skips_nan_in_the_middle_and_truncates_elapsed_to_millis() {
        let mut acc = RateAccumulator::default();
        acc.push(ms(0), 100.0);
        acc.push(ms(500), f64::NAN);
        acc.push(ms(1500), 400.0);
        acc.push(ms(2000), f64::NAN);
        // 1000 * 300 / 1500 ms
        assert_eq!(acc.rate(), 200.0);

        // Sub-millisecond elapsed time counts as 1 ms: 1000 * 5 / 1.
        let mut acc = RateAccumulator::default();
        let t0 = ms(0);
        acc.push(t0, 0.0);
        acc.push(t0 + chrono::TimeDelta::microseconds(999), 5.0);
        assert_eq!(acc.rate(), 5000.0);
        // 2.9 ms truncates to 2 ms: 1000 * 6 / 2.
        let mut acc = RateAccumulator::default();
        acc.push(t0, 0.0);
        acc.push(t0 + chrono::TimeDelta::microseconds(2900), 6.0);
        assert_eq!(acc.rate(), 3000.0);
    }

    #[test]
    fn rate_of_infinite_samples_follows_ieee() {
        let mut acc = RateAccumulator::default();
        acc.push(ms(0), 1.0);
        acc.push(ms(1000), f64::INFINITY);
        assert_eq!(acc.rate(), f64::INFINITY);
        let mut acc = RateAccumulator::default();
        acc.push(ms(0), f64::INFINITY);
        acc.push(ms(1000), f64::INFINITY);
        assert!(acc.rate().is_nan(), "Inf - Inf is NaN");
    }

    #[test]
    fn average_skips_nan_and_infinity() {
        let mut acc = AverageAccumulator::default();
        for v in [1.0, f64::NAN, 3.0, f64::INFINITY, 5.0] {
            acc.push(v);
        }
        assert_eq!(acc.average(1), 3.0);
        assert_eq!(acc.average(3), 3.0);
        assert!(acc.average(4).is_nan(), "only 3 finite observations");
    }

    /// The value of `metric` in `values`, NaN when the vertex or the metric is absent
    /// (the reference's `getOrDefault(metric, NaN)`).
    fn sample(values: Option<&MetricValues>, metric: ScalingMetric) -> f64 {
        values.map_or(f64::NAN, |v| v.get_or_absent(metric))
    }

    /// The reference's loops, sample by sample through each snapshot's vertex map: the oracle of
    /// the column reads.
    fn scanned(history: &MetricHistory, vertex: &str, metric: ScalingMetric, min_observations: usize) -> (f64, f64) {
        let mut rate = RateAccumulator::default();
        let mut average = AverageAccumulator::default();
        for (at, snapshot) in history.iter() {
            let value = sample(snapshot.vertex(vertex), metric);
            rate.push(*at, value);
            average.push(value);
        }
        (rate.rate(), average.average(min_observations))
    }

    /// The vertices of a generated snapshot: (index in [`IDS`], [(index in [`METRICS`], value)]).
    type Vertices = Vec<(usize, Vec<(usize, f64)>)>;

    /// A generated window: each snapshot lists some of four vertices (two sharing their first 16
    /// bytes), each with some metrics (window columns and others), finite, NaN or infinite.
    fn window_strategy() -> impl proptest::strategy::Strategy<Value = Vec<(i64, Vertices)>> {
        use proptest::prelude::*;
        let value = prop_oneof![
            6 => -1e6..1e6f64,
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
            1 => Just(f64::NEG_INFINITY),
        ];
        let metrics = proptest::collection::vec((0..METRICS.len(), value), 0..5);
        let vertices = proptest::collection::vec((0..IDS.len(), metrics), 0..5);
        // Runs of snapshots listing the same vertices are what the digests share ids over.
        proptest::collection::vec((1i64..5000, vertices, any::<bool>()), 0..12).prop_map(|steps| {
            let mut previous: Vertices = Vec::new();
            steps
                .into_iter()
                .map(|(step, vertices, same_vertices)| {
                    let vertices = if same_vertices && !previous.is_empty() {
                        previous
                            .iter()
                            .zip(vertices.iter().cycle())
                            .map(|((id, _), (_, m))| (*id, m.clone()))
                            .collect()
                    } else {
                        vertices
                    };
                    previous = vertices.clone();
                    (step, vertices)
                })
                .collect()
        })
    }

    const IDS: [&str; 4] = ["a", "0123456789abcdef-1", "0123456789abcdef-2", "z"];
    const METRICS: [ScalingMetric; 5] = [
        ScalingMetric::ObservedTpr,
        ScalingMetric::NumRecordsIn,
        ScalingMetric::Lag,
        ScalingMetric::Load,
        ScalingMetric::TrueProcessingRate,
    ];

    proptest::proptest! {
        /// Averages and rates read from the snapshots' column digests are, bit for bit, the
        /// reference's loops over every snapshot's map, whatever vertices and metrics each
        /// snapshot lists; the same for a vertex no snapshot lists and a metric no column holds.
        #[test]
        fn column_reads_are_the_reference_loops(window in window_strategy(), min_observations in 0usize..4) {
            let mut at = 0;
            let history: MetricHistory = window
                .into_iter()
                .map(|(step, vertices)| {
                    at += step;
                    let snapshot = CollectedMetrics {
                        vertex_metrics: vertices
                            .into_iter()
                            .map(|(id, metrics)| (IDS[id].into(), metrics.into_iter().map(|(m, v)| (METRICS[m], v)).collect()))
                            .collect(),
                        ..Default::default()
                    };
                    (ms(at), snapshot)
                })
                .collect();
            for id in IDS.iter().chain(&["0123456789abcdef", "missing"]) {
                for metric in METRICS {
                    let (rate, average) = scanned(&history, id, metric, min_observations);
                    let read = (metric_rate(&history, id, metric), metric_average(&history, Some(id), metric, min_observations));
                    proptest::prop_assert!(
                        read.0.to_bits() == rate.to_bits() && read.1.to_bits() == average.to_bits(),
                        "{id} {metric:?}: read {read:?}, scanned ({rate}, {average})"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// The branch-free push sums exactly what the reference's loop sums (`getAverage`:
        /// skip NaN, remember and skip infinities, add the rest in order).
        #[test]
        fn push_is_the_reference_loop(
            samples in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::num::f64::ANY,
                    proptest::strategy::Just(0.0),
                    proptest::strategy::Just(-0.0),
                    proptest::strategy::Just(f64::NEG_INFINITY),
                ],
                0..40,
            ),
            min in 0usize..4,
        ) {
            let mut acc = AverageAccumulator::default();
            let (mut sum, mut n, mut infinite) = (0.0f64, 0usize, false);
            for &x in &samples {
                acc.push(x);
                if x.is_nan() {
                    continue;
                }
                if x.is_infinite() {
                    infinite = true;
                    continue;
                }
                sum += x;
                n += 1;
            }
            let expected = if n == 0 {
                if infinite { f64::INFINITY } else { f64::NAN }
            } else if n < min {
                f64::NAN
            } else {
                sum / n as f64
            };
            let got = acc.average(min);
            proptest::prop_assert!(
                got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan()),
                "{got:e} vs {expected:e}"
            );
        }

        /// The blocked column kernel leaves every position's accumulator exactly as feeding it its
        /// column values one by one does, from any starting state and for any width.
        #[test]
        fn push_columns_is_push_per_position(
            start in proptest::collection::vec((-1e6f64..1e6, 0u64..5, 0u64..2), 0..11),
            columns in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        8 => -1e9f64..1e9,
                        1 => proptest::num::f64::ANY,
                        1 => proptest::strategy::Just(f64::NAN),
                        1 => proptest::strategy::Just(f64::INFINITY),
                    ],
                    11,
                ),
                0..7,
            ),
        ) {
            let states: Vec<AverageAccumulator> = start
                .iter()
                .map(|&(sum, count, infinite)| AverageAccumulator { sum, count, infinite })
                .collect();
            let mut block = AverageColumn::default();
            block.reset(states.iter().copied());
            let views: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
            block.push_columns(&views, None);
            for (k, state) in states.iter().enumerate() {
                let mut one = *state;
                for column in &columns {
                    one.push(column[k]);
                }
                let got = block.get(k);
                proptest::prop_assert_eq!(got.sum.to_bits(), one.sum.to_bits(), "position {}", k);
                proptest::prop_assert_eq!((got.count, got.infinite), (one.count, one.infinite));
            }
        }
    }

    proptest::proptest! {
        /// Columns that are NaN at the same positions throughout and finite elsewhere: the plain
        /// sums with those positions put back leave every accumulator exactly as the per-sample
        /// rule does, and as the general kernel does.
        #[test]
        fn push_columns_skipping_fixed_nan_positions_is_push_per_position(
            start in proptest::collection::vec((-1e6f64..1e6, 0u64..5, 0u64..2), 0..21),
            nan_at in proptest::collection::vec(proptest::bool::weighted(0.4), 21),
            columns in proptest::collection::vec(proptest::collection::vec(-1e300f64..1e300, 21), 0..7),
        ) {
            let states: Vec<AverageAccumulator> = start
                .iter()
                .map(|&(sum, count, infinite)| AverageAccumulator { sum, count, infinite })
                .collect();
            let columns: Vec<Vec<f64>> = columns
                .into_iter()
                .map(|c| c.into_iter().zip(&nan_at).map(|(x, &nan)| if nan { f64::NAN } else { x }).collect())
                .collect();
            let skipped: Vec<u32> = (0..21u32).filter(|&k| nan_at[k as usize]).collect();
            let views: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
            let mut fast = AverageColumn::default();
            fast.reset(states.iter().copied());
            fast.push_columns(&views, Some(&skipped));
            let mut general = AverageColumn::default();
            general.reset(states.iter().copied());
            general.push_columns(&views, None);
            for (k, state) in states.iter().enumerate() {
                let mut one = *state;
                for column in &columns {
                    one.push(column[k]);
                }
                for got in [fast.get(k), general.get(k)] {
                    proptest::prop_assert_eq!(got.sum.to_bits(), one.sum.to_bits(), "position {}", k);
                    proptest::prop_assert_eq!((got.count, got.infinite), (one.count, one.infinite));
                }
            }
        }
    }

    #[test]
    fn average_without_finite_samples_is_inf_or_nan() {
        let mut acc = AverageAccumulator::default();
        assert!(acc.average(1).is_nan());
        acc.push(f64::NAN);
        assert!(acc.average(1).is_nan());
        acc.push(f64::NEG_INFINITY);
        // Any infinity (even negative) makes the empty mean +Inf, whatever min_observations is.
        assert_eq!(acc.average(1), f64::INFINITY);
        assert_eq!(acc.average(5), f64::INFINITY);
    }

    #[test]
    fn average_of_global_and_vertex_metrics() {
        let heap = ScalingMetric::HeapMemoryUsed;
        let load = ScalingMetric::Load;
        let history: MetricHistory = [
            (ms(0), snapshot(&[("v", &[(load, 0.2)])], &[(heap, 100.0)])),
            (ms(1000), snapshot(&[], &[(heap, 300.0)])),
            (ms(2000), snapshot(&[("v", &[(load, 0.4)])], &[])),
        ]
        .into_iter()
        .collect();
        assert_eq!(metric_average(&history, None, heap, 1), 200.0);
        assert!((metric_average(&history, Some("v"), load, 1) - 0.3).abs() < 1e-15);
        assert!(metric_average(&history, Some("v"), load, 3).is_nan());
        assert!(metric_average(&history, Some("x"), load, 1).is_nan());
    }
}
