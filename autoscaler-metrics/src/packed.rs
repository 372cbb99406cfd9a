//! The packed form of one snapshot: the bytes a state store keeps for a snapshot of a job's
//! metric window, written from the compact snapshot a [`MetricHistory`](crate::MetricHistory)
//! keeps (its columns copied as they are, not read value by value) and read back as the
//! [`CollectedMetrics`] it holds, bit for bit.
//!
//! # Layout, version 1
//!
//! Little-endian throughout; a *varint* is an unsigned LEB128 number of at most 10 bytes, with
//! no byte beyond what its value needs.
//!
//! 1. The layout version, one byte: [`PACKED_LAYOUT`].
//! 2. The vertex ids, in the snapshot's (sorted) order: a varint count, then for each id a varint
//!    `length << 1 | hex` and its bytes. With `hex` set, the id is a non-empty run of lowercase
//!    hexadecimal digits of even length (a Flink `JobVertexID` is 32 of them), kept as the
//!    `length` bytes they spell; otherwise its `length` bytes of UTF-8.
//! 3. For each id, the metrics its map holds: a `u32` with bit [`ScalingMetric::index`] set for
//!    each.
//! 4. The job-wide metrics: a varint count, then each as a *value* (below), in
//!    [`ScalingMetric::ALL`] order.
//! 5. The window columns, each as the compact snapshot keeps it: its code byte, then its NaN
//!    bitmap (when the code says so) and its words. Their lengths follow from the code and the
//!    number of ids. A column's value for an id whose map lacks the metric is not read.
//! 6. The other vertex metrics: a varint count, then for each a varint position in the ids and a
//!    *value*, ordered by position, then metric.
//!
//! A *value* is a byte, the metric's [`ScalingMetric::index`] with bit 7 set when the value is an
//! integer, then that integer's zigzag as a varint (an `f64` that is exactly a whole number of
//! magnitude below 2^53, not `-0.0`), or else the value's 8 bytes (any `f64`, NaN payloads and
//! infinities included).
//!
//! Reading checks everything it reads: an unknown version or metric, a count larger than the
//! bytes left, ids out of order, a metric present without a value or a value for a metric not
//! present, an integer written with more bytes than it needs, bytes left over. Each is a
//! [`PackedSnapshotError`] naming what was wrong and where, never a panic, and nothing read
//! allocates more than the bytes given could describe.

use crate::columns::{WINDOW_COLUMNS, column_of, read_kept_column, unzigzag, zigzag};
use crate::{CollectedMetrics, METRIC_COUNT, MetricValues, ScalingMetric, VertexId};
use std::collections::BTreeMap;

/// The version of the packed layout this release writes, the packed bytes' first byte; it reads
/// this one only.
pub const PACKED_LAYOUT: u8 = 1;

/// Packed bytes that do not hold a snapshot: what was wrong, and the byte it was found at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("packed snapshot, byte {offset}: {problem}")]
pub struct PackedSnapshotError {
    /// The offset in the packed bytes where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub problem: String,
}

/// Bit 7 of a value's metric byte: the value is an integer, written as a varint.
const INTEGER: u8 = 0x80;

// Every metric's index fits below bit 7 of a value's metric byte, and below bit 32 of a `u32`
// present set (which the reader shifts by the metric count).
const _: () = assert!(METRIC_COUNT < 32);

/// Integers of at most this magnitude are all exact `f64`s.
const EXACT_INTEGERS: u64 = 1 << 53;

