//! Fuzz target `state_codec`: see `autoscaler_replay::fuzzing::state_codec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::state_codec(data));
