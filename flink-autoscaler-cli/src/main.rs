//! The `flink-autoscaler` binary: `replay` (what-if on recorded metrics), `run` (the standalone
//! autoscaler against Flink clusters and YARN), `bottleneck` (the root cause of a running job's
//! backpressure) and `explain` (a decision in words). Everything lives in the library
//! [`flink_autoscaler_cli`]; this is its entry point.

// The service allocates and frees many small buffers per request (bodies, parsed JSON, labels);
// under glibc's malloc, allocation was about a quarter of its CPU (docs/service-benchmark.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    flink_autoscaler_cli::cli::main()
}
