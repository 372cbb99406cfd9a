//! The simulated fleet: N jobs of V vertices in a chain, with deterministic rates and the metric
//! values Flink would report for them.
//!
//! Job `j` reads `1000 * (1 + j % 5)` records per second. Vertex `v` of job `j` runs at
//! parallelism `1 + (j + v) % 4` at first, and one subtask processes `rate / (p0 * u)` records per
//! second, so that its utilization is `u = 0.5 + 0.1 * ((j + v) % 3)` at the initial parallelism:
//! inside the autoscaler's default band (target 0.7, boundary 0.3), so these jobs are never scaled.
//! A *hot* job (every `hot_every`-th job) has vertex 1 at utilization 1.4: a bottleneck that the
//! autoscaler scales up, after which Flink's adaptive scheduler (this fake) restarts the job at the
//! new parallelism.
//!
//! The throughput of a job is the smaller of its source rate and the capacity of its slowest
//! vertex; busy time is throughput over capacity, vertices upstream of a bottleneck are
//! backpressured for the rest of the second, and the source's `pendingRecords` grows by the rate
//! it cannot read. Counters (records in/out, accumulated busy time) are rate times the seconds
//! since the job last switched to RUNNING.

/// The metric-related numbers of one vertex at its current parallelism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct VertexRates {
    /// Records per second through the vertex (the job's throughput).
    pub throughput: f64,
    /// Busy time, ms per second (0..=1000).
    pub busy: f64,
    /// Backpressured time, ms per second.
    pub backpressured: f64,
    /// Idle time, ms per second.
    pub idle: f64,
    /// Records per second the source cannot read (0 for other vertices).
    pub lag_rate: f64,
}

/// Source rate of job `j`, records per second.
pub(crate) fn source_rate(job: usize) -> f64 {
    1000.0 * (1 + job % 5) as f64
}

/// Initial parallelism of vertex `v` of job `j`.
pub(crate) fn initial_parallelism(job: usize, vertex: usize) -> u32 {
    1 + ((job + vertex) % 4) as u32
}

/// Utilization of vertex `v` of job `j` at its initial parallelism.
fn initial_utilization(job: usize, vertex: usize, hot: bool) -> f64 {
    if hot && vertex == 1 {
        1.4
    } else {
        0.5 + 0.1 * ((job + vertex) % 3) as f64
    }
}

/// Records per second one subtask of the vertex can process.
pub(crate) fn subtask_capacity(job: usize, vertex: usize, hot: bool) -> f64 {
    source_rate(job) / (f64::from(initial_parallelism(job, vertex)) * initial_utilization(job, vertex, hot))
}

/// The rates of every vertex of a job at `parallelism` (one entry per vertex, vertex 0 the source).
pub(crate) fn vertex_rates(job: usize, hot: bool, parallelism: &[u32]) -> Vec<VertexRates> {
    let capacity: Vec<f64> = parallelism
        .iter()
        .enumerate()
        .map(|(v, p)| subtask_capacity(job, v, hot) * f64::from(*p))
        .collect();
    let rate = source_rate(job);
    let throughput = capacity.iter().copied().fold(rate, f64::min);
    let bottleneck = capacity.iter().position(|c| *c <= throughput);
    capacity
        .iter()
        .enumerate()
        .map(|(v, c)| {
            let busy = (1000.0 * throughput / c).min(1000.0);
            let upstream_of_bottleneck = throughput < rate && bottleneck.is_some_and(|b| v < b);
            let backpressured = if upstream_of_bottleneck { 1000.0 - busy } else { 0.0 };
            VertexRates {
                throughput,
                busy,
                backpressured,
                idle: (1000.0 - busy - backpressured).max(0.0),
                lag_rate: if v == 0 { rate - throughput } else { 0.0 },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_job_runs_inside_the_band() {
        // Job 0: rate 1000; vertex 0 at p=1 and u=0.5: capacity 2000/s, busy 500 ms/s.
        let p: Vec<u32> = (0..3).map(|v| initial_parallelism(0, v)).collect();
        assert_eq!(p, vec![1, 2, 3]);
        let rates = vertex_rates(0, false, &p);
        assert!((rates[0].busy - 500.0).abs() < 1e-9);
        // Vertex 1: u = 0.6, vertex 2: u = 0.7.
        assert!((rates[1].busy - 600.0).abs() < 1e-9);
        assert!((rates[2].busy - 700.0).abs() < 1e-9);
        assert!(rates.iter().all(|r| r.backpressured == 0.0 && r.lag_rate == 0.0));
    }

    #[test]
    fn a_hot_job_has_a_bottleneck_until_it_is_scaled() {
        // Job 0 hot: vertex 1 (p=2) can do 1000 / 1.4 = 714.3/s; the source is backpressured.
        let rates = vertex_rates(0, true, &[1, 2, 3]);
        assert!((rates[0].throughput - 1000.0 / 1.4).abs() < 1e-9);
        assert!((rates[1].busy - 1000.0).abs() < 1e-9);
        assert!(rates[0].backpressured > 0.0);
        assert_eq!(rates[2].backpressured, 0.0);
        assert!((rates[0].lag_rate - (1000.0 - 1000.0 / 1.4)).abs() < 1e-9);
        // At p=4 vertex 1 runs at 0.7.
        let scaled = vertex_rates(0, true, &[1, 4, 3]);
        assert!((scaled[1].busy - 700.0).abs() < 1e-9);
        assert_eq!(scaled[0].lag_rate, 0.0);
    }
}
