//! Fuzz target `yarn_responses`: see `autoscaler_replay::fuzzing::yarn_responses`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::yarn_responses(data));
