//! The metric vocabulary: [`ScalingMetric`], dense per-vertex metric maps and evaluated values.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! scaling_metrics {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, avg: $avg:literal; )*) => {
        /// A metric the autoscaler collects or computes, named exactly as the reference's
        /// `ScalingMetric` enum (and serialized under that name).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum ScalingMetric {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        impl ScalingMetric {
            /// Every metric, in the reference's declaration order (this project's additions last).
            pub const ALL: [ScalingMetric; scaling_metrics!(@count $($variant)*)] = [$(ScalingMetric::$variant,)*];

            /// The reference name, e.g. `"TRUE_PROCESSING_RATE"`.
            pub const fn name(self) -> &'static str {
                match self { $(ScalingMetric::$variant => $name,)* }
            }

            /// Parses a reference name (case-sensitive, as the reference's `valueOf`).
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(ScalingMetric::$variant),)* _ => None }
            }

            /// Whether the reference computes (and reports) a windowed average for this metric.
            pub const fn calculates_average(self) -> bool {
                match self { $(ScalingMetric::$variant => $avg,)* }
            }
        }
    };
    (@count) => { 0 };
    (@count $head:ident $($tail:ident)*) => { 1 + scaling_metrics!(@count $($tail)*) };
}

scaling_metrics! {
    /// Busy ratio, 0..1 (busy ms per second / 1000).
    Load = "LOAD", avg: true;
    /// Records a vertex can process per second at full utilization.
    TrueProcessingRate = "TRUE_PROCESSING_RATE", avg: true;
    /// True processing rate observed from backpressure (sources only).
    ObservedTpr = "OBSERVED_TPR", avg: true;
    /// Records per second the vertex must sustain.
    TargetDataRate = "TARGET_DATA_RATE", avg: true;
    /// Extra records per second needed to drain the backlog within the catch-up duration.
    CatchUpDataRate = "CATCH_UP_DATA_RATE", avg: false;
    /// Pending records (sources).
    Lag = "LAG", avg: false;
    /// Current parallelism.
    Parallelism = "PARALLELISM", avg: false;
    /// Parallelism the autoscaler recommends.
    RecommendedParallelism = "RECOMMENDED_PARALLELISM", avg: false;
    /// Max parallelism (number of key groups).
    MaxParallelism = "MAX_PARALLELISM", avg: false;
    /// Number of source partitions (0 = unknown).
    NumSourcePartitions = "NUM_SOURCE_PARTITIONS", avg: false;
    /// Processing rate below which the vertex is scaled up.
    ScaleUpRateThreshold = "SCALE_UP_RATE_THRESHOLD", avg: false;
    /// Processing rate above which the vertex is scaled down.
    ScaleDownRateThreshold = "SCALE_DOWN_RATE_THRESHOLD", avg: false;
    /// Processing rate expected after a rescale.
    ExpectedProcessingRate = "EXPECTED_PROCESSING_RATE", avg: false;
    /// Accumulated input record count (all subtasks).
    NumRecordsIn = "NUM_RECORDS_IN", avg: false;
    /// Input records per second (all subtasks).
    NumRecordsInPerSecond = "NUM_RECORDS_IN_PER_SECOND", avg: false;
    /// Accumulated output record count (all subtasks).
    NumRecordsOut = "NUM_RECORDS_OUT", avg: false;
    /// Accumulated busy milliseconds summed over subtasks.
    AccumulatedBusyTime = "ACCUMULATED_BUSY_TIME", avg: false;
    /// Fraction of time spent in garbage collection, 0..1.
    GcPressure = "GC_PRESSURE", avg: false;
    /// Heap used, bytes.
    HeapMemoryUsed = "HEAP_MEMORY_USED", avg: true;
    /// Managed memory used, bytes.
    ManagedMemoryUsed = "MANAGED_MEMORY_USED", avg: true;
    /// Metaspace used, bytes.
    MetaspaceMemoryUsed = "METASPACE_MEMORY_USED", avg: true;
    /// Heap used / heap max, 0..1.
    HeapMaxUsageRatio = "HEAP_MAX_USAGE_RATIO", avg: true;
    /// Task slots in use.
    NumTaskSlotsUsed = "NUM_TASK_SLOTS_USED", avg: false;
    /// Backpressure ratio, 0..1 (`backPressuredTimeMsPerSecond / 1000`, aggregated over subtasks as
    /// `LOAD` is). This project's addition, not in the reference's enum: it feeds the root-cause
    /// analysis ([`crate::root_cause`]) and changes no decision.
    Backpressure = "BACKPRESSURE", avg: true;
}

/// Number of [`ScalingMetric`] variants.
pub const METRIC_COUNT: usize = ScalingMetric::ALL.len();

