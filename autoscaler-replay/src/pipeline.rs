//! The replay pipeline: the live cycle's steps on a recorded scenario (replay-format §3.3-3.5).

use super::output::{
    self, ConfigChangesSection, DecisionSection, DelayedScaleDownSection, EvaluatedSection, EventJson,
    ExplanationSection,
};
use super::scenario::{Scenario, ScenarioError, ScenarioInput};
use autoscaler_core::cycle::{self, CycleInput, CycleMetrics, CycleOutcome, CycleResult, JobState};
use autoscaler_core::plugins::ResolvedPlugins;
use autoscaler_core::record::DecisionRecord;
use autoscaler_core::scaling::{CycleEvent, Decision};
use autoscaler_core::{
    CollectedJobMetrics, DelayedScaleDown, EventType, MetricsSnapshot, config::AutoScalerOptions, config::OptionsError,
};
use autoscaler_metrics::root_cause::Explanation;
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, JobTopology, ScalingMetric, compute_processing_rate_thresholds,
};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

fn options_error(e: OptionsError) -> ScenarioError {
    match e {
        OptionsError::InvalidValue { key, value, reason } => {
            ScenarioError::new(format!("config.{key}"), format!("cannot parse {value:?}: {reason}"))
        }
        other => ScenarioError::new("config", other.to_string()),
    }
}

/// Completes decision-only input (§3.4): topology facts and thresholds a vertex lacks.
fn complete_evaluated(
    mut out: EvaluatedMetrics,
    topology: &JobTopology,
    options: &AutoScalerOptions,
    restart_time: Duration,
) -> EvaluatedMetrics {
    let config = options.evaluation_config(restart_time);
    for (id, metrics) in out.vertices.iter_mut() {
        let Some(v) = topology.get(id.as_str()) else { continue };
        let facts = [
            (ScalingMetric::Parallelism, f64::from(v.parallelism.get())),
            (ScalingMetric::MaxParallelism, f64::from(v.max_parallelism.get())),
            (ScalingMetric::NumSourcePartitions, f64::from(v.num_source_partitions)),
        ];
        for (metric, value) in facts {
            if !metrics.contains(metric) {
                metrics.insert(
                    metric,
                    EvaluatedScalingMetric {
                        current: value,
                        average: f64::NAN,
                    },
                );
            }
        }
        if !metrics.contains(ScalingMetric::ScaleUpRateThreshold)
            || !metrics.contains(ScalingMetric::ScaleDownRateThreshold)
        {
            let (up, down) = compute_processing_rate_thresholds(metrics, &config, false);
            metrics.insert(ScalingMetric::ScaleUpRateThreshold, EvaluatedScalingMetric::of(up));
            metrics.insert(ScalingMetric::ScaleDownRateThreshold, EvaluatedScalingMetric::of(down));
        }
    }
    out
}

/// What the replayed cycle reached: the sections of the result that depend on it.
enum Outcome {
    /// No decision stage: `not_ready` with its reason.
    NotReady(&'static str),
    /// The cycle failed: the error's message.
    Failed(String),
    /// The decision stage's decision and its record.
    Decided {
        decision: Box<Decision>,
        record: Box<DecisionRecord>,
    },
}

/// The input mode's part of the result.
enum Mode {
    /// `evaluated` input: no `explanation` (written as `null`) and no `evaluated` section.
    Evaluated,
    /// `metrics` input: the root cause of the window and what the evaluation gave, if it ran.
    Metrics {
        explanation: Option<Explanation>,
        evaluated: Option<std::sync::Arc<EvaluatedMetrics>>,
    },
}

/// The result of replaying a scenario (a `flink-autoscaler-result/1` document), as its parts.
///
/// It serializes section by section ([`Serialize`]), so it can be written without building the
/// document in memory: [`write_json`](Self::write_json) writes exactly what
/// `flink-autoscaler replay` prints, and `serde_json::to_value(&result)` is [`replay`]'s document.
pub struct ReplayResult {
    topology: JobTopology,
    mode: Mode,
    restart_time_s: u64,
    outcome: Outcome,
    delayed_scale_down: DelayedScaleDown,
}

impl ReplayResult {
    fn new(
        topology: JobTopology,
        mode: Mode,
        restart_time: Duration,
        outcome: Outcome,
        delayed_scale_down: DelayedScaleDown,
    ) -> Self {
        Self {
            topology,
            mode,
            restart_time_s: restart_time.as_secs(),
            outcome,
            delayed_scale_down,
        }
    }

