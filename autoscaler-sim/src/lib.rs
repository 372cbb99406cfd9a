//! # autoscaler-sim
//!
//! A deterministic simulated Flink job to run the autoscaler against, and the harness that does so
//! (a dev-dependency of the examples and tests, never public API of a published crate).
//!
//! - [`Simulator`]: a job of vertices with a per-subtask capacity, edges with ship strategies and
//!   selectivities, sources with a [`RateProfile`] and a backlog; records move in small steps
//!   through bounded buffers with credit-based flow control, and the job reports what Flink
//!   reports (busy/backpressured/idle ms per second, record rates and counters, pendingRecords).
//!   A rescale costs a restart downtime.
//! - The simulator behind the autoscaler's own traits ([`SimMetricsCollector`],
//!   [`SimScalingRealizer`], [`SimJobListFetcher`]) and a clock following simulated time
//!   ([`SimHandle::clock`]).
//! - [`harness`]: runs `JobAutoScalerImpl` on a simulator cycle by cycle and measures convergence.
//! - [`workloads`]: the job shapes of the examples and the convergence benchmark.
//! - [`bottleneck`]: the true bottleneck of a simulated job, by experiment, and the root-cause
//!   rule's verdict on it (precision and recall of the rule).
//! - [`logs`]: log lines captured in memory, for the tests that check what was logged.

// The simulator and its adapters: private modules, their items at the root.
mod adapters;
mod engine;
mod job;
mod profile;

// Namespaces: their items are reached through them only.
pub mod bottleneck;
pub mod harness;
pub mod logs;
pub mod rng;
pub mod workloads;

pub use adapters::{
    SimContext, SimHandle, SimJobListFetcher, SimMetricsCollector, SimScalingRealizer, sim_epoch, sim_instant,
};
pub use engine::{Counters, RescaleEvent, SimJobState, Simulator, SubtaskMeters, Totals};
pub use job::{KeySkew, SimEdge, SimError, SimJob, SimSettings, SimTaskManagerMemory, SimVertex, SourceSpec};
pub use profile::RateProfile;
