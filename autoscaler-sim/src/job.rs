//! The description of a simulated job: [`SimJob`], its vertices, edges, sources and settings.

use crate::profile::RateProfile;
use autoscaler_metrics::ShipStrategy;
use std::time::Duration;

/// How keys are spread over the key groups of a vertex's HASH inputs.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum KeySkew {
    /// Every key group gets the same share of the records.
    #[default]
    Uniform,
    /// Key group shares follow Zipf's law with this exponent (ranks shuffled over the key groups
    /// with the simulation seed).
    Zipf {
        /// The Zipf exponent (1.0 is the classic law).
        exponent: f64,
    },
    /// One key group gets `share` of all records, the rest is uniform.
    HotKey {
        /// Fraction of records of the hot key, 0..1.
        share: f64,
    },
}

/// The external system feeding a source vertex (a Kafka topic, say).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// Arrival rate over time.
    pub profile: RateProfile,
    /// Records already waiting when the simulation starts.
    pub initial_backlog: f64,
    /// Number of partitions, assigned round-robin to subtasks (`None`: the backlog is shared
    /// evenly by all subtasks, and no partition count is reported).
    pub partitions: Option<u32>,
}

/// One vertex of the simulated job.
#[derive(Debug, Clone, PartialEq)]
pub struct SimVertex {
    /// Vertex id (what the autoscaler sees).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Records per second one subtask processes when it is busy 100% of the time.
    pub capacity: f64,
    /// Parallelism when the simulation starts.
    pub parallelism: u32,
    /// Max parallelism (number of key groups).
    pub max_parallelism: u32,
    /// Set for source vertices (vertices without inputs).
    pub source: Option<SourceSpec>,
    /// Key distribution of the records arriving over HASH edges.
    pub key_skew: KeySkew,
    /// Per-subtask capacity multipliers, cycled over the subtasks (subtask `i` processes
    /// `capacity * factors[i % len]`), e.g. `[1.0, 1.0, 1.0, 0.5]` for every fourth subtask on a
    /// slow machine. Empty: every subtask has `capacity`.
    pub capacity_factors: Vec<f64>,
}

impl SimVertex {
    /// A non-source vertex.
    pub fn new(id: impl Into<String>, capacity: f64, parallelism: u32) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            capacity,
            parallelism,
            max_parallelism: 128,
            source: None,
            key_skew: KeySkew::Uniform,
            capacity_factors: Vec::new(),
        }
    }

    /// A source vertex fed by `profile`.
    pub fn source(id: impl Into<String>, capacity: f64, parallelism: u32, profile: RateProfile) -> Self {
        Self {
            source: Some(SourceSpec {
                profile,
                initial_backlog: 0.0,
                partitions: None,
            }),
            ..Self::new(id, capacity, parallelism)
        }
    }

    /// Sets the max parallelism.
    pub fn max_parallelism(mut self, max_parallelism: u32) -> Self {
        self.max_parallelism = max_parallelism;
        self
    }

    /// Sets the key skew of HASH inputs.
    pub fn key_skew(mut self, skew: KeySkew) -> Self {
        self.key_skew = skew;
        self
    }

    /// Sets per-subtask capacity multipliers (see [`SimVertex::capacity_factors`]).
    pub fn capacity_factors(mut self, factors: Vec<f64>) -> Self {
        self.capacity_factors = factors;
        self
    }

    /// Sets the initial backlog of a source (ignored for non-sources).
    pub fn backlog(mut self, records: f64) -> Self {
        if let Some(s) = &mut self.source {
            s.initial_backlog = records;
        }
        self
    }

    /// Sets the partition count of a source (ignored for non-sources).
    pub fn partitions(mut self, partitions: u32) -> Self {
        if let Some(s) = &mut self.source {
            s.partitions = Some(partitions);
        }
        self
    }
}

/// An edge of the simulated job.
#[derive(Debug, Clone, PartialEq)]
pub struct SimEdge {
    /// Upstream vertex id.
    pub from: String,
    /// Downstream vertex id.
    pub to: String,
    /// How records are distributed to downstream subtasks.
    pub ship_strategy: ShipStrategy,
    /// Records sent on this edge per record the upstream vertex processes (a filter < 1, a
    /// flat-map > 1). BROADCAST sends each of them to every downstream subtask.
    pub selectivity: f64,
}

impl SimEdge {
    /// An edge with selectivity 1.
    pub fn new(from: impl Into<String>, to: impl Into<String>, ship_strategy: ShipStrategy) -> Self {
        Self {
            from: from.into(),
            to: to.into(),
            ship_strategy,
            selectivity: 1.0,
        }
    }

