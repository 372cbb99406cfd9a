//! `flink-autoscaler replay --recording FILE [--set key=value ...] [--from T] [--to T]`: the pure
//! cycle ([`autoscaler_core::cycle`]) over a recording written by `run --record`
//! (`docs/recording.md`), one cycle per recorded collection, the job's state carried from cycle to
//! cycle exactly as the live loop carries it (metric window, scaling history and tracking, delayed
//! scale-downs, restarts).
//!
//! Each cycle runs, with the plugins `run` offers ([`crate::stock_plugins`]), on the collection as
//! it was recorded, the topology then in force (so after a
//! rescale the replay follows the recorded job's new parallelism) and the recorded configuration,
//! and makes the decision record the live cycle made ([`DecisionRecord`]). Replayed with the
//! recorded configuration, the records are those of the recording: [`RecordingReplay::reproduced`]
//! counts them.
//!
//! With `--set`, a second run (the *what-if*) goes side by side on the same collections with the
//! changed configuration, and every cycle whose decisions differ is a [`CycleDivergence`]: the
//! job's two outcomes and, per vertex, the two targets and reason codes. After the first divergent
//! rescale the recorded metrics describe the recorded job, not the what-if job (which would run at
//! another parallelism): [`RecordingReplay::metrics_stale_from`] says from which cycle on.
//!
//! `--from T` and `--to T` bound the cycles reported. The cycles before `T` still run, both with
//! the recorded configuration, so the state at `T` is the recorded job's and the change takes
//! effect at `T`.

use crate::recording::{Entry, RecordedMetrics, RecordingError, RecordingReader, Snapshot};
use autoscaler_core::config::catalog;
use autoscaler_core::cycle::{self, CycleInput, CycleMetrics, JobState};
use autoscaler_core::record::{DecisionRecord, JobOutcome, UtilizationBound, VertexReason};
use autoscaler_core::{
    CollectedJobMetrics, MetricsSnapshot, config::AutoScalerOptions, config::Configuration, config::OptionsError,
};
use autoscaler_metrics::JobTopology;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The format tag of [`RecordingReplay`]'s JSON (`replay --recording FILE --json`).
pub const RECORDING_REPLAY_FORMAT: &str = "flink-autoscaler-recording-replay/1";

/// Why a recording cannot be replayed. Every message is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingReplayError {
    /// The recording cannot be read, or a line of it is not the format's.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// A `--set` argument that is not `key=value`, names a key the cycle does not read, or whose
    /// value does not parse.
    #[error("invalid --set {arg:?}: {message}")]
    Set {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        message: String,
    },
    /// A `--from` / `--to` that is not an RFC 3339 time, or an empty range.
    #[error("invalid --{flag} {value:?}: {message}")]
    Time {
        /// `from` or `to`.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// A recorded configuration whose options do not parse (the live cycle could not have run on it).
    #[error("invalid recording: line {line}: config: {message}")]
    Config {
        /// The line of the snapshot the configuration was to be used for.
        line: usize,
        /// The option error.
        message: String,
    },
    /// A snapshot before the configuration or topology it needs.
    #[error("invalid recording: line {line}: a snapshot before any {missing} line")]
    MissingContext {
        /// The snapshot's line.
        line: usize,
        /// `config` or `topology`.
        missing: &'static str,
    },
}

/// What to change and which cycles to report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIf {
    /// The configuration changes (`--set key=value`), applied over the recorded configuration.
    pub set: Configuration,
    /// Report the cycles from this instant on (`--from`).
    pub from: Option<DateTime<Utc>>,
    /// Report the cycles up to this instant (`--to`).
    pub to: Option<DateTime<Utc>>,
}

fn time_arg(flag: &'static str, value: &str) -> Result<DateTime<Utc>, RecordingReplayError> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| RecordingReplayError::Time {
            flag,
            value: value.to_owned(),
            message: format!("expected an RFC 3339 time such as 2024-05-01T10:00:00Z ({e})"),
        })
}