impl ScalingMetric {
    /// Dense index of the metric (its position in [`ScalingMetric::ALL`]).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ScalingMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value type that has a distinguished "absent" filler, used by [`MetricMap`].
pub trait MetricSlot: Copy {
    /// The filler of an empty slot.
    const ABSENT: Self;
}

impl MetricSlot for f64 {
    const ABSENT: Self = f64::NAN;
}

impl MetricSlot for EvaluatedScalingMetric {
    const ABSENT: Self = EvaluatedScalingMetric::NAN;
}

/// A dense, allocation-free map from [`ScalingMetric`] to `T` that remembers which keys are present.
///
/// "Present with NaN" and "absent" are different states, as in the reference's `Map<ScalingMetric, Double>`.
/// Two maps are equal when they hold the same metrics with equal values, NaN counting as equal to
/// NaN (as Java's `Double.equals`).
#[derive(Clone, Copy)]
pub struct MetricMap<T: MetricSlot> {
    values: [T; METRIC_COUNT],
    present: u32,
}

impl<T: MetricSlot> Default for MetricMap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: MetricSlot> MetricMap<T> {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            values: [T::ABSENT; METRIC_COUNT],
            present: 0,
        }
    }

    /// The value of `metric`, if present.
    #[inline]
    pub fn get(&self, metric: ScalingMetric) -> Option<T> {
        self.contains(metric).then(|| self.values[metric.index()])
    }

    /// The value of `metric`, or the absent filler (NaN for numbers).
    #[inline]
    pub fn get_or_absent(&self, metric: ScalingMetric) -> T {
        self.values[metric.index()]
    }

    /// Whether `metric` is present.
    #[inline]
    pub fn contains(&self, metric: ScalingMetric) -> bool {
        self.present & (1 << metric.index()) != 0
    }

    /// Sets `metric` to `value`.
    #[inline]
    pub fn insert(&mut self, metric: ScalingMetric, value: T) {
        self.values[metric.index()] = value;
        self.present |= 1 << metric.index();
    }

    /// Removes `metric`, returning its value if it was present.
    pub fn remove(&mut self, metric: ScalingMetric) -> Option<T> {
        let old = self.get(metric);
        self.values[metric.index()] = T::ABSENT;
        self.present &= !(1 << metric.index());
        old
    }

    /// The present metrics as a bit set (bit `metric.index()`).
    #[inline]
    pub(crate) fn present_bits(&self) -> u32 {
        self.present
    }

    /// Number of present metrics.
    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// Whether no metric is present.
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// Present entries in [`ScalingMetric::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (ScalingMetric, T)> + '_ {
        ScalingMetric::ALL
            .iter()
            .filter(|m| self.contains(**m))
            .map(|m| (*m, self.values[m.index()]))
    }
}

/// Java `Double.equals` semantics: NaN equals NaN (absent slots hold NaN, so plain `==` would make
/// every map with an absent metric unequal to itself).
fn same_f64(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

impl PartialEq for MetricMap<f64> {
    fn eq(&self, other: &Self) -> bool {
        self.present == other.present && self.iter().zip(other.iter()).all(|((_, a), (_, b))| same_f64(a, b))
    }
}

impl PartialEq for MetricMap<EvaluatedScalingMetric> {
    fn eq(&self, other: &Self) -> bool {
        self.present == other.present && self.iter().zip(other.iter()).all(|((_, a), (_, b))| a == b)
    }
}

impl<T: MetricSlot + fmt::Debug> fmt::Debug for MetricMap<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<T: MetricSlot> FromIterator<(ScalingMetric, T)> for MetricMap<T> {
    fn from_iter<I: IntoIterator<Item = (ScalingMetric, T)>>(iter: I) -> Self {
        let mut map = Self::new();
        for (m, v) in iter {
            map.insert(m, v);
        }
        map
    }
}

/// Collected metric values of one vertex (or the job's global metrics) in one snapshot.
pub type MetricValues = MetricMap<f64>;

/// Evaluated metrics of one vertex (or the job's global evaluated metrics).
pub type EvaluatedVertexMetrics = MetricMap<EvaluatedScalingMetric>;

/// An evaluated metric: the latest value and/or the windowed average. NaN means "not set".
///
/// Serialized as `{"current": n, "average": n}` with non-finite values as strings. Equality treats
/// NaN as equal to NaN, as the reference's `EvaluatedScalingMetric.equals` does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct EvaluatedScalingMetric {
    /// The current (latest) value, NaN when not set.
    #[serde(with = "crate::json_number", default = "nan")]
    pub current: f64,
    /// The windowed average, NaN when not set.
    #[serde(with = "crate::json_number", default = "nan")]
    pub average: f64,
}

fn nan() -> f64 {
    f64::NAN
}

impl PartialEq for EvaluatedScalingMetric {
    fn eq(&self, other: &Self) -> bool {
        same_f64(self.current, other.current) && same_f64(self.average, other.average)
    }
}

impl EvaluatedScalingMetric {
    /// Both sides unset.
    pub const NAN: Self = Self {
        current: f64::NAN,
        average: f64::NAN,
    };

    /// A metric with both sides set, rounded as the reference stores them (see [`round_metric`]).
    pub fn new(current: f64, average: f64) -> Self {
        Self {
            current: round_metric(current),
            average: round_metric(average),
        }
    }

