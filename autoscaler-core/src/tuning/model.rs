//! Flink's TaskManager memory model, as far as memory tuning needs it: the `taskmanager.memory.*`
//! and network-buffer options ([`MemoryModelOptions`]) and the memory spec derived from them
//! ([`MemorySpec::derive`], Flink's `ProcessMemoryUtils.memoryProcessSpecFromConfig` with
//! `TaskExecutorFlinkMemoryUtils`).

use super::size::multiply;
use crate::config::Configuration;
use crate::config::{OptionsError, java_trim, parse_double, parse_int, parse_memory_size};

/// `taskmanager.memory.process.size`.
pub const TOTAL_PROCESS_MEMORY: &str = "taskmanager.memory.process.size";
/// `taskmanager.memory.flink.size`.
pub const TOTAL_FLINK_MEMORY: &str = "taskmanager.memory.flink.size";
/// `taskmanager.memory.task.heap.size`.
pub const TASK_HEAP_MEMORY: &str = "taskmanager.memory.task.heap.size";
/// `taskmanager.memory.managed.size`.
pub const MANAGED_MEMORY_SIZE: &str = "taskmanager.memory.managed.size";
/// `taskmanager.memory.size`, the deprecated key of [`MANAGED_MEMORY_SIZE`].
pub const MANAGED_MEMORY_SIZE_DEPRECATED: &str = "taskmanager.memory.size";
/// `taskmanager.memory.managed.fraction`.
pub const MANAGED_MEMORY_FRACTION: &str = "taskmanager.memory.managed.fraction";
/// `taskmanager.memory.framework.heap.size`.
pub const FRAMEWORK_HEAP_MEMORY: &str = "taskmanager.memory.framework.heap.size";
/// `taskmanager.memory.framework.off-heap.size`.
pub const FRAMEWORK_OFF_HEAP_MEMORY: &str = "taskmanager.memory.framework.off-heap.size";
/// `taskmanager.memory.task.off-heap.size`.
pub const TASK_OFF_HEAP_MEMORY: &str = "taskmanager.memory.task.off-heap.size";
/// `taskmanager.memory.network.min`.
pub const NETWORK_MEMORY_MIN: &str = "taskmanager.memory.network.min";
/// `taskmanager.memory.network.max`.
pub const NETWORK_MEMORY_MAX: &str = "taskmanager.memory.network.max";
/// `taskmanager.memory.network.fraction`.
pub const NETWORK_MEMORY_FRACTION: &str = "taskmanager.memory.network.fraction";
/// `taskmanager.memory.jvm-metaspace.size`.
pub const JVM_METASPACE: &str = "taskmanager.memory.jvm-metaspace.size";
/// `taskmanager.memory.jvm-overhead.min`.
pub const JVM_OVERHEAD_MIN: &str = "taskmanager.memory.jvm-overhead.min";
/// `taskmanager.memory.jvm-overhead.max`.
pub const JVM_OVERHEAD_MAX: &str = "taskmanager.memory.jvm-overhead.max";
/// `taskmanager.memory.jvm-overhead.fraction`.
pub const JVM_OVERHEAD_FRACTION: &str = "taskmanager.memory.jvm-overhead.fraction";
/// `taskmanager.network.memory.buffers-per-channel`.
pub const NETWORK_BUFFERS_PER_CHANNEL: &str = "taskmanager.network.memory.buffers-per-channel";
/// `taskmanager.network.memory.floating-buffers-per-gate`.
pub const NETWORK_FLOATING_BUFFERS_PER_GATE: &str = "taskmanager.network.memory.floating-buffers-per-gate";
/// `taskmanager.memory.segment-size`.
pub const MEMORY_SEGMENT_SIZE: &str = "taskmanager.memory.segment-size";

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// A `(min, max, fraction)` range of a derived memory component (Flink's `RangeFraction`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeFraction {
    /// Lower bound in bytes.
    pub min: i64,
    /// Upper bound in bytes.
    pub max: i64,
    /// The fraction as Flink reads it: a Java `float`, used widened to double.
    pub fraction: f64,
}

