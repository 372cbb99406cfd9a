//! The persisted form of each state: state type identifiers and the versioned, optionally
//! compressed serde envelope stored in `state_value`.

use autoscaler_core::{
    ConfigChanges, DelayedScaleDown, ParallelismOverrides, ScalingHistory, ScalingTracking, StateError,
};
use autoscaler_metrics::{CollectedMetrics, EvaluatedMetrics, MetricHistory, SharedSnapshot};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, SecondsFormat, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use std::io::{Read as _, Write as _};

/// The newest version of the envelope, which this release writes and reads. Every release must
/// keep reading every older version (`tests/fixtures/format-v1` and `format-v1-slots` pin
/// version 1, `format-v2-slots` version 2).
///
/// Version 2 added the packed window row: `{"v":2,"at":...,"packed":"<base64>"}`, a snapshot in
/// [`autoscaler_metrics::PACKED_LAYOUT`]'s bytes, a quarter of its JSON row. Only window rows are
/// written as version 2; every other state is still written as version 1, whose JSON did not
/// change, so that a release before version 2 still reads them.
pub const FORMAT_VERSION: u32 = 2;

/// The version of the envelope of every state but the window rows (see [`FORMAT_VERSION`]).
const JSON_FORMAT_VERSION: u32 = 1;

/// The version that introduced packed window rows, which this release writes them as.
const PACKED_FORMAT_VERSION: u32 = 2;
const _: () = assert!(PACKED_FORMAT_VERSION <= FORMAT_VERSION);

/// Serialized states at least this long are gzip-compressed by default (a full collected-metrics
/// history is the only state that usually gets there).
pub const DEFAULT_COMPRESSION_THRESHOLD: usize = 64 * 1024;

/// Largest state a `gzip` envelope may decompress to: 64 MiB. A full collected-metrics history of a
/// 1000-vertex job is about 10 MB of JSON, so this leaves room, while a crafted row (8 MB of gzip can
/// expand to gigabytes) fails with [`StateError::Serialization`] once the limit is crossed instead
/// of exhausting memory. The reference bounds the same state by trimming the metric history until
/// the serialized states fit its 1 MB ConfigMap (`KubernetesAutoScalerStateStore.trimHistoryToMaxCmSize`).
pub const MAX_DECOMPRESSED_STATE_BYTES: usize = 64 * 1024 * 1024;

/// The kind of a persisted state: one row per (job key, state type).
///
/// The identifiers are the reference's `StateType` ones, plus `evaluatedMetrics` for the trait's
/// extra methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateType {
    /// `scalingHistory`.
    ScalingHistory,
    /// `scalingTracking`.
    ScalingTracking,
    /// `collectedMetrics`.
    CollectedMetrics,
    /// `evaluatedMetrics` (not in the reference's JDBC store). Kept in the store's memory only,
    /// never written to a database: see [`StateType::is_written`].
    EvaluatedMetrics,
    /// `parallelismOverrides`.
    ParallelismOverrides,
    /// `configOverrides` (the configuration changes).
    ConfigOverrides,
    /// `delayedScaleDown`.
    DelayedScaleDown,
}

impl StateType {
    /// Every state type, in the order rows are written.
    pub const ALL: [StateType; 7] = [
        StateType::ScalingHistory,
        StateType::ScalingTracking,
        StateType::CollectedMetrics,
        StateType::EvaluatedMetrics,
        StateType::ParallelismOverrides,
        StateType::ConfigOverrides,
        StateType::DelayedScaleDown,
    ];