impl WhatIf {
    /// Parses `--set` arguments (`key=value`, the key one the cycle reads) and the `--from` /
    /// `--to` times (RFC 3339).
    ///
    /// # Errors
    /// [`RecordingReplayError::Set`] or [`RecordingReplayError::Time`], naming the argument.
    pub fn parse(set: &[String], from: Option<&str>, to: Option<&str>) -> Result<Self, RecordingReplayError> {
        let mut changes = Configuration::new();
        for arg in set {
            let bad = |message: &str| RecordingReplayError::Set {
                arg: arg.clone(),
                message: message.to_owned(),
            };
            let (key, value) = arg.split_once('=').ok_or_else(|| bad("expected key=value"))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(bad("the key is empty"));
            }
            if !catalog::is_known(key) {
                let hint = catalog::closest_key(key)
                    .filter(|_| catalog::is_autoscaler_key(key))
                    .map(|closest| format!(" (did you mean {closest}?)"))
                    .unwrap_or_default();
                return Err(bad(&format!(
                    "unknown key: no option of the autoscaler's cycle has this name{hint}"
                )));
            }
            changes.set(key, value.trim());
        }
        let from = from.map(|v| time_arg("from", v)).transpose()?;
        let to = to.map(|v| time_arg("to", v)).transpose()?;
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            return Err(RecordingReplayError::Time {
                flag: "to",
                value: t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                message: format!("before --from {}", f.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            });
        }
        Ok(Self { set: changes, from, to })
    }

    /// Whether there is a change to compare against.
    pub fn has_changes(&self) -> bool {
        !self.set.is_empty()
    }
}

/// The job's outcome in one run of a cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeSide {
    /// The outcome code.
    pub outcome: JobOutcome,
    /// Its reason.
    pub reason: Option<String>,
}

/// One vertex in one run of a cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexSide {
    /// Parallelism during the cycle.
    pub current: u32,
    /// Parallelism after it.
    pub target: u32,
    /// What the vertex scaler recommended.
    pub recommended: u32,
    /// The reason code.
    pub reason: VertexReason,
    /// The reason in words.
    pub detail: String,
}

/// A vertex the two runs decided differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexDivergence {
    /// The vertex id.
    pub vertex: String,
    /// With the recorded configuration.
    pub recorded_config: VertexSide,
    /// With the changed configuration.
    pub what_if: VertexSide,
}

/// A cycle the two runs decided differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleDivergence {
    /// The job with the recorded configuration.
    pub recorded_config: OutcomeSide,
    /// The job with the changed configuration.
    pub what_if: OutcomeSide,
    /// The vertices whose target or reason code differ.
    pub vertices: Vec<VertexDivergence>,
    /// Whether one of the two runs rescaled (the recorded metrics stop describing the what-if job).
    pub rescale: bool,
}

/// One replayed cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayedCycle {
    /// 1-based among the reported cycles.
    pub index: usize,
    /// The collection's instant.
    pub at: DateTime<Utc>,
    /// The snapshot's line in the recording.
    pub line: usize,
    /// The decision with the recorded configuration.
    pub record: DecisionRecord,
    /// Whether `record` is the recorded decision; `None` when the recording holds none for the
    /// cycle (a live cycle that failed records none).
    pub matches_recording: Option<bool>,
    /// The recorded decision's summary when it differs from `record`.
    pub recorded_summary: Option<String>,
    /// The decision with the changed configuration (only with `--set`).
    pub what_if: Option<DecisionRecord>,
    /// How the two decisions differ (`None` when they agree or without `--set`).
    pub divergence: Option<CycleDivergence>,
}

/// Parallelism from an instant on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParallelismStep {
    /// Since when.
    pub from: DateTime<Utc>,
    /// The parallelism.
    pub parallelism: u32,
}

