//! Fuzz target `state_codec`: see `flink_autoscaler::fuzzing::state_codec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::state_codec(data));