    /// The `state_type` column value.
    pub fn identifier(self) -> &'static str {
        match self {
            StateType::ScalingHistory => "scalingHistory",
            StateType::ScalingTracking => "scalingTracking",
            StateType::CollectedMetrics => "collectedMetrics",
            StateType::EvaluatedMetrics => "evaluatedMetrics",
            StateType::ParallelismOverrides => "parallelismOverrides",
            StateType::ConfigOverrides => "configOverrides",
            StateType::DelayedScaleDown => "delayedScaleDown",
        }
    }

    /// Whether a database store writes this state type. Every type is written except
    /// [`StateType::EvaluatedMetrics`]: each cycle that evaluates replaces them and no cycle reads
    /// them (the next one evaluates again from the persisted metric window), so a database store
    /// keeps them in memory, as the reference's `JobAutoScalerImpl` keeps its last evaluated
    /// metrics. Writing them cost more than the metric window itself (about 5.6 KB of JSON per
    /// 10-vertex job and cycle, against 2.2 KB for the new snapshot's JSON row, and about 600
    /// bytes packed since). A row an earlier release wrote is deleted by the job's next flush.
    pub fn is_written(self) -> bool {
        self != StateType::EvaluatedMetrics
    }

    /// The state type of a `state_type` column value, if known.
    pub fn from_identifier(identifier: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.identifier() == identifier)
    }
}

impl fmt::Display for StateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.identifier())
    }
}

/// One state value, typed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StateValue {
    ScalingHistory(ScalingHistory),
    ScalingTracking(ScalingTracking),
    CollectedMetrics(MetricHistory),
    EvaluatedMetrics(std::sync::Arc<EvaluatedMetrics>),
    ParallelismOverrides(ParallelismOverrides),
    ConfigOverrides(ConfigChanges),
    DelayedScaleDown(DelayedScaleDown),
}

/// What `state_value` holds: `{"v":1,"state":<json>}`, or `{"v":1,"gzip":"<base64 of gzipped json>"}`
/// for a large state.
///
/// A row of a job's metric window also names its snapshot's instant, and holds the snapshot
/// packed: `{"v":2,"at":"<RFC 3339>","packed":"<base64>"}` (or `"packedGzip"`, see
/// [`encode_snapshot`] and [`SLOT_PREFIX`]); earlier
/// releases wrote it as JSON, `{"v":1,"at":"<RFC 3339>","state":<json>}` (or `"gzip"`).
#[derive(Deserialize)]
struct EnvelopeIn<'a> {
    v: u32,
    #[serde(default)]
    at: Option<String>,
    #[serde(borrow, default)]
    state: Option<&'a RawValue>,
    #[serde(default)]
    gzip: Option<String>,
    #[serde(borrow, default)]
    packed: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, rename = "packedGzip")]
    packed_gzip: Option<String>,
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    v: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gzip: Option<String>,
}

impl StateValue {
    /// The state type this value is stored under.
    pub(crate) fn state_type(&self) -> StateType {
        match self {
            StateValue::ScalingHistory(_) => StateType::ScalingHistory,
            StateValue::ScalingTracking(_) => StateType::ScalingTracking,
            StateValue::CollectedMetrics(_) => StateType::CollectedMetrics,
            StateValue::EvaluatedMetrics(_) => StateType::EvaluatedMetrics,
            StateValue::ParallelismOverrides(_) => StateType::ParallelismOverrides,
            StateValue::ConfigOverrides(_) => StateType::ConfigOverrides,
            StateValue::DelayedScaleDown(_) => StateType::DelayedScaleDown,
        }
    }

    /// The `state_value` text: the current envelope, gzip-compressed when the JSON is at least
    /// `compression_threshold` bytes long.
    pub(crate) fn encode(&self, compression_threshold: usize) -> Result<String, StateError> {
        match self {
            StateValue::ScalingHistory(v) => encode_value(self.state_type(), v, compression_threshold),
            StateValue::ScalingTracking(v) => encode_value(self.state_type(), v, compression_threshold),
            StateValue::CollectedMetrics(v) => encode_value(self.state_type(), v, compression_threshold),
            StateValue::EvaluatedMetrics(v) => encode_value(self.state_type(), &**v, compression_threshold),
            StateValue::ParallelismOverrides(v) => encode_value(self.state_type(), v, compression_threshold),
            StateValue::ConfigOverrides(v) => encode_value(self.state_type(), v, compression_threshold),
            StateValue::DelayedScaleDown(v) => encode_value(self.state_type(), v, compression_threshold),
        }
    }

