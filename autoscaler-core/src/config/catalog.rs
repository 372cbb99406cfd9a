//! The one table of the option keys: every `job.autoscaler.*` option with its type, default and
//! meaning, its legacy (`kubernetes.operator.job.autoscaler.*`) and deprecated keys, and the few
//! Flink options the autoscaler's options read.
//!
//! Everything that needs to know which keys exist reads this table: the options parser resolves an
//! option's keys with [`OptionSpec::keys`] (through [`option_keys`](super::option_keys)), the
//! unknown-key warning ([`unknown_keys`]) names the closest known key, `flink-autoscaler validate`
//! prints the defaults, `replay --set` refuses a key the table does not know, and the option table
//! of `docs/configuration.md` is [`markdown_table`].
//!
//! ```
//! use autoscaler_core::config::catalog;
//! let spec = catalog::find("kubernetes.operator.job.autoscaler.metrics.window").unwrap();
//! assert_eq!(spec.key, "job.autoscaler.metrics.window");
//! assert_eq!(spec.default, "15 min");
//! let typo = catalog::closest_key("job.autoscaler.utilisation.target");
//! assert_eq!(typo, Some("job.autoscaler.utilization.target".to_owned()));
//! ```

use super::syntax::Configuration;
use crate::tuning;

/// Prefix of every core option.
pub const AUTOSCALER_PREFIX: &str = "job.autoscaler.";
/// Prefix of the legacy fallback keys the Kubernetes operator used (`kubernetes.operator.job.autoscaler.`).
pub const LEGACY_PREFIX: &str = "kubernetes.operator.job.autoscaler.";

/// The type of an option's value, in Flink's value syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionType {
    /// `true` / `false` (case-insensitive).
    Boolean,
    /// A Java `int`.
    Integer,
    /// A Java `double`.
    Double,
    /// A Flink duration (`30 s`, `5 min`, `PT1M`).
    Duration,
    /// A Flink memory size (`512 mb`, `2g`).
    MemorySize,
    /// A `;`-separated list.
    List,
    /// One of the names (case-insensitive).
    Enum(&'static [&'static str]),
    /// Free text.
    String,
}

impl OptionType {
    /// The type's name in the docs.
    pub fn name(&self) -> String {
        match self {
            Self::Boolean => "boolean".to_owned(),
            Self::Integer => "integer".to_owned(),
            Self::Double => "double".to_owned(),
            Self::Duration => "duration".to_owned(),
            Self::MemorySize => "memory size".to_owned(),
            Self::List => "list".to_owned(),
            Self::Enum(names) => format!("enum {}", names.join("/")),
            Self::String => "string".to_owned(),
        }
    }
}

/// One option: its canonical key, type, default and meaning, and the other keys that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionSpec {
    /// The canonical key, e.g. `job.autoscaler.metrics.window` or `taskmanager.numberOfTaskSlots`.
    pub key: &'static str,
    /// The value's type.
    pub kind: OptionType,
    /// The default as the docs print it (`(none)` when unset means "not configured").
    pub default: &'static str,
    /// What the option does.
    pub description: &'static str,
    /// For a `job.autoscaler.*` option: the names after [`LEGACY_PREFIX`] of its fallback keys, in
    /// lookup order; empty means the one legacy key of the same name.
    pub legacy_names: &'static [&'static str],
    /// Deprecated keys, looked up last (full keys).
    pub deprecated: &'static [&'static str],
}

impl OptionSpec {
    /// The name after [`AUTOSCALER_PREFIX`], or `None` for a Flink option.
    pub fn name(&self) -> Option<&'static str> {
        self.key.strip_prefix(AUTOSCALER_PREFIX)
    }

    /// Whether `key` is one of [`OptionSpec::keys`] (without building them).
    pub fn is_set_by(&self, key: &str) -> bool {
        if self.key == key || self.deprecated.contains(&key) {
            return true;
        }
        match (self.name(), key.strip_prefix(LEGACY_PREFIX)) {
            (Some(name), Some(legacy)) if self.legacy_names.is_empty() => legacy == name,
            (Some(_), Some(legacy)) => self.legacy_names.contains(&legacy),
            _ => false,
        }
    }

    /// Every key that sets this option, in the reference's lookup order: the canonical key, the
    /// legacy fallback keys, then the deprecated keys (Flink `ConfigOption` puts fallback keys
    /// before deprecated ones).
    pub fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.key.to_owned()];
        if let Some(name) = self.name() {
            let legacy: &[&str] = if self.legacy_names.is_empty() {
                &[name]
            } else {
                self.legacy_names
            };
            keys.extend(legacy.iter().map(|n| format!("{LEGACY_PREFIX}{n}")));
        }
        keys.extend(self.deprecated.iter().map(|k| (*k).to_owned()));
        keys
    }
}