/// Time a vertex spent against the utilization band (each cycle counts until the next one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BandTime {
    /// Seconds with the utilization known.
    pub known_s: i64,
    /// Seconds above `utilization.max`.
    pub above_max_s: i64,
    /// Seconds below `utilization.min`.
    pub below_min_s: i64,
}

impl BandTime {
    /// Seconds outside the band.
    pub fn outside_s(&self) -> i64 {
        self.above_max_s.saturating_add(self.below_min_s)
    }
}

/// One run over the reported cycles.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSummary {
    /// Cycles reported.
    pub cycles: usize,
    /// Cycles that reached a decision.
    pub decided: usize,
    /// When the run rescaled.
    pub rescales: Vec<DateTime<Utc>>,
    /// Per vertex, the parallelism the run had its job at over time: the parallelism of the first
    /// cycle, then each rescale's target.
    pub parallelism: BTreeMap<String, Vec<ParallelismStep>>,
    /// Per vertex, the time outside the utilization band.
    pub outside_band: BTreeMap<String, BandTime>,
}

/// The result of [`replay_recording`] (JSON: [`RECORDING_REPLAY_FORMAT`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordingReplay {
    /// [`RECORDING_REPLAY_FORMAT`].
    pub format: &'static str,
    /// The recording's job key.
    pub job: String,
    /// The configuration changes (`--set`).
    pub set: Configuration,
    /// `--from`.
    pub from: Option<DateTime<Utc>>,
    /// `--to`.
    pub to: Option<DateTime<Utc>>,
    /// The reported cycles.
    pub cycles: Vec<ReplayedCycle>,
    /// Recorded decisions in range without a collection (the metrics were not ready): nothing to
    /// replay for them.
    pub uncollected: usize,
    /// Reported cycles that hold a recorded decision.
    pub recorded: usize,
    /// Of those, the ones the replay with the recorded configuration reproduced exactly.
    pub reproduced: usize,
    /// The run with the recorded configuration.
    pub summary: RunSummary,
    /// The run with the changed configuration (only with `--set`).
    pub what_if_summary: Option<RunSummary>,
    /// Cycles whose decisions diverge.
    pub divergent_cycles: usize,
    /// The first of them (its `index`).
    pub first_divergence: Option<usize>,
    /// The first divergent rescale (its `index`): from this cycle on the recorded metrics no longer
    /// describe the what-if job.
    pub metrics_stale_from: Option<usize>,
    /// With `--set`: whether the changed configuration's options differ from the recorded ones in
    /// some reported cycle (not when every change repeats a recorded value, or is shadowed by
    /// another key of the same option that the recording sets).
    pub changes_take_effect: Option<bool>,
}

fn snapshot_metrics(metrics: &RecordedMetrics) -> MetricsSnapshot {
    match metrics {
        RecordedMetrics::Flink(raw) => MetricsSnapshot::Flink(raw.clone()),
        RecordedMetrics::Scaling(m) => MetricsSnapshot::Scaling(m.clone()),
    }
}

/// One cycle on `snapshot`, as `JobAutoScalerImpl::run_cycle` runs it after a collection
/// ([`cycle::run`]), with the record it hands to the event handler.
fn run_cycle(
    state: &mut JobState,
    (config, options): (&Configuration, &AutoScalerOptions),
    topology: &JobTopology,
    snapshot: &Snapshot,
    job: &str,
) -> DecisionRecord {
    let at = snapshot.at;
    let plugins = crate::stock_plugins().resolve(config, options);
    let input = CycleInput {
        now: at,
        metrics: CycleMetrics::Collected {
            collected: CollectedJobMetrics::new(
                topology.clone(),
                snapshot.job_running_since,
                snapshot_metrics(&snapshot.metrics),
            ),
            collected_at: at,
        },
        options,
        task_manager_cpu: snapshot.task_manager_cpu,
        task_manager_memory: snapshot.task_manager_memory,
        records: true,
        explain: false,
        job: Some(job),
    };
    let result = cycle::run(state, input, &plugins);
    // Asked for, a record is always built; the fallback only keeps this total.
    result
        .record
        .unwrap_or_else(|| cycle::not_ready_record(at, Some(job), options, "no record"))
}