impl RangeFraction {
    /// Flink's `getRangeFraction` check: `min <= max` and `0 <= fraction < 1`.
    fn check(self, component: &'static str) -> Result<Self, SpecError> {
        if self.min <= self.max && (0.0..1.0).contains(&self.fraction) {
            Ok(self)
        } else {
            Err(SpecError::InconsistentRange {
                component,
                min: self.min,
                max: self.max,
                fraction: self.fraction,
            })
        }
    }

    fn clamp(self, bytes: i64) -> i64 {
        if bytes > self.max {
            self.max
        } else if bytes < self.min {
            self.min
        } else {
            bytes
        }
    }

    /// Flink's `deriveWithFraction`: `base × fraction`, clamped to the range.
    fn derive(self, base: i64) -> Result<i64, SpecError> {
        multiply(base, self.fraction)
            .map(|b| self.clamp(b))
            .ok_or(SpecError::Overflow)
    }

    /// Flink's `deriveWithInverseFraction`: `base × fraction / (1 − fraction)`, clamped.
    fn derive_inverse(self, base: i64) -> Result<i64, SpecError> {
        multiply(base, self.fraction / (1.0 - self.fraction))
            .map(|b| self.clamp(b))
            .ok_or(SpecError::Overflow)
    }
}

/// The TaskManager memory options memory tuning reads, with Flink's defaults. Sizes are bytes.
///
/// Flink's deprecated memory keys (`taskmanager.memory.size` as managed size, the legacy
/// `taskmanager.network.memory.*` and `taskmanager.network.numberOfBuffers` keys) are not read.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryModelOptions {
    /// `taskmanager.memory.process.size` (unset).
    pub process_size: Option<i64>,
    /// `taskmanager.memory.flink.size` (unset).
    pub flink_size: Option<i64>,
    /// `taskmanager.memory.task.heap.size` (unset).
    pub task_heap: Option<i64>,
    /// `taskmanager.memory.managed.size` (unset).
    pub managed_size: Option<i64>,
    /// `taskmanager.memory.managed.fraction` (0.4, a Java float).
    pub managed_fraction: f64,
    /// `taskmanager.memory.framework.heap.size` (128 mb).
    pub framework_heap: i64,
    /// `taskmanager.memory.framework.off-heap.size` (128 mb).
    pub framework_off_heap: i64,
    /// `taskmanager.memory.task.off-heap.size` (0).
    pub task_off_heap: i64,
    /// `taskmanager.memory.network.min` / `.max` / `.fraction` (64 mb, 2^63−1 bytes, 0.1).
    pub network: RangeFraction,
    /// `taskmanager.memory.jvm-metaspace.size` (256 mb).
    pub jvm_metaspace: i64,
    /// `taskmanager.memory.jvm-overhead.min` / `.max` / `.fraction` (192 mb, 1 gb, 0.1).
    pub jvm_overhead: RangeFraction,
    /// `taskmanager.network.memory.buffers-per-channel` (2).
    pub buffers_per_channel: i32,
    /// `taskmanager.network.memory.floating-buffers-per-gate` (8).
    pub floating_buffers_per_gate: i32,
    /// `taskmanager.memory.segment-size` (32 kb).
    pub segment_size: i64,
}

impl Default for MemoryModelOptions {
    fn default() -> Self {
        Self {
            process_size: None,
            flink_size: None,
            task_heap: None,
            managed_size: None,
            managed_fraction: f64::from(0.4f32),
            framework_heap: 128 * MIB,
            framework_off_heap: 128 * MIB,
            task_off_heap: 0,
            network: RangeFraction {
                min: 64 * MIB,
                max: i64::MAX,
                fraction: f64::from(0.1f32),
            },
            jvm_metaspace: 256 * MIB,
            jvm_overhead: RangeFraction {
                min: 192 * MIB,
                max: GIB,
                fraction: f64::from(0.1f32),
            },
            buffers_per_channel: 2,
            floating_buffers_per_gate: 8,
            segment_size: 32 << 10,
        }
    }
}