    /// Writes the document as compact JSON followed by a newline (what `flink-autoscaler replay`
    /// prints), streaming: nothing but the current value is held in memory, so pass a buffered
    /// writer. Flushes `writer` at the end.
    pub fn write_json<W: Write>(&self, mut writer: W) -> std::io::Result<()> {
        serde_json::to_writer(&mut writer, self)?;
        writer.write_all(b"\n")?;
        writer.flush()
    }
}

/// A `null` section.
const NULL: Option<()> = None;

/// The sections in the order the result has always had them (the order the document was once
/// assembled in): `config_changes` of a decided cycle precedes `delayed_scale_down` when tuning
/// returned changes and follows it as `null` otherwise; `evaluated` only in `metrics` mode.
impl Serialize for ReplayResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let topology = &self.topology;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("format", output::RESULT_FORMAT)?;
        match &self.mode {
            Mode::Evaluated => m.serialize_entry("explanation", &NULL)?,
            Mode::Metrics { explanation, evaluated } => {
                let explanation = explanation
                    .as_ref()
                    .map(|explanation| ExplanationSection { explanation, topology });
                m.serialize_entry("explanation", &explanation)?;
                let evaluated = evaluated.as_ref().map(|metrics| EvaluatedSection { metrics, topology });
                m.serialize_entry("evaluated", &evaluated)?;
            }
        }
        m.serialize_entry("restart_time_s", &self.restart_time_s)?;
        match &self.outcome {
            Outcome::NotReady(reason) => self.undecided(&mut m, "not_ready", reason, None)?,
            Outcome::Failed(message) => self.undecided(&mut m, "error", message, Some(message))?,
            Outcome::Decided { decision, record } => {
                m.serialize_entry("decision", &DecisionSection::Decided { topology, decision })?;
                m.serialize_entry("record", record)?;
                // §4.6: what memory tuning returned, `null` when the decision did not reach it.
                let changes = decision
                    .memory_tuning
                    .as_ref()
                    .map(|t| ConfigChangesSection::of(&t.changes));
                if let Some(changes) = &changes {
                    m.serialize_entry("config_changes", changes)?;
                }
                m.serialize_entry("delayed_scale_down", &DelayedScaleDownSection(&self.delayed_scale_down))?;
                if changes.is_none() {
                    m.serialize_entry("config_changes", &NULL)?;
                }
                m.serialize_entry("events", &Events(&decision.events))?;
            }
        }
        m.end()
    }
}

impl ReplayResult {
    /// The sections after `restart_time_s` of a cycle without a decision stage; `error` is the
    /// failed cycle's message, its one event.
    fn undecided<M: SerializeMap>(
        &self,
        m: &mut M,
        outcome: &str,
        reason: &str,
        error: Option<&str>,
    ) -> Result<(), M::Error> {
        let decision = DecisionSection::Undecided {
            topology: &self.topology,
            outcome,
            reason,
        };
        m.serialize_entry("decision", &decision)?;
        m.serialize_entry("delayed_scale_down", &DelayedScaleDownSection(&self.delayed_scale_down))?;
        m.serialize_entry("config_changes", &NULL)?;
        m.serialize_entry("record", &NULL)?;
        let events: Vec<EventJson<'_>> = error
            .map(|message| EventJson {
                event_type: EventType::Warning,
                reason: "AutoscalerError",
                message,
            })
            .into_iter()
            .collect();
        m.serialize_entry("events", &events)
    }
}

/// A decision's events.
struct Events<'a>(&'a [CycleEvent]);

impl Serialize for Events<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(EventJson::of))
    }
}

/// Runs the scenario's cycle and returns the result document: the steps of
/// [`autoscaler_core::cycle`] on the scenario's state, exactly as a live cycle runs them.
///
/// The document is built in memory (a `serde_json::Value` tree is several times the size of its
/// JSON text) and the scenario is copied; [`replay_result`] and [`ReplayResult::write_json`]
/// write the same document streaming, from the scenario itself.
pub fn replay(s: &Scenario) -> Result<Value, ScenarioError> {
    let result = replay_result(s.clone())?;
    // Infallible: every map key is a string.
    serde_json::to_value(&result).map_err(|e| ScenarioError::new("result", e.to_string()))
}