    /// Only the current value set (rounded), as the reference's `EvaluatedScalingMetric.of`.
    pub fn of(current: f64) -> Self {
        Self {
            current: round_metric(current),
            average: f64::NAN,
        }
    }

    /// Only the average set (rounded), as the reference's `EvaluatedScalingMetric.avg`.
    pub fn avg(average: f64) -> Self {
        Self {
            current: f64::NAN,
            average: round_metric(average),
        }
    }
}

/// Rounds `value` half-up to 3 decimals on its shortest decimal representation, as the reference's
/// `ScalingMetrics.roundMetric`; a value that would round to 0 is kept unrounded and non-finite
/// values are returned unchanged.
///
/// ```
/// use autoscaler_metrics::round_metric;
/// assert_eq!(round_metric(1.0005), 1.001);
/// assert_eq!(round_metric(0.0004), 0.0004);
/// assert!(round_metric(f64::NAN).is_nan());
/// ```
pub fn round_metric(value: f64) -> f64 {
    if !value.is_finite() {
        return value;
    }
    let rounded = crate::java::round_half_up(value, 3);
    if rounded == 0.0 { value } else { rounded }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_count_is_24() {
        assert_eq!(METRIC_COUNT, 24);
        for m in ScalingMetric::ALL {
            assert_eq!(ScalingMetric::from_name(m.name()), Some(m));
            let json = serde_json::to_string(&m).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", m.name()));
        }
        assert_eq!(ScalingMetric::from_name("load"), None);
    }

    #[test]
    fn round_metric_is_half_up_on_shortest_decimal() {
        assert_eq!(round_metric(2.0005), 2.001);
        assert_eq!(round_metric(1.2344), 1.234);
        assert_eq!(round_metric(-1.2345), -1.235);
        assert_eq!(round_metric(0.0001), 0.0001);
        assert_eq!(round_metric(1_408_596_540.0), 1_408_596_540.0);
        assert_eq!(round_metric(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn metric_map_distinguishes_absent_from_nan() {
        let mut map = MetricValues::new();
        assert!(map.get(ScalingMetric::Lag).is_none());
        map.insert(ScalingMetric::Lag, f64::NAN);
        assert!(map.contains(ScalingMetric::Lag));
        assert!(map.get_or_absent(ScalingMetric::Load).is_nan());
        assert_eq!(map.len(), 1);
        assert_eq!(map, map, "absent slots do not break equality");
        assert_eq!(EvaluatedScalingMetric::of(1.0), EvaluatedScalingMetric::of(1.0));
        assert_ne!(EvaluatedScalingMetric::of(1.0), EvaluatedScalingMetric::avg(1.0));
        assert!(map.remove(ScalingMetric::Lag).is_some());
        assert!(map.is_empty());
    }
}

mod serde_impls {
    use super::{EvaluatedScalingMetric, MetricMap, ScalingMetric};
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt;
    use std::marker::PhantomData;

    /// Wrapper that serializes an `f64` with non-finite values as strings.
    struct Num(f64);

    impl Serialize for Num {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            crate::json_number::serialize(&self.0, s)
        }
    }

    impl<'de> Deserialize<'de> for Num {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            crate::json_number::deserialize(d).map(Num)
        }
    }

    impl Serialize for MetricMap<f64> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(self.len()))?;
            for (m, v) in self.iter() {
                map.serialize_entry(&m, &Num(v))?;
            }
            map.end()
        }
    }

    impl Serialize for MetricMap<EvaluatedScalingMetric> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(self.len()))?;
            for (m, v) in self.iter() {
                map.serialize_entry(&m, &v)?;
            }
            map.end()
        }
    }

    struct MapVisitor<V, T>(PhantomData<(V, T)>);

    impl<'de, V, T> Visitor<'de> for MapVisitor<V, T>
    where
        V: Deserialize<'de> + Into<T>,
        T: super::MetricSlot,
    {
        type Value = MetricMap<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map from ScalingMetric names to values")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = MetricMap::new();
            while let Some((k, v)) = access.next_entry::<ScalingMetric, V>()? {
                map.insert(k, v.into());
            }
            Ok(map)
        }
    }

    impl From<Num> for f64 {
        fn from(n: Num) -> f64 {
            n.0
        }
    }

    impl<'de> Deserialize<'de> for MetricMap<f64> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(MapVisitor::<Num, f64>(PhantomData))
        }
    }

    impl<'de> Deserialize<'de> for MetricMap<EvaluatedScalingMetric> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(MapVisitor::<EvaluatedScalingMetric, EvaluatedScalingMetric>(
                PhantomData,
            ))
        }
    }
}

/// How per-subtask busy time is aggregated (`job.autoscaler.metrics.busy-time.aggregator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum BusyTimeAggregator {
    /// The busiest subtask (the reference default).
    #[default]
    Max,
    /// The least busy subtask.
    Min,
    /// The mean over subtasks, from the accumulated busy time counter.
    Avg,
}