/// Whether two records say the same, NaN included (compared as their JSON).
fn same_record(a: &DecisionRecord, b: &DecisionRecord) -> bool {
    matches!((serde_json::to_value(a), serde_json::to_value(b)), (Ok(x), Ok(y)) if x == y)
}

fn vertex_side(v: &autoscaler_core::record::VertexRecord) -> VertexSide {
    VertexSide {
        current: v.current_parallelism,
        target: v.target_parallelism,
        recommended: v.recommended_parallelism,
        reason: v.reason,
        detail: v.detail.clone(),
    }
}

/// Where two records of the same cycle decide differently: the job's outcome or reason, a
/// vertex's target or reason code.
fn divergence(base: &DecisionRecord, what_if: &DecisionRecord) -> Option<CycleDivergence> {
    let vertices: Vec<VertexDivergence> = base
        .vertices
        .iter()
        .filter_map(|(id, b)| {
            let w = what_if.vertices.get(id)?;
            (b.target_parallelism != w.target_parallelism || b.reason != w.reason).then(|| VertexDivergence {
                vertex: id.clone(),
                recorded_config: vertex_side(b),
                what_if: vertex_side(w),
            })
        })
        .collect();
    let same_outcome = base.outcome == what_if.outcome && base.reason == what_if.reason;
    if same_outcome && vertices.is_empty() {
        return None;
    }
    let rescale = (base.outcome == JobOutcome::Scale || what_if.outcome == JobOutcome::Scale)
        && vertices.iter().any(|v| v.recorded_config.target != v.what_if.target);
    Some(CycleDivergence {
        recorded_config: OutcomeSide {
            outcome: base.outcome,
            reason: base.reason.clone(),
        },
        what_if: OutcomeSide {
            outcome: what_if.outcome,
            reason: what_if.reason.clone(),
        },
        vertices,
        rescale,
    })
}

fn summarize<'a>(cycles: impl Iterator<Item = (DateTime<Utc>, &'a DecisionRecord)> + Clone) -> RunSummary {
    let mut summary = RunSummary::default();
    let next_at = cycles
        .clone()
        .skip(1)
        .map(|(at, _)| Some(at))
        .chain(std::iter::once(None));
    for ((at, record), next) in cycles.zip(next_at) {
        summary.cycles += 1;
        if matches!(
            record.outcome,
            JobOutcome::Scale | JobOutcome::NoChange | JobOutcome::Blocked
        ) {
            summary.decided += 1;
        }
        if record.outcome == JobOutcome::Scale {
            summary.rescales.push(at);
        }
        for (id, v) in &record.vertices {
            let steps = summary.parallelism.entry(id.clone()).or_default();
            if steps.is_empty() {
                steps.push(ParallelismStep {
                    from: at,
                    parallelism: v.current_parallelism,
                });
            }
            if record.outcome == JobOutcome::Scale
                && steps.last().is_some_and(|s| s.parallelism != v.target_parallelism)
            {
                steps.push(ParallelismStep {
                    from: at,
                    parallelism: v.target_parallelism,
                });
            }
            let band = summary.outside_band.entry(id.clone()).or_default();
            let Some(next) = next else { continue };
            let dt = (next - at).num_seconds().max(0);
            match v.utilization {
                UtilizationBound::Unknown => {}
                known => {
                    band.known_s = band.known_s.saturating_add(dt);
                    if known == UtilizationBound::AboveMax {
                        band.above_max_s = band.above_max_s.saturating_add(dt);
                    } else if known == UtilizationBound::BelowMin {
                        band.below_min_s = band.below_min_s.saturating_add(dt);
                    }
                }
            }
        }
    }
    summary
}

