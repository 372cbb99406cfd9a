//! `run --metrics-detail vertex` against the fake JobManager: once a job has been evaluated, its
//! vertices' series are on `/metrics` (the exporter keeps the evaluation a cycle hands to the
//! store as part of the job's state).

use flink_fake_jobmanager::{FakeConfig, FakeJobManager};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    raw.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}

#[test]
fn evaluated_jobs_have_their_vertex_series() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let fake = runtime.block_on(async {
        FakeJobManager::new(FakeConfig {
            jobs: 2,
            vertices: 3,
            ..FakeConfig::default()
        })
        .start("127.0.0.1:0".parse().expect("address"))
        .await
        .expect("start the fake JobManager")
    });
    let dir = std::env::temp_dir().join(format!("fa-vertex-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("autoscaler.yaml");
    std::fs::write(
        &config,
        "job.autoscaler.metrics.window: \"20 s\"\njob.autoscaler.stabilization.interval: \"5 s\"\n",
    )
    .expect("config");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .args(["run", "--flink-url", &fake.url(), "--config"])
        .arg(&config)
        .args(["--state", "memory", "--interval", "1 s", "--metrics-detail", "vertex"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}"), "--run-for", "60 s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn flink-autoscaler run");

    let series = "flink_autoscaler_vertex_true_processing_rate_average_records_per_second{";
    let started = Instant::now();
    let mut scrape = String::new();
    while started.elapsed() < Duration::from_secs(50) {
        scrape = get(port, "/metrics").unwrap_or_default();
        if scrape.lines().filter(|l| l.starts_with(series)).count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = child.kill();
    let _ = child.wait();
    runtime.block_on(fake.stop());
    let _ = std::fs::remove_dir_all(&dir);
    let vertices = scrape.lines().filter(|l| l.starts_with(series)).count();
    assert!(vertices >= 2, "no per-vertex series after 50 s:\n{scrape}");
    assert!(scrape.contains("vertex_name=\""), "{scrape}");
}