const fn opt(key: &'static str, kind: OptionType, default: &'static str, description: &'static str) -> OptionSpec {
    OptionSpec {
        key,
        kind,
        default,
        description,
        legacy_names: &[],
        deprecated: &[],
    }
}

use OptionType::{Boolean, Double, Duration, Integer, List, MemorySize};

/// Every option the autoscaler reads from a job's configuration: the `job.autoscaler.*` options
/// (reference `AutoScalerOptions`), then the Flink options they depend on.
pub const OPTIONS: &[OptionSpec] = &[
    opt(
        "job.autoscaler.enabled",
        Boolean,
        "false",
        "Master switch; when false every cycle clears the job's stored state.",
    ),
    opt(
        "job.autoscaler.scaling.enabled",
        Boolean,
        "true",
        "false: recommend only (collect, evaluate, report, never rescale).",
    ),
    opt(
        "job.autoscaler.metrics.window",
        Duration,
        "15 min",
        "Length of the sliding metric window.",
    ),
    opt(
        "job.autoscaler.stabilization.interval",
        Duration,
        "5 min",
        "Time after the job started running during which samples are not collected.",
    ),
    opt(
        "job.autoscaler.excluded.periods",
        List,
        "[]",
        "Quartz cron expressions and/or daily `HH:mm[:ss]-HH:mm[:ss]` windows in which no scaling is executed.",
    ),
    OptionSpec {
        legacy_names: &["utilization.target", "target.utilization"],
        deprecated: &["job.autoscaler.target.utilization"],
        ..opt(
            "job.autoscaler.utilization.target",
            Double,
            "0.7",
            "Target busy ratio the vertices are sized for.",
        )
    },
    opt(
        "job.autoscaler.target.utilization.boundary",
        Double,
        "0.3",
        "Deprecated: half-width of the utilization band when `utilization.max`/`utilization.min` are unset.",
    ),
    opt(
        "job.autoscaler.utilization.max",
        Double,
        "(target + boundary)",
        "Upper utilization bound.",
    ),
    opt(
        "job.autoscaler.utilization.min",
        Double,
        "(target - boundary)",
        "Lower utilization bound.",
    ),
    OptionSpec {
        legacy_names: &["scale-up.grace-period", "scale-down.interval"],
        deprecated: &["job.autoscaler.scale-up.grace-period"],
        ..opt(
            "job.autoscaler.scale-down.interval",
            Duration,
            "1 h",
            "Scale-downs are delayed over this window; 0 disables the delay.",
        )
    },
    opt(
        "job.autoscaler.vertex.min-parallelism",
        Integer,
        "1",
        "Lower parallelism limit of a vertex.",
    ),
    opt(
        "job.autoscaler.vertex.max-parallelism",
        Integer,
        "200",
        "Upper parallelism limit of a vertex.",
    ),
    opt(
        "job.autoscaler.scale-down.max-factor",
        Double,
        "0.6",
        "Largest scale-down as a factor of the current parallelism.",
    ),
    opt(
        "job.autoscaler.scale-up.max-factor",
        Double,
        "100000.0",
        "Largest scale-up as a factor of the current parallelism.",
    ),
    opt(
        "job.autoscaler.catch-up.duration",
        Duration,
        "30 min",
        "Time to catch up on the backlog after a scale; 0 disables backlog-based capacity.",
    ),
    opt(
        "job.autoscaler.restart.time",
        Duration,
        "5 min",
        "Expected restart time, when no tracked value is used.",
    ),
    opt(
        "job.autoscaler.restart.time-tracking.enabled",
        Boolean,
        "false",
        "Use the longest observed restart time.",
    ),
    opt(
        "job.autoscaler.restart.time-tracking.limit",
        Duration,
        "15 min",
        "Cap of the tracked restart time.",
    ),
    opt(
        "job.autoscaler.backlog-processing.lag-threshold",
        Duration,
        "5 min",
        "Lag above which a source counts as processing a backlog.",
    ),
    opt(
        "job.autoscaler.observed-true-processing-rate.lag-threshold",
        Duration,
        "30 s",
        "Lag from which the observed true processing rate is measured.",
    ),
    opt(
        "job.autoscaler.observed-true-processing-rate.switch-threshold",
        Double,
        "0.15",
        "Relative difference from which the observed true processing rate replaces the busy-time one.",
    ),
    opt(
        "job.autoscaler.observed-true-processing-rate.min-observations",
        Integer,
        "2",
        "Observations needed before the observed true processing rate is used.",
    ),
    opt(
        "job.autoscaler.scaling.effectiveness.detection.enabled",
        Boolean,
        "false",
        "Block a scale-up after an ineffective one.",
    ),
    opt(
        "job.autoscaler.scaling.effectiveness.threshold",
        Double,
        "0.1",
        "Ratio of actual to expected increase below which a scale-up is ineffective.",
    ),
    opt(
        "job.autoscaler.memory.gc-pressure.threshold",
        Double,
        "1.0",
        "GC time ratio above which scaling is blocked.",
    ),
    opt(
        "job.autoscaler.memory.heap-usage.threshold",
        Double,
        "1.0",
        "Average heap usage ratio above which scaling is blocked.",
    ),
    opt(
        "job.autoscaler.memory.tuning.enabled",
        Boolean,
        "false",
        "Apply the TaskManager memory tuning (else computed and reported only).",
    ),
    opt(
        "job.autoscaler.memory.tuning.scale-down-compensation.enabled",
        Boolean,
        "true",
        "Give the heap more memory when the number of TaskManagers shrinks.",
    ),
    opt(
        "job.autoscaler.memory.tuning.overhead",
        Double,
        "0.2",
        "Headroom added to the measured heap and metaspace.",
    ),
    opt(
        "job.autoscaler.memory.tuning.maximize-managed-memory",
        Boolean,
        "false",
        "Give all unbudgeted memory to managed memory when it is in use.",
    ),
    opt(
        "job.autoscaler.history.max.count",
        Integer,
        "3",
        "Scaling summaries kept per vertex.",
    ),
    opt(
        "job.autoscaler.history.max.age",
        Duration,
        "1 d",
        "Maximum age of the scaling summaries kept.",
    ),
    opt(
        "job.autoscaler.metrics.busy-time.aggregator",
        OptionType::Enum(&["AVG", "MAX", "MIN"]),
        "MAX",
        "How the subtasks' busy times are aggregated.",
    ),
    opt(
        "job.autoscaler.vertex.exclude.ids",
        List,
        "[]",
        "Ids of vertices never scaled.",
    ),
    opt(
        "job.autoscaler.scaling.event.interval",
        Duration,
        "30 min",
        "Deduplication interval of repeated events.",
    ),
    opt(
        "job.autoscaler.flink.rest-client.timeout",
        Duration,
        "10 s",
        "Timeout of the Flink REST calls.",
    ),
    opt(
        "job.autoscaler.quota.memory",
        MemorySize,
        "(none)",
        "Memory quota of the job's TaskManagers; a scale-up above it is blocked.",
    ),
    opt(
        "job.autoscaler.quota.cpu",
        Double,
        "(none)",
        "CPU quota of the job's TaskManagers; a scale-up above it is blocked.",
    ),
    opt(
        "job.autoscaler.scaling.key-group.partitions.adjust.mode",
        OptionType::Enum(&["EVENLY_SPREAD", "MAXIMIZE_UTILISATION"]),
        "(none)",
        "Deprecated legacy alignment, used only when `scaling.parallelism-alignment.mode` is unset.",
    ),
    opt(
        "job.autoscaler.scaling.parallelism-alignment.mode",
        OptionType::String,
        "BALANCED",
        "BALANCED, EVENLY_SPREAD, OFF or the name of a custom alignment mode.",
    ),
    opt(
        "job.autoscaler.observed-scalability.enabled",
        Boolean,
        "false",
        "Divide the scale factor by a fitted scalability coefficient.",
    ),
    opt(
        "job.autoscaler.observed-scalability.min-observations",
        Integer,
        "3",
        "Scaling history entries needed to fit the coefficient.",
    ),
    opt(
        "job.autoscaler.observed-scalability.coefficient-min",
        Double,
        "0.5",
        "Lower bound of the fitted scalability coefficient.",
    ),
    opt(
        "job.autoscaler.metrics.custom-evaluators",
        List,
        "[]",
        "Custom evaluator instances (only the first is used).",
    ),
    opt(
        "job.autoscaler.scaling.custom-executors",
        List,
        "[]",
        "Custom scaling executor instances, run in priority order.",
    ),
    opt(
        "job.autoscaler.compat.reference-1-16",
        Boolean,
        "false",
        "true: the reference 1.16 decisions where this port differs (unmeasured vertices, the partition cap in alignment, the observed-scalability guard).",
    ),
    opt(
        "taskmanager.numberOfTaskSlots",
        Integer,
        "1",
        "Flink: task slots per TaskManager.",
    ),
    opt(
        tuning::TOTAL_PROCESS_MEMORY,
        MemorySize,
        "(none)",
        "Flink: total process memory of a TaskManager.",
    ),
    opt(
        tuning::TOTAL_FLINK_MEMORY,
        MemorySize,
        "(none)",
        "Flink: total Flink memory of a TaskManager.",
    ),
    opt(
        tuning::TASK_HEAP_MEMORY,
        MemorySize,
        "(none)",
        "Flink: task heap memory.",
    ),
    opt(
        tuning::MANAGED_MEMORY_SIZE,
        MemorySize,
        "(none)",
        "Flink: managed memory size.",
    ),
    opt(
        tuning::MANAGED_MEMORY_FRACTION,
        Double,
        "0.4",
        "Flink: managed memory fraction.",
    ),
    opt(
        tuning::FRAMEWORK_HEAP_MEMORY,
        MemorySize,
        "128 mb",
        "Flink: framework heap memory.",
    ),
    opt(
        tuning::FRAMEWORK_OFF_HEAP_MEMORY,
        MemorySize,
        "128 mb",
        "Flink: framework off-heap memory.",
    ),
    opt(
        tuning::TASK_OFF_HEAP_MEMORY,
        MemorySize,
        "0 bytes",
        "Flink: task off-heap memory.",
    ),
    opt(
        tuning::NETWORK_MEMORY_MIN,
        MemorySize,
        "64 mb",
        "Flink: network memory minimum.",
    ),
    opt(
        tuning::NETWORK_MEMORY_MAX,
        MemorySize,
        "infinite",
        "Flink: network memory maximum.",
    ),
    opt(
        tuning::NETWORK_MEMORY_FRACTION,
        Double,
        "0.1",
        "Flink: network memory fraction.",
    ),
    opt(tuning::JVM_METASPACE, MemorySize, "256 mb", "Flink: JVM metaspace."),
    opt(
        tuning::JVM_OVERHEAD_MIN,
        MemorySize,
        "192 mb",
        "Flink: JVM overhead minimum.",
    ),
    opt(
        tuning::JVM_OVERHEAD_MAX,
        MemorySize,
        "1 gb",
        "Flink: JVM overhead maximum.",
    ),
    opt(
        tuning::JVM_OVERHEAD_FRACTION,
        Double,
        "0.1",
        "Flink: JVM overhead fraction.",
    ),
    opt(
        tuning::NETWORK_BUFFERS_PER_CHANNEL,
        Integer,
        "2",
        "Flink: exclusive network buffers per channel.",
    ),
    opt(
        tuning::NETWORK_FLOATING_BUFFERS_PER_GATE,
        Integer,
        "8",
        "Flink: floating network buffers per gate.",
    ),
    opt(
        tuning::MEMORY_SEGMENT_SIZE,
        MemorySize,
        "32 kb",
        "Flink: memory segment size.",
    ),
];

