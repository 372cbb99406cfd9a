//! Fuzz target `replay_parse`: see `autoscaler_replay::fuzzing::replay_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::replay_parse(data));
