//! The `flink-autoscaler` binary.

fn main() {}
