//! The column digest of a snapshot: the few metrics the window statistics read, laid out densely.
//!
//! A [`crate::MetricHistory`] builds one [`Columns`] per snapshot when the snapshot is added, and
//! never again. Reading a window then decodes a few columns per snapshot instead of searching
//! every snapshot's vertex map, and snapshots that list the same vertices share one id list, so
//! mapping a position to its topology vertex is resolved once per run of such snapshots rather
//! than once per sample. The columns hold the same values the maps hold, bit for bit (NaN where
//! absent), each kept in as few bytes as its values allow ([`Code`]): a window is most of what a
//! job costs in memory. No statistic is precomputed, so every window statistic still sums its
//! samples in time order as the reference does.

use crate::history_stats::{AverageAccumulator, AverageColumn};
use crate::{CollectedMetrics, JobTopology, MetricHistory, MetricValues, ScalingMetric, VertexId};
use std::sync::Arc;

/// The metrics a [`Columns`] holds, column `c` being `WINDOW_COLUMNS[c]`; the ones window
/// averages read come first ([`AVERAGED_COLUMNS`]).
pub(crate) const WINDOW_COLUMNS: [ScalingMetric; 8] = [
    ScalingMetric::Load,
    ScalingMetric::NumRecordsInPerSecond,
    ScalingMetric::ObservedTpr,
    ScalingMetric::Backpressure,
    ScalingMetric::NumRecordsIn,
    ScalingMetric::NumRecordsOut,
    ScalingMetric::Lag,
    ScalingMetric::AccumulatedBusyTime,
];