/// A Java `float` as Flink reads it (`Float.parseFloat`: the grammar of [`parse_double`], rounded
/// once, directly to float), returned widened to double as the reference uses it.
///
/// ```
/// use autoscaler_core::tuning::parse_float;
/// assert_eq!(parse_float("0.4"), Ok(0.4000000059604645));
/// assert!(parse_float("0,4").is_err());
/// ```
///
/// # Errors
/// A message naming the value.
pub fn parse_float(text: &str) -> Result<f64, String> {
    // The grammar is Java's; only the rounding differs from a double.
    let as_double = parse_double(text)?;
    if !as_double.is_finite() {
        return Ok(as_double);
    }
    let body = java_trim(text);
    let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
    body.parse::<f32>()
        .map(f64::from)
        .map_err(|_| format!("{text:?} is not a number"))
}

fn invalid(key: &str, value: &str, reason: String) -> OptionsError {
    OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    }
}

fn read<T>(
    conf: &Configuration,
    key: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, OptionsError> {
    conf.get(key)
        .map(|value| parse(value).map_err(|reason| invalid(key, value, reason)))
        .transpose()
}

fn size(text: &str) -> Result<i64, String> {
    // parse_memory_size guarantees a Java long.
    parse_memory_size(text).map(|b| i64::try_from(b).unwrap_or(i64::MAX))
}

impl MemoryModelOptions {
    /// Reads the options from `conf`; a present key whose value does not parse is an error naming
    /// it, whether or not tuning runs.
    ///
    /// # Errors
    /// [`OptionsError::InvalidValue`] naming the first key whose value does not parse.
    pub fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        let d = Self::default();
        let size_or = |key: &str, default: i64| Ok::<_, OptionsError>(read(conf, key, size)?.unwrap_or(default));
        let float_or =
            |key: &str, default: f64| Ok::<_, OptionsError>(read(conf, key, parse_float)?.unwrap_or(default));
        let int_or = |key: &str, default: i32| Ok::<_, OptionsError>(read(conf, key, parse_int)?.unwrap_or(default));
        Ok(Self {
            process_size: read(conf, TOTAL_PROCESS_MEMORY, size)?,
            flink_size: read(conf, TOTAL_FLINK_MEMORY, size)?,
            task_heap: read(conf, TASK_HEAP_MEMORY, size)?,
            managed_size: read(conf, MANAGED_MEMORY_SIZE, size)?,
            managed_fraction: float_or(MANAGED_MEMORY_FRACTION, d.managed_fraction)?,
            framework_heap: size_or(FRAMEWORK_HEAP_MEMORY, d.framework_heap)?,
            framework_off_heap: size_or(FRAMEWORK_OFF_HEAP_MEMORY, d.framework_off_heap)?,
            task_off_heap: size_or(TASK_OFF_HEAP_MEMORY, d.task_off_heap)?,
            network: RangeFraction {
                min: size_or(NETWORK_MEMORY_MIN, d.network.min)?,
                max: size_or(NETWORK_MEMORY_MAX, d.network.max)?,
                fraction: float_or(NETWORK_MEMORY_FRACTION, d.network.fraction)?,
            },
            jvm_metaspace: size_or(JVM_METASPACE, d.jvm_metaspace)?,
            jvm_overhead: RangeFraction {
                min: size_or(JVM_OVERHEAD_MIN, d.jvm_overhead.min)?,
                max: size_or(JVM_OVERHEAD_MAX, d.jvm_overhead.max)?,
                fraction: float_or(JVM_OVERHEAD_FRACTION, d.jvm_overhead.fraction)?,
            },
            buffers_per_channel: int_or(NETWORK_BUFFERS_PER_CHANNEL, d.buffers_per_channel)?,
            floating_buffers_per_gate: int_or(NETWORK_FLOATING_BUFFERS_PER_GATE, d.floating_buffers_per_gate)?,
            segment_size: size_or(MEMORY_SEGMENT_SIZE, d.segment_size)?,
        })
    }
}

