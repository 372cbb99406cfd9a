//! Fuzz target `config_values`: see `autoscaler_replay::fuzzing::config_values`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::config_values(data));