    /// Decodes a `state_value` written by this or any older release.
    pub(crate) fn decode(state_type: StateType, text: &str) -> Result<StateValue, StateError> {
        Ok(match state_type {
            StateType::ScalingHistory => StateValue::ScalingHistory(decode_value(state_type, text)?),
            StateType::ScalingTracking => StateValue::ScalingTracking(decode_value(state_type, text)?),
            StateType::CollectedMetrics => StateValue::CollectedMetrics(decode_value(state_type, text)?),
            StateType::EvaluatedMetrics => {
                StateValue::EvaluatedMetrics(std::sync::Arc::new(decode_value(state_type, text)?))
            }
            StateType::ParallelismOverrides => StateValue::ParallelismOverrides(decode_value(state_type, text)?),
            StateType::ConfigOverrides => StateValue::ConfigOverrides(decode_value(state_type, text)?),
            StateType::DelayedScaleDown => StateValue::DelayedScaleDown(decode_value(state_type, text)?),
        })
    }
}

fn serialization_error(state_type: StateType, message: impl fmt::Display) -> StateError {
    StateError::Serialization {
        state_type: state_type.identifier(),
        message: message.to_string(),
    }
}

pub(crate) fn encode_value<T: Serialize>(
    state_type: StateType,
    value: &T,
    compression_threshold: usize,
) -> Result<String, StateError> {
    let mut out = Vec::with_capacity(1024);
    write!(out, "{{\"v\":{JSON_FORMAT_VERSION},\"state\":").map_err(|e| serialization_error(state_type, e))?;
    let start = out.len();
    serde_json::to_writer(&mut out, value).map_err(|e| serialization_error(state_type, e))?;
    if out.len() - start >= compression_threshold {
        let envelope = EnvelopeOut::<()> {
            v: JSON_FORMAT_VERSION,
            state: None,
            gzip: Some(gzip_base64(&out[start..]).map_err(|e| serialization_error(state_type, e))?),
        };
        return serde_json::to_string(&envelope).map_err(|e| serialization_error(state_type, e));
    }
    out.push(b'}');
    // serde_json writes UTF-8 only.
    String::from_utf8(out).map_err(|e| serialization_error(state_type, e))
}

/// `state_type` prefix of the rows holding one snapshot each of a job's metric window: the
/// prefix, then the row's slot, a number (`collectedMetrics#0`, `collectedMetrics#1`, ...). The
/// value names the snapshot's instant (`"at"` in the envelope, RFC 3339 with nanoseconds). A row
/// keeps its slot while the window slides: the row of a snapshot leaving the window is
/// overwritten in place with one entering it, so the database updates one row where it would
/// otherwise insert one and delete another (and change its unique index twice).
pub(crate) const SLOT_PREFIX: &str = "collectedMetrics#";

/// `state_type` prefix of the snapshot rows of the release before slots: the prefix, then the
/// snapshot's instant in RFC 3339 with nanoseconds (`collectedMetrics@2024-05-01T12:00:00.000000000Z`).
/// Read, and replaced by slot rows on the window's next flush.
pub(crate) const SNAPSHOT_PREFIX: &str = "collectedMetrics@";

/// The `state_type` of the window row in slot `slot`.
pub(crate) fn slot_identifier(slot: u32) -> String {
    format!("{SLOT_PREFIX}{slot}")
}

/// The slot a window row's `state_type` names, if it is one: a number written as
/// [`slot_identifier`] writes it (no sign, no leading zero).
pub(crate) fn slot_number(identifier: &str) -> Option<u32> {
    let digits = identifier.strip_prefix(SLOT_PREFIX)?;
    let canonical = digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    if canonical { digits.parse().ok() } else { None }
}

