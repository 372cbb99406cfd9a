//! Fuzz target `replay_parse`: see `flink_autoscaler::fuzzing::replay_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::replay_parse(data));