/// One run of the cycle: its state and the configuration it applies.
struct Run {
    state: JobState,
    /// The options of the configuration last used, to parse each configuration once.
    options: Option<(Configuration, AutoScalerOptions)>,
}

impl Run {
    fn new() -> Self {
        Self {
            state: JobState::default(),
            options: None,
        }
    }

    fn options(&mut self, config: &Configuration) -> Result<AutoScalerOptions, OptionsError> {
        if let Some((parsed, options)) = &self.options
            && parsed == config
        {
            return Ok(options.clone());
        }
        let options = AutoScalerOptions::from_configuration(config)?;
        self.options = Some((config.clone(), options.clone()));
        Ok(options)
    }
}

fn set_error(what_if: &WhatIf, e: &OptionsError) -> RecordingReplayError {
    let key = match e {
        OptionsError::InvalidValue { key, .. } => Some(key.as_str()),
        _ => None,
    };
    let arg = what_if.set.iter().find(|(k, _)| Some(*k) == key).map_or_else(
        || {
            what_if
                .set
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
        |(k, v)| format!("{k}={v}"),
    );
    RecordingReplayError::Set {
        arg,
        message: e.to_string(),
    }
}

/// Replays the recording read by `reader`; see the [module docs](self).
///
/// # Errors
/// A line that is not the format's, a snapshot before its configuration or topology, a recorded
/// configuration or a change whose options do not parse.
pub fn replay_recording<R: std::io::BufRead>(
    mut reader: RecordingReader<R>,
    what_if: &WhatIf,
) -> Result<RecordingReplay, RecordingReplayError> {
    let job = reader.job().to_owned();
    let compare = what_if.has_changes();
    let mut base = Run::new();
    let mut changed = Run::new();
    let mut config: Option<Configuration> = None;
    let mut topology: Option<JobTopology> = None;
    let mut cycles: Vec<ReplayedCycle> = Vec::new();
    // The last cycle run, and whether it is reported: a decision line belongs to it when its
    // instant is the cycle's.
    let mut last: Option<(DateTime<Utc>, bool)> = None;
    let mut uncollected = 0;
    let mut changes_take_effect = false;
    let in_range = |at: DateTime<Utc>| what_if.from.is_none_or(|f| at >= f);
    while let Some((line, entry)) = reader.next_entry()? {
        match entry {
            Entry::Config { config: c, .. } => config = Some(c),
            Entry::Topology { topology: t, .. } => topology = Some(*t),
            Entry::Snapshot(snapshot) => {
                if what_if.to.is_some_and(|t| snapshot.at > t) {
                    break;
                }
                let recorded_config = config.as_ref().ok_or(RecordingReplayError::MissingContext {
                    line,
                    missing: "config",
                })?;
                let topology = topology.as_ref().ok_or(RecordingReplayError::MissingContext {
                    line,
                    missing: "topology",
                })?;
                let reported = in_range(snapshot.at);
                let options = base
                    .options(recorded_config)
                    .map_err(|e| RecordingReplayError::Config {
                        line,
                        message: e.to_string(),
                    })?;
                let record = run_cycle(&mut base.state, (recorded_config, &options), topology, &snapshot, &job);
                let what_if_record = if compare {
                    // Before the range, both runs apply the recorded configuration.
                    let effective = if reported {
                        recorded_config.overlay(&what_if.set)
                    } else {
                        recorded_config.clone()
                    };
                    let changed_options = changed.options(&effective).map_err(|e| set_error(what_if, &e))?;
                    changes_take_effect |= reported && changed_options != options;
                    let options = changed_options;
                    Some(run_cycle(
                        &mut changed.state,
                        (&effective, &options),
                        topology,
                        &snapshot,
                        &job,
                    ))
                } else {
                    None
                };
                last = Some((snapshot.at, reported));
                if reported {
                    let divergence = what_if_record.as_ref().and_then(|w| divergence(&record, w));
                    cycles.push(ReplayedCycle {
                        index: cycles.len() + 1,
                        at: snapshot.at,
                        line,
                        matches_recording: None,
                        recorded_summary: None,
                        record,
                        what_if: what_if_record,
                        divergence,
                    });
                }
            }
            Entry::Decision(recorded) => match last {
                Some((at, true)) if at == recorded.at => {
                    if let Some(cycle) = cycles.last_mut() {
                        let same = same_record(&cycle.record, &recorded);
                        cycle.matches_recording = Some(same);
                        cycle.recorded_summary = (!same).then(|| recorded.summary.clone());
                    }
                }
                Some((at, false)) if at == recorded.at => {}
                _ if in_range(recorded.at) && what_if.to.is_none_or(|t| recorded.at <= t) => uncollected += 1,
                _ => {}
            },
        }
    }
    let recorded = cycles.iter().filter(|c| c.matches_recording.is_some()).count();
    let reproduced = cycles.iter().filter(|c| c.matches_recording == Some(true)).count();
    let summary = summarize(cycles.iter().map(|c| (c.at, &c.record)));
    let what_if_summary =
        compare.then(|| summarize(cycles.iter().filter_map(|c| c.what_if.as_ref().map(|w| (c.at, w)))));
    let divergent: Vec<&ReplayedCycle> = cycles.iter().filter(|c| c.divergence.is_some()).collect();
    let first_divergence = divergent.first().map(|c| c.index);
    let metrics_stale_from = divergent
        .iter()
        .find(|c| c.divergence.as_ref().is_some_and(|d| d.rescale))
        .map(|c| c.index);
    Ok(RecordingReplay {
        format: RECORDING_REPLAY_FORMAT,
        job,
        set: what_if.set.clone(),
        from: what_if.from,
        to: what_if.to,
        divergent_cycles: divergent.len(),
        cycles,
        uncollected,
        recorded,
        reproduced,
        summary,
        what_if_summary,
        first_divergence,
        metrics_stale_from,
        changes_take_effect: compare.then_some(changes_take_effect),
    })
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// `3723` → `1 h 2 min 3 s`; `0` → `0 s`.
fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let parts = [(s / 3600, "h"), (s / 60 % 60, "min"), (s % 60, "s")];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n} {unit}"))
        .collect();
    if text.is_empty() {
        "0 s".to_owned()
    } else {
        text.join(" ")
    }
}