/// The namespaces of the plugins' own parameters, `<namespace><instance>.<param>` after
/// [`AUTOSCALER_PREFIX`] (or [`LEGACY_PREFIX`]): any key under them is known.
pub const PLUGIN_NAMESPACES: &[&str] = &[
    "metrics.custom-evaluator.",
    "scaling.custom-executor.",
    "scaling.parallelism-alignment.mode.",
];

/// The option `job.autoscaler.<name>`.
pub fn by_name(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|spec| spec.name() == Some(name))
}

/// The option that `key` sets: its canonical key, a legacy fallback key or a deprecated key.
pub fn find(key: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|spec| spec.is_set_by(key))
}

/// Whether `key` is one of the autoscaler's keys (`job.autoscaler.*` or its legacy form), which
/// the unknown-key check looks at.
pub fn is_autoscaler_key(key: &str) -> bool {
    key.starts_with(AUTOSCALER_PREFIX) || key.starts_with(LEGACY_PREFIX)
}

/// Whether `key` is known: an option's key, or a plugin parameter.
pub fn is_known(key: &str) -> bool {
    if find(key).is_some() {
        return true;
    }
    let name = key
        .strip_prefix(AUTOSCALER_PREFIX)
        .or_else(|| key.strip_prefix(LEGACY_PREFIX));
    name.is_some_and(|name| {
        PLUGIN_NAMESPACES
            .iter()
            .any(|ns| name.strip_prefix(ns).is_some_and(|rest| rest.contains('.')))
    })
}

