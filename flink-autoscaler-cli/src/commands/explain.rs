//! The binary's `explain` command.

use autoscaler_replay::explain::{records_in, render};
use std::io::Write;
use std::process::ExitCode;

fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the output: {e}");
            ExitCode::from(1)
        }
    }
}

/// `explain SOURCE`: a file (a decision record, a replay result, a `/jobs/{key}` answer, a
/// recording replay's JSON), `-` for standard input, or a running service's
/// `http://127.0.0.1:PORT/jobs/KEY`.
pub fn explain(source: &str) -> ExitCode {
    let text = if source.starts_with("http://") {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("cannot start the runtime: {e}");
                return ExitCode::from(1);
            }
        };
        match runtime.block_on(crate::status::fetch_loopback(
            source,
            std::time::Duration::from_secs(10),
        )) {
            Ok(t) => t,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(1);
            }
        }
    } else {
        match crate::io::read_input(source) {
            Ok(t) => t,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(2);
            }
        }
    };
    let document: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{source}: not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    match records_in(&document) {
        Ok(records) => {
            let texts: Vec<String> = records.iter().map(render).collect();
            print(&texts.join("\n"))
        }
        Err(e) => {
            eprintln!("{source}: {e}");
            ExitCode::from(2)
        }
    }
}
