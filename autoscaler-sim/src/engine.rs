//! The stepped, deterministic simulation of a running Flink job: [`Simulator`].
//!
//! Records are a fluid: every step (100 ms by default) each subtask, in topological order, takes
//! what its input holds (a source: its partitions' backlog; others: its input buffer), up to its
//! capacity for the step, and ships the results downstream. A subtask may only send what the
//! receiving subtask has announced credit for: Flink's credit-based flow control gives every
//! input channel its share of the receiver's buffers, so the simulator gives each sending channel
//! `free space / number of channels` of the receiver's bounded buffer. A slow vertex therefore
//! fills its buffers, its upstream runs out of credit and is backpressured, and the pressure
//! travels back to the sources, whose backlog (`pendingRecords`) grows.
//!
//! Meters follow Flink's: rates and time gauges are differences of accumulated counters over the
//! last `meter_span` (60 s), refreshed every `meter_update` (5 s). One simplification: in the first
//! span after a (re)start Flink's `MeterView` divides by the full span (under-reporting), the
//! simulator by the time elapsed; the autoscaler's stabilization interval hides both.
//!
//! Time accounting follows Flink's task metrics: a subtask is *busy* while processing (records /
//! capacity), *backpressured* for the rest of the step when credit, not input, limited it, and
//! *idle* for the rest of the step otherwise; the three add up to the step.

use crate::job::{KeySkew, SimError, SimJob};
use crate::rng::SplitMix64;
use autoscaler_metrics::collection::{
    AggregatedMetric, FlinkMetric, FlinkMetrics, IoMetrics, RawJobMetrics, TaskSlotMetrics,
};
use autoscaler_metrics::{EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexSpec};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Accumulated per-subtask counters since the subtask started (Flink resets them on a restart).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Milliseconds spent processing.
    pub busy_ms: f64,
    /// Milliseconds spent waiting for output credit.
    pub backpressured_ms: f64,
    /// Milliseconds spent waiting for input.
    pub idle_ms: f64,
    /// Records taken from the input (the buffer, or the source's partitions).
    pub records_in: f64,
    /// Records emitted (summed over output edges, once per record even when broadcast).
    pub records_out: f64,
}

impl Counters {
    fn minus(&self, earlier: &Counters) -> Counters {
        Counters {
            busy_ms: self.busy_ms - earlier.busy_ms,
            backpressured_ms: self.backpressured_ms - earlier.backpressured_ms,
            idle_ms: self.idle_ms - earlier.idle_ms,
            records_in: self.records_in - earlier.records_in,
            records_out: self.records_out - earlier.records_out,
        }
    }
}

/// What Flink's per-subtask meters report for one subtask (rates over the meter span).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SubtaskMeters {
    /// `busyTimeMsPerSecond`.
    pub busy_ms_per_sec: f64,
    /// `backPressuredTimeMsPerSecond`.
    pub backpressured_ms_per_sec: f64,
    /// `idleTimeMsPerSecond`.
    pub idle_ms_per_sec: f64,
    /// `numRecordsInPerSecond`.
    pub records_in_per_sec: f64,
    /// `numRecordsOutPerSecond`.
    pub records_out_per_sec: f64,
    /// Accumulated counters at the last meter update.
    pub counters: Counters,
    /// `pendingRecords` (sources only, else 0).
    pub pending_records: f64,
}

/// Whether the simulated job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimJobState {
    /// Processing records.
    Running,
    /// Restarting after a rescale until the given simulated instant (ms): nothing is processed.
    Restarting {
        /// When the job is RUNNING again (ms since the simulation started).
        until_ms: u64,
    },
}

/// One applied rescale.
#[derive(Debug, Clone, PartialEq)]
pub struct RescaleEvent {
    /// When the rescale started (ms since the simulation started).
    pub at_ms: u64,
    /// Parallelism per vertex before.
    pub from: BTreeMap<String, u32>,
    /// Parallelism per vertex after.
    pub to: BTreeMap<String, u32>,
}

/// Life-time record totals, never reset, for checking conservation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Records that arrived at each source's external system (index = vertex).
    pub arrived: Vec<f64>,
    /// Records processed by each vertex.
    pub processed: Vec<f64>,
    /// Records delivered into each edge's downstream buffers (index = edge).
    pub delivered: Vec<f64>,
}

#[derive(Debug, Clone)]
struct Subtask {
    buffer: f64,
    counters: Counters,
}

