//! Fuzz target `config_values`: see `flink_autoscaler::fuzzing::config_values`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flink_autoscaler::fuzzing::config_values(data));