fn side_text(v: &VertexSide) -> String {
    let parallelism = if v.target != v.current {
        format!("{} -> {}", v.current, v.target)
    } else if v.recommended != v.current {
        format!("{} (wanted {})", v.current, v.recommended)
    } else {
        v.current.to_string()
    };
    format!("{parallelism} ({}: {})", v.reason.as_str(), v.detail)
}

fn outcome_text(o: &OutcomeSide) -> String {
    match &o.reason {
        Some(reason) => format!("{} ({reason})", o.outcome.as_str()),
        None => o.outcome.as_str().to_owned(),
    }
}

fn summary_text(out: &mut String, title: &str, s: &RunSummary) {
    let _ = writeln!(out, "{title}:");
    let rescales = if s.rescales.is_empty() {
        "no rescale".to_owned()
    } else {
        let times: Vec<String> = s.rescales.iter().map(|t| time(*t)).collect();
        format!(
            "{} rescale{} (at {})",
            s.rescales.len(),
            if s.rescales.len() == 1 { "" } else { "s" },
            times.join(", ")
        )
    };
    let _ = writeln!(out, "  {} cycles, {} decided, {rescales}", s.cycles, s.decided);
    let _ = writeln!(out, "  parallelism over time:");
    let width = s.parallelism.keys().map(String::len).max().unwrap_or(0);
    for (id, steps) in &s.parallelism {
        let text: Vec<String> = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                if i == 0 {
                    step.parallelism.to_string()
                } else {
                    format!("{} from {}", step.parallelism, time(step.from))
                }
            })
            .collect();
        let _ = writeln!(out, "    {id:width$}  {}", text.join(", "));
    }
    let _ = writeln!(out, "  time outside the utilization band:");
    for (id, band) in &s.outside_band {
        if band.known_s == 0 {
            let _ = writeln!(out, "    {id:width$}  unknown (never evaluated)");
            continue;
        }
        let share = band.outside_s() as f64 / band.known_s as f64 * 100.0;
        let _ = writeln!(
            out,
            "    {id:width$}  {} of {} ({share:.0}%): {} above max, {} below min",
            duration(band.outside_s()),
            duration(band.known_s),
            duration(band.above_max_s),
            duration(band.below_min_s),
        );
    }
}

