//! Fuzz target `replay_whole`: see `autoscaler_replay::fuzzing::replay_whole`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::replay_whole(data));
