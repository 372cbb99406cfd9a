//! Fuzz target `flink_rest_models`: see `autoscaler_replay::fuzzing::flink_rest_models`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::flink_rest_models(data));