/// The instant an earlier release's snapshot row's `state_type` names, if it is one.
pub(crate) fn snapshot_instant(identifier: &str) -> Option<DateTime<Utc>> {
    let instant = identifier.strip_prefix(SNAPSHOT_PREFIX)?;
    DateTime::parse_from_rfc3339(instant)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

/// The `state_value` of the window row of the snapshot collected at `at`:
/// `{"v":2,"at":"<RFC 3339>","packed":"<base64>"}`, the snapshot's packed bytes
/// ([`SharedSnapshot::pack`]), written from the compact snapshot without building its maps or
/// formatting its numbers. Packed bytes of at least `compression_threshold` bytes (a snapshot of
/// thousands of vertices) are gzip-compressed: `"packedGzip"` in place of `"packed"`. `packed`
/// is a buffer for the bytes, kept by the caller from one row to the next.
pub(crate) fn encode_snapshot(
    at: DateTime<Utc>,
    snapshot: &SharedSnapshot,
    compression_threshold: usize,
    packed: &mut Vec<u8>,
) -> Result<String, StateError> {
    packed.clear();
    snapshot.pack(packed);
    let (field, base64) = if packed.len() >= compression_threshold {
        let gzipped = gzip_base64(packed).map_err(|e| serialization_error(StateType::CollectedMetrics, e))?;
        ("packedGzip", Some(gzipped))
    } else {
        ("packed", None)
    };
    // `"at"` is RFC 3339 (no character JSON escapes) and base64 needs no escaping either.
    let at = at.to_rfc3339_opts(SecondsFormat::Nanos, true);
    let length = base64.as_ref().map_or(packed.len().div_ceil(3) * 4, String::len);
    let mut out = String::with_capacity(48 + at.len() + length);
    std::fmt::Write::write_fmt(
        &mut out,
        format_args!("{{\"v\":{PACKED_FORMAT_VERSION},\"at\":\"{at}\",\"{field}\":\""),
    )
    .map_err(|e| serialization_error(StateType::CollectedMetrics, e))?;
    match base64 {
        Some(gzipped) => out.push_str(&gzipped),
        None => BASE64.encode_string(&*packed, &mut out),
    }
    out.push_str("\"}");
    Ok(out)
}

/// An earlier release's snapshot row's value (its instant is in the row's `state_type`).
pub(crate) fn decode_snapshot(text: &str) -> Result<CollectedMetrics, StateError> {
    decode_value(StateType::CollectedMetrics, text)
}

/// A window row's value: the instant it names and its snapshot, packed (version 2) or as JSON
/// (version 1).
pub(crate) fn decode_slot(text: &str) -> Result<(DateTime<Utc>, CollectedMetrics), StateError> {
    let state_type = StateType::CollectedMetrics;
    let mut envelope = read_envelope(state_type, text)?;
    let at = envelope.at.take();
    let packed = match (envelope.packed.take(), envelope.packed_gzip.take()) {
        (None, None) => None,
        (Some(packed), None) => Some(
            BASE64
                .decode(packed.as_bytes())
                .map_err(|e| serialization_error(state_type, format!("bad base64 in `packed`: {e}")))?,
        ),
        (None, Some(compressed)) => Some(
            gunzip_base64(&compressed, MAX_DECOMPRESSED_STATE_BYTES)
                .map_err(|e| serialization_error(state_type, format!("in `packedGzip`: {e}")))?,
        ),
        (Some(_), Some(_)) => {
            return Err(serialization_error(
                state_type,
                "a window row holds one of `packed` and `packedGzip`",
            ));
        }
    };
    let snapshot = match packed {
        Some(bytes) => {
            if envelope.v < PACKED_FORMAT_VERSION || envelope.state.is_some() || envelope.gzip.is_some() {
                return Err(serialization_error(
                    state_type,
                    "a packed window row is version 2 or later and holds nothing else",
                ));
            }
            CollectedMetrics::unpack(&bytes).map_err(|e| serialization_error(state_type, e))?
        }
        None => json_value(state_type, envelope)?,
    };
    let at = at.ok_or_else(|| serialization_error(state_type, "the window row names no instant (`at`)"))?;
    let at = DateTime::parse_from_rfc3339(&at).map_err(|e| {
        // The row's text, echoed in the error (and a log line): its first characters only.
        let shown: String = at.chars().take(48).collect();
        serialization_error(state_type, format!("bad instant `at` ({shown:?}): {e}"))
    })?;
    Ok((at.with_timezone(&Utc), snapshot))
}

/// Decodes a window row's `state_value` (a `collectedMetrics#<slot>` row, any format version this
/// release reads) and drops it: tells whether the row is readable, as a store's load would find
/// it.
///
/// ```
/// use autoscaler_state::decode_window_row;
/// assert!(decode_window_row(r#"{"v":1,"at":"2024-05-01T12:00:00Z","state":{"vertexMetrics":{},"globalMetrics":{}}}"#).is_ok());
/// assert!(decode_window_row(r#"{"v":2,"at":"2024-05-01T12:00:00Z","packed":"AQAAAAAAAAAAAAAA"}"#).is_ok());
/// assert!(decode_window_row(r#"{"v":2,"at":"2024-05-01T12:00:00Z","packed":"AgAA"}"#).is_err());
/// ```
///
/// # Errors
/// [`StateError::Serialization`] naming what is wrong.
pub fn decode_window_row(text: &str) -> Result<(), StateError> {
    decode_slot(text).map(drop)
}

/// What the window index row holds: a generation unique to one flush, and how many snapshot
/// rows it wrote.
#[derive(Serialize)]
struct WindowIndex<'a> {
    generation: &'a str,
    snapshots: usize,
}