/// The known key closest to `key` by edit distance, written with `key`'s prefix (canonical or
/// legacy); `None` when nothing is close (more than a third of the name differs).
pub fn closest_key(key: &str) -> Option<String> {
    let (prefix, name) = match key.strip_prefix(LEGACY_PREFIX) {
        Some(name) => (LEGACY_PREFIX, name),
        None => (AUTOSCALER_PREFIX, key.strip_prefix(AUTOSCALER_PREFIX).unwrap_or(key)),
    };
    closest_among(name, OPTIONS.iter().filter_map(OptionSpec::name)).map(|best| format!("{prefix}{best}"))
}

/// The candidate closest to `text` by edit distance, `None` when more than a third of `text`
/// differs from every candidate (the one rule for "did you mean", for other key families too).
///
/// ```
/// use autoscaler_core::config::catalog::closest_among;
/// let keys = ["autoscaler.standalone.fetcher.flink-cluster.host", "autoscaler.standalone.jdbc.url"];
/// assert_eq!(closest_among("autoscaler.standalone.fetcher.flink-cluster.hots", keys), Some(keys[0]));
/// assert_eq!(closest_among("something else", keys), None);
/// ```
pub fn closest_among<'a>(text: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let (distance, best) = candidates
        .into_iter()
        .map(|candidate| (edit_distance(text, candidate), candidate))
        .min_by_key(|(distance, _)| *distance)?;
    (distance <= text.chars().count().max(3) / 3).then_some(best)
}

