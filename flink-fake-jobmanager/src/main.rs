//! `flink-fake-jobmanager`: serves the fake Flink REST API until SIGTERM or ctrl-c, printing
//! `listening on http://ADDR` first.

use clap::Parser;
use flink_fake_jobmanager::{FakeConfig, FakeJobManager};
use std::io::Write as _;
use std::time::Duration;

/// A fake Flink JobManager REST API for N jobs of V vertices.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Number of jobs.
    #[arg(long, default_value_t = 10)]
    jobs: usize,
    /// Vertices per job (a chain; vertex 0 is the source).
    #[arg(long, default_value_t = 4)]
    vertices: usize,
    /// Every N-th job has a bottleneck the autoscaler scales up (0: none).
    #[arg(long, default_value_t = 0)]
    hot_every: usize,
    /// Sources report no `pendingRecords` (like a datagen source).
    #[arg(long)]
    no_pending_records: bool,
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: std::net::SocketAddr,
    /// Seconds the jobs have been RUNNING when the fake starts.
    #[arg(long, default_value_t = 3600)]
    running_for_secs: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let fake = FakeJobManager::new(FakeConfig {
            jobs: args.jobs,
            vertices: args.vertices,
            hot_every: args.hot_every,
            pending_records: !args.no_pending_records,
            running_for: Duration::from_secs(args.running_for_secs),
            ..FakeConfig::default()
        });
        let listener = tokio::net::TcpListener::bind(args.addr).await?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening on http://{}", listener.local_addr()?)?;
        stdout.flush()?;
        fake.serve(listener, async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
            }
        })
        .await?;
        Ok(())
    })
}