    /// Sets the selectivity.
    pub fn selectivity(mut self, selectivity: f64) -> Self {
        self.selectivity = selectivity;
        self
    }
}

/// Settings of the simulated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSettings {
    /// Length of one simulation step (smaller is more precise, slower).
    pub step: Duration,
    /// Input buffer of a subtask, in seconds of its own capacity (Flink's network buffers).
    pub buffer_secs: f64,
    /// Time from a rescale request being applied to the job RUNNING again; nothing is processed
    /// meanwhile while records keep arriving.
    pub restart_downtime: Duration,
    /// The adaptive scheduler's `jobmanager.adaptive-scheduler.scaling-interval.min`: a new
    /// resource requirement is applied no earlier than this after the job last started running.
    pub scaling_interval_min: Duration,
    /// Span of Flink's per-second meters and time gauges (60 s in Flink).
    pub meter_span: Duration,
    /// How often meters are updated (5 s in Flink's metric view updater).
    pub meter_update: Duration,
    /// Relative noise on arrival rates, 0..1 (0.02 = ±2% per step, uniform).
    pub rate_noise: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// What the TaskManagers report about their memory (heap, metaspace, managed memory), which
    /// memory tuning reads; `None` (the default) reports nothing, as a job without TaskManager
    /// metrics.
    pub task_manager_memory: Option<SimTaskManagerMemory>,
}

/// The memory the simulated TaskManagers report as in use, in bytes (the largest TaskManager, as
/// the collector aggregates them): constant, whatever the load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimTaskManagerMemory {
    /// `Status.JVM.Memory.Heap.Max`.
    pub heap_max: f64,
    /// `Status.JVM.Memory.Heap.Used`.
    pub heap_used: f64,
    /// `Status.JVM.Memory.Metaspace.Used`.
    pub metaspace_used: f64,
    /// `Status.Flink.Memory.Managed.Used` (0 without RocksDB).
    pub managed_used: f64,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self {
            step: Duration::from_millis(100),
            buffer_secs: 1.0,
            restart_downtime: Duration::from_secs(20),
            scaling_interval_min: Duration::from_secs(30),
            meter_span: Duration::from_secs(60),
            meter_update: Duration::from_secs(5),
            rate_noise: 0.0,
            seed: 1,
            task_manager_memory: None,
        }
    }
}

/// A simulated job: vertices, edges and cluster settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimJob {
    /// Job name (also the job key and job id the autoscaler sees).
    pub name: String,
    /// Vertices.
    pub vertices: Vec<SimVertex>,
    /// Edges.
    pub edges: Vec<SimEdge>,
    /// Cluster settings.
    pub settings: SimSettings,
}

impl SimJob {
    /// An empty job called `name` with default settings.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            vertices: Vec::new(),
            edges: Vec::new(),
            settings: SimSettings::default(),
        }
    }

    /// Adds a vertex.
    pub fn vertex(mut self, vertex: SimVertex) -> Self {
        self.vertices.push(vertex);
        self
    }

    /// Adds an edge.
    pub fn edge(mut self, edge: SimEdge) -> Self {
        self.edges.push(edge);
        self
    }

    /// Replaces the settings.
    pub fn settings(mut self, settings: SimSettings) -> Self {
        self.settings = settings;
        self
    }
}

/// Why a [`SimJob`] cannot be simulated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The graph is not a valid job graph (duplicate or unknown ids, cycle, zero parallelism).
    #[error("invalid job graph: {0}")]
    Topology(String),
    /// A vertex has a non-positive or non-finite capacity.
    #[error("vertex {vertex}: capacity must be a positive number, got {capacity}")]
    Capacity {
        /// The vertex.
        vertex: String,
        /// The bad capacity.
        capacity: f64,
    },
    /// A vertex without inputs has no source spec, or a vertex with inputs has one.
    #[error("vertex {vertex}: {problem}")]
    SourceMismatch {
        /// The vertex.
        vertex: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// An edge selectivity is negative or not finite.
    #[error("edge {from} -> {to}: selectivity must be a finite number >= 0, got {selectivity}")]
    Selectivity {
        /// Upstream vertex.
        from: String,
        /// Downstream vertex.
        to: String,
        /// The bad selectivity.
        selectivity: f64,
    },
    /// A setting is out of range.
    #[error("setting {setting}: {problem}")]
    Setting {
        /// The setting.
        setting: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
}
