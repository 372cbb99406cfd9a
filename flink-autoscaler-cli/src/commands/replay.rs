//! The `replay` command: one cycle on a scenario, or every cycle of a recording.

use crate::io::{read_input, report};
use std::io::Write;
use std::process::ExitCode;

/// `replay SCENARIO`: one cycle on a scenario file or standard input.
pub fn run_replay(source: &str) -> ExitCode {
    let text = match read_input(source) {
        Ok(t) => t,
        Err(message) => {
            report(&format!("invalid scenario: {message}"));
            return ExitCode::from(2);
        }
    };
    // The text is dropped once the scenario is parsed, and the result is written section by
    // section as it is serialized: a large scenario never holds the text, or the result's JSON, at
    // once with the rest.
    let scenario = autoscaler_replay::parse_scenario(&text);
    drop(text);
    let scenario = match scenario {
        Ok(scenario) => scenario,
        Err(e) => {
            report(&e.to_string());
            return ExitCode::from(2);
        }
    };
    match autoscaler_replay::replay_result(scenario) {
        Ok(result) => {
            let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match result.write_json(out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    report(&format!("cannot write the result: {e}"));
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            report(&e.to_string());
            ExitCode::from(2)
        }
    }
}

/// `replay --recording FILE [--set key=value ...] [--from T] [--to T] [--json]`.
pub fn run_replay_recording(
    path: &std::path::Path,
    set: &[String],
    from: Option<&str>,
    to: Option<&str>,
    json: bool,
) -> ExitCode {
    use autoscaler_replay::recording_replay::{WhatIf, render, replay_recording};
    let result = WhatIf::parse(set, from, to).and_then(|what_if| {
        let reader = autoscaler_replay::recording::open_recording_file(path)?;
        replay_recording(reader, &what_if)
    });
    let replayed = match result {
        Ok(r) => r,
        Err(e) => {
            report(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let text = if json {
        match serde_json::to_string_pretty(&replayed) {
            Ok(t) => format!("{t}\n"),
            Err(e) => {
                report(&format!("cannot write the result: {e}"));
                return ExitCode::from(1);
            }
        }
    } else {
        render(&replayed)
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&format!("cannot write the result: {e}"));
            ExitCode::from(1)
        }
    }
}
