//! Fuzz target `replay_whole`: see `flink_autoscaler::fuzzing::replay_whole`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::replay_whole(data));