#[derive(Debug, Clone)]
struct VertexState {
    parallelism: u32,
    subtasks: Vec<Subtask>,
    /// Share of HASH-shipped records per subtask (key groups owned, weighted by key skew).
    hash_share: Vec<f64>,
    /// Number of sending channels per subtask, over all input edges.
    senders: Vec<f64>,
    /// Meter snapshots `(ms, counters per subtask)`, oldest first.
    meters: VecDeque<(u64, Vec<Counters>)>,
}

/// The stepped simulation of one job. Deterministic: the same job and seed give the same run.
#[derive(Debug, Clone)]
pub struct Simulator {
    job: SimJob,
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
    edge_ends: Vec<(usize, usize)>,
    order: Vec<usize>,
    key_weights: Vec<Vec<f64>>,
    vertices: Vec<VertexState>,
    /// Backlog per partition, per source vertex (empty for non-sources).
    partitions: Vec<Vec<f64>>,
    requirements: Vec<u32>,
    state: SimJobState,
    now_ms: u64,
    running_since_ms: u64,
    rescales: Vec<RescaleEvent>,
    totals: Totals,
    backlog_growing_ms: u64,
    rng: SplitMix64,
}

impl Simulator {
    /// Validates `job` and starts it RUNNING at time 0.
    pub fn new(job: SimJob) -> Result<Self, SimError> {
        validate(&job)?;
        let n = job.vertices.len();
        let index: BTreeMap<&str, usize> = job
            .vertices
            .iter()
            .enumerate()
            .map(|(i, v)| (v.id.as_str(), i))
            .collect();
        let mut inputs = vec![Vec::new(); n];
        let mut outputs = vec![Vec::new(); n];
        let mut edge_ends = Vec::with_capacity(job.edges.len());
        for (e, edge) in job.edges.iter().enumerate() {
            let (Some(&u), Some(&w)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str())) else {
                return Err(SimError::Topology(format!(
                    "edge {} -> {} names an unknown vertex",
                    edge.from, edge.to
                )));
            };
            outputs[u].push(e);
            inputs[w].push(e);
            edge_ends.push((u, w));
        }
        let topology = build_topology(&job, &job.vertices.iter().map(|v| v.parallelism).collect::<Vec<_>>())?;
        let order = topology.topological_order().to_vec();
        let mut rng = SplitMix64::new(job.settings.seed);
        let key_weights = job
            .vertices
            .iter()
            .map(|v| key_group_weights(v.max_parallelism, &v.key_skew, &mut rng))
            .collect();
        let partitions = job
            .vertices
            .iter()
            .map(|v| match &v.source {
                Some(s) => {
                    let count = s.partitions.unwrap_or(v.parallelism).max(1) as usize;
                    vec![s.initial_backlog / count as f64; count]
                }
                None => Vec::new(),
            })
            .collect();
        let requirements = job.vertices.iter().map(|v| v.parallelism).collect();
        let totals = Totals {
            arrived: job
                .vertices
                .iter()
                .map(|v| v.source.as_ref().map_or(0.0, |s| s.initial_backlog))
                .collect(),
            processed: vec![0.0; n],
            delivered: vec![0.0; job.edges.len()],
        };
        let mut sim = Self {
            vertices: job
                .vertices
                .iter()
                .map(|v| VertexState {
                    parallelism: v.parallelism,
                    subtasks: Vec::new(),
                    hash_share: Vec::new(),
                    senders: Vec::new(),
                    meters: VecDeque::new(),
                })
                .collect(),
            job,
            inputs,
            outputs,
            edge_ends,
            order,
            key_weights,
            partitions,
            requirements,
            state: SimJobState::Running,
            now_ms: 0,
            running_since_ms: 0,
            rescales: Vec::new(),
            totals,
            backlog_growing_ms: 0,
            rng,
        };
        let initial: Vec<u32> = sim.vertices.iter().map(|v| v.parallelism).collect();
        sim.deploy(&initial);
        sim.start_meters();
        Ok(sim)
    }

    /// The simulated job.
    pub fn job(&self) -> &SimJob {
        &self.job
    }

    /// Simulated time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_millis(self.now_ms)
    }

    /// Whether the job runs or restarts.
    pub fn state(&self) -> SimJobState {
        self.state
    }

    /// When the job last became RUNNING.
    pub fn running_since(&self) -> Duration {
        Duration::from_millis(self.running_since_ms)
    }

    /// Current parallelism per vertex id.
    pub fn parallelism(&self) -> BTreeMap<String, u32> {
        self.job
            .vertices
            .iter()
            .zip(&self.vertices)
            .map(|(v, s)| (v.id.clone(), s.parallelism))
            .collect()
    }

    /// The resource requirements (desired parallelism) per vertex id.
    pub fn requirements(&self) -> BTreeMap<String, u32> {
        self.job
            .vertices
            .iter()
            .zip(&self.requirements)
            .map(|(v, p)| (v.id.clone(), *p))
            .collect()
    }

    /// Rescales applied so far.
    pub fn rescales(&self) -> &[RescaleEvent] {
        &self.rescales
    }

    /// Life-time record totals.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Total simulated time during which the summed source backlog grew.
    pub fn backlog_growing_time(&self) -> Duration {
        Duration::from_millis(self.backlog_growing_ms)
    }

    /// Records waiting in the external systems of all sources.
    pub fn total_backlog(&self) -> f64 {
        self.partitions.iter().flatten().sum()
    }

    /// Records waiting in the external system of source vertex `index` (0 for non-sources).
    pub fn backlog(&self, index: usize) -> f64 {
        self.partitions.get(index).map_or(0.0, |p| p.iter().sum())
    }

    /// Records waiting in the input buffers of vertex `index`.
    pub fn buffered(&self, index: usize) -> f64 {
        self.vertices
            .get(index)
            .map_or(0.0, |v| v.subtasks.iter().map(|s| s.buffer).sum())
    }

    /// Index of vertex `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.job.vertices.iter().position(|v| v.id == id)
    }

    /// Edges as `(upstream index, downstream index)`, in declaration order.
    pub fn edge_ends(&self) -> &[(usize, usize)] {
        &self.edge_ends
    }

    /// Sets the desired parallelism of vertex `id` (clamped to 1..=max parallelism), as a PUT of
    /// the resource requirements does. Returns whether the requirement changed; unknown ids are
    /// ignored (false). The change is applied by [`step`](Self::step) once the cooldown allows.
    pub fn set_requirement(&mut self, id: &str, parallelism: u32) -> bool {
        let Some(i) = self.index_of(id) else {
            return false;
        };
        let p = parallelism.clamp(1, self.job.vertices[i].max_parallelism.max(1));
        let changed = self.requirements[i] != p;
        self.requirements[i] = p;
        changed
    }

    /// Changes the adaptive scheduler's `scaling-interval.min` (the cooldown after the job last
    /// started running before a new requirement is applied).
    pub fn set_scaling_interval_min(&mut self, interval: Duration) {
        self.job.settings.scaling_interval_min = interval;
    }

    /// The current job graph as the autoscaler sees it.
    pub fn topology(&self) -> Result<JobTopology, SimError> {
        build_topology(
            &self.job,
            &self.vertices.iter().map(|v| v.parallelism).collect::<Vec<_>>(),
        )
    }

    /// Advances the simulation by `duration`, in whole steps.
    pub fn advance(&mut self, duration: Duration) {
        let end = self.now_ms + duration.as_millis() as u64;
        while self.now_ms < end {
            self.step();
        }
    }

    /// Advances the simulation by one step.
    pub fn step(&mut self) {
        let dt_ms = (self.job.settings.step.as_millis() as u64).max(1);
        let dt = dt_ms as f64 / 1000.0;
        let backlog_before = self.total_backlog();
        self.arrive(dt);
        match self.state {
            SimJobState::Restarting { until_ms } => {
                if self.now_ms + dt_ms >= until_ms {
                    self.state = SimJobState::Running;
                    self.now_ms += dt_ms;
                    self.running_since_ms = self.now_ms;
                    self.start_meters();
                    self.account_backlog(backlog_before, dt_ms);
                    return;
                }
            }
            SimJobState::Running => {
                let cooled =
                    self.now_ms >= self.running_since_ms + self.job.settings.scaling_interval_min.as_millis() as u64;
                let changed = self
                    .vertices
                    .iter()
                    .zip(&self.requirements)
                    .any(|(v, r)| v.parallelism != *r);
                if changed && cooled {
                    self.rescale();
                } else {
                    for i in self.order.clone() {
                        self.process_vertex(i, dt);
                    }
                }
            }
        }
        self.now_ms += dt_ms;
        self.account_backlog(backlog_before, dt_ms);
        let update_ms = (self.job.settings.meter_update.as_millis() as u64).max(dt_ms);
        if self.state == SimJobState::Running && (self.now_ms - self.running_since_ms).is_multiple_of(update_ms) {
            self.snapshot_meters();
        }
    }

    fn account_backlog(&mut self, before: f64, dt_ms: u64) {
        if self.total_backlog() > before + 1e-9 {
            self.backlog_growing_ms += dt_ms;
        }
    }

    fn arrive(&mut self, dt: f64) {
        let t = self.now_ms as f64 / 1000.0;
        let noise = self.job.settings.rate_noise;
        for (i, v) in self.job.vertices.iter().enumerate() {
            let Some(src) = &v.source else { continue };
            let jitter = if noise > 0.0 {
                1.0 + noise * self.rng.next_signed()
            } else {
                1.0
            };
            let records = src.profile.rate_at(t) * dt * jitter;
            let parts = &mut self.partitions[i];
            let each = records / parts.len() as f64;
            for p in parts.iter_mut() {
                *p += each;
            }
            self.totals.arrived[i] += records;
        }
    }

    /// Stops the job and redeploys it at the required parallelism; buffered records survive
    /// (as with unaligned checkpoints), counters and meters restart from zero.
    fn rescale(&mut self) {
        let from = self.parallelism();
        let required = self.requirements.clone();
        self.deploy(&required);
        self.rescales.push(RescaleEvent {
            at_ms: self.now_ms,
            from,
            to: self.parallelism(),
        });
        self.state = SimJobState::Restarting {
            until_ms: self.now_ms + self.job.settings.restart_downtime.as_millis() as u64,
        };
    }

    /// (Re)creates the subtasks of every vertex at `parallelism`, spreading buffered records.
    fn deploy(&mut self, parallelism: &[u32]) {
        for (i, p) in parallelism.iter().enumerate() {
            let p = (*p).max(1);
            let buffered: f64 = self.vertices[i].subtasks.iter().map(|s| s.buffer).sum();
            let state = &mut self.vertices[i];
            state.parallelism = p;
            state.subtasks = vec![
                Subtask {
                    buffer: buffered / f64::from(p),
                    counters: Counters::default()
                };
                p as usize
            ];
            state.hash_share = key_group_shares(&self.key_weights[i], p);
            if let Some(src) = &self.job.vertices[i].source
                && src.partitions.is_none()
            {
                // Without partitions every subtask shares the backlog evenly.
                let total: f64 = self.partitions[i].iter().sum();
                self.partitions[i] = vec![total / f64::from(p); p as usize];
            }
            state.meters.clear();
        }
        for w in 0..self.vertices.len() {
            let p_w = self.vertices[w].parallelism as usize;
            let mut senders = vec![0.0; p_w];
            for &e in &self.inputs[w] {
                let u = self.edge_ends[e].0;
                let p_u = self.vertices[u].parallelism as usize;
                for s in 0..p_u {
                    for (j, share) in self.targets(e, s) {
                        if share > 0.0 {
                            senders[j] += 1.0;
                        }
                    }
                }
            }
            self.vertices[w].senders = senders;
        }
    }

    fn start_meters(&mut self) {
        for v in &mut self.vertices {
            v.meters.clear();
            v.meters
                .push_back((self.now_ms, v.subtasks.iter().map(|s| s.counters).collect()));
        }
    }

    fn snapshot_meters(&mut self) {
        let keep_ms = self.job.settings.meter_span.as_millis() as u64;
        let now = self.now_ms;
        for v in &mut self.vertices {
            v.meters
                .push_back((now, v.subtasks.iter().map(|s| s.counters).collect()));
            while v.meters.len() > 2 && v.meters.get(1).is_some_and(|(t, _)| now - t >= keep_ms) {
                v.meters.pop_front();
            }
        }
    }

    /// The strategy an edge really uses: FORWARD between different parallelisms behaves as RESCALE.
    fn effective_strategy(&self, e: usize) -> ShipStrategy {
        let (u, w) = self.edge_ends[e];
        match self.job.edges[e].ship_strategy {
            ShipStrategy::Forward if self.vertices[u].parallelism != self.vertices[w].parallelism => {
                ShipStrategy::Rescale
            }
            other => other,
        }
    }

    /// Downstream subtasks of upstream subtask `s` on edge `e`, with the fraction of `s`'s records
    /// on that edge each receives (BROADCAST: 1 each).
    fn targets(&self, e: usize, s: usize) -> Vec<(usize, f64)> {
        let (u, w) = self.edge_ends[e];
        let p_u = self.vertices[u].parallelism as usize;
        let p_w = self.vertices[w].parallelism as usize;
        match self.effective_strategy(e) {
            ShipStrategy::Hash => self.vertices[w].hash_share.iter().copied().enumerate().collect(),
            ShipStrategy::Broadcast => (0..p_w).map(|j| (j, 1.0)).collect(),
            ShipStrategy::Global => vec![(0, 1.0)],
            ShipStrategy::Forward => vec![(s, 1.0)],
            ShipStrategy::Rescale => {
                if p_u >= p_w {
                    vec![(s * p_w / p_u, 1.0)]
                } else {
                    let lo = s * p_w / p_u;
                    let hi = ((s + 1) * p_w / p_u).max(lo + 1);
                    let share = 1.0 / (hi - lo) as f64;
                    (lo..hi).map(|j| (j, share)).collect()
                }
            }
            ShipStrategy::Rebalance | ShipStrategy::Shuffle | ShipStrategy::Custom | ShipStrategy::Unknown => {
                (0..p_w).map(|j| (j, 1.0 / p_w as f64)).collect()
            }
        }
    }

    fn all_to_all(&self, e: usize) -> bool {
        !matches!(
            self.effective_strategy(e),
            ShipStrategy::Forward | ShipStrategy::Rescale
        )
    }

    /// Records per second subtask `s` of vertex `v` processes when busy all the time.
    pub fn subtask_capacity(&self, v: usize, s: usize) -> f64 {
        let spec = &self.job.vertices[v];
        let factors = &spec.capacity_factors;
        if factors.is_empty() {
            spec.capacity
        } else {
            spec.capacity * factors[s % factors.len()]
        }
    }

    fn process_vertex(&mut self, v: usize, dt: f64) {
        let p = self.vertices[v].parallelism as usize;
        // What each subtask could take from its input.
        let available: Vec<f64> = if self.job.vertices[v].source.is_some() {
            (0..p)
                .map(|s| self.partitions[v].iter().skip(s).step_by(p).sum())
                .collect()
        } else {
            self.vertices[v].subtasks.iter().map(|s| s.buffer).collect()
        };
        // What credit allows each subtask to process, over all its output edges.
        let mut limit = vec![f64::INFINITY; p];
        for &e in &self.outputs[v] {
            let sel = self.job.edges[e].selectivity;
            if sel <= 0.0 {
                continue;
            }
            let w = self.edge_ends[e].1;
            let buffer_secs = self.job.settings.buffer_secs;
            let credit = |j: usize| {
                let st = &self.vertices[w];
                let buffer_cap = self.subtask_capacity(w, j) * buffer_secs;
                (buffer_cap - st.subtasks[j].buffer).max(0.0) / st.senders[j].max(1.0)
            };
            if self.all_to_all(e) {
                let bound = self
                    .targets(e, 0)
                    .into_iter()
                    .filter(|(_, share)| *share > 0.0)
                    .map(|(j, share)| credit(j) / (sel * share))
                    .fold(f64::INFINITY, f64::min);
                for l in &mut limit {
                    *l = l.min(bound);
                }
            } else {
                for (s, l) in limit.iter_mut().enumerate() {
                    let bound = self
                        .targets(e, s)
                        .into_iter()
                        .filter(|(_, share)| *share > 0.0)
                        .map(|(j, share)| credit(j) / (sel * share))
                        .fold(f64::INFINITY, f64::min);
                    *l = l.min(bound);
                }
            }
        }
        let dt_ms = dt * 1000.0;
        let mut processed = vec![0.0; p];
        for s in 0..p {
            let capacity = self.subtask_capacity(v, s);
            let want = available[s].min(capacity * dt);
            let x = want.min(limit[s]).max(0.0);
            processed[s] = x;
            let busy_ms = (x / capacity * 1000.0).min(dt_ms);
            let c = &mut self.vertices[v].subtasks[s].counters;
            c.busy_ms += busy_ms;
            if limit[s] < want {
                c.backpressured_ms += dt_ms - busy_ms;
            } else {
                c.idle_ms += dt_ms - busy_ms;
            }
            c.records_in += x;
            c.records_out += x * self.outputs[v]
                .iter()
                .map(|&e| self.job.edges[e].selectivity)
                .sum::<f64>();
        }
        // Take the processed records from the input.
        if self.job.vertices[v].source.is_some() {
            for (s, x) in processed.iter().enumerate() {
                if available[s] <= 0.0 {
                    continue;
                }
                let keep = ((available[s] - x) / available[s]).clamp(0.0, 1.0);
                for part in self.partitions[v].iter_mut().skip(s).step_by(p) {
                    *part *= keep;
                }
            }
        } else {
            for (s, x) in processed.iter().enumerate() {
                let b = &mut self.vertices[v].subtasks[s].buffer;
                *b = (*b - x).max(0.0);
            }
        }
        let total: f64 = processed.iter().sum();
        self.totals.processed[v] += total;
        // Ship the results downstream.
        for e in self.outputs[v].clone() {
            let sel = self.job.edges[e].selectivity;
            let w = self.edge_ends[e].1;
            let mut delivered = 0.0;
            if self.all_to_all(e) {
                for (j, share) in self.targets(e, 0) {
                    let amount = total * sel * share;
                    self.vertices[w].subtasks[j].buffer += amount;
                    delivered += amount;
                }
            } else {
                for (s, x) in processed.iter().enumerate() {
                    for (j, share) in self.targets(e, s) {
                        let amount = x * sel * share;
                        self.vertices[w].subtasks[j].buffer += amount;
                        delivered += amount;
                    }
                }
            }
            self.totals.delivered[e] += delivered;
        }
    }

    /// Flink's meters of every subtask of vertex `index` (as of the last meter update).
    pub fn subtask_meters(&self, index: usize) -> Vec<SubtaskMeters> {
        let Some(state) = self.vertices.get(index) else {
            return Vec::new();
        };
        let (Some((t_new, newest)), Some((t_old, oldest))) = (state.meters.back(), state.meters.front()) else {
            return Vec::new();
        };
        let span_secs = (t_new - t_old) as f64 / 1000.0;
        let p = state.parallelism as usize;
        (0..p)
            .map(|s| {
                let d = newest[s].minus(&oldest[s]);
                let per_sec = |x: f64| if span_secs > 0.0 { x / span_secs } else { 0.0 };
                let pending = if self.job.vertices[index].source.is_some() {
                    self.partitions[index].iter().skip(s).step_by(p).sum()
                } else {
                    0.0
                };
                SubtaskMeters {
                    busy_ms_per_sec: per_sec(d.busy_ms),
                    backpressured_ms_per_sec: per_sec(d.backpressured_ms),
                    idle_ms_per_sec: per_sec(d.idle_ms),
                    records_in_per_sec: per_sec(d.records_in),
                    records_out_per_sec: per_sec(d.records_out),
                    counters: newest[s],
                    pending_records: pending,
                }
            })
            .collect()
    }

    /// The metrics a collector would read from Flink now, aggregated over subtasks as Flink's
    /// REST API does; `None` while the job is not RUNNING or has not updated its meters yet (the
    /// first `meter_update` after a start).
    pub fn flink_metrics(&self) -> Option<RawJobMetrics> {
        // Right after a (re)start no meter has been updated yet: Flink has nothing to report.
        if self.state != SimJobState::Running || self.vertices.iter().any(|v| v.meters.len() < 2) {
            return None;
        }
        let mut raw = RawJobMetrics::default();
        for (i, v) in self.job.vertices.iter().enumerate() {
            let meters = self.subtask_meters(i);
            let id = VertexId::new(&v.id);
            let mut flink = FlinkMetrics::new();
            flink.insert(
                FlinkMetric::BusyTimePerSec,
                aggregate(meters.iter().map(|m| m.busy_ms_per_sec)),
            );
            flink.insert(
                FlinkMetric::BackpressureTimePerSec,
                aggregate(meters.iter().map(|m| m.backpressured_ms_per_sec)),
            );
            let records_in: f64 = meters.iter().map(|m| m.counters.records_in).sum();
            let records_out: f64 = meters.iter().map(|m| m.counters.records_out).sum();
            if v.source.is_some() {
                flink.insert(
                    FlinkMetric::SourceTaskNumRecordsInPerSec,
                    aggregate(meters.iter().map(|m| m.records_in_per_sec)),
                );
                flink.insert(
                    FlinkMetric::SourceTaskNumRecordsIn,
                    aggregate(meters.iter().map(|m| m.counters.records_in)),
                );
                flink.insert(
                    FlinkMetric::SourceTaskNumRecordsOut,
                    aggregate(meters.iter().map(|m| m.counters.records_out)),
                );
                flink.insert(
                    FlinkMetric::PendingRecords,
                    aggregate(meters.iter().map(|m| m.pending_records)),
                );
            } else {
                flink.insert(
                    FlinkMetric::NumRecordsInPerSec,
                    aggregate(meters.iter().map(|m| m.records_in_per_sec)),
                );
            }
            raw.vertex_metrics.insert(id.clone(), flink);
            // As in Flink's job details, a source task reads nothing from the network.
            raw.io_metrics.insert(
                id,
                IoMetrics {
                    num_records_in: if v.source.is_some() {
                        0
                    } else {
                        records_in.round() as u64
                    },
                    num_records_out: records_out.round() as u64,
                    accumulated_busy_time: meters.iter().map(|m| m.counters.busy_ms).sum(),
                },
            );
        }
        // One slot sharing group: the job uses as many slots as its widest vertex.
        let slots = self
            .vertices
            .iter()
            .map(|v| f64::from(v.parallelism))
            .fold(0.0, f64::max);
        raw.task_slots = Some(TaskSlotMetrics {
            total: slots,
            available: 0.0,
        });
        if let Some(memory) = self.job.settings.task_manager_memory {
            for (metric, bytes) in [
                (FlinkMetric::HeapMemoryMax, memory.heap_max),
                (FlinkMetric::HeapMemoryUsed, memory.heap_used),
                (FlinkMetric::MetaspaceMemoryUsed, memory.metaspace_used),
                (FlinkMetric::ManagedMemoryUsed, memory.managed_used),
            ] {
                raw.task_manager_metrics.insert(metric, aggregate([bytes].into_iter()));
            }
        }
        Some(raw)
    }

    /// The steady-state input rate (records/s) of every vertex at `t` seconds, from the sources'
    /// profiles (without noise or backlog) and the edge selectivities.
    pub fn steady_input_rates(&self, t_secs: f64) -> Vec<f64> {
        let mut rate = vec![0.0; self.job.vertices.len()];
        for &v in &self.order {
            if let Some(src) = &self.job.vertices[v].source {
                rate[v] = src.profile.rate_at(t_secs);
            }
            for &e in &self.outputs[v] {
                let w = self.edge_ends[e].1;
                rate[w] += rate[v] * self.job.edges[e].selectivity;
            }
        }
        rate
    }

    /// The smallest parallelism per vertex at which no subtask is busier than `utilization`
    /// under the steady-state rates at `t` seconds: the optimum an autoscaler aiming at
    /// `utilization` should find. Key skew and partition assignment are taken into account;
    /// capped at the max parallelism (and at a source's partition count, beyond which extra
    /// subtasks get no data).
    pub fn optimal_parallelism(&self, t_secs: f64, utilization: f64) -> BTreeMap<String, u32> {
        let rates = self.steady_input_rates(t_secs);
        let mut out = BTreeMap::new();
        for (v, spec) in self.job.vertices.iter().enumerate() {
            let max_p = spec.max_parallelism.max(1);
            let budget = spec.capacity * utilization;
            let mut chosen = max_p;
            for p in 1..=max_p {
                if self.busiest_subtask_load(v, p, &rates) <= budget + 1e-9 {
                    chosen = p;
                    break;
                }
            }
            if let Some(parts) = spec.source.as_ref().and_then(|s| s.partitions) {
                chosen = chosen.min(parts.max(1));
            }
            out.insert(spec.id.clone(), chosen);
        }
        out
    }

    /// Records/s reaching each subtask of vertex `v` at parallelism `p`, relative to its capacity
    /// factor, for the busiest subtask: the rate a subtask of base capacity would have to sustain.
    fn busiest_subtask_load(&self, v: usize, p: u32, rates: &[f64]) -> f64 {
        let factor = |j: usize| self.subtask_capacity(v, j) / self.job.vertices[v].capacity;
        self.subtask_rates(v, p, rates)
            .into_iter()
            .enumerate()
            .map(|(j, r)| r / factor(j))
            .fold(0.0, f64::max)
    }

    /// Records/s reaching each subtask of vertex `v` at parallelism `p` under the vertex input
    /// rates `rates` (the upstream parallelism does not matter: pointwise edges are spread evenly).
    fn subtask_rates(&self, v: usize, p: u32, rates: &[f64]) -> Vec<f64> {
        let spec = &self.job.vertices[v];
        let n = p.max(1) as usize;
        if let Some(src) = &spec.source {
            return match src.partitions {
                Some(parts) => {
                    let parts = parts.max(1) as usize;
                    (0..n)
                        .map(|s| rates[v] * (s..parts).step_by(n).count() as f64 / parts as f64)
                        .collect()
                }
                None => vec![rates[v] / n as f64; n],
            };
        }
        let mut load = vec![0.0; n];
        let hash = key_group_shares(&self.key_weights[v], p);
        for &e in &self.inputs[v] {
            let u = self.edge_ends[e].0;
            let edge_rate = rates[u] * self.job.edges[e].selectivity;
            match self.job.edges[e].ship_strategy {
                ShipStrategy::Hash => {
                    for (j, l) in load.iter_mut().enumerate() {
                        *l += edge_rate * hash[j];
                    }
                }
                ShipStrategy::Broadcast => load.iter_mut().for_each(|l| *l += edge_rate),
                ShipStrategy::Global => load[0] += edge_rate,
                _ => load.iter_mut().for_each(|l| *l += edge_rate / n as f64),
            }
        }
        load
    }
}

