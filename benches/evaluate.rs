//! Benchmarks (filled in later).
fn main() {}
