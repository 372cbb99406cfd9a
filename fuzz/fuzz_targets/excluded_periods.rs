//! Fuzz target `excluded_periods`: see `autoscaler_replay::fuzzing::excluded_periods`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoscaler_replay::fuzzing::excluded_periods(data));