const STALE_NOTE: &str = "the recorded metrics no longer describe the what-if job: it would run at another parallelism, \
                          and its later decisions are computed on the recorded job's metrics";

/// A cycle in words: the text after its head (empty when it has none), then its indented lines.
fn cycle_lines(r: &RecordingReplay, c: &ReplayedCycle) -> Vec<String> {
    let mut lines = Vec::new();
    match (&c.what_if, &c.divergence) {
        (None, _) => lines.push(c.record.summary.clone()),
        (Some(_), None) => lines.push(format!("{} (both)", c.record.summary)),
        (Some(w), Some(d)) => {
            lines.push(String::new());
            lines.push(format!("  recorded config: {}", c.record.summary));
            lines.push(format!("  what-if:         {}", w.summary));
            if d.recorded_config != d.what_if {
                lines.push(format!(
                    "  diverges: job: recorded config {}, what-if {}",
                    outcome_text(&d.recorded_config),
                    outcome_text(&d.what_if)
                ));
            }
            for v in &d.vertices {
                lines.push(format!(
                    "  diverges: {}: recorded config {}; what-if {}",
                    v.vertex,
                    side_text(&v.recorded_config),
                    side_text(&v.what_if)
                ));
            }
            if r.metrics_stale_from == Some(c.index) {
                lines.push(format!("  after this first divergent rescale, {STALE_NOTE}"));
            }
        }
    }
    if let Some(recorded) = &c.recorded_summary {
        lines.push(format!("  differs from the recording, which says: {recorded}"));
    }
    lines
}