/// Runs the scenario's cycle as [`replay`] does and returns the result as its parts, to serialize
/// section by section. The scenario is consumed: its topology, metrics and state become the
/// cycle's, nothing is copied. `result.write_json(writer)` writes the document without building it
/// in memory, byte for byte what `serde_json::to_string(&replay(&s)?)` gives plus a newline.
///
/// ```
/// let scenario = autoscaler_replay::parse_scenario(r#"{
///   "format": "flink-autoscaler-scenario/1",
///   "now": "2024-05-01T10:15:00Z",
///   "topology": {"vertices": [{"id": "src", "parallelism": 2, "max_parallelism": 128}]},
///   "evaluated": {"vertices": {"src": {"TRUE_PROCESSING_RATE": {"average": 100}}}}
/// }"#).expect("valid scenario");
/// let result = autoscaler_replay::replay_result(scenario).expect("replayed");
/// let mut out = Vec::new();
/// result.write_json(&mut out).expect("written");
/// let document: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
/// assert_eq!(document["format"], "flink-autoscaler-result/1");
/// ```
pub fn replay_result(s: Scenario) -> Result<ReplayResult, ScenarioError> {
    let Scenario {
        now,
        config,
        job,
        topology,
        input,
        scaling_history,
        scaling_tracking,
        delayed_scale_down,
    } = s;
    let mut options = AutoScalerOptions::from_configuration(&config).map_err(options_error)?;
    // §3.2: `job.autoscaler.enabled` is out of scope, the replay always runs.
    options.enabled = true;
    let options = options;
    let mut state = JobState {
        scaling_history,
        scaling_tracking,
        delayed_scale_down,
        ..JobState::default()
    };
    let evaluated_mode = matches!(input, ScenarioInput::Evaluated(_));
    let metrics = match input {
        // §3.4: state loading, then the decision on the completed metrics.
        ScenarioInput::Evaluated(given) => CycleMetrics::Evaluated {
            topology,
            job_running_since: job.running_since,
            complete: Box::new(|topology: &JobTopology, restart_time| {
                complete_evaluated(*given, topology, &options, restart_time)
            }),
        },
        // §3.3: the earlier snapshots are the stored window, the last one this cycle's collection.
        ScenarioInput::Metrics(mut snapshots) => {
            let Some((collected_at, latest)) = snapshots.pop() else {
                return Err(ScenarioError::new("metrics", "expected at least one snapshot"));
            };
            state.metric_history = snapshots.into_iter().collect();
            CycleMetrics::Collected {
                collected: CollectedJobMetrics::new(
                    topology,
                    job.running_since.unwrap_or(now),
                    MetricsSnapshot::Scaling(latest),
                ),
                collected_at,
            }
        }
    };
    let input = CycleInput {
        now,
        metrics,
        options: &options,
        task_manager_cpu: job.taskmanager_cpu,
        // The context's value (§3.1): the scenario's, else the configured process size.
        task_manager_memory: job.taskmanager_memory.or(options.task_manager_process_memory),
        records: true,
        // §4.7: the root cause of the window, whatever the outcome.
        explain: !evaluated_mode,
        job: None,
    };
    let result = cycle::run(&mut state, input, &ResolvedPlugins::default());
    let CycleResult {
        outcome,
        topology,
        restart_time,
        explanation,
        record,
        ..
    } = result;
    let topology = topology.ok_or_else(|| ScenarioError::new("topology", "the cycle lost its topology"))?;
    // In `metrics` mode the result shows what the evaluation gave, when it ran.
    let evaluated = state.evaluated_metrics.take();
    let mode = if evaluated_mode {
        Mode::Evaluated
    } else {
        Mode::Metrics { explanation, evaluated }
    };
    let outcome = match outcome {
        CycleOutcome::InsufficientSamples => Outcome::NotReady(cycle::INSUFFICIENT_SAMPLES),
        CycleOutcome::WindowNotFull { stabilizing } => Outcome::NotReady(cycle::window_not_full_reason(stabilizing)),
        CycleOutcome::Decided(decision) => Outcome::Decided {
            decision,
            record: Box::new(record.ok_or_else(|| ScenarioError::new("result", "the cycle built no record"))?),
        },
        CycleOutcome::Failed { message, .. } => Outcome::Failed(message),
        other => Outcome::Failed(format!("unexpected cycle outcome {other:?}")),
    };
    Ok(ReplayResult::new(
        topology,
        mode,
        restart_time,
        outcome,
        state.delayed_scale_down,
    ))
}
