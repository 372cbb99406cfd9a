//! Fuzz target `yarn_responses`: see `flink_autoscaler::fuzzing::yarn_responses`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::yarn_responses(data));
