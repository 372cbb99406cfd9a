//! The `flink-autoscaler` binary: `replay` (what-if on recorded metrics), `run` (the standalone
//! autoscaler against Flink clusters and YARN), `bottleneck` (the root cause of a running job's
//! backpressure) and `explain` (a decision in words). Everything lives in the library
//! [`flink_autoscaler_cli`]; this is its entry point.

fn main() -> std::process::ExitCode {
    flink_autoscaler_cli::cli::main()
}