/// The replay in words: each cycle's decision, the divergences, the summaries.
pub fn render(r: &RecordingReplay) -> String {
    let mut out = String::new();
    let span = match (r.cycles.first(), r.cycles.last()) {
        (Some(a), Some(b)) => format!(" from {} to {}", time(a.at), time(b.at)),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "replay of the recording of {:?}: {} cycles{span}",
        r.job,
        r.cycles.len()
    );
    let changes: Vec<String> = r.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !changes.is_empty() {
        let when = r.from.map_or_else(
            || "from the first cycle on".to_owned(),
            |f| format!("from {} on", time(f)),
        );
        let _ = writeln!(out, "what-if: {} ({when})", changes.join(", "));
        if r.changes_take_effect == Some(false) {
            let _ = writeln!(
                out,
                "note: the changes leave the recorded options as they are (the same values, or another key of \
                 the same option set in the recording takes precedence)"
            );
        }
    }
    let _ = writeln!(out);
    // Consecutive cycles that read alike are printed once, as a range.
    let mut blocks: Vec<(&ReplayedCycle, &ReplayedCycle, Vec<String>)> = Vec::new();
    for c in &r.cycles {
        let lines = cycle_lines(r, c);
        match blocks.last_mut() {
            Some((_, last, previous)) if *previous == lines => *last = c,
            _ => blocks.push((c, c, lines)),
        }
    }
    for (first, last, lines) in &blocks {
        let head = if first.index == last.index {
            format!("cycle {}  {}", first.index, time(first.at))
        } else {
            format!(
                "cycles {}-{}  {} .. {}",
                first.index,
                last.index,
                time(first.at),
                time(last.at)
            )
        };
        match lines.split_first() {
            Some((inline, rest)) if !inline.is_empty() => {
                let _ = writeln!(out, "{head}  {inline}");
                for line in rest {
                    let _ = writeln!(out, "{line}");
                }
            }
            _ => {
                let _ = writeln!(out, "{head}");
                for line in lines.iter().skip(1) {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "reproduced {} of {} recorded decisions with the recorded configuration{}",
        r.reproduced,
        r.recorded,
        if r.uncollected > 0 {
            format!(
                " ({} recorded cycles had no collection: metrics not ready)",
                r.uncollected
            )
        } else {
            String::new()
        }
    );
    summary_text(&mut out, "summary, recorded configuration", &r.summary);
    if let Some(w) = &r.what_if_summary {
        summary_text(&mut out, &format!("summary, what-if ({})", changes.join(", ")), w);
        match (r.first_divergence, r.metrics_stale_from) {
            (None, _) => {
                let _ = writeln!(
                    out,
                    "divergence: none, the two configurations decide alike on every cycle"
                );
            }
            (Some(first), stale) => {
                let at = |i: usize| {
                    r.cycles
                        .get(i.saturating_sub(1))
                        .map_or_else(String::new, |c| time(c.at))
                };
                let _ = writeln!(
                    out,
                    "divergence: {} of {} cycles, the first at cycle {first} ({})",
                    r.divergent_cycles,
                    r.cycles.len(),
                    at(first)
                );
                if let Some(stale) = stale {
                    let _ = writeln!(
                        out,
                        "from the first divergent rescale on (cycle {stale}, {}), {STALE_NOTE}",
                        at(stale)
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_clock() {
        assert_eq!(duration(0), "0 s");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(3723), "1 h 2 min 3 s");
        assert_eq!(duration(7200), "2 h");
        assert_eq!(duration(-5), "0 s");
    }

    #[test]
    fn set_arguments_are_parsed_and_checked() {
        let ok = WhatIf::parse(
            &["job.autoscaler.utilization.target=0.5".to_owned()],
            Some("2024-05-01T10:00:00Z"),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.set.get("job.autoscaler.utilization.target"), Some("0.5"));
        assert!(ok.has_changes());
        // The deprecated and legacy names the options read are known too.
        for key in [
            "job.autoscaler.target.utilization",
            "kubernetes.operator.job.autoscaler.scale-down.interval",
            "job.autoscaler.vertex.exclude.ids",
            "taskmanager.numberOfTaskSlots",
        ] {
            assert!(catalog::is_known(key), "{key}");
        }
        let err = |set: &str| {
            WhatIf::parse(&[set.to_owned()], None, None)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            err("job.autoscaler.no-such-option=1"),
            "invalid --set \"job.autoscaler.no-such-option=1\": unknown key: no option of the autoscaler's cycle has this name"
        );
        assert_eq!(
            err("job.autoscaler.utilisation.target=0.5"),
            "invalid --set \"job.autoscaler.utilisation.target=0.5\": unknown key: no option of the autoscaler's cycle has this name (did you mean job.autoscaler.utilization.target?)"
        );
        assert_eq!(err("novalue"), "invalid --set \"novalue\": expected key=value");
        assert_eq!(err("=1"), "invalid --set \"=1\": the key is empty");
        let time_err = WhatIf::parse(&[], Some("yesterday\n"), None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            time_err.starts_with("invalid --from \"yesterday\\n\": expected an RFC 3339 time"),
            "{time_err}"
        );
        assert!(!time_err.contains('\n'));
        let range = WhatIf::parse(&[], Some("2024-05-01T11:00:00Z"), Some("2024-05-01T10:00:00Z"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            range,
            "invalid --to \"2024-05-01T10:00:00Z\": before --from 2024-05-01T11:00:00Z"
        );
    }
}