/// The Levenshtein distance of two strings, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// A `job.autoscaler.*` (or legacy) key no option has, with the closest known key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// The key as written.
    pub key: String,
    /// The closest known key, if one is close.
    pub closest: Option<String>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown key {}, ignored", self.key)?;
        match &self.closest {
            Some(closest) => write!(f, " (did you mean {closest}?)"),
            None => Ok(()),
        }
    }
}

/// Every key of `conf` under `job.autoscaler.` or `kubernetes.operator.job.autoscaler.` that no
/// option or plugin namespace knows, in key order.
///
/// ```
/// use autoscaler_core::config::{Configuration, catalog};
/// let conf = Configuration::from_iter([
///     ("job.autoscaler.utilisation.target", "0.5"),
///     ("job.autoscaler.scaling.custom-executor.cap.max", "8"),
/// ]);
/// let unknown = catalog::unknown_keys(&conf);
/// assert_eq!(unknown.len(), 1);
/// assert_eq!(
///     unknown[0].to_string(),
///     "unknown key job.autoscaler.utilisation.target, ignored (did you mean job.autoscaler.utilization.target?)"
/// );
/// ```
pub fn unknown_keys(conf: &Configuration) -> Vec<UnknownKey> {
    conf.iter()
        .map(|(key, _)| key)
        .filter(|key| is_autoscaler_key(key) && !is_known(key))
        .map(|key| UnknownKey {
            key: key.to_owned(),
            closest: closest_key(key),
        })
        .collect()
}