/// Why the memory options describe no consistent TaskManager (Flink's
/// `IllegalConfigurationException` while deriving the spec): memory tuning is then skipped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// None of task heap + managed size, total Flink size or total process size is set.
    #[error("neither task heap and managed memory, nor total Flink memory, nor total process memory is configured")]
    NotConfigured,
    /// A range has `min > max` or a fraction outside `[0, 1)`.
    #[error("inconsistent {component} range: min {min}, max {max}, fraction {fraction}")]
    InconsistentRange {
        /// `network`, `jvm-overhead` or `managed`.
        component: &'static str,
        /// Lower bound in bytes.
        min: i64,
        /// Upper bound in bytes.
        max: i64,
        /// The fraction.
        fraction: f64,
    },
    /// The configured parts add up to more than the total they must fit in.
    #[error("the configured {parts} ({sum} bytes) exceed the {total_name} ({total} bytes)")]
    Exceeds {
        /// What was summed.
        parts: &'static str,
        /// Their sum.
        sum: i64,
        /// What they must fit in.
        total_name: &'static str,
        /// Its size.
        total: i64,
    },
    /// A derived component lies outside its configured `[min, max]`.
    #[error("derived {component} size {size} is not in its configured range [{min}, {max}]")]
    OutOfRange {
        /// `network` or `jvm-overhead`.
        component: &'static str,
        /// The derived size.
        size: i64,
        /// Lower bound.
        min: i64,
        /// Upper bound.
        max: i64,
    },
    /// A size computation left the range of a Java `long`.
    #[error("a memory size overflows a Java long")]
    Overflow,
}

/// A TaskManager's memory as Flink derives it from the configuration (the reference's
/// `CommonProcessMemorySpec<TaskExecutorFlinkMemory>`). Sizes are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySpec {
    /// Framework heap.
    pub framework_heap: i64,
    /// Task heap.
    pub task_heap: i64,
    /// Framework off-heap.
    pub framework_off_heap: i64,
    /// Task off-heap.
    pub task_off_heap: i64,
    /// Managed memory.
    pub managed: i64,
    /// Network memory.
    pub network: i64,
    /// JVM metaspace.
    pub metaspace: i64,
    /// JVM overhead.
    pub overhead: i64,
}

fn add(parts: &[i64]) -> Result<i64, SpecError> {
    parts
        .iter()
        .try_fold(0i64, |sum, p| sum.checked_add(*p))
        .ok_or(SpecError::Overflow)
}

/// `total − sum(parts)`, which must not be negative.
fn rest(total: i64, total_name: &'static str, parts_name: &'static str, parts: &[i64]) -> Result<i64, SpecError> {
    let sum = add(parts)?;
    if sum > total {
        return Err(SpecError::Exceeds {
            parts: parts_name,
            sum,
            total_name,
            total,
        });
    }
    Ok(total - sum)
}

fn check_in_range(component: &'static str, size: i64, range: RangeFraction) -> Result<i64, SpecError> {
    if size < range.min || size > range.max {
        return Err(SpecError::OutOfRange {
            component,
            size,
            min: range.min,
            max: range.max,
        });
    }
    Ok(size)
}

/// The Flink-memory part of a spec.
struct FlinkMemory {
    task_heap: i64,
    managed: i64,
    network: i64,
}

impl MemorySpec {
    /// JVM heap: framework heap + task heap (Flink's `getJvmHeapMemorySize`).
    pub fn jvm_heap(&self) -> i64 {
        self.framework_heap + self.task_heap
    }

    /// Total Flink memory: heaps, off-heaps, managed and network.
    pub fn total_flink(&self) -> i64 {
        self.jvm_heap() + self.framework_off_heap + self.task_off_heap + self.managed + self.network
    }

    /// Total process memory: total Flink memory, metaspace and overhead.
    pub fn total_process(&self) -> i64 {
        self.total_flink() + self.metaspace + self.overhead
    }