/// min/max/avg/sum over subtask values, as Flink's aggregated subtask metrics.
fn aggregate(values: impl Iterator<Item = f64>) -> AggregatedMetric {
    let values: Vec<f64> = values.collect();
    if values.is_empty() {
        return AggregatedMetric::NAN;
    }
    let sum: f64 = values.iter().sum();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let avg = sum / values.len() as f64;
    let skew = if avg > 0.0 { (max - min) / avg * 100.0 } else { 0.0 };
    AggregatedMetric {
        min,
        max,
        avg,
        sum,
        skew,
    }
}

/// Relative weight of each key group under `skew` (summing to 1).
fn key_group_weights(max_parallelism: u32, skew: &KeySkew, rng: &mut SplitMix64) -> Vec<f64> {
    let n = max_parallelism.max(1) as usize;
    let mut w = match skew {
        KeySkew::Uniform => vec![1.0; n],
        KeySkew::Zipf { exponent } => {
            let mut ranks: Vec<usize> = (0..n).collect();
            // Fisher-Yates with the seeded generator: which key group holds which rank.
            for i in (1..n).rev() {
                let j = rng.next_index(i + 1);
                ranks.swap(i, j);
            }
            ranks
                .into_iter()
                .map(|r| 1.0 / ((r + 1) as f64).powf(*exponent))
                .collect()
        }
        KeySkew::HotKey { share } => {
            let share = share.clamp(0.0, 1.0);
            let rest = if n > 1 { (1.0 - share) / (n - 1) as f64 } else { 0.0 };
            let hot = rng.next_index(n);
            (0..n)
                .map(|k| {
                    if k == hot {
                        share + if n == 1 { 1.0 - share } else { 0.0 }
                    } else {
                        rest
                    }
                })
                .collect()
        }
    };
    let total: f64 = w.iter().sum();
    if total > 0.0 {
        w.iter_mut().for_each(|x| *x /= total);
    }
    w
}

