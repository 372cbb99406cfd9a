//! Fuzz target `excluded_periods`: see `flink_autoscaler::fuzzing::excluded_periods`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::excluded_periods(data));