    /// Derives the spec as Flink does, first matching path wins:
    ///
    /// 1. task heap and managed size both set: network is the rest of the total Flink size if that
    ///    is set (inside the network range), else derived by inverse fraction from the other parts;
    /// 2. total Flink size set: the Flink memory split from it;
    /// 3. total process size set: overhead by fraction of it, metaspace as configured, the rest is
    ///    total Flink memory, split as in 2;
    /// 4. otherwise there is no spec.
    ///
    /// In 1 and 2 the JVM part (metaspace, overhead) is derived from the total Flink size: the
    /// overhead is the rest of the process size if that is set (inside the overhead range), else
    /// derived by inverse fraction from total Flink + metaspace.
    ///
    /// # Errors
    /// [`SpecError`] for every inconsistency Flink rejects with an `IllegalConfigurationException`.
    pub fn derive(o: &MemoryModelOptions) -> Result<Self, SpecError> {
        let network_range = o.network.check("network")?;
        let overhead_range = o.jvm_overhead.check("jvm-overhead")?;
        let (flink, total_flink, jvm) = match (o.task_heap, o.managed_size, o.flink_size, o.process_size) {
            (Some(task_heap), Some(managed), flink_size, _) => {
                let without_network = add(&[
                    o.framework_heap,
                    o.framework_off_heap,
                    task_heap,
                    o.task_off_heap,
                    managed,
                ])?;
                let network = match flink_size {
                    Some(total) => {
                        let network = rest(
                            total,
                            "total Flink memory",
                            "Flink memory without network",
                            &[without_network],
                        )?;
                        check_in_range("network", network, network_range)?
                    }
                    None => network_range.derive_inverse(without_network)?,
                };
                let total = add(&[without_network, network])?;
                let flink = FlinkMemory {
                    task_heap,
                    managed,
                    network,
                };
                (flink, total, Self::jvm_from_total_flink(o, total, overhead_range)?)
            }
            (_, _, Some(total), _) => (
                Self::flink_from_total(o, total, network_range)?,
                total,
                Self::jvm_from_total_flink(o, total, overhead_range)?,
            ),
            (_, _, None, Some(process)) => {
                let overhead = overhead_range.derive(process)?;
                let total = rest(
                    process,
                    "total process memory",
                    "JVM metaspace and overhead",
                    &[o.jvm_metaspace, overhead],
                )?;
                (
                    Self::flink_from_total(o, total, network_range)?,
                    total,
                    (o.jvm_metaspace, overhead),
                )
            }
            _ => return Err(SpecError::NotConfigured),
        };
        let spec = Self {
            framework_heap: o.framework_heap,
            task_heap: flink.task_heap,
            framework_off_heap: o.framework_off_heap,
            task_off_heap: o.task_off_heap,
            managed: flink.managed,
            network: flink.network,
            metaspace: jvm.0,
            overhead: jvm.1,
        };
        // Every total must fit a Java long, so that the accessors cannot overflow.
        let total_process = add(&[total_flink, spec.metaspace, spec.overhead])?;
        debug_assert_eq!(spec.total_flink(), total_flink);
        debug_assert_eq!(spec.total_process(), total_process);
        Ok(spec)
    }

    /// Managed memory: the configured size, else the managed fraction of `total` (range 0..max).
    fn managed(o: &MemoryModelOptions, total: i64) -> Result<i64, SpecError> {
        match o.managed_size {
            Some(managed) => Ok(managed),
            None => RangeFraction {
                min: 0,
                max: i64::MAX,
                fraction: o.managed_fraction,
            }
            .check("managed")?
            .derive(total),
        }
    }

    /// Flink's `deriveFromTotalFlinkMemory`.
    fn flink_from_total(
        o: &MemoryModelOptions,
        total: i64,
        network_range: RangeFraction,
    ) -> Result<FlinkMemory, SpecError> {
        let managed = Self::managed(o, total)?;
        if let Some(task_heap) = o.task_heap {
            let network = rest(
                total,
                "total Flink memory",
                "Flink memory without network",
                &[
                    o.framework_heap,
                    o.framework_off_heap,
                    task_heap,
                    o.task_off_heap,
                    managed,
                ],
            )?;
            let network = check_in_range("network", network, network_range)?;
            Ok(FlinkMemory {
                task_heap,
                managed,
                network,
            })
        } else {
            let network = network_range.derive(total)?;
            let task_heap = rest(
                total,
                "total Flink memory",
                "Flink memory without task heap",
                &[
                    o.framework_heap,
                    o.framework_off_heap,
                    o.task_off_heap,
                    managed,
                    network,
                ],
            )?;
            Ok(FlinkMemory {
                task_heap,
                managed,
                network,
            })
        }
    }

