//! Fuzz target `flink_rest_models`: see `flink_autoscaler::fuzzing::flink_rest_models`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::flink_rest_models(data));