/// Share of HASH records per subtask at parallelism `p`: key group `k` belongs to subtask
/// `k * p / maxParallelism` (Flink's `KeyGroupRangeAssignment`).
fn key_group_shares(weights: &[f64], p: u32) -> Vec<f64> {
    let n = weights.len().max(1);
    let p = p.max(1) as usize;
    let mut shares = vec![0.0; p];
    for (k, w) in weights.iter().enumerate() {
        shares[(k * p / n).min(p - 1)] += w;
    }
    shares
}

fn build_topology(job: &SimJob, parallelism: &[u32]) -> Result<JobTopology, SimError> {
    let vertices = job
        .vertices
        .iter()
        .zip(parallelism)
        .map(|(v, p)| {
            let mut spec = VertexSpec::new(v.id.as_str(), *p, v.max_parallelism);
            spec.name = Some(v.name.clone());
            spec.num_source_partitions = v.source.as_ref().and_then(|s| s.partitions).unwrap_or(0);
            spec
        })
        .collect();
    let edges = job
        .edges
        .iter()
        .map(|e| EdgeSpec::new(e.from.as_str(), e.to.as_str(), e.ship_strategy))
        .collect();
    JobTopology::new(vertices, edges).map_err(|e| SimError::Topology(e.to_string()))
}

