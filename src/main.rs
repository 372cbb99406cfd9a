//! The `flink-autoscaler` binary: `replay` (what-if on recorded metrics), `run` (the standalone
//! autoscaler against a Flink cluster), `bottleneck` (the root cause of a running job's
//! backpressure) and `explain` (a decision in words).

mod bottleneck;
mod cli_record;
mod run;

use clap::{Parser, Subcommand};
use std::io::{Read, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "flink-autoscaler",
    version,
    about = "Autoscaler for Apache Flink streaming jobs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate and decide one autoscaler cycle on a recorded scenario (flink-autoscaler-scenario/1),
    /// or, with `--recording`, every cycle of a recording written by `run --record`.
    Replay {
        /// Scenario file, or `-` for standard input.
        #[arg(required_unless_present = "recording", conflicts_with = "recording")]
        scenario: Option<String>,
        /// A recording (`DIR/<job>.jsonl` of `run --record`): replay its cycles with the state
        /// carried from cycle to cycle, print each decision and a summary.
        #[arg(long, value_name = "FILE")]
        recording: Option<std::path::PathBuf>,
        /// Run the recorded and this changed configuration side by side and say where their
        /// decisions diverge (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", requires = "recording")]
        set: Vec<String>,
        /// Report the cycles from this RFC 3339 instant on (the change takes effect there).
        #[arg(long, value_name = "T", requires = "recording")]
        from: Option<String>,
        /// Report the cycles up to this RFC 3339 instant.
        #[arg(long, value_name = "T", requires = "recording")]
        to: Option<String>,
        /// Print the replay as JSON (flink-autoscaler-recording-replay/1) instead of text.
        #[arg(long, requires = "recording")]
        json: bool,
    },
    /// Explain a decision in words: a replay result, a recording replay's JSON, a decision record,
    /// or a running service's `http://127.0.0.1:PORT/jobs/KEY`.
    Explain {
        /// File, `-` for standard input, or a loopback `http://` URL.
        source: String,
    },
    /// Run the standalone autoscaler against Flink clusters and YARN (adaptive scheduler, rescale API).
    Run(Box<run::RunArgs>),
    /// Name the vertex holding a running job back (root cause of backpressure); scales nothing.
    Bottleneck(bottleneck::BottleneckArgs),
}

/// Largest scenario read (the reference's 1000-vertex benchmark scenario is 9 MB).
const MAX_SCENARIO_BYTES: u64 = 64 * 1024 * 1024;

/// Reads at most `limit` bytes of UTF-8 text from `reader`; more is an error naming the limit.
fn read_text_limited(reader: impl Read, limit: u64) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(std::io::Error::other(format!("larger than the limit of {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads the file at `path`, at most `limit` bytes (a `/dev/zero` or a huge file is an error, not
/// an out-of-memory abort).
pub(crate) fn read_limited(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    read_text_limited(std::fs::File::open(path)?, limit)
}

/// Reads the scenario text from a path or stdin.
fn read_input(source: &str) -> Result<String, String> {
    if source == "-" {
        read_text_limited(std::io::stdin().lock(), MAX_SCENARIO_BYTES)
            .map_err(|e| format!("cannot read standard input: {e}"))
    } else {
        read_limited(std::path::Path::new(source), MAX_SCENARIO_BYTES).map_err(|e| format!("cannot read {source}: {e}"))
    }
}

/// Writes one line to stderr, ignoring a closed pipe: `eprintln!` panics when stderr is gone, and a
/// panic whose report panics too aborts the process (SIGABRT) instead of exiting with a code.
fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{message}");
}

fn run_replay(source: &str) -> ExitCode {
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
    let scenario = flink_autoscaler::replay::parse_scenario(&text);
    drop(text);
    let scenario = match scenario {
        Ok(scenario) => scenario,
        Err(e) => {
            report(&e.to_string());
            return ExitCode::from(2);
        }
    };
    match flink_autoscaler::replay::replay_result(scenario) {
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
fn run_replay_recording(
    path: &std::path::Path,
    set: &[String],
    from: Option<&str>,
    to: Option<&str>,
    json: bool,
) -> ExitCode {
    use flink_autoscaler::replay::recording::{WhatIf, render, replay_recording};
    let result = WhatIf::parse(set, from, to).and_then(|what_if| {
        let reader = flink_autoscaler::recording::open_recording_file(path)?;
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

fn run_bottleneck(args: bottleneck::BottleneckArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flink-autoscaler: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(bottleneck::bottleneck(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flink-autoscaler: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_standalone(args: run::RunArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        run::LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        run::LogFormat::Json => logs.json().init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            report(&format!("flink-autoscaler: cannot start the runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&format!("flink-autoscaler: {e:#}"));
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    // A bug must never surface as a backtrace: report it on one line and exit non-zero.
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_owned());
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        report(&format!("flink-autoscaler: internal error{location}: {message}"));
    }));
    let cli = Cli::parse();
    let code = std::panic::catch_unwind(|| match cli.command {
        Command::Replay {
            scenario,
            recording,
            set,
            from,
            to,
            json,
        } => match (scenario, recording) {
            (_, Some(recording)) => run_replay_recording(&recording, &set, from.as_deref(), to.as_deref(), json),
            (Some(scenario), None) => run_replay(&scenario),
            (None, None) => {
                report("invalid arguments: replay needs a scenario file or --recording FILE");
                ExitCode::from(2)
            }
        },
        Command::Explain { source } => cli_record::explain(&source),
        Command::Run(args) => run_standalone(*args),
        Command::Bottleneck(args) => run_bottleneck(args),
    });
    code.unwrap_or(ExitCode::from(3))
}