/// The position of `metric` in [`WINDOW_COLUMNS`], if it is a window column.
pub(crate) const fn column_of(metric: ScalingMetric) -> Option<usize> {
    let mut i = 0;
    while i < WINDOW_COLUMNS.len() {
        if WINDOW_COLUMNS[i] as usize == metric as usize {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The position of `metric` in [`WINDOW_COLUMNS`]; a metric not there is a compile-time error
/// where the position is a constant.
pub(crate) const fn column(metric: ScalingMetric) -> usize {
    match column_of(metric) {
        Some(c) => c,
        None => panic!("not a window column"),
    }
}

/// The digest of one snapshot: its vertex ids in map order and, column by column, the values of
/// [`WINDOW_COLUMNS`] for each id in that order (NaN where absent), each column kept as
/// compactly as its values allow without changing a bit of them ([`Code`]); and the job-wide
/// metrics, their values alone in [`ScalingMetric::ALL`] order (a job-wide map holds a handful
/// of its 24 slots), each value's 8 bytes as they are.
#[derive(Debug)]
pub(crate) struct Columns {
    /// The snapshot's vertex ids in its map's (sorted) order; the same allocation as the
    /// neighbouring snapshot's when both list the same vertices.
    pub(crate) ids: Arc<[VertexId]>,
    /// The job-wide values (8 bytes each), then the columns one after the other, column `c` as
    /// `codes[c]` says.
    data: Box<[u8]>,
    /// The job-wide metrics present (bit `metric.index()`).
    global: u32,
    /// How each column is kept ([`Code::pack`]).
    codes: [u8; WINDOW_COLUMNS.len()],
    /// Where each column ends in `data` (the next one starts there): kept, so that a read finds
    /// a column without walking the ones before it.
    ends: [u32; WINDOW_COLUMNS.len()],
    /// Which metrics each vertex has and where the averaged columns are NaN: the same allocation
    /// as the neighbouring snapshot's when both are alike, as they nearly always are.
    shape: Arc<Shape>,
    /// Bit `c` is set when no value of column `c` is infinite.
    no_infinite: u8,
}

/// Where each column of a [`Columns`] starts in its bytes, and where the last one ends.
pub(crate) type Starts = [usize; WINDOW_COLUMNS.len() + 1];

/// How one column of a [`Columns`] is laid out in its bytes, chosen per column and snapshot as
/// the fewest bytes that give back every value bit for bit.
///
/// When some value of the column is the canonical NaN (`f64::NAN`, what an absent metric reads),
/// the column starts with a bitmap of those positions (`ceil(n / 8)` bytes, bit `k % 8` of byte
/// `k / 8` for position `k`) and only the other positions follow. Each of those takes `width`
/// bytes, little-endian:
/// - with `scale` [`Code::RAW`], the value's own 8 bytes (any `f64`: infinities, other NaNs, `-0.0`);
/// - otherwise the zigzag of an integer `m` such that `m as f64 / 10^scale` is the value, bit for
///   bit: counters and other whole numbers take `scale` 0, Flink's per-second milliseconds over
///   1000 (busy and backpressured ratios) `scale` 3, and `width` is what the largest `|m|` needs
///   (0 when every value is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Code {
    scale: u8,
    width: u8,
    masked: bool,
}

/// The exact powers of ten a [`Code`] may scale by (every one is an exact `f64`).
const POWERS_OF_TEN: [f64; 7] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

// Every scale has its power of ten, and the raw one is not among them.
const _: () = assert!(POWERS_OF_TEN.len() == Code::RAW as usize);

/// The canonical NaN's bits: the positions holding them are the ones a masked column elides.
const NAN_BITS: u64 = 0x7ff8_0000_0000_0000;

impl Code {
    /// The `scale` of a column kept as raw `f64` bits.
    const RAW: u8 = 7;

    /// The code in one byte: `scale` in bits 0..3, `width` (0 to 8) in bits 3..7, `masked` bit 7.
    #[inline]
    fn pack(self) -> u8 {
        self.scale | self.width << 3 | u8::from(self.masked) << 7
    }

    /// The inverse of [`Code::pack`].
    #[inline]
    fn unpack(byte: u8) -> Self {
        Self {
            scale: byte & 0b111,
            width: (byte >> 3) & 0b1111,
            masked: byte & 0x80 != 0,
        }
    }

    /// The value an integer `m` stands for at `scale` (not [`Code::RAW`]): the one decoding rule,
    /// which [`Code::choose`] also applies to check that a scale gives back every value.
    #[inline]
    fn scaled(m: i64, scale: u8) -> f64 {
        m as f64 / POWERS_OF_TEN[usize::from(scale)]
    }

    /// The integer `value` stands for at `scale` (not [`Code::RAW`]), rounded: what
    /// [`Code::choose`] checks and [`Code::encode`] keeps.
    #[inline]
    fn integer(value: f64, scale: u8) -> f64 {
        (value * POWERS_OF_TEN[usize::from(scale)]).round()
    }

    /// The fewest bytes that keep `values` bit for bit.
    fn choose(values: &[f64]) -> Self {
        let masked = values.iter().any(|v| v.to_bits() == NAN_BITS);
        let kept = || values.iter().copied().filter(|v| v.to_bits() != NAN_BITS);
        let raw = Self {
            scale: Self::RAW,
            width: 8,
            masked,
        };
        for scale in 0..POWERS_OF_TEN.len() as u8 {
            let mut largest = 0u64;
            let exact = kept().all(|v| {
                let m = Self::integer(v, scale);
                // Beyond 2^53 not every integer is an f64, and `as i64` would saturate.
                let ok = m.abs() < 9_007_199_254_740_992.0 && Self::scaled(m as i64, scale).to_bits() == v.to_bits();
                largest = largest.max(zigzag(m as i64));
                ok
            });
            if exact {
                let width = (u64::BITS - largest.leading_zeros()).div_ceil(8) as u8;
                return if width < 8 { Self { scale, width, masked } } else { raw };
            }
        }
        raw
    }

    /// The value of the word `word` (its `width` low bytes).
    #[inline]
    fn decode(self, word: u64) -> f64 {
        if self.scale == Self::RAW {
            f64::from_bits(word)
        } else {
            Self::scaled(unzigzag(word), self.scale)
        }
    }

    /// Appends the values of the `count` words `words` to `out`: one loop per width, so that
    /// each reads its words with fixed-size loads.
    fn decode_all(self, words: &[u8], count: usize, out: &mut Vec<f64>) {
        fn each<const W: usize>(code: Code, words: &[u8], out: &mut Vec<f64>) {
            out.extend(words.chunks_exact(W).map(|w| {
                let mut bytes = [0u8; 8];
                bytes[..W].copy_from_slice(w);
                code.decode(u64::from_le_bytes(bytes))
            }));
        }
        match self.width {
            0 => out.extend(std::iter::repeat_n(self.decode(0), count)),
            1 => each::<1>(self, words, out),
            2 => each::<2>(self, words, out),
            3 => each::<3>(self, words, out),
            4 => each::<4>(self, words, out),
            5 => each::<5>(self, words, out),
            6 => each::<6>(self, words, out),
            7 => each::<7>(self, words, out),
            // A raw word; no code is wider ([`Code::choose`]).
            _ => each::<8>(self, words, out),
        }
    }

    /// Appends the word of `value` (known to be kept exactly) to `out`.
    fn encode(self, value: f64, out: &mut Vec<u8>) {
        let word = if self.scale == Self::RAW {
            value.to_bits()
        } else {
            zigzag(Self::integer(value, self.scale) as i64)
        };
        out.extend_from_slice(&word.to_le_bytes()[..usize::from(self.width)]);
    }
}

/// Appends the `n` values of a column kept as `code` says, whose bytes are `mask` (its NaN
/// bitmap, empty when not masked) and `words` (its kept words, `width` bytes each for every
/// position the bitmap does not elide), to `out`.
fn decode_words(code: Code, n: usize, mask: &[u8], words: &[u8], out: &mut Vec<f64>) {
    let start = out.len();
    let kept = n - elided_count(mask);
    code.decode_all(words, kept, out);
    if code.masked {
        // The kept values move to their positions, from the last, with NaN in between.
        out.resize(start + n, f64::NAN);
        let mut from = start + kept;
        for k in (0..n).rev() {
            if elided(mask, k) {
                out[start + k] = f64::NAN;
            } else {
                from -= 1;
                out[start + k] = out[from];
            }
        }
    }
}

/// The `n` values of one column kept as its code byte `code` says ([`Code::pack`]), read from
/// the front of `bytes` (its NaN bitmap when masked, then its kept words), as [`Columns`]
/// keeps a column: the values, one per position, and how many bytes they took. `None` when the
/// bytes are too few, or the bitmap marks a position past `n`, or the code is not the one
/// [`Code::choose`] gives for the values read: what a store reads back from a database, checked
/// rather than trusted, and read one way only.
pub(crate) fn read_kept_column(code: u8, n: usize, bytes: &[u8]) -> Option<(Vec<f64>, usize)> {
    let unpacked = Code::unpack(code);
    if unpacked.width > 8 || unpacked.scale > Code::RAW {
        return None;
    }
    let mask_len = if unpacked.masked { n.div_ceil(8) } else { 0 };
    let mask = bytes.get(..mask_len)?;
    // The bits past the last position are zero.
    if !n.is_multiple_of(8) && mask.last().is_some_and(|last| last >> (n % 8) != 0) {
        return None;
    }
    let kept = n - elided_count(mask);
    let words_len = kept.checked_mul(usize::from(unpacked.width))?;
    let words = bytes.get(mask_len..mask_len.checked_add(words_len)?)?;
    let mut values = Vec::with_capacity(n);
    decode_words(unpacked, n, mask, words, &mut values);
    (Code::choose(&values).pack() == code).then_some((values, mask_len + words_len))
}

/// Signed to unsigned, small magnitudes to small numbers: 0, -1, 1, -2 to 0, 1, 2, 3.
#[inline]
pub(crate) fn zigzag(m: i64) -> u64 {
    ((m << 1) ^ (m >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(word: u64) -> i64 {
    ((word >> 1) as i64) ^ -((word & 1) as i64)
}

/// Whether position `k` is elided in the NaN bitmap `mask` ([`Code`]).
#[inline]
fn elided(mask: &[u8], k: usize) -> bool {
    mask[k / 8] & (1 << (k % 8)) != 0
}

/// How many positions the NaN bitmap `mask` elides.
#[inline]
fn elided_count(mask: &[u8]) -> usize {
    mask.iter().map(|b| b.count_ones() as usize).sum()
}

/// How many positions before `k` the NaN bitmap `mask` elides.
#[inline]
fn elided_before(mask: &[u8], k: usize) -> usize {
    elided_count(&mask[..k / 8]) + (mask[k / 8] & ((1u8 << (k % 8)) - 1)).count_ones() as usize
}

/// The little-endian word of `bytes` (at most 8).
#[inline]
fn word(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

/// The part of a [`Columns`] that neighbouring snapshots usually have alike.
#[derive(Debug)]
struct Shape {
    /// Every metric present in each id's map (bit `metric.index()`), not only the columns.
    present: Box<[u32]>,
    /// The union of `present`.
    union: u32,
    /// For each of the first [`AVERAGED_COLUMNS`] columns, the positions whose value is NaN
    /// (absent, mostly), ascending; the same allocation as the neighbouring snapshot's where they
    /// are the same positions.
    nan_positions: [Arc<[u32]>; AVERAGED_COLUMNS],
}

/// How many of [`WINDOW_COLUMNS`], from the first, window averages read (the others are
/// counters, read at the ends of the window only): only these get their NaN positions.
const AVERAGED_COLUMNS: usize = 4;

impl Columns {
    /// The digest of `snapshot`, sharing `neighbour`'s id list when it lists the same vertices.
    pub(crate) fn of(snapshot: &CollectedMetrics, neighbour: Option<&Columns>) -> Self {
        let vertices = &snapshot.vertex_metrics;
        let n = vertices.len();
        let mut values = vec![f64::NAN; n * WINDOW_COLUMNS.len()];
        for (k, metrics) in vertices.values().enumerate() {
            for (c, metric) in WINDOW_COLUMNS.iter().enumerate() {
                values[c * n + k] = metrics.get_or_absent(*metric);
            }
        }
        let column = |c: usize| &values[c * n..(c + 1) * n];
        let present: Box<[u32]> = vertices.values().map(|m| m.present_bits()).collect();
        let union = present.iter().fold(0, |bits, p| bits | p);
        let no_infinite = (0..WINDOW_COLUMNS.len())
            .filter(|&c| !column(c).iter().any(|x| x.is_infinite()))
            .fold(0, |bits, c| bits | 1 << c);
        let nan_positions = std::array::from_fn(|c| {
            let nan = column(c)
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_nan())
                .map(|(k, _)| k as u32);
            match neighbour {
                Some(other) if other.shape.nan_positions[c].iter().copied().eq(nan.clone()) => {
                    Arc::clone(&other.shape.nan_positions[c])
                }
                _ => nan.collect(),
            }
        });
        let shape = match neighbour {
            Some(other)
                if other.shape.present == present
                    && (0..AVERAGED_COLUMNS).all(|c| Arc::ptr_eq(&other.shape.nan_positions[c], &nan_positions[c])) =>
            {
                Arc::clone(&other.shape)
            }
            _ => Arc::new(Shape {
                present,
                union,
                nan_positions,
            }),
        };
        let ids = match neighbour {
            Some(other) if other.ids.len() == n && other.ids.iter().zip(vertices.keys()).all(|(a, b)| a == b) => {
                Arc::clone(&other.ids)
            }
            _ => vertices.keys().cloned().collect(),
        };
        let codes: [Code; WINDOW_COLUMNS.len()] = std::array::from_fn(|c| Code::choose(column(c)));
        let mut data = Vec::new();
        for (_, value) in snapshot.global_metrics.iter() {
            data.extend_from_slice(&value.to_bits().to_le_bytes());
        }
        let mut ends = [0; WINDOW_COLUMNS.len()];
        for ((c, code), end) in codes.iter().enumerate().zip(&mut ends) {
            if code.masked {
                let mut mask = vec![0u8; n.div_ceil(8)];
                for (k, v) in column(c).iter().enumerate() {
                    if v.to_bits() == NAN_BITS {
                        mask[k / 8] |= 1 << (k % 8);
                    }
                }
                data.extend_from_slice(&mask);
            }
            for &v in column(c).iter().filter(|v| !code.masked || v.to_bits() != NAN_BITS) {
                code.encode(v, &mut data);
            }
            // Past 4 GiB (never: a snapshot that large is not collected) a column reads as
            // missing, through `bytes_at`'s bounds check, rather than from wrong bytes.
            *end = u32::try_from(data.len()).unwrap_or(u32::MAX);
        }
        Self {
            ids,
            data: data.into_boxed_slice(),
            codes: codes.map(Code::pack),
            ends,
            global: snapshot.global_metrics.present_bits(),
            shape,
            no_infinite,
        }
    }

    /// Where each column starts in `data`, and (last) where the last one ends.
    #[inline]
    pub(crate) fn starts(&self) -> Starts {
        let mut starts = [8 * self.global.count_ones() as usize; WINDOW_COLUMNS.len() + 1];
        for (start, &end) in starts[1..].iter_mut().zip(&self.ends) {
            *start = end as usize;
        }
        starts
    }

    /// The bytes of column `c` given the [`starts`](Self::starts): its NaN bitmap (empty when
    /// not masked) and its kept words.
    fn bytes_at(&self, c: usize, starts: &Starts) -> (&[u8], &[u8]) {
        let mask = if Code::unpack(self.codes[c]).masked {
            self.ids.len().div_ceil(8)
        } else {
            0
        };
        let column = self.data.get(starts[c]..starts[c + 1]).unwrap_or_default();
        column.split_at(mask.min(column.len()))
    }

    /// The bytes of column `c`: its NaN bitmap (empty when not masked) and its kept words.
    #[cfg(test)]
    fn bytes(&self, c: usize) -> (&[u8], &[u8]) {
        self.bytes_at(c, &self.starts())
    }

    /// Appends the values of each column of `columns` ([`column`]), one per id, to the `out` at
    /// the same index: one walk over the codes for them all.
    pub(crate) fn decode_columns<const N: usize>(&self, columns: [usize; N], out: &mut [Vec<f64>; N]) {
        let starts = self.starts();
        for (c, out) in columns.into_iter().zip(out.iter_mut()) {
            self.decode_at(c, self.bytes_at(c, &starts), out);
        }
    }

    /// Appends the values of column `c` ([`column`]), one per id, to `out`.
    #[cfg(test)]
    pub(crate) fn decode_column(&self, c: usize, out: &mut Vec<f64>) {
        self.decode_at(c, self.bytes(c), out);
    }

    /// Appends the values of column `c`, whose bytes are `(mask, words)`, to `out`.
    fn decode_at(&self, c: usize, (mask, words): (&[u8], &[u8]), out: &mut Vec<f64>) {
        decode_words(Code::unpack(self.codes[c]), self.ids.len(), mask, words, out);
    }

    /// Column `c` as it is kept: its code byte ([`Code::pack`]) and its bytes (the NaN bitmap,
    /// when masked, then the kept words), given the [`starts`](Self::starts).
    pub(crate) fn kept_column(&self, c: usize, starts: &Starts) -> (u8, &[u8]) {
        (
            self.codes[c],
            self.data.get(starts[c]..starts[c + 1]).unwrap_or_default(),
        )
    }

    /// Every metric present in each id's map (bit `metric.index()`), in id order.
    pub(crate) fn present_all(&self) -> &[u32] {
        &self.shape.present
    }

    /// Whether no value of column `c` is infinite.
    #[inline]
    pub(crate) fn no_infinite(&self, c: usize) -> bool {
        self.no_infinite & (1 << c) != 0
    }

    /// The positions where column `c` is NaN, ascending; `None` for a column window averages do
    /// not read ([`AVERAGED_COLUMNS`]).
    #[inline]
    pub(crate) fn nan_positions(&self, c: usize) -> Option<&Arc<[u32]>> {
        self.shape.nan_positions.get(c)
    }

    /// Every metric present in the map of some id (bit `metric.index()`).
    #[inline]
    pub(crate) fn union(&self) -> u32 {
        self.shape.union
    }

    /// The position of vertex `id` in the ids, if the snapshot lists it.
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        // The ids are in the snapshot map's (sorted) order.
        self.ids.binary_search_by(|v| v.as_str().cmp(id)).ok()
    }

    /// Every metric present in the map of the id at position `k` (bit `metric.index()`).
    #[inline]
    pub(crate) fn present(&self, k: usize) -> u32 {
        self.shape.present[k]
    }

    /// The value of column `c` for the id at position `k`.
    pub(crate) fn value(&self, c: usize, k: usize) -> f64 {
        self.value_at(c, k, &self.starts())
    }

    /// [`value`](Self::value) given the column [`starts`](Self::starts), for a caller reading
    /// several values of the snapshot.
    pub(crate) fn value_at(&self, c: usize, k: usize, starts: &Starts) -> f64 {
        let code = Code::unpack(self.codes[c]);
        let (mask, words) = self.bytes_at(c, starts);
        let mut index = k;
        if code.masked {
            if elided(mask, k) {
                return f64::NAN;
            }
            // The kept words skip the elided positions before `k`.
            index = k - elided_before(mask, k);
        }
        let width = usize::from(code.width);
        words
            .get(index * width..(index + 1) * width)
            .map_or(f64::NAN, |w| code.decode(word(w)))
    }

    /// The job-wide value of `metric`, NaN when absent (as [`MetricValues::get_or_absent`]).
    #[inline]
    pub(crate) fn global_value(&self, metric: ScalingMetric) -> f64 {
        let bit = 1u32 << metric.index();
        if self.global & bit == 0 {
            return f64::NAN;
        }
        let at = 8 * (self.global & (bit - 1)).count_ones() as usize;
        self.data.get(at..at + 8).map_or(f64::NAN, |w| f64::from_bits(word(w)))
    }

    /// The job-wide metrics as a map.
    pub(crate) fn global(&self) -> MetricValues {
        let mut map = MetricValues::new();
        let present = ScalingMetric::ALL
            .iter()
            .filter(|m| self.global & (1 << m.index()) != 0);
        for (metric, w) in present.zip(self.data.chunks_exact(8)) {
            map.insert(*metric, f64::from_bits(word(w)));
        }
        map
    }

    /// The bytes the column values take (for the tests' and the docs' figures).
    #[cfg(test)]
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Where a vertex's entry sits: (sample index in the window, position in that sample's ids).
pub(crate) type RowAt = (usize, usize);

/// Per-vertex statistics of some window columns, in topology vertex order.
pub(crate) struct WindowScan<const N: usize> {
    /// The reference's `getAverage` state of each requested column.
    pub(crate) averages: Vec<[AverageAccumulator; N]>,
    /// The metrics present in some snapshot of the vertex (bit `metric.index()`).
    pub(crate) seen: Vec<u32>,
    /// The earliest and the latest entry of the vertex, `None` when no snapshot lists it.
    pub(crate) ends: Vec<Option<(RowAt, RowAt)>>,
    /// The topology index of each id of the latest snapshot (`None` for an id the topology lacks).
    pub(crate) latest: Vec<Option<usize>>,
}

/// Reads `history` once for the averages of the columns `averaged` ([`column`] positions) of
/// every vertex of `topology`, with each vertex's present metrics and first and last entries.
///
/// Every vertex's accumulators take its samples in time order, so each average is the
/// reference's sequential sum. Consecutive snapshots listing the same vertices (the same id list)
/// are accumulated column by column over their positions; where the id list changes, each
/// vertex's running state moves to its new position (or waits, while a snapshot lacks it). Ids
/// unknown to the topology are ignored; a vertex missing from a snapshot has no sample there.
pub(crate) fn scan<const N: usize>(
    topology: &JobTopology,
    history: &MetricHistory,
    averaged: [usize; N],
) -> WindowScan<N> {
    let mut out = WindowScan {
        averages: vec![[AverageAccumulator::default(); N]; topology.len()],
        seen: vec![0; topology.len()],
        ends: vec![None; topology.len()],
        latest: Vec::new(),
    };
    let samples: Vec<&Columns> = history.with_columns().map(|(_, columns)| columns).collect();
    let mut slot = AverageColumn::default();
    let mut decoded: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    let mut seen: Vec<u32> = Vec::new();
    let mut start = 0;
    while let Some(first) = samples.get(start) {
        let len = samples[start..]
            .iter()
            .position(|c| !Arc::ptr_eq(&c.ids, &first.ids))
            .unwrap_or(samples.len() - start);
        let run = &samples[start..start + len];
        let vertices: Vec<Option<usize>> = first.ids.iter().map(|id| topology.index_of(id.as_str())).collect();
        for column in &mut decoded {
            // Each snapshot of the run appends one value per id: room for all at once.
            column.clear();
            column.reserve(run.len() * first.ids.len());
        }
        for columns in run {
            columns.decode_columns(averaged, &mut decoded);
        }
        for (c, &column) in averaged.iter().enumerate() {
            slot.reset(
                vertices
                    .iter()
                    .map(|v| v.map_or_else(Default::default, |v| out.averages[v][c])),
            );
            let n = first.ids.len();
            let run_columns: Vec<&[f64]> = if n == 0 {
                vec![&[]; run.len()]
            } else {
                decoded[c].chunks_exact(n).collect()
            };
            // Where the run's columns are NaN at the same positions throughout and infinite
            // nowhere, those positions take no sample and every other one a finite sample.
            let nan_only_at = first.nan_positions(column).filter(|nan| {
                run.iter().all(|columns| {
                    columns.no_infinite(column) && columns.nan_positions(column).is_some_and(|n| Arc::ptr_eq(n, nan))
                })
            });
            let nan_only_at = nan_only_at.map(|nan| &**nan);
            slot.push_columns(&run_columns, nan_only_at);
            for (k, vertex) in vertices.iter().enumerate() {
                if let Some(v) = *vertex {
                    out.averages[v][c] = slot.get(k);
                }
            }
        }
        seen.clear();
        seen.resize(vertices.len(), 0);
        for columns in run {
            for (bits, present) in seen.iter_mut().zip(&columns.shape.present) {
                *bits |= present;
            }
        }
        let last = start + len - 1;
        for (k, vertex) in vertices.iter().enumerate() {
            let Some(v) = *vertex else { continue };
            out.seen[v] |= seen[k];
            let earliest = out.ends[v].map_or((start, k), |(earliest, _)| earliest);
            out.ends[v] = Some((earliest, (last, k)));
        }
        out.latest = vertices;
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScalingMetric::*;
    use chrono::{TimeZone, Utc};

    fn snapshot(ids: &[&str], load: f64) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: ids
                .iter()
                .map(|id| {
                    (
                        VertexId::new(id),
                        MetricValues::from_iter([(Load, load), (Parallelism, 2.0)]),
                    )
                })
                .collect(),
            global_metrics: MetricValues::new(),
        }
    }

    fn values(columns: &Columns, c: usize) -> Vec<f64> {
        let mut out = Vec::new();
        columns.decode_column(c, &mut out);
        out
    }

    /// A snapshot whose vertex `k` has `values[k]` as `Load`, and each other window column as
    /// the value after it (wrapping), so that every column holds every kind of value.
    fn snapshot_of(values: &[f64]) -> CollectedMetrics {
        CollectedMetrics {
            vertex_metrics: (0..values.len())
                .map(|k| {
                    (
                        VertexId::new(format!("v{k:04}")),
                        WINDOW_COLUMNS
                            .iter()
                            .enumerate()
                            .map(|(c, metric)| (*metric, values[(k + c) % values.len()]))
                            .collect(),
                    )
                })
                .collect(),
            global_metrics: MetricValues::new(),
        }
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(-0.0),
            Just(0.0),
            Just(f64::INFINITY),
            (-1000i64..1000).prop_map(|m| m as f64),
            (0i64..1_000_000_000_000).prop_map(|m| m as f64),
            (0i64..=1000).prop_map(|m| m as f64 / 1000.0),
            (-100_000i64..100_000).prop_map(|m| m as f64 / 100.0),
            Just(f64::from_bits(0x7ff8_0000_0000_0001)),
            Just(9_007_199_254_740_993.0),
        ]
    }

    proptest::proptest! {
        #[test]
        fn columns_give_back_every_value_bit_for_bit(values in proptest::collection::vec(any_value(), 0..40)) {
            let snapshot = snapshot_of(&values);
            let c = Columns::of(&snapshot, None);
            for (k, metrics) in snapshot.vertex_metrics.values().enumerate() {
                for (col, metric) in WINDOW_COLUMNS.iter().enumerate() {
                    let want = metrics.get_or_absent(*metric).to_bits();
                    proptest::prop_assert_eq!(c.value(col, k).to_bits(), want, "column {} position {}", col, k);
                }
            }
            for (col, metric) in WINDOW_COLUMNS.iter().enumerate() {
                let decoded: Vec<u64> = super::tests::values(&c, col).iter().map(|v| v.to_bits()).collect();
                let want: Vec<u64> = snapshot.vertex_metrics.values().map(|m| m.get_or_absent(*metric).to_bits()).collect();
                proptest::prop_assert_eq!(decoded, want);
            }
        }
    }

    #[test]
    fn job_wide_values_read_as_their_map() {
        let mut snapshot = snapshot(&["a"], 0.5);
        let map = &mut snapshot.global_metrics;
        map.insert(Lag, 5.0);
        map.insert(Load, f64::NAN);
        map.insert(NumRecordsOut, -0.0);
        let c = Columns::of(&snapshot, None);
        // Three present values, kept in index order (Load, Lag, NumRecordsOut), 8 bytes each,
        // before the columns: "a"'s load 0.5 (scale 1, zigzag 10: width 1), then a 1-byte NaN
        // bitmap for each of the seven columns "a" lacks.
        assert_eq!(c.data_len(), 3 * 8 + 1 + 7);
        assert_eq!(c.global_value(Lag), 5.0);
        assert!(c.global_value(Load).is_nan(), "present with NaN");
        assert!(c.global_value(ObservedTpr).is_nan(), "absent");
        assert_eq!(c.global_value(NumRecordsOut).to_bits(), (-0.0f64).to_bits());
        let back = c.global();
        assert_eq!(back, snapshot.global_metrics);
        assert!(back.contains(Load) && !back.contains(ObservedTpr));
        assert_eq!(values(&c, column(Load)), [0.5]);
        assert!(Columns::of(&CollectedMetrics::default(), None).global().is_empty());
    }

    #[test]
    fn columns_take_the_bytes_their_values_need() {
        // Worked by hand for 10 vertices: the busy ratios 0.001 to 0.010 (scale 3, width 1: the
        // zigzags 2 to 20), whole counters up to 10^9 (scale 0: zigzag 2 * 10^9 < 2^32, width 4),
        // a column absent but at one position (a 2-byte NaN bitmap and one word) and a column of
        // arbitrary ratios (8 bytes each).
        let load: Vec<f64> = (1..=10).map(|m| m as f64 / 1000.0).collect();
        let records: Vec<f64> = (1..=10).map(|m| (m * 100_000_000) as f64).collect();
        let rates: Vec<f64> = (1..=10).map(|m| 1.0 / (m as f64 + 2.0)).collect();
        let snapshot = CollectedMetrics {
            vertex_metrics: (0..10)
                .map(|k| {
                    let mut values = MetricValues::from_iter([
                        (Load, load[k]),
                        (NumRecordsIn, records[k]),
                        (NumRecordsInPerSecond, rates[k]),
                    ]);
                    if k == 0 {
                        values.insert(Lag, 7.0);
                    }
                    (VertexId::new(format!("v{k}")), values)
                })
                .collect(),
            global_metrics: MetricValues::new(),
        };
        let c = Columns::of(&snapshot, None);
        // Load 10 * 1, rates 10 * 8, records 10 * 4, lag 2 + 1 (zigzag 14), and the four other
        // columns absent everywhere: 2 bytes of bitmap each.
        assert_eq!(c.data_len(), 10 + 80 + 40 + 3 + 4 * 2);
        assert_eq!(values(&c, column(Load)), load);
        assert_eq!(values(&c, column(NumRecordsIn)), records);
        assert_eq!(c.value(column(Lag), 0), 7.0);
        assert!(c.value(column(Lag), 1).is_nan());
    }

    #[test]
    fn columns_hold_the_values_and_every_present_bit() {
        let c = Columns::of(&snapshot(&["b", "a"], 0.5), None);
        assert_eq!(&*c.ids, [VertexId::new("a"), VertexId::new("b")]);
        assert_eq!(values(&c, column(Load)), [0.5, 0.5]);
        assert!(c.value(column(NumRecordsIn), 1).is_nan(), "absent reads NaN");
        assert_eq!(c.union(), (1 << Load.index()) | (1 << Parallelism.index()));
    }

    #[test]
    fn same_vertices_share_the_id_list() {
        let first = Columns::of(&snapshot(&["a", "b"], 0.5), None);
        let same = Columns::of(&snapshot(&["a", "b"], 0.5), Some(&first));
        assert!(Arc::ptr_eq(&first.ids, &same.ids));
        let other = Columns::of(&snapshot(&["a", "c"], 0.5), Some(&first));
        assert!(!Arc::ptr_eq(&first.ids, &other.ids));
        let fewer = Columns::of(&snapshot(&["a"], 0.5), Some(&first));
        assert_eq!(fewer.ids.len(), 1);
    }

    #[test]
    fn alike_neighbours_share_their_shape() {
        let first = Columns::of(&snapshot(&["a", "b"], 0.5), None);
        // Other values, the same metrics and NaN positions: one shape.
        let next = Columns::of(&snapshot(&["a", "b"], 0.7), Some(&first));
        assert!(Arc::ptr_eq(&first.shape, &next.shape));
        assert_eq!(values(&next, column(Load)), [0.7, 0.7]);
        // A NaN where there was a value: a shape of its own, the unchanged columns' NaN
        // positions still shared.
        let nan = Columns::of(&snapshot(&["a", "b"], f64::NAN), Some(&next));
        assert!(!Arc::ptr_eq(&next.shape, &nan.shape));
        assert_eq!(nan.nan_positions(column(Load)).expect("averaged")[..], [0, 1]);
        let c = column(NumRecordsInPerSecond);
        assert!(Arc::ptr_eq(
            next.nan_positions(c).expect("averaged"),
            nan.nan_positions(c).expect("averaged")
        ));
        // A metric more on one vertex: a shape of its own.
        let mut more = snapshot(&["a", "b"], 0.7);
        more.vertex_metrics.values_mut().next().expect("a").insert(Lag, 3.0);
        let more = Columns::of(&more, Some(&next));
        assert!(!Arc::ptr_eq(&next.shape, &more.shape));
        assert_ne!(more.present(0), next.present(0));
        assert_eq!(more.present(1), next.present(1));
    }

    #[test]
    fn a_scan_follows_vertices_across_changing_id_lists() {
        let topology = JobTopology::new(
            vec![
                crate::VertexSpec::new("a", 1, 1),
                crate::VertexSpec::new("b", 1, 1),
                crate::VertexSpec::new("c", 1, 1),
            ],
            vec![],
        )
        .expect("valid topology");
        let at = |s: i64| Utc.timestamp_opt(s, 0).single().expect("valid instant");
        // "b" appears in the second run only; "x" is unknown; "c" never appears.
        let history: MetricHistory = [
            (at(1), snapshot(&["a", "x"], 0.1)),
            (at(2), snapshot(&["a", "x"], 0.2)),
            (at(3), snapshot(&["a", "b"], 0.4)),
            (at(4), snapshot(&["a", "x"], 0.8)),
        ]
        .into_iter()
        .collect();
        let scan = scan(&topology, &history, [column(Load)]);
        // a: ((0.1 + 0.2) + 0.4) + 0.8 in that order, 4 samples.
        assert_eq!(scan.averages[0][0].average(1), (((0.1 + 0.2) + 0.4) + 0.8) / 4.0);
        assert_eq!(scan.averages[1][0].average(1), 0.4);
        assert!(scan.averages[2][0].average(1).is_nan());
        assert_eq!(scan.ends[0], Some(((0, 0), (3, 0))));
        assert_eq!(scan.ends[1], Some(((2, 1), (2, 1))));
        assert_eq!(scan.ends[2], None);
        assert_eq!(scan.seen[1], (1 << Load.index()) | (1 << Parallelism.index()));
        assert_eq!(scan.latest, [Some(0), None]);
    }
}