/// The window index row's value for a flush of `snapshots` rows by generation `generation`.
pub(crate) fn encode_window_index(generation: &str, snapshots: usize) -> Result<String, StateError> {
    encode_value(
        StateType::CollectedMetrics,
        &WindowIndex { generation, snapshots },
        usize::MAX,
    )
}

fn decode_value<T: DeserializeOwned>(state_type: StateType, text: &str) -> Result<T, StateError> {
    json_value(state_type, read_envelope(state_type, text)?)
}

/// The envelope of `text`, of a version this release reads.
fn read_envelope(state_type: StateType, text: &str) -> Result<EnvelopeIn<'_>, StateError> {
    let envelope: EnvelopeIn<'_> = serde_json::from_str(text)
        .map_err(|e| serialization_error(state_type, format!("not a state envelope: {e}")))?;
    // A newer version means a newer release wrote the row.
    if envelope.v == 0 || envelope.v > FORMAT_VERSION {
        return Err(serialization_error(
            state_type,
            format!(
                "format version {} is not readable by this release (it reads 1..={FORMAT_VERSION})",
                envelope.v
            ),
        ));
    }
    Ok(envelope)
}

/// The JSON value an envelope holds, plain or compressed.
fn json_value<T: DeserializeOwned>(state_type: StateType, envelope: EnvelopeIn<'_>) -> Result<T, StateError> {
    if envelope.packed.is_some() || envelope.packed_gzip.is_some() {
        return Err(serialization_error(
            state_type,
            "only a window row holds a packed snapshot",
        ));
    }
    match (envelope.state, envelope.gzip) {
        (Some(raw), None) => serde_json::from_str(raw.get()).map_err(|e| serialization_error(state_type, e)),
        (None, Some(compressed)) => {
            let json = gunzip_base64(&compressed, MAX_DECOMPRESSED_STATE_BYTES)
                .map_err(|e| serialization_error(state_type, e))?;
            serde_json::from_slice(&json).map_err(|e| serialization_error(state_type, e))
        }
        _ => Err(serialization_error(
            state_type,
            "the envelope must hold exactly one of `state` and `gzip`",
        )),
    }
}

fn gzip_base64(bytes: &[u8]) -> std::io::Result<String> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    encoder.write_all(bytes)?;
    Ok(BASE64.encode(encoder.finish()?))
}

/// The base64 gzip data decompressed, refusing more than `limit` bytes of output.
fn gunzip_base64(text: &str, limit: usize) -> Result<Vec<u8>, String> {
    let compressed = BASE64.decode(text).map_err(|e| format!("bad base64 in `gzip`: {e}"))?;
    let mut json = Vec::with_capacity(compressed.len().saturating_mul(4).min(limit));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    GzDecoder::new(compressed.as_slice())
        .take(cap)
        .read_to_end(&mut json)
        .map_err(|e| format!("bad gzip data: {e}"))?;
    if json.len() > limit {
        return Err(format!(
            "the compressed state expands to more than the limit of {limit} bytes"
        ));
    }
    Ok(json)
}