/// The option table of the docs (`docs/configuration.md`), one row per option.
pub fn markdown_table() -> String {
    let mut out = String::from("| key | type | default | meaning | other keys |\n|---|---|---|---|---|\n");
    for spec in OPTIONS {
        let others: Vec<String> = spec.keys().into_iter().skip(1).map(|k| format!("`{k}`")).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            spec.key,
            spec.kind.name(),
            spec.default,
            spec.description,
            others.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_list_the_table() {
        const BEGIN: &str = "<!-- options:begin -->\n";
        const END: &str = "<!-- options:end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("{path} has no {BEGIN:?} ... {END:?} section");
        };
        let listed = &doc[begin + BEGIN.len()..end];
        let table = markdown_table();
        if listed != table && std::env::var_os("BLESS_DOCS").is_some() {
            let updated = format!("{}{table}{}", &doc[..begin + BEGIN.len()], &doc[end..]);
            std::fs::write(path, updated).unwrap_or_else(|e| panic!("{path}: {e}"));
            return;
        }
        assert_eq!(
            listed, table,
            "{path} is out of date: run BLESS_DOCS=1 cargo test -p autoscaler-core --lib catalog"
        );
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("utilisation.target", "utilization.target"), 1);
        assert_eq!(edit_distance("metrics.windw", "metrics.window"), 1);
    }

    #[test]
    fn every_key_is_unique_and_lookups_find_every_alias() {
        let mut seen = std::collections::HashSet::new();
        for spec in OPTIONS {
            for key in spec.keys() {
                assert!(seen.insert(key.clone()), "{key} is listed twice");
                assert_eq!(find(&key).map(|s| s.key), Some(spec.key));
                assert!(spec.is_set_by(&key));
                assert!(is_known(&key));
            }
        }
        assert_eq!(
            find("kubernetes.operator.job.autoscaler.scale-up.grace-period").map(|s| s.key),
            Some("job.autoscaler.scale-down.interval")
        );
    }

    /// Options another part of the port reads before the options parser does (none now).
    const NOT_READ_BY_THE_PARSER: &[&str] = &[];

    #[test]
    fn every_option_of_the_table_is_read_by_the_options_parser() {
        use crate::config::AutoScalerOptions;
        let defaults = AutoScalerOptions::from_configuration(&Configuration::new());
        for spec in OPTIONS.iter().filter(|s| !NOT_READ_BY_THE_PARSER.contains(&s.key)) {
            for key in spec.keys() {
                // A value no option accepts either fails the parser or changes the options.
                let probe = Configuration::from_iter([(key.as_str(), "\u{1}")]);
                let read = match AutoScalerOptions::from_configuration(&probe) {
                    Err(_) => true,
                    Ok(options) => defaults.as_ref().map_or(true, |d| *d != options),
                };
                assert!(read, "{key} is in the table but the parser does not read it");
            }
        }
    }

    #[test]
    fn the_closest_key_keeps_the_prefix_it_was_written_with() {
        assert_eq!(
            closest_key("kubernetes.operator.job.autoscaler.metrics.windw").as_deref(),
            Some("kubernetes.operator.job.autoscaler.metrics.window")
        );
        assert_eq!(closest_key("job.autoscaler.completely-different-thing"), None);
    }

    #[test]
    fn plugin_parameters_are_known_but_not_the_bare_namespace() {
        assert!(is_known("job.autoscaler.metrics.custom-evaluator.e.class"));
        assert!(is_known(
            "kubernetes.operator.job.autoscaler.scaling.custom-executor.cap.max"
        ));
        assert!(is_known(
            "job.autoscaler.scaling.parallelism-alignment.mode.fives.multiple"
        ));
        assert!(!is_known("job.autoscaler.scaling.custom-executor.nothing"));
        assert!(!is_known("job.autoscaler.nope"));
        // Keys outside the autoscaler's prefixes are never reported.
        let conf = Configuration::from_iter([("taskmanager.numberOfTaskSlotz", "2"), ("job.autoscaler.nope", "1")]);
        let keys: Vec<String> = unknown_keys(&conf).into_iter().map(|u| u.key).collect();
        assert_eq!(keys, ["job.autoscaler.nope"]);
    }
}