/// Appends the packed form of the snapshot whose vertex ids, per-id present metrics, job-wide
/// metrics, kept columns (each as `(code, bytes)`) and values outside the columns (by position)
/// are given, in the layout above.
pub(crate) fn pack<'a>(
    ids: &[VertexId],
    present: &[u32],
    global: &MetricValues,
    columns: impl Iterator<Item = (u8, &'a [u8])>,
    outside: &[(u32, ScalingMetric, f64)],
    out: &mut Vec<u8>,
) {
    out.push(PACKED_LAYOUT);
    write_varint(out, ids.len() as u64);
    for id in ids {
        let id = id.as_str().as_bytes();
        if is_lower_hex(id) {
            write_varint(out, (id.len() as u64 / 2) << 1 | 1);
            out.extend(
                id.chunks_exact(2)
                    .map(|pair| hex_digit(pair[0]) << 4 | hex_digit(pair[1])),
            );
        } else {
            write_varint(out, (id.len() as u64) << 1);
            out.extend_from_slice(id);
        }
    }
    for bits in present {
        out.extend_from_slice(&bits.to_le_bytes());
    }
    write_varint(out, global.len() as u64);
    for (metric, value) in global.iter() {
        write_value(out, metric, value);
    }
    for (code, bytes) in columns {
        out.push(code);
        out.extend_from_slice(bytes);
    }
    write_varint(out, outside.len() as u64);
    for &(k, metric, value) in outside {
        write_varint(out, u64::from(k));
        write_value(out, metric, value);
    }
}

/// The snapshot packed in `bytes` (see the module's docs for what is checked).
pub(crate) fn unpack(bytes: &[u8]) -> Result<CollectedMetrics, PackedSnapshotError> {
    let mut r = Reader { bytes, at: 0 };
    let layout = r.byte("the layout version")?;
    if layout != PACKED_LAYOUT {
        return Err(r.error_at(
            0,
            format!("layout version {layout} is not readable (this release reads {PACKED_LAYOUT})"),
        ));
    }
    let ids = read_ids(&mut r)?;
    let n = ids.len();
    let mut present = Vec::with_capacity(n);
    for _ in 0..n {
        let start = r.at;
        let bits = u32::from_le_bytes(r.array("a vertex's present metrics")?);
        if bits >> METRIC_COUNT != 0 {
            return Err(r.error_at(start, format!("unknown metrics in a vertex's present set ({bits:#x})")));
        }
        present.push(bits);
    }
    // Every job-wide value takes at least two bytes.
    let globals = r.count("job-wide metrics", 2)?;
    let mut global_metrics = MetricValues::new();
    let mut last = None;
    for _ in 0..globals {
        let start = r.at;
        let (metric, value) = r.value()?;
        if last.is_some_and(|l| l >= metric.index()) {
            return Err(r.error_at(start, format!("job-wide metric {metric} is out of order")));
        }
        last = Some(metric.index());
        global_metrics.insert(metric, value);
    }
    let mut columns = Vec::with_capacity(WINDOW_COLUMNS.len());
    for metric in WINDOW_COLUMNS {
        let start = r.at;
        let code = r.byte("a column's code")?;
        let (values, used) = read_kept_column(code, n, &r.bytes[r.at..]).ok_or_else(|| {
            r.error_at(
                start,
                format!("the {metric} column's code {code:#04x} or bytes are not readable"),
            )
        })?;
        r.at += used;
        columns.push(values);
    }
    let mut maps = Vec::with_capacity(n);
    for (k, bits) in present.iter().enumerate() {
        let mut values = MetricValues::new();
        for (c, metric) in WINDOW_COLUMNS.iter().enumerate() {
            let value = columns[c][k];
            if bits & (1 << metric.index()) != 0 {
                values.insert(*metric, value);
            } else if value.to_bits() != f64::NAN.to_bits() {
                // A metric a vertex lacks is NaN in its column, as the compact snapshot keeps it.
                return Err(r.error_at(
                    r.at,
                    format!("{metric} of vertex {:?} has a value but is not present", ids[k]),
                ));
            }
        }
        maps.push(values);
    }
    // Every outside value takes at least three bytes.
    let others = r.count("vertex metrics outside the columns", 3)?;
    let mut last = None;
    for _ in 0..others {
        let start = r.at;
        let k = usize::try_from(r.varint("a vertex position")?).unwrap_or(usize::MAX);
        let (metric, value) = r.value()?;
        let Some(values) = maps.get_mut(k) else {
            return Err(r.error_at(start, format!("vertex position {k} is past the {n} ids")));
        };
        if column_of(metric).is_some() {
            return Err(r.error_at(start, format!("{metric} is a column, not a value of its own")));
        }
        if present[k] & (1 << metric.index()) == 0 {
            return Err(r.error_at(
                start,
                format!("{metric} of vertex {:?} is not in its present set", ids[k]),
            ));
        }
        if last.is_some_and(|l| l >= (k, metric.index())) {
            return Err(r.error_at(start, format!("{metric} of vertex {:?} is out of order", ids[k])));
        }
        last = Some((k, metric.index()));
        values.insert(metric, value);
    }
    if r.at != bytes.len() {
        return Err(r.error_at(r.at, format!("{} bytes after the snapshot", bytes.len() - r.at)));
    }
    let mut vertex_metrics = BTreeMap::new();
    for ((id, values), bits) in ids.into_iter().zip(maps).zip(present) {
        if values.present_bits() != bits {
            let missing = ScalingMetric::ALL
                .iter()
                .find(|m| bits & !values.present_bits() & (1 << m.index()) != 0);
            let missing = missing.map_or_else(String::new, |m| m.to_string());
            return Err(r.error_at(
                r.at,
                format!("vertex {id:?} lists {missing} as present without its value"),
            ));
        }
        vertex_metrics.insert(VertexId::from(id), values);
    }
    Ok(CollectedMetrics {
        vertex_metrics,
        global_metrics,
    })
}