/// Decodes a stored `state_value` as `state_type` (any format version this release reads) and
/// drops the value: tells whether a row is readable, as a store's load would find it.
///
/// ```
/// use autoscaler_state::{StateType, decode_state_value};
/// assert!(decode_state_value(StateType::ParallelismOverrides, r#"{"v":1,"state":{"a":2}}"#).is_ok());
/// assert!(decode_state_value(StateType::ParallelismOverrides, r#"{"v":1,"gzip":"!"}"#).is_err());
/// ```
///
/// # Errors
/// [`StateError::Serialization`] naming the state type and what is wrong.
pub fn decode_state_value(state_type: StateType, text: &str) -> Result<(), StateError> {
    StateValue::decode(state_type, text).map(drop)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use autoscaler_core::ScalingRecord;
    use autoscaler_metrics::{MetricValues, ScalingMetric};
    use chrono::{TimeZone, Utc};
    use std::time::Duration;

    fn tracking() -> StateValue {
        let mut t = ScalingTracking::default();
        t.scaling_records.insert(
            Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            ScalingRecord {
                restart_duration: Some(Duration::from_secs(42)),
            },
        );
        StateValue::ScalingTracking(t)
    }

    #[test]
    fn identifiers_round_trip_and_match_the_reference() {
        for t in StateType::ALL {
            assert_eq!(StateType::from_identifier(t.identifier()), Some(t));
        }
        assert_eq!(StateType::ConfigOverrides.identifier(), "configOverrides");
        assert_eq!(StateType::from_identifier("nope"), None);
    }

    #[test]
    fn small_state_is_plain_json_in_a_version_1_envelope() {
        let text = tracking().encode(DEFAULT_COMPRESSION_THRESHOLD).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"state":{"scalingRecords":{"2023-11-14T22:13:20Z":{"restartDuration":{"secs":42,"nanos":0}}}}}"#
        );
        assert_eq!(
            StateValue::decode(StateType::ScalingTracking, &text).unwrap(),
            tracking()
        );
    }

    #[test]
    fn state_at_the_threshold_is_compressed_and_decodes() {
        let text = tracking().encode(1).unwrap();
        assert!(text.starts_with(r#"{"v":1,"gzip":""#), "{text}");
        assert_eq!(
            StateValue::decode(StateType::ScalingTracking, &text).unwrap(),
            tracking()
        );
    }

    proptest::proptest! {
        // Any configuration change survives encode/decode, compressed or not.
        #[test]
        fn config_changes_round_trip(
            overrides in proptest::collection::btree_map(".{0,12}", ".{0,12}", 0..6),
            removals in proptest::collection::btree_set(".{0,12}", 0..6),
            threshold in 0usize..400,
        ) {
            let value = StateValue::ConfigOverrides(ConfigChanges { overrides, removals });
            let text = value.encode(threshold).unwrap();
            proptest::prop_assert_eq!(StateValue::decode(StateType::ConfigOverrides, &text).unwrap(), value);
        }
    }

    /// A number as a snapshot may hold it: whole, fractional, tiny, huge, negative, non-finite.
    fn any_value() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..1 << 40).prop_map(|n| n as f64),
            -1e6f64..1e6,
            proptest::num::f64::ANY,
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
        ]
    }

    fn any_metric_values() -> impl proptest::strategy::Strategy<Value = MetricValues> {
        use proptest::prelude::*;
        proptest::collection::vec((0..ScalingMetric::ALL.len(), any_value()), 0..12)
            .prop_map(|entries| entries.into_iter().map(|(m, v)| (ScalingMetric::ALL[m], v)).collect())
    }

    proptest::proptest! {
        // A window row reads back as its instant and the snapshot (as serde writes both, so NaN
        // and infinities compare), written without building the snapshot's maps.
        #[test]
        fn window_rows_read_back(
            snapshots in proptest::collection::vec(
                (
                    proptest::collection::btree_map(
                        // Plain Flink ids, and ids that need escaping in JSON.
                        proptest::prop_oneof!["[0-9a-f]{32}", ".{0,6}", "[\"\\\\\u{0}-\u{1f}\u{7f}é💡]{1,4}"],
                        any_metric_values(),
                        0..5,
                    ),
                    any_metric_values(),
                ),
                1..4,
            ),
            nanos in 0u32..1_000_000_000,
            threshold in proptest::prop_oneof![proptest::strategy::Just(DEFAULT_COMPRESSION_THRESHOLD), 0usize..200],
        ) {
            let history: MetricHistory = snapshots
                .into_iter()
                .enumerate()
                .map(|(i, (vertices, global))| {
                    let at = Utc.timestamp_opt(1_700_000_000 + i as i64 * 10, nanos).unwrap();
                    let vertex_metrics = vertices
                        .into_iter()
                        .map(|(id, values)| (autoscaler_metrics::VertexId::from(id.as_str()), values))
                        .collect();
                    (at, CollectedMetrics { vertex_metrics, global_metrics: global })
                })
                .collect();
            let mut buffer = Vec::new();
            for (at, snapshot) in history.shared() {
                let row = encode_snapshot(at, snapshot, threshold, &mut buffer).unwrap();
                let at_text = at.to_rfc3339_opts(SecondsFormat::Nanos, true);
                let field = if buffer.len() >= threshold { "packedGzip" } else { "packed" };
                proptest::prop_assert!(row.starts_with(&format!("{{\"v\":2,\"at\":\"{at_text}\",\"{field}\":\"")), "{}", row);
                let (read_at, read) = decode_slot(&row).unwrap();
                proptest::prop_assert_eq!(read_at, at);
                proptest::prop_assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(snapshot).unwrap());
                proptest::prop_assert!(!snapshot.is_expanded());
                // The JSON of version 1, as the release before wrote it, reads the same.
                let v1 = format!(
                    "{{\"v\":1,\"at\":\"{at_text}\",\"state\":{}}}",
                    serde_json::to_string(snapshot).unwrap()
                );
                let (v1_at, v1_read) = decode_slot(&v1).unwrap();
                proptest::prop_assert_eq!(v1_at, at);
                proptest::prop_assert_eq!(serde_json::to_string(&v1_read).unwrap(), serde_json::to_string(&read).unwrap());
            }
        }
    }

    #[test]
    fn a_packed_row_is_a_third_of_its_json() {
        let vertex_metrics = (0..10u32)
            .map(|k| {
                let mut values = MetricValues::new();
                values.insert(ScalingMetric::Load, f64::from(k * 37) / 1000.0);
                values.insert(ScalingMetric::NumRecordsInPerSecond, 1234.5678 + f64::from(k));
                values.insert(ScalingMetric::NumRecordsIn, 1_000_000.0 * f64::from(k + 1));
                values.insert(ScalingMetric::NumRecordsOut, 990_000.0 * f64::from(k + 1));
                values.insert(ScalingMetric::AccumulatedBusyTime, 129_921.0);
                values.insert(ScalingMetric::Parallelism, 4.0);
                values.insert(ScalingMetric::MaxParallelism, 128.0);
                (
                    autoscaler_metrics::VertexId::from(format!("{:032x}", u128::from(k) << 64 | 0xabc)),
                    values,
                )
            })
            .collect();
        let snapshot = CollectedMetrics {
            vertex_metrics,
            global_metrics: MetricValues::new(),
        };
        let at = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        let history: MetricHistory = [(at, snapshot.clone())].into_iter().collect();
        let (_, shared) = history.shared().next().unwrap();
        let row = encode_snapshot(at, shared, DEFAULT_COMPRESSION_THRESHOLD, &mut Vec::new()).unwrap();
        let json = encode_value(StateType::CollectedMetrics, &snapshot, usize::MAX).unwrap();
        assert!(
            row.len() * 3 < json.len(),
            "packed {} bytes, JSON {}",
            row.len(),
            json.len()
        );
    }

    #[test]
    fn bad_packed_rows_are_typed_errors() {
        let at = r#""at":"2024-05-01T12:00:00Z""#;
        let empty = "AQAAAAAAAAAAAAAA";
        assert!(decode_slot(&format!(r#"{{"v":2,{at},"packed":"{empty}"}}"#)).is_ok());
        for (row, problem) in [
            (format!(r#"{{"v":1,{at},"packed":"{empty}"}}"#), "version 2 or later"),
            (
                format!(r#"{{"v":2,{at},"packed":"{empty}","state":{{}}}}"#),
                "holds nothing else",
            ),
            (format!(r#"{{"v":2,{at},"packed":"!!"}}"#), "bad base64 in `packed`"),
            (
                format!(r#"{{"v":2,{at},"packedGzip":"!!"}}"#),
                "in `packedGzip`: bad base64",
            ),
            (
                format!(r#"{{"v":2,{at},"packed":"{empty}","packedGzip":"{empty}"}}"#),
                "one of `packed` and `packedGzip`",
            ),
            (
                format!(r#"{{"v":2,{at},"packed":"AgAA"}}"#),
                "layout version 2 is not readable",
            ),
            (format!(r#"{{"v":2,"packed":"{empty}"}}"#), "names no instant"),
            (format!(r#"{{"v":3,{at},"packed":"{empty}"}}"#), "format version 3"),
        ] {
            let err = decode_slot(&row).unwrap_err().to_string();
            assert!(err.contains(problem), "{row}: {err}");
            assert!(decode_window_row(&row).is_err());
        }
        // Only a window row holds a packed snapshot.
        let err = StateValue::decode(StateType::CollectedMetrics, &format!(r#"{{"v":2,"packed":"{empty}"}}"#))
            .unwrap_err()
            .to_string();
        assert!(err.contains("only a window row holds a packed snapshot"), "{err}");
    }

    #[test]
    fn slot_identifiers_are_canonical_numbers() {
        assert_eq!(slot_identifier(0), "collectedMetrics#0");
        assert_eq!(slot_number("collectedMetrics#0"), Some(0));
        assert_eq!(slot_number("collectedMetrics#89"), Some(89));
        assert_eq!(slot_number(&slot_identifier(u32::MAX)), Some(u32::MAX));
        for not_a_slot in [
            "collectedMetrics#",
            "collectedMetrics#07",
            "collectedMetrics#+7",
            "collectedMetrics#-1",
            "collectedMetrics#7 ",
            "collectedMetrics#4294967296",
            "collectedMetrics@2024-05-01T12:00:00Z",
            "collectedMetricsIndex",
        ] {
            assert_eq!(slot_number(not_a_slot), None, "{not_a_slot}");
        }
    }

    #[test]
    fn a_window_row_without_a_readable_instant_is_a_typed_error() {
        let err = decode_slot(r#"{"v":1,"state":{"vertexMetrics":{},"globalMetrics":{}}}"#).unwrap_err();
        assert!(err.to_string().contains("names no instant"), "{err}");
        let err =
            decode_slot(r#"{"v":1,"at":"yesterday","state":{"vertexMetrics":{},"globalMetrics":{}}}"#).unwrap_err();
        assert!(err.to_string().contains("bad instant `at` (\"yesterday\")"), "{err}");
        let long = format!(
            r#"{{"v":1,"at":"{}","state":{{"vertexMetrics":{{}},"globalMetrics":{{}}}}}}"#,
            "9".repeat(100_000)
        );
        let err = decode_slot(&long).unwrap_err().to_string();
        assert!(err.len() < 300, "the instant is not echoed whole: {} bytes", err.len());
        let (at, _) = decode_slot(
            r#"{"v":1,"at":"2024-05-01T12:00:00.5+02:00","state":{"vertexMetrics":{},"globalMetrics":{}}}"#,
        )
        .unwrap();
        assert_eq!(
            at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "2024-05-01T10:00:00.500Z"
        );
    }

    #[test]
    fn decompression_stops_at_the_limit() {
        // 2 MiB of zeros compress to about 2 KiB; with a 1 MiB limit the output is cut off.
        let bomb = gzip_base64(&vec![0u8; 2 << 20]).unwrap();
        let err = gunzip_base64(&bomb, 1 << 20).unwrap_err();
        assert!(err.contains("limit of 1048576 bytes"), "{err}");
        assert_eq!(gunzip_base64(&bomb, 2 << 20).map(|v| v.len()), Ok(2 << 20));
    }

    #[test]
    fn newer_or_garbage_versions_are_typed_errors() {
        let err = StateValue::decode(StateType::ScalingTracking, r#"{"v":3,"state":{}}"#).unwrap_err();
        assert!(err.to_string().contains("format version 3"), "{err}");
        assert!(StateValue::decode(StateType::ScalingTracking, "not json").is_err());
        assert!(StateValue::decode(StateType::ScalingTracking, r#"{"v":1}"#).is_err());
        assert!(StateValue::decode(StateType::ScalingTracking, r#"{"v":1,"gzip":"!!"}"#).is_err());
    }
}
