//! The replay pipeline: the live cycle's steps on a recorded scenario (replay-format §3.3-3.5).

use super::output::{
    self, ConfigChangesSection, DecisionSection, DelayedScaleDownSection, EvaluatedSection, EventJson,
    ExplanationSection,
};
use super::scenario::{Scenario, ScenarioError, ScenarioInput};
use autoscaler_core::cycle::{self, DecisionFacts, JobState, Observation, Stage, StateChanges};
use autoscaler_core::record::DecisionRecord;
use autoscaler_core::scaling::{CycleEvent, Decision};
use autoscaler_core::{
    CollectedJobMetrics, DelayedScaleDown, EventType, MetricsSnapshot, config::AutoScalerOptions, config::OptionsError,
};
use autoscaler_metrics::root_cause::{self, Explanation};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedScalingMetric, JobTopology, MetricHistory, ScalingMetric,
    compute_processing_rate_thresholds,
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
        evaluated: Option<Box<EvaluatedMetrics>>,
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
    let options = AutoScalerOptions::from_configuration(&config).map_err(options_error)?;
    let mut state = JobState {
        metric_history: MetricHistory::new(),
        scaling_history,
        scaling_tracking,
        delayed_scale_down,
        parallelism_overrides: Default::default(),
        config_changes: Default::default(),
    };
    let mut changes = StateChanges::default();

    let (topology, mode, scaling, evaluated, unmeasured) = match input {
        ScenarioInput::Evaluated(given) => {
            // §3.4: state loading, then the decision on the completed metrics.
            let scaling =
                cycle::load_scaling_state(&mut state, &mut changes, &topology, job.running_since, now, &options);
            let evaluated = complete_evaluated(*given, &topology, &options, scaling.restart_time);
            (topology, Mode::Evaluated, scaling, evaluated, Vec::new())
        }
        ScenarioInput::Metrics(mut snapshots) => {
            // §3.3: the earlier snapshots are the stored window, the last one this cycle's collection.
            let Some((collected_at, latest)) = snapshots.pop() else {
                return Err(ScenarioError::new("metrics", "expected at least one snapshot"));
            };
            state.metric_history = snapshots.into_iter().collect();
            let collected = CollectedJobMetrics::new(
                topology,
                job.running_since.unwrap_or(now),
                MetricsSnapshot::Scaling(latest),
            );
            let observation = cycle::observe(&mut state, &mut changes, collected, collected_at, now, &options);
            let assessment = cycle::assess(&mut state, &mut changes, &observation, now, &options);
            // The collection's topology (the scenario's), handed back.
            let Observation {
                topology, unmeasured, ..
            } = observation;
            // §4.7: the root cause, from the samples of the evaluation window.
            let explanation = root_cause::explain(&topology, &state.metric_history);
            let restart_time = assessment.scaling.restart_time;
            let metrics = |evaluated| Mode::Metrics { explanation, evaluated };
            // Every stage short of a full window ends the replay here, with its outcome.
            let evaluated = match assessment.stage {
                Stage::Ready(evaluated) => Ok(evaluated),
                Stage::InsufficientSamples => Err((Outcome::NotReady(cycle::INSUFFICIENT_SAMPLES), None)),
                Stage::Failed(e) => Err((Outcome::Failed(e.to_string()), None)),
                Stage::WindowNotFull { stabilizing, evaluated } => Err((
                    Outcome::NotReady(cycle::window_not_full_reason(stabilizing)),
                    Some(Box::new(evaluated)),
                )),
            };
            match evaluated {
                Ok(evaluated) => (topology, metrics(None), assessment.scaling, evaluated, unmeasured),
                Err((outcome, evaluated)) => {
                    return Ok(ReplayResult::new(
                        topology,
                        metrics(evaluated),
                        restart_time,
                        outcome,
                        state.delayed_scale_down,
                    ));
                }
            }
        }
    };

    // §3.5: decision.
    let facts = DecisionFacts {
        now,
        topology: &topology,
        evaluated: &evaluated,
        options: &options,
        unmeasured: &unmeasured,
        task_manager_cpu: job.taskmanager_cpu,
        // The context's value (§3.1): the scenario's, else the configured process size.
        task_manager_memory: job.taskmanager_memory.or(options.task_manager_process_memory),
    };
    let restart_time = scaling.restart_time;
    let decision = cycle::conclude(&mut state, &mut changes, scaling, &facts);
    // The evaluation window, for the decision record's estimates and root cause.
    let window = matches!(mode, Mode::Metrics { .. }).then_some(&state.metric_history);
    let record = super::record::decision_record(now, &topology, &evaluated, &decision, &options, restart_time, window);
    // In `metrics` mode the result shows the metrics the decision read.
    let mode = match mode {
        Mode::Metrics { explanation, .. } => Mode::Metrics {
            explanation,
            evaluated: Some(Box::new(evaluated)),
        },
        Mode::Evaluated => Mode::Evaluated,
    };
    let outcome = Outcome::Decided {
        decision: Box::new(decision),
        record: Box::new(record),
    };
    Ok(ReplayResult::new(
        topology,
        mode,
        restart_time,
        outcome,
        state.delayed_scale_down,
    ))
}