fn validate(job: &SimJob) -> Result<(), SimError> {
    for v in &job.vertices {
        if !(v.capacity.is_finite() && v.capacity > 0.0) {
            return Err(SimError::Capacity {
                vertex: v.id.clone(),
                capacity: v.capacity,
            });
        }
        let has_inputs = job.edges.iter().any(|e| e.to == v.id);
        match (&v.source, has_inputs) {
            (None, false) => {
                return Err(SimError::SourceMismatch {
                    vertex: v.id.clone(),
                    problem: "has no inputs but no source spec",
                });
            }
            (Some(_), true) => {
                return Err(SimError::SourceMismatch {
                    vertex: v.id.clone(),
                    problem: "has a source spec but also inputs",
                });
            }
            _ => {}
        }
    }
    for v in &job.vertices {
        if v.capacity_factors.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
            return Err(SimError::Setting {
                setting: "capacity_factors",
                problem: "every factor must be a positive number",
            });
        }
    }
    for e in &job.edges {
        if !(e.selectivity.is_finite() && e.selectivity >= 0.0) {
            return Err(SimError::Selectivity {
                from: e.from.clone(),
                to: e.to.clone(),
                selectivity: e.selectivity,
            });
        }
    }
    let s = &job.settings;
    if s.step.is_zero() {
        return Err(SimError::Setting {
            setting: "step",
            problem: "must be positive",
        });
    }
    if !(s.buffer_secs.is_finite() && s.buffer_secs > 0.0) {
        return Err(SimError::Setting {
            setting: "buffer_secs",
            problem: "must be a positive number",
        });
    }
    if !(0.0..1.0).contains(&s.rate_noise) {
        return Err(SimError::Setting {
            setting: "rate_noise",
            problem: "must be in [0, 1)",
        });
    }
    Ok(())
}
