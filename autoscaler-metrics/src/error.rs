//! The engine's error type.

use crate::VertexId;

/// Errors of the evaluation engine: an invalid topology, history or input value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The topology has no vertex.
    #[error("the job topology has no vertex")]
    EmptyTopology,
    /// A vertex id is the empty string.
    #[error("a vertex id is empty; give every vertex a non-empty id")]
    EmptyVertexId,
    /// Two vertices share an id.
    #[error("vertex id {vertex} appears twice; vertex ids must be unique")]
    DuplicateVertex {
        /// The repeated id.
        vertex: VertexId,
    },
    /// A vertex has parallelism 0.
    #[error("vertex {vertex} has parallelism 0; parallelism must be at least 1")]
    ZeroParallelism {
        /// The vertex.
        vertex: VertexId,
    },
    /// A vertex has max parallelism 0.
    #[error("vertex {vertex} has max parallelism 0; max parallelism must be at least 1")]
    ZeroMaxParallelism {
        /// The vertex.
        vertex: VertexId,
    },
    /// A vertex's parallelism exceeds its max parallelism.
    #[error("vertex {vertex} has parallelism {parallelism} above its max parallelism {max_parallelism}")]
    ParallelismAboveMax {
        /// The vertex.
        vertex: VertexId,
        /// Its parallelism.
        parallelism: u32,
        /// Its max parallelism.
        max_parallelism: u32,
    },
    /// An edge or a metric refers to a vertex that is not in the topology.
    #[error("unknown vertex {vertex} ({context}); it is not in the job topology")]
    UnknownVertex {
        /// The unknown id.
        vertex: VertexId,
        /// Where it was referenced.
        context: &'static str,
    },
    /// Two edges connect the same pair of vertices.
    #[error("more than one edge from {from} to {to}")]
    DuplicateEdge {
        /// Upstream vertex.
        from: VertexId,
        /// Downstream vertex.
        to: VertexId,
    },
    /// The graph has a cycle.
    #[error("the job graph has a cycle through vertex {vertex}; a streaming job graph must be acyclic")]
    Cycle {
        /// A vertex on (or behind) the cycle.
        vertex: VertexId,
    },
    /// A snapshot was added out of time order.
    #[error("metric snapshot at {at} is not after the latest snapshot at {latest}")]
    OutOfOrderSnapshot {
        /// The rejected snapshot's time.
        at: chrono::DateTime<chrono::Utc>,
        /// The latest snapshot already held.
        latest: chrono::DateTime<chrono::Utc>,
    },
    /// A source has no input-rate information at all (the reference's RuntimeException).
    #[error("Cannot evaluate metrics without ingestion rate information")]
    MissingIngestionRate {
        /// The source vertex.
        vertex: VertexId,
    },
}
