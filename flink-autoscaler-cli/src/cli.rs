//! The command line: its arguments and the dispatch to one module per command.

use crate::commands::{bottleneck, explain, replay, run};
use crate::io::report;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The `flink-autoscaler` command line.
#[derive(Parser)]
#[command(
    name = "flink-autoscaler",
    version,
    about = "Autoscaler for Apache Flink streaming jobs"
)]
pub struct Cli {
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
    /// Check a configuration without running it: print the effective configuration (secrets
    /// redacted) and every problem; exit 0 when it is valid, 1 when it is not.
    Validate(crate::service::config::ValidateArgs),
}

/// The binary's entry point: parses the command line and runs one command; a bug is reported on
/// one line with exit code 3, never as a backtrace.
pub fn main() -> ExitCode {
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
    // The Java entrypoint's `--key value` overrides become `-D key=value`.
    let cli = Cli::parse_from(crate::service::config::rewrite_key_value_args(std::env::args_os()));
    let code = std::panic::catch_unwind(|| match cli.command {
        Command::Replay {
            scenario,
            recording,
            set,
            from,
            to,
            json,
        } => match (scenario, recording) {
            (_, Some(recording)) => {
                replay::run_replay_recording(&recording, &set, from.as_deref(), to.as_deref(), json)
            }
            (Some(scenario), None) => replay::run_replay(&scenario),
            (None, None) => {
                report("invalid arguments: replay needs a scenario file or --recording FILE");
                ExitCode::from(2)
            }
        },
        Command::Explain { source } => explain::explain(&source),
        Command::Run(args) => run::run_standalone(*args),
        Command::Bottleneck(args) => bottleneck::run_bottleneck(args),
        Command::Validate(args) => crate::service::config::run_validate(&args),
    });
    code.unwrap_or(ExitCode::from(3))
}
