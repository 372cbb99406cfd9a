//! The `flink-autoscaler` binary: `replay` (what-if on recorded metrics) and `run` (the standalone
//! autoscaler against a Flink cluster).

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
    /// Evaluate and decide one autoscaler cycle on a recorded scenario (flink-autoscaler-scenario/1).
    Replay {
        /// Scenario file, or `-` for standard input.
        scenario: String,
    },
    /// Explain a decision in words: a replay result, a recording replay's JSON, a decision record,
    /// or a running service's `http://127.0.0.1:PORT/jobs/KEY`.
    Explain {
        /// File, `-` for standard input, or a loopback `http://` URL.
        source: String,
    },
    /// Run the standalone autoscaler against a Flink cluster (adaptive scheduler, rescale API).
    Run(run::RunArgs),
}

/// Reads the scenario text from a path or stdin.
fn read_input(source: &str) -> Result<String, String> {
    if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(text)
    } else {
        std::fs::read_to_string(source).map_err(|e| format!("cannot read {source}: {e}"))
    }
}

fn run_replay(source: &str) -> ExitCode {
    let text = match read_input(source) {
        Ok(t) => t,
        Err(message) => {
            eprintln!("invalid scenario: {message}");
            return ExitCode::from(2);
        }
    };
    match flink_autoscaler::replay::replay_str(&text) {
        Ok(result) => {
            let mut out = std::io::stdout().lock();
            match writeln!(out, "{result}") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cannot write the result: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn run_standalone(args: run::RunArgs) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flink-autoscaler: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flink-autoscaler: {e:#}");
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
        eprintln!("flink-autoscaler: internal error{location}: {message}");
    }));
    let cli = Cli::parse();
    let code = std::panic::catch_unwind(|| match cli.command {
        Command::Replay { scenario } => run_replay(&scenario),
        Command::Explain { source } => cli_record::explain(&source),
        Command::Run(args) => run_standalone(args),
    });
    code.unwrap_or(ExitCode::from(3))
}
