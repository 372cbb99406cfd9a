//! What an SRE sees of `flink-autoscaler run`, through the binary: `/readyz` going 503 once the
//! sources die, the README's metric list against a scrape, JSON log lines naming the job as a
//! plain field at `RUST_LOG=warn`, and a repeated warning logged once per event interval.
//!
//! The fake cluster (blocking HTTP on 127.0.0.1) lists one RUNNING job whose own configuration
//! fails the options validation, so every cycle ends in the same validation warning.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const JOB: &str = "69d8f5332ed995a1c6cf4baa8d8018bb";
/// A job configuration the options validation refuses (a target utilization above 1).
const INVALID_JOB_CONFIG: &str = r#"[{"key":"job.autoscaler.utilization.target","value":"7"}]"#;

/// A fake Flink JobManager serving `/jobs/overview` and the job's configuration; it stops
/// listening when dropped.
struct FakeFlink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeFlink {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let overview = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../autoscaler-realizer/tests/fixtures/jobs-overview.json"
        ))
        .expect("fixture");
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &overview),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(stream: TcpStream, overview: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("");
    let (status, body) = if path == "/jobs/overview" {
        ("200 OK", overview.to_owned())
    } else if path == format!("/jobs/{JOB}/jobmanager/config") {
        ("200 OK", INVALID_JOB_CONFIG.to_owned())
    } else {
        ("404 Not Found", r#"{"errors":["Not found."]}"#.to_owned())
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A loopback address nothing listens on yet.
fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

fn spawn(args: &[String], envs: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Waits (at most 60 s) for `child` to exit; returns its exit code and stderr.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `GET path` on `addr`: (status, de-chunked body), or `None` while nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    Some((status, if chunked { dechunk(body) } else { body.to_owned() }))
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// Polls `GET path` until `done` accepts the answer (at most 30 s).
fn poll(addr: SocketAddr, path: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let started = Instant::now();
    loop {
        let answer = get(addr, path);
        if let Some((status, body)) = &answer
            && done(*status, body)
        {
            return (*status, body.clone());
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "GET {path}: no acceptable answer in 30 s, last {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the sample `series` (name and labels as served) in a scrape.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn run_args(flink: &str, metrics: SocketAddr, run_for: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--flink-url",
        &format!("prod={flink}"),
        "--interval",
        "1 s",
        "--run-for",
        run_for,
        "--metrics-addr",
        &metrics.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

#[test]
fn readyz_goes_503_once_no_source_has_been_listed_for_the_staleness_bound() {
    let flink = FakeFlink::start();
    let addr = free_addr();
    let child = spawn(&run_args(&flink.url(), addr, "40 s", &["--state", "memory"]), &[]);
    let (status, _) = poll(addr, "/readyz", |s, _| s == 200);
    assert_eq!(status, 200);
    let (_, scrape) = poll(addr, "/metrics", |s, _| s == 200);
    let listed = sample(
        &scrape,
        r#"flink_autoscaler_last_successful_cycle_timestamp_seconds{source="prod"}"#,
    );
    assert!(listed.is_some_and(|t| t > 1.7e9), "{scrape}");
    assert_eq!(
        sample(&scrape, r#"flink_autoscaler_source_fetch_errors_total{source="prod"}"#),
        Some(0.0),
        "{scrape}"
    );

    // Every source dies: within the bound (3 intervals of 1 s) and a cycle, /readyz says so.
    let died = Instant::now();
    drop(flink);
    let (status, body) = poll(addr, "/readyz", |s, _| s == 503);
    assert!(body.contains("no source has been listed successfully"), "{body}");
    let waited = died.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "503 after {waited:?}, before the bound"
    );
    assert_eq!(status, 503);
    let (_, scrape) = poll(addr, "/metrics", |s, _| s == 200);
    assert!(
        sample(&scrape, r#"flink_autoscaler_source_fetch_errors_total{source="prod"}"#).is_some_and(|n| n >= 1.0),
        "{scrape}"
    );
    // /livez is still fine: the process is alive, only not ready.
    assert_eq!(get(addr, "/livez").map(|(s, _)| s), Some(200));
    let mut child = child;
    let _ = child.kill();
    let _ = finish(child);
}

/// Every family a scrape serves is in the README's metric list with its type, and the series an
/// SRE alerts on exist before anything failed.
#[test]
fn the_readme_metric_list_names_every_family_a_scrape_serves() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README");
    let flink = FakeFlink::start();
    let addr = free_addr();
    let dir = std::env::temp_dir().join(format!("fa-observability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let state = format!("sqlite:{}", dir.join("state.db").display());
    let child = spawn(&run_args(&flink.url(), addr, "4 s", &["--state", &state]), &[]);
    let (_, scrape) = poll(addr, "/metrics", |s, body| {
        s == 200 && body.contains(&format!("flink_autoscaler_job_info{{source=\"prod\",job_id=\"{JOB}\""))
    });
    let (code, stderr) = finish(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(0), "{stderr}");

    let mut families = 0;
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        assert!(
            readme.contains(&format!("| `{name}` | {kind} |")),
            "the README's metric list has no `{name}` ({kind})"
        );
        families += 1;
    }
    assert!(families >= 15, "{families} families:\n{scrape}");
    for series in [
        format!(r#"flink_autoscaler_build_info{{version="{}""#, env!("CARGO_PKG_VERSION")),
        "process_cpu_seconds_total".to_owned(),
        "process_resident_memory_bytes".to_owned(),
        // The fake's job is misconfigured on purpose (the warning tests): its errors count.
        format!(r#"flink_autoscaler_errors_total{{source="prod",job_id="{JOB}"}} "#),
        r#"flink_autoscaler_rest_request_errors_total{source="prod",method="GET",endpoint="/jobs/overview",kind="timeout"} 0"#.to_owned(),
        r#"flink_autoscaler_rest_request_errors_total{source="prod",method="PUT",endpoint="/jobs/:jobid/resource-requirements",kind="status"} 0"#.to_owned(),
        r#"flink_autoscaler_state_flush_errors_total{store="sqlite"} 0"#.to_owned(),
        r#"flink_autoscaler_state_rows_discarded_total{store="sqlite"} 0"#.to_owned(),
        r#"flink_autoscaler_source_fetch_errors_total{source="prod"} 0"#.to_owned(),
    ] {
        assert!(scrape.contains(&series), "no {series} in:\n{scrape}");
    }
    // The job level: no per-vertex series, and no `stat` label anywhere.
    assert!(!scrape.contains("flink_autoscaler_vertex_"), "{scrape}");
    assert!(!scrape.contains("stat=\""), "{scrape}");
}

/// Parses JSON log lines; panics on a line that is not one.
fn json_lines(stderr: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

#[test]
fn json_lines_at_warn_carry_the_job_and_source_as_plain_strings() {
    let flink = FakeFlink::start();
    let child = spawn(
        &[
            "run".into(),
            "--flink-url".into(),
            format!("prod={}", flink.url()),
            "--state".into(),
            "memory".into(),
            "--interval".into(),
            "1 s".into(),
            "--run-for".into(),
            "3 s".into(),
            "--log-format".into(),
            "json".into(),
        ],
        &[("RUST_LOG", "warn")],
    );
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(r#"\"prod/"#), "a double-encoded job:\n{stderr}");
    let lines = json_lines(&stderr);
    let about_the_job: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains("utilization.target")))
        .collect();
    assert!(!about_the_job.is_empty(), "no warning about the job:\n{stderr}");
    for line in about_the_job {
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["job"], format!("prod/{JOB}"), "{line}");
        assert_eq!(line["source"], "prod", "{line}");
    }
    // The validation warning repeats every cycle, but is logged once in the default 30 min.
    let warnings = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("autoscaler options do not validate"))
        })
        .count();
    assert_eq!(warnings, 1, "{stderr}");
}

#[test]
fn a_repeated_warning_is_logged_once_per_event_interval_with_the_count_left_out() {
    let flink = FakeFlink::start();
    let dir = std::env::temp_dir().join(format!("fa-repeats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("config.yaml");
    std::fs::write(&config, "job.autoscaler.scaling.event.interval: 2 s\n").expect("config");
    let child = spawn(
        &[
            "run".into(),
            "--flink-url".into(),
            format!("prod={}", flink.url()),
            "--config".into(),
            config.display().to_string(),
            "--state".into(),
            "memory".into(),
            "--interval".into(),
            "300 ms".into(),
            "--run-for".into(),
            "5 s".into(),
            "--log-format".into(),
            "json".into(),
        ],
        &[("RUST_LOG", "info")],
    );
    let (code, stderr) = finish(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(0), "{stderr}");
    let lines = json_lines(&stderr);
    let cycles = lines.iter().filter(|l| l["message"] == "control loop cycle").count();
    let warnings: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("autoscaler options do not validate"))
        })
        .collect();
    assert!(cycles >= 8, "{cycles} cycles:\n{stderr}");
    // About 5 s / 2 s: the first, then one per interval.
    assert!(
        (2..=4).contains(&warnings.len()),
        "{} warnings in {cycles} cycles:\n{stderr}",
        warnings.len()
    );
    assert!(warnings[0].get("suppressed").is_none(), "{}", warnings[0]);
    let left_out: u64 = warnings.iter().filter_map(|w| w["suppressed"].as_u64()).sum();
    assert!(left_out >= 1, "the later lines count what was left out:\n{stderr}");
    // Every warning but those after the last logged one is logged or counted (a cycle's line and
    // its job's warning come from different tasks, in either order).
    let accounted = warnings.len() as u64 + left_out;
    let expected = cycles as u64 - trailing_cycles(&lines);
    assert!(
        accounted <= cycles as u64 && accounted + 1 >= expected,
        "{accounted} warnings logged or counted, {expected} expected:\n{stderr}"
    );
}

/// Cycles after the last logged warning, whose warnings are left out and not yet counted.
fn trailing_cycles(lines: &[serde_json::Value]) -> u64 {
    let last = lines
        .iter()
        .rposition(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("autoscaler options do not validate"))
        })
        .unwrap_or(0);
    lines[last..]
        .iter()
        .filter(|l| l["message"] == "control loop cycle")
        .count() as u64
}