    /// Flink's `deriveJvmMetaspaceAndOverheadFromTotalFlinkMemory`: `(metaspace, overhead)`.
    fn jvm_from_total_flink(
        o: &MemoryModelOptions,
        total_flink: i64,
        overhead_range: RangeFraction,
    ) -> Result<(i64, i64), SpecError> {
        let with_metaspace = add(&[total_flink, o.jvm_metaspace])?;
        let overhead = match o.process_size {
            Some(process) => {
                // Flink's MemorySize.subtract would throw for a negative rest; it cannot lie in
                // the overhead range either way.
                let overhead = process.checked_sub(with_metaspace).ok_or(SpecError::Overflow)?;
                check_in_range("jvm-overhead", overhead, overhead_range)?
            }
            None => overhead_range.derive_inverse(with_metaspace)?,
        };
        Ok((o.jvm_metaspace, overhead))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: i64 = 1 << 10;

    fn options(entries: &[(&str, &str)]) -> MemoryModelOptions {
        MemoryModelOptions::from_configuration(&entries.iter().copied().collect()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn defaults_are_flinks() {
        let o = MemoryModelOptions::from_configuration(&Configuration::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o, MemoryModelOptions::default());
        assert_eq!(o.managed_fraction, 0.4000000059604645);
        assert_eq!(o.network.fraction, 0.10000000149011612);
        assert_eq!((o.network.min, o.network.max), (64 * MIB, i64::MAX));
        assert_eq!((o.jvm_overhead.min, o.jvm_overhead.max), (192 * MIB, GIB));
        assert_eq!(
            (o.buffers_per_channel, o.floating_buffers_per_gate, o.segment_size),
            (2, 8, 32 * KIB)
        );
        assert_eq!(MemorySpec::derive(&o), Err(SpecError::NotConfigured));
    }

    #[test]
    fn a_value_that_does_not_parse_names_its_key() {
        for (key, value) in [
            (TOTAL_PROCESS_MEMORY, "2.5g"),
            (MANAGED_MEMORY_FRACTION, "forty"),
            (NETWORK_MEMORY_MAX, "-1"),
            (NETWORK_BUFFERS_PER_CHANNEL, "2.0"),
            (MEMORY_SEGMENT_SIZE, "32 kib"),
            (JVM_OVERHEAD_FRACTION, ""),
        ] {
            let err = MemoryModelOptions::from_configuration(&Configuration::from_iter([(key, value)]));
            assert!(
                matches!(&err, Err(OptionsError::InvalidValue { key: k, .. }) if k == key),
                "{key}={value}: {err:?}"
            );
        }
    }

    #[test]
    fn fractions_are_java_floats() {
        assert_eq!(parse_float("0.1"), Ok(0.10000000149011612));
        assert_eq!(parse_float(" 0.25f "), Ok(0.25));
        assert_eq!(parse_float("1e-1"), Ok(0.10000000149011612));
        assert!(parse_float("NaN").is_ok_and(f64::is_nan));
        assert!(parse_float("0x1p-3").is_err());
        assert!(parse_float("inf").is_err());
    }

    #[test]
    fn process_size_path() {
        // P = 30 gb = 32212254720. Overhead = 32212254720 × 0.10000000149011612 = 3221225520.0...
        // clamped to its max 1 gb. Metaspace 256 mb. T = 30 gb − 256 mb − 1 gb = 30870077440.
        // Managed = floor(30870077440 × 0.4000000059604645) = 12348031160.
        // Network = floor(30870077440 × 0.10000000149011612) = 3087007790 (>= 64 mb).
        // Task heap = T − 128 mb − 128 mb − 0 − managed − network = 15166603034.
        let spec = MemorySpec::derive(&options(&[(TOTAL_PROCESS_MEMORY, "30 gb")])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.overhead, GIB);
        assert_eq!(spec.metaspace, 256 * MIB);
        assert_eq!(spec.total_flink(), 30_870_077_440);
        assert_eq!(spec.managed, 12_348_031_160);
        assert_eq!(spec.network, 3_087_007_790);
        assert_eq!(spec.task_heap, 15_166_603_034);
        assert_eq!(spec.jvm_heap(), 15_300_820_762);
        assert_eq!(spec.total_process(), 30 * GIB);
        // A small process hits the overhead minimum: 1 gb × 0.1 = 107374184 < 192 mb.
        let spec = MemorySpec::derive(&options(&[(TOTAL_PROCESS_MEMORY, "1 gb")])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.overhead, 192 * MIB);
        // Metaspace + overhead larger than the process.
        assert!(matches!(
            MemorySpec::derive(&options(&[(TOTAL_PROCESS_MEMORY, "400 mb")])),
            Err(SpecError::Exceeds { .. })
        ));
        // The Flink memory left (1 gb − 256 mb − 192 mb = 576 mb) cannot hold 2 x 128 mb
        // framework memory + 0.4 managed + 64 mb network minimum + a task heap of 400 mb.
        assert!(matches!(
            MemorySpec::derive(&options(&[
                (TOTAL_PROCESS_MEMORY, "1 gb"),
                (TASK_HEAP_MEMORY, "400 mb")
            ])),
            Err(SpecError::Exceeds { .. })
        ));
    }

    #[test]
    fn flink_size_path() {
        // F = 1 gb: managed = floor(1073741824 × 0.4000000059604645) = 429496736, network =
        // floor(1073741824 × 0.10000000149011612) = 107374184, task heap = 1 gb − 256 mb −
        // managed − network = 1073741824 − 268435456 − 429496736 − 107374184 = 268435448.
        // JVM: metaspace 256 mb; overhead = (1 gb + 256 mb) × 0.1/0.9 = 1342177280 ×
        // 0.11111111295076065 = 149130811.35 -> 149130811 < 192 mb -> 192 mb.
        let spec = MemorySpec::derive(&options(&[(TOTAL_FLINK_MEMORY, "1 gb")])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.managed, 429_496_736);
        assert_eq!(spec.network, 107_374_184);
        assert_eq!(spec.task_heap, 268_435_448);
        assert_eq!(spec.overhead, 192 * MIB);
        assert_eq!(spec.total_flink(), GIB);
        // With the process size also set, the overhead is the rest: 2 gb − 1 gb − 256 mb = 768 mb.
        let spec = MemorySpec::derive(&options(&[
            (TOTAL_FLINK_MEMORY, "1 gb"),
            (TOTAL_PROCESS_MEMORY, "2 gb"),
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.overhead, 768 * MIB);
        // ... and must lie in the overhead range: 4 gb − 1.25 gb > 1 gb.
        assert!(matches!(
            MemorySpec::derive(&options(&[
                (TOTAL_FLINK_MEMORY, "1 gb"),
                (TOTAL_PROCESS_MEMORY, "4 gb")
            ])),
            Err(SpecError::OutOfRange {
                component: "jvm-overhead",
                ..
            })
        ));
        // A process smaller than Flink memory + metaspace (Flink's subtract would throw).
        assert!(
            MemorySpec::derive(&options(&[
                (TOTAL_FLINK_MEMORY, "1 gb"),
                (TOTAL_PROCESS_MEMORY, "1 gb")
            ]))
            .is_err()
        );
        // Task heap set: network is the rest, 1 gb − 256 mb − 200 mb − managed 429496736 =
        // 166094432, inside [64 mb, max].
        let spec = MemorySpec::derive(&options(&[(TOTAL_FLINK_MEMORY, "1 gb"), (TASK_HEAP_MEMORY, "200 mb")]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.network, 166_094_432);
        // With 300 mb of task heap the rest, 61236832, is below the 64 mb network minimum.
        assert!(matches!(
            MemorySpec::derive(&options(&[(TOTAL_FLINK_MEMORY, "1 gb"), (TASK_HEAP_MEMORY, "300 mb")])),
            Err(SpecError::OutOfRange {
                component: "network",
                ..
            })
        ));
        // ... and a network rest above network.max is inconsistent.
        assert!(matches!(
            MemorySpec::derive(&options(&[
                (TOTAL_FLINK_MEMORY, "1 gb"),
                (TASK_HEAP_MEMORY, "200 mb"),
                (NETWORK_MEMORY_MAX, "100 mb")
            ])),
            Err(SpecError::OutOfRange {
                component: "network",
                ..
            })
        ));
    }

    #[test]
    fn fine_grained_path() {
        // TH 512 mb + M 256 mb: without network = 128 + 128 + 512 + 0 + 256 = 1024 mb; network =
        // 1 gb × 0.11111111295076065 = 119304649 (>= 64 mb); T = 1193046473.
        // JVM: (T + 256 mb) × 0.11111111295076065 = 1461481929 × 0.11111111295076065
        // = 162386883.1 -> 162386883 < 192 mb -> 192 mb.
        let o = options(&[(TASK_HEAP_MEMORY, "512 mb"), (MANAGED_MEMORY_SIZE, "256 mb")]);
        let spec = MemorySpec::derive(&o).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.network, 119_304_649);
        assert_eq!(spec.total_flink(), 1_193_046_473);
        assert_eq!((spec.task_heap, spec.managed), (512 * MIB, 256 * MIB));
        assert_eq!(spec.overhead, 192 * MIB);
        // This path wins over a process size (whose overhead must then fit the range):
        // 2 gb − 1193046473 − 256 mb = 686001719, inside [192 mb, 1 gb].
        let o = options(&[
            (TASK_HEAP_MEMORY, "512 mb"),
            (MANAGED_MEMORY_SIZE, "256 mb"),
            (TOTAL_PROCESS_MEMORY, "2 gb"),
        ]);
        assert_eq!(MemorySpec::derive(&o).map(|s| s.overhead), Ok(686_001_719));
        // With F set the network is the rest: 1280 mb − 1024 mb = 256 mb.
        let o = options(&[
            (TASK_HEAP_MEMORY, "512 mb"),
            (MANAGED_MEMORY_SIZE, "256 mb"),
            (TOTAL_FLINK_MEMORY, "1280 mb"),
        ]);
        assert_eq!(MemorySpec::derive(&o).map(|s| s.network), Ok(256 * MIB));
        // ... and F too small for the parts is inconsistent.
        let o = options(&[
            (TASK_HEAP_MEMORY, "512 mb"),
            (MANAGED_MEMORY_SIZE, "256 mb"),
            (TOTAL_FLINK_MEMORY, "1000 mb"),
        ]);
        assert!(matches!(MemorySpec::derive(&o), Err(SpecError::Exceeds { .. })));
        // Only one of the two fine-grained keys set falls through to the process size path.
        let o = options(&[(TASK_HEAP_MEMORY, "512 mb"), (TOTAL_PROCESS_MEMORY, "4 gb")]);
        assert_eq!(MemorySpec::derive(&o).map(|s| s.task_heap), Ok(512 * MIB));
    }

    #[test]
    fn inconsistent_ranges_mean_no_spec() {
        for entries in [
            &[
                (TOTAL_PROCESS_MEMORY, "4 gb"),
                (NETWORK_MEMORY_MIN, "2 gb"),
                (NETWORK_MEMORY_MAX, "1 gb"),
            ][..],
            &[(TOTAL_PROCESS_MEMORY, "4 gb"), (NETWORK_MEMORY_FRACTION, "1.0")],
            &[(TOTAL_PROCESS_MEMORY, "4 gb"), (JVM_OVERHEAD_FRACTION, "-0.1")],
            &[(TOTAL_PROCESS_MEMORY, "4 gb"), (MANAGED_MEMORY_FRACTION, "NaN")],
            &[(TOTAL_PROCESS_MEMORY, "4 gb"), (JVM_OVERHEAD_MIN, "2 gb")],
        ] {
            assert!(
                matches!(
                    MemorySpec::derive(&options(entries)),
                    Err(SpecError::InconsistentRange { .. })
                ),
                "{entries:?}"
            );
        }
        // The managed fraction is only checked when it is used.
        let o = options(&[
            (TASK_HEAP_MEMORY, "512 mb"),
            (MANAGED_MEMORY_SIZE, "256 mb"),
            (MANAGED_MEMORY_FRACTION, "2"),
        ]);
        assert!(MemorySpec::derive(&o).is_ok());
    }
}