/// The vertex ids (layout item 2): each checked, and strictly ascending.
fn read_ids(r: &mut Reader<'_>) -> Result<Vec<String>, PackedSnapshotError> {
    // Every id takes at least its length's byte.
    let n = r.count("vertex ids", 1)?;
    let mut ids: Vec<String> = Vec::with_capacity(n);
    for _ in 0..n {
        let start = r.at;
        let header = r.varint("a vertex id's length")?;
        let len = usize::try_from(header >> 1).unwrap_or(usize::MAX);
        let raw = r.take(len, "a vertex id")?;
        let id = if header & 1 == 1 {
            if raw.is_empty() {
                return Err(r.error_at(start, "an empty hexadecimal vertex id"));
            }
            raw.iter()
                .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
                .map(char::from)
                .collect()
        } else {
            let text =
                std::str::from_utf8(raw).map_err(|e| r.error_at(start, format!("a vertex id is not UTF-8: {e}")))?;
            if is_lower_hex(raw) {
                return Err(r.error_at(start, "a hexadecimal vertex id written as text"));
            }
            text.to_owned()
        };
        if ids.last().is_some_and(|last| *last >= id) {
            return Err(r.error_at(start, format!("vertex id {id:?} is not after the one before it")));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// The lowercase hexadecimal digits, by value.
const HEX: [u8; 16] = *b"0123456789abcdef";

/// Whether `id` is a non-empty run of lowercase hexadecimal digits of even length: kept as the
/// bytes it spells.
fn is_lower_hex(id: &[u8]) -> bool {
    !id.is_empty() && id.len().is_multiple_of(2) && id.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The value of a lowercase hexadecimal digit (known to be one).
fn hex_digit(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        _ => b - b'a' + 10,
    }
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The integer `value` is exactly, if it is one a value is written as.
fn exact_integer(value: f64) -> Option<i64> {
    let m = value as i64;
    (m.unsigned_abs() < EXACT_INTEGERS && (m as f64).to_bits() == value.to_bits()).then_some(m)
}

fn write_value(out: &mut Vec<u8>, metric: ScalingMetric, value: f64) {
    // Every metric's index is below 32 (asserted above), so bit 7 is free.
    let index = metric.index() as u8;
    match exact_integer(value) {
        Some(m) => {
            out.push(index | INTEGER);
            write_varint(out, zigzag(m));
        }
        None => {
            out.push(index);
            out.extend_from_slice(&value.to_bits().to_le_bytes());
        }
    }
}

/// Reads packed bytes from the front, each read checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn error_at(&self, offset: usize, problem: impl Into<String>) -> PackedSnapshotError {
        PackedSnapshotError {
            offset,
            problem: problem.into(),
        }
    }

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], PackedSnapshotError> {
        let bytes: &'a [u8] = self.bytes;
        let Some(taken) = self.at.checked_add(len).and_then(|end| bytes.get(self.at..end)) else {
            return Err(self.error_at(self.at, format!("{what} ends past the last byte")));
        };
        self.at += len;
        Ok(taken)
    }

    fn byte(&mut self, what: &str) -> Result<u8, PackedSnapshotError> {
        self.take(1, what).map(|b| b[0])
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], PackedSnapshotError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N, what)?);
        Ok(array)
    }

    fn varint(&mut self, what: &str) -> Result<u64, PackedSnapshotError> {
        let start = self.at;
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.error_at(start, format!("{what} is past 2^64")));
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                // No byte beyond what the number needs (a last byte of 0 after the first).
                if b == 0 && shift > 0 {
                    return Err(self.error_at(start, format!("{what} is written with more bytes than it needs")));
                }
                return Ok(n);
            }
        }
        Err(self.error_at(start, format!("{what} is past 2^64")))
    }

    /// A count of items of at least `min_bytes` each, no more than the bytes left can hold.
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, PackedSnapshotError> {
        let start = self.at;
        let n = self.varint(&format!("the count of {what}"))?;
        let left = self.bytes.len() - self.at;
        match usize::try_from(n) {
            Ok(n) if n <= left / min_bytes => Ok(n),
            _ => Err(self.error_at(start, format!("{n} {what} do not fit in the {left} bytes left"))),
        }
    }

    fn value(&mut self) -> Result<(ScalingMetric, f64), PackedSnapshotError> {
        let start = self.at;
        let tag = self.byte("a metric")?;
        let Some(&metric) = ScalingMetric::ALL.get(usize::from(tag & !INTEGER)) else {
            return Err(self.error_at(start, format!("unknown metric {}", tag & !INTEGER)));
        };
        let value = if tag & INTEGER != 0 {
            let m = unzigzag(self.varint("an integer value")?);
            if m.unsigned_abs() >= EXACT_INTEGERS {
                return Err(self.error_at(start, format!("{metric}'s integer {m} is past 2^53")));
            }
            m as f64
        } else {
            let value = f64::from_bits(u64::from_le_bytes(self.array("a value")?));
            if exact_integer(value).is_some() {
                return Err(self.error_at(
                    start,
                    format!("{metric}'s value {value} is an integer written in 8 bytes"),
                ));
            }
            value
        };
        Ok((metric, value))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::MetricHistory;
    use crate::ScalingMetric::*;
    use chrono::{DateTime, Utc};
    use proptest::prelude::*;

    /// `snapshot` packed as a window keeps it.
    fn packed(snapshot: &CollectedMetrics) -> Vec<u8> {
        let mut history = MetricHistory::new();
        history.insert(DateTime::<Utc>::UNIX_EPOCH, snapshot.clone());
        let mut out = Vec::new();
        history.shared().next().unwrap().1.pack(&mut out);
        out
    }

    /// Every metric of both maps, compared by bits (NaN payloads and `-0.0` included).
    fn same_bits(a: &MetricValues, b: &MetricValues) -> bool {
        a.present_bits() == b.present_bits()
            && a.iter()
                .zip(b.iter())
                .all(|((_, x), (_, y))| x.to_bits() == y.to_bits())
    }

    fn same_snapshot(a: &CollectedMetrics, b: &CollectedMetrics) -> bool {
        same_bits(&a.global_metrics, &b.global_metrics)
            && a.vertex_metrics.len() == b.vertex_metrics.len()
            && a.vertex_metrics
                .iter()
                .zip(&b.vertex_metrics)
                .all(|((i, x), (j, y))| i.as_str() == j.as_str() && same_bits(x, y))
    }

    #[test]
    fn a_small_snapshot_packs_to_the_bytes_worked_out_by_hand() {
        let mut source = MetricValues::new();
        source.insert(Load, 0.5);
        source.insert(Parallelism, 2.0);
        let mut sink = MetricValues::new();
        sink.insert(NumRecordsIn, 300.0);
        let mut global = MetricValues::new();
        global.insert(HeapMemoryUsed, 1024.0);
        global.insert(GcPressure, 0.25);
        let snapshot = CollectedMetrics {
            vertex_metrics: [(VertexId::from("0a1b"), source), (VertexId::from("sink"), sink)].into(),
            global_metrics: global,
        };
        let bytes = packed(&snapshot);
        let load = u8::try_from(Load.index()).unwrap();
        let records = u8::try_from(NumRecordsIn.index()).unwrap();
        let parallelism = u8::try_from(Parallelism.index()).unwrap();
        let heap = u8::try_from(HeapMemoryUsed.index()).unwrap();
        let gc = u8::try_from(GcPressure.index()).unwrap();
        let mut want = vec![
            PACKED_LAYOUT,
            2,    // two ids
            0x05, // "0a1b": 2 bytes, hexadecimal
            0x0a,
            0x1b,
            0x08, // "sink": 4 bytes of text
            b's',
            b'i',
            b'n',
            b'k',
        ];
        want.extend_from_slice(&(1u32 << load | 1 << parallelism).to_le_bytes());
        want.extend_from_slice(&(1u32 << records).to_le_bytes());
        // Two job-wide values in `ALL` order: GC pressure (not an integer: 8 bytes), then the heap
        // (1024, zigzag 2048 = 0x80 0x10).
        assert!(gc < heap);
        want.extend_from_slice(&[2, gc]);
        want.extend_from_slice(&0.25f64.to_bits().to_le_bytes());
        want.extend_from_slice(&[heap | 0x80, 0x80, 0x10]);
        // The columns, in `WINDOW_COLUMNS` order: LOAD 0.5 and NaN (the sink lacks it): masked
        // (bitmap 0b10), scale 1 (five tenths), 1 byte (zigzag 5 = 10); the rates, the observed
        // TPR, the backpressure, the lag: all NaN, masked with width 0 (bitmap 0b11); records in
        // NaN then 300: masked, scale 0, 2 bytes (zigzag 600 = 0x0258); the rest all NaN.
        let all_nan = [0b1000_0000, 0b11];
        want.extend_from_slice(&[0b1000_1001, 0b10, 10]);
        want.extend_from_slice(&all_nan);
        want.extend_from_slice(&all_nan);
        want.extend_from_slice(&all_nan);
        want.extend_from_slice(&[0b1001_0000, 0b01, 0x58, 0x02]);
        want.extend_from_slice(&all_nan);
        want.extend_from_slice(&all_nan);
        want.extend_from_slice(&all_nan);
        // One value outside the columns: the source's parallelism 2 (zigzag 4).
        want.extend_from_slice(&[1, 0, parallelism | 0x80, 4]);
        assert_eq!(WINDOW_COLUMNS[0], Load);
        assert_eq!(WINDOW_COLUMNS[4], NumRecordsIn);
        assert_eq!(bytes, want);
        assert!(same_snapshot(&CollectedMetrics::unpack(&bytes).unwrap(), &snapshot));
    }

    /// A 10-vertex snapshot as the fake JobManager's jobs report it.
    fn ten_vertices() -> CollectedMetrics {
        let vertex_metrics = (0..10u32)
            .map(|k| {
                let mut values = MetricValues::new();
                values.insert(Load, f64::from(k * 37 % 1000) / 1000.0);
                values.insert(NumRecordsInPerSecond, 1234.5678 + f64::from(k));
                values.insert(Backpressure, 0.0);
                values.insert(NumRecordsIn, 1_000_000.0 * f64::from(k + 1));
                values.insert(NumRecordsOut, 990_000.0 * f64::from(k + 1));
                values.insert(AccumulatedBusyTime, 129_921.0);
                values.insert(Parallelism, 4.0);
                values.insert(MaxParallelism, 128.0);
                (
                    VertexId::from(format!("{:032x}", u128::from(k) * 0x9e37_79b9_7f4a_7c15)),
                    values,
                )
            })
            .collect();
        let mut global_metrics = MetricValues::new();
        global_metrics.insert(HeapMemoryUsed, 512.0 * 1024.0 * 1024.0);
        global_metrics.insert(GcPressure, 0.01);
        CollectedMetrics {
            vertex_metrics,
            global_metrics,
        }
    }

    #[test]
    fn a_ten_vertex_snapshot_packs_small() {
        let snapshot = ten_vertices();
        let bytes = packed(&snapshot);
        // 10 ids of 16 bytes and their lengths (170), present sets (40), 2 job-wide values
        // (9 + 6), columns (8 codes; LOAD 2 bytes each, the rate 8, counters 3 to 4: about
        // 200 bytes), the parallelisms (20 values of 3 bytes, 1 count).
        assert!(bytes.len() < 520, "{} bytes", bytes.len());
        let json = serde_json::to_string(&snapshot).unwrap();
        assert!(
            bytes.len() * 3 < json.len(),
            "{} bytes packed, {} as JSON",
            bytes.len(),
            json.len()
        );
        assert!(same_snapshot(&CollectedMetrics::unpack(&bytes).unwrap(), &snapshot));
    }

    /// A number as a snapshot may hold it.
    fn any_value() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(f64::from_bits(0x7ff8_0000_0000_0001)),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            (-1000i64..1000).prop_map(|m| m as f64),
            (0i64..1 << 53).prop_map(|m| m as f64),
            Just(9_007_199_254_740_992.0),
            Just(-9_007_199_254_740_993.0),
            (0i64..=1000).prop_map(|m| m as f64 / 1000.0),
        ]
    }

    fn any_values() -> impl Strategy<Value = MetricValues> {
        proptest::collection::vec((0..METRIC_COUNT, any_value()), 0..14)
            .prop_map(|entries| entries.into_iter().map(|(m, v)| (ScalingMetric::ALL[m], v)).collect())
    }

    fn any_snapshot() -> impl Strategy<Value = CollectedMetrics> {
        (
            proptest::collection::btree_map(
                prop_oneof![
                    "[0-9a-f]{32}",
                    "[0-9a-f]{1,5}",
                    "[0-9A-Fa-f]{2,4}",
                    ".{1,6}",
                    "[\"\\\\\u{0}é💡]{1,3}"
                ],
                any_values(),
                0..12,
            ),
            any_values(),
        )
            .prop_map(|(vertices, global_metrics)| CollectedMetrics {
                vertex_metrics: vertices
                    .into_iter()
                    .map(|(id, values)| (VertexId::from(id), values))
                    .collect(),
                global_metrics,
            })
    }

    proptest::proptest! {
        // Every snapshot reads back bit for bit, and packing what was read gives the same bytes.
        #[test]
        fn snapshots_read_back_bit_for_bit(snapshot in any_snapshot()) {
            let bytes = packed(&snapshot);
            let read = CollectedMetrics::unpack(&bytes).unwrap();
            prop_assert!(same_snapshot(&read, &snapshot), "{:?}\n{:?}", read, snapshot);
            prop_assert_eq!(packed(&read), bytes);
        }

        // Cut short anywhere, packed bytes are an error, never a panic.
        #[test]
        fn every_truncation_is_an_error(snapshot in any_snapshot()) {
            let bytes = packed(&snapshot);
            for len in 0..bytes.len() {
                prop_assert!(CollectedMetrics::unpack(&bytes[..len]).is_err(), "{} of {} bytes", len, bytes.len());
            }
        }

        // Any byte changed, any bytes at all: a snapshot or an error, never a panic; and what
        // reads packs to the same bytes again (nothing is read two ways).
        #[test]
        fn changed_bytes_read_canonically_or_fail(snapshot in any_snapshot(), at in any::<proptest::sample::Index>(), byte in any::<u8>()) {
            let mut bytes = packed(&snapshot);
            let i = at.index(bytes.len());
            bytes[i] = byte;
            if let Ok(read) = CollectedMetrics::unpack(&bytes) {
                prop_assert_eq!(packed(&read), bytes);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = bytes;
            if let Some(first) = bytes.first_mut() {
                *first = PACKED_LAYOUT;
            }
            if let Ok(read) = CollectedMetrics::unpack(&bytes) {
                prop_assert_eq!(packed(&read), bytes);
            }
        }
    }

    fn problem(bytes: &[u8]) -> String {
        CollectedMetrics::unpack(bytes).unwrap_err().to_string()
    }

    #[test]
    fn bad_bytes_are_errors_that_say_what_and_where() {
        let good = packed(&ten_vertices());
        let mut newer = good.clone();
        newer[0] = 2;
        assert_eq!(
            problem(&newer),
            "packed snapshot, byte 0: layout version 2 is not readable (this release reads 1)"
        );
        assert_eq!(
            problem(&[]),
            "packed snapshot, byte 0: the layout version ends past the last byte"
        );
        let mut longer = good.clone();
        longer.push(0);
        assert!(
            problem(&longer).ends_with(": 1 bytes after the snapshot"),
            "{}",
            problem(&longer)
        );
        // A count of 2^63 ids: refused before anything is allocated.
        let huge = [PACKED_LAYOUT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(
            problem(&huge),
            "packed snapshot, byte 1: 9223372036854775807 vertex ids do not fit in the 0 bytes left"
        );
        // Zero written in two bytes.
        assert_eq!(
            problem(&[PACKED_LAYOUT, 0x80, 0x00]),
            "packed snapshot, byte 1: the count of vertex ids is written with more bytes than it needs"
        );
        assert!(
            problem(&[
                PACKED_LAYOUT,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0x02
            ])
            .contains("past 2^64")
        );
        // Ids out of order, and a hexadecimal id written as text.
        let swapped = [PACKED_LAYOUT, 2, 2, b'b', 2, b'a'];
        assert_eq!(
            problem(&swapped),
            "packed snapshot, byte 4: vertex id \"a\" is not after the one before it"
        );
        assert_eq!(
            problem(&[PACKED_LAYOUT, 1, 4, b'a', b'b']),
            "packed snapshot, byte 2: a hexadecimal vertex id written as text"
        );
        // An unknown metric in a present set.
        let unknown = [PACKED_LAYOUT, 1, 2, b'x', 0, 0, 0, 0x80];
        assert!(
            problem(&unknown).contains("unknown metrics in a vertex's present set"),
            "{}",
            problem(&unknown)
        );
    }

    #[test]
    fn a_present_metric_needs_its_value_and_a_value_needs_its_metric() {
        let mut values = MetricValues::new();
        values.insert(Parallelism, 3.0);
        let snapshot = CollectedMetrics {
            vertex_metrics: [(VertexId::from("x"), values)].into(),
            global_metrics: MetricValues::new(),
        };
        let bytes = packed(&snapshot);
        // The last bytes are the outside count (1), position 0 and the value (2 bytes).
        let cut = bytes.len() - 4;
        let mut without = bytes[..cut].to_vec();
        without.push(0);
        assert!(
            problem(&without).contains("lists PARALLELISM as present without its value"),
            "{}",
            problem(&without)
        );
        // The present set emptied: the value has no metric.
        let mut absent = bytes.clone();
        absent[4..8].copy_from_slice(&0u32.to_le_bytes());
        assert!(
            problem(&absent).contains("PARALLELISM of vertex \"x\" is not in its present set"),
            "{}",
            problem(&absent)
        );
        // An integer written as 8 bytes.
        let mut wide = bytes[..cut].to_vec();
        let parallelism = u8::try_from(Parallelism.index()).unwrap();
        wide.extend_from_slice(&[1, 0, parallelism]);
        wide.extend_from_slice(&3.0f64.to_bits().to_le_bytes());
        assert!(
            problem(&wide).contains("is an integer written in 8 bytes"),
            "{}",
            problem(&wide)
        );
    }
}
