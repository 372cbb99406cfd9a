//! `flink-autoscaler run` against a fake Flink cluster: the job status on the metrics address,
//! the REST request series on `/metrics`, JSON logs, and the reference's JDBC event handler keys.
//!
//! The fake cluster (a few lines of blocking HTTP on 127.0.0.1) lists one RUNNING job whose own
//! configuration fails the autoscaler's options validation, so every cycle ends in the validation
//! warning event without any metric collection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const JOB: &str = "69d8f5332ed995a1c6cf4baa8d8018bb";
const SECRET: &str = "Sup3rS3cretPw";

/// A fake Flink JobManager serving `/jobs/overview` and the job's configuration; 404 otherwise.
struct FakeFlink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl FakeFlink {
    fn start(job_config: &'static str) -> Self {
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
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &overview, job_config),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self { addr, stop }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn answer(stream: TcpStream, overview: &str, job_config: &str) {
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
        ("200 OK", job_config.to_owned())
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

/// A job configuration the options validation refuses (a target utilization above 1).
const INVALID_JOB_CONFIG: &str = r#"[{"key":"job.autoscaler.utilization.target","value":"7"}]"#;

/// A local port nothing listens on.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
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

/// Waits (at most 60 s) for `child` to exit; returns its exit code, stdout and stderr.
fn finish(mut child: Child) -> (Option<i32>, String, String) {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `GET path` on `addr`: (status, body), or `None` while nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
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

/// The decoded body of a chunked (or plain) HTTP/1.1 answer.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            return body.to_owned();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if n == 0 || tail.len() < n {
            return out;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
}

#[test]
fn the_metrics_address_serves_the_job_status_and_the_rest_request_series() {
    let flink = FakeFlink::start(INVALID_JOB_CONFIG);
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
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
            "5 s".into(),
            "--metrics-addr".into(),
            addr.to_string(),
        ],
        &[],
    );
    let (status, jobs) = poll(addr, "/jobs", |s, _| s == 200);
    assert_eq!(status, 200);
    let jobs: serde_json::Value = serde_json::from_str(&dechunk(&jobs)).expect("/jobs is JSON");
    assert!(jobs["jobs"].is_array(), "{jobs}");
    // The job's own options do not validate: it is listed as misconfigured with the reason.
    let (status, one) = poll(addr, &format!("/jobs/prod/{JOB}"), |s, _| s == 200);
    assert_eq!(status, 200, "{one}");
    let one: serde_json::Value = serde_json::from_str(&dechunk(&one)).expect("/jobs/{key} is JSON");
    assert_eq!(one["job"], format!("prod/{JOB}"), "{one}");
    assert_eq!(one["record"]["outcome"], "misconfigured", "{one}");
    let reason = one["record"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("job.autoscaler.utilization.target"), "{one}");
    let (_, jobs) = poll(addr, "/jobs", |s, _| s == 200);
    assert!(dechunk(&jobs).contains("\"outcome\":\"misconfigured\""), "{jobs}");
    let overview =
        r#"flink_autoscaler_rest_request_duration_seconds_count{source="prod",method="GET",endpoint="/jobs/overview"}"#;
    let config = r#"endpoint="/jobs/:jobid/jobmanager/config""#;
    let (_, metrics) = poll(addr, "/metrics", |s, body| {
        s == 200 && body.contains(overview) && body.contains(config)
    });
    assert!(
        !metrics.contains(&format!("endpoint=\"/jobs/{JOB}")),
        "no raw id in a label:\n{metrics}"
    );
    // ... and counted: the gauge is 1 and every rejected cycle is an error.
    let gauge = format!("flink_autoscaler_job_misconfigured{{source=\"prod\",job_id=\"{JOB}\"}} 1");
    let errors = format!("flink_autoscaler_errors_total{{source=\"prod\",job_id=\"{JOB}\"}} ");
    let (_, metrics) = poll(addr, "/metrics", |_, body| dechunk(body).contains(&gauge));
    let counted = dechunk(&metrics)
        .lines()
        .find_map(|l| l.strip_prefix(errors.as_str()))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(counted >= 1, "{metrics}");
    let (code, _, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn worker_threads_are_counted_from_one() {
    let (code, _, stderr) = finish(spawn(&["run".into(), "--worker-threads".into(), "0".into()], &[]));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--worker-threads"), "{stderr}");
}

#[test]
fn json_logs_are_one_object_per_line_without_passwords() {
    let flink = FakeFlink::start(INVALID_JOB_CONFIG);
    let url = flink.url().replace("http://", &format!("http://admin:{SECRET}@"));
    let closed = free_port();
    let child = spawn(
        &[
            "run".into(),
            "--flink-url".into(),
            format!("prod={url}"),
            "--yarn-rm-url".into(),
            format!("rm=http://admin:{SECRET}@127.0.0.1:{closed}/"),
            "--worker-threads".into(),
            "2".into(),
            "--state".into(),
            "memory".into(),
            "--interval".into(),
            "1 s".into(),
            "--run-for".into(),
            "3 s".into(),
            "--log-format".into(),
            "json".into(),
        ],
        &[("RUST_LOG", "debug")],
    );
    let (code, stdout, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stdout.contains(SECRET) && !stderr.contains(SECRET),
        "a password leaked:\n{stderr}"
    );
    assert!(
        !stderr.contains("Sup3rS3cret"),
        "a part of the password leaked:\n{stderr}"
    );
    let mut messages = Vec::new();
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(value["level"].is_string() && value["timestamp"].is_string(), "{line}");
        messages.push(value["message"].as_str().unwrap_or_default().to_owned());
    }
    for expected in [
        "standalone autoscaler starting",
        "could not list the jobs of a source",
        "autoscaler options do not validate, not scaling",
        "standalone autoscaler stopped",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(expected)),
            "no {expected:?} line in:\n{stderr}"
        );
    }
}

/// The reference's keys `event-handler.type: JDBC` + `jdbc.*` (password from the environment
/// variable the config names) route `run`'s events into the database event handler: the
/// validation warning of every cycle lands in `t_flink_autoscaler_event_handler` once,
/// deduplicated, and the password appears nowhere in the output.
#[test]
fn the_reference_jdbc_event_handler_keys_store_deduplicated_events() {
    let Ok(admin) = std::env::var("AUTOSCALER_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but AUTOSCALER_TEST_POSTGRES_URL is not set"
        );
        eprintln!("skipping: AUTOSCALER_TEST_POSTGRES_URL is not set");
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let schema = format!(
        "as_run_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let exec = |sql: String| {
        rt.block_on(async {
            use sqlx::Connection as _;
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect");
            sqlx::raw_sql(&sql).execute(&mut conn).await.expect("sql");
            conn.close().await.expect("close");
        });
    };
    exec(format!("CREATE SCHEMA {schema}"));

    // postgres://USER@HOST:PORT/DB -> jdbc:postgresql://HOST:PORT/DB + username USER.
    let rest = admin
        .strip_prefix("postgres://")
        .or_else(|| admin.strip_prefix("postgresql://"))
        .expect("a postgres:// URL");
    let (user, host_db) = rest.split_once('@').map_or(("postgres", rest), |(u, h)| (u, h));
    let user = user.split(':').next().unwrap_or("postgres");
    let sep = if host_db.contains('?') { '&' } else { '?' };
    let jdbc = format!("jdbc:postgresql://{host_db}{sep}options[search_path]={schema}");
    let dir = std::env::temp_dir().join(format!("fa-run-jdbc-{schema}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "autoscaler.standalone.state-store.type: MEMORY\n\
             autoscaler.standalone.event-handler.type: JDBC\n\
             autoscaler.standalone.jdbc.url: '{jdbc}'\n\
             autoscaler.standalone.jdbc.username: {user}\n\
             autoscaler.standalone.jdbc.password-env-variable: FA_RUN_TEST_JDBC_PWD\n"
        ),
    )
    .expect("config");

    let flink = FakeFlink::start(INVALID_JOB_CONFIG);
    let child = spawn(
        &[
            "run".into(),
            "--flink-url".into(),
            format!("prod={}", flink.url()),
            "--config".into(),
            config.display().to_string(),
            "--interval".into(),
            "1 s".into(),
            "--run-for".into(),
            "4 s".into(),
        ],
        &[("FA_RUN_TEST_JDBC_PWD", SECRET), ("RUST_LOG", "debug")],
    );
    let (code, stdout, stderr) = finish(child);
    let _ = std::fs::remove_dir_all(&dir);

    let url = format!("{admin}{sep}options[search_path]={schema}");
    let events = rt.block_on(async {
        let handler = autoscaler_state::open_event_handler(&url)
            .await
            .expect("open the event table");
        handler.events(&format!("prod/{JOB}")).await.expect("read events")
    });
    exec(format!("DROP SCHEMA {schema} CASCADE"));

    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stdout.contains(SECRET) && !stderr.contains(SECRET),
        "a password leaked:\n{stderr}"
    );
    // The warning itself is logged once per event interval (the logs leave repeats out).
    let cycles = stderr.matches("control loop cycle").count();
    assert!(cycles >= 2, "several cycles ran ({cycles}):\n{stderr}");
    assert_eq!(
        events.len(),
        1,
        "one row, deduplicated over {cycles} cycles: {events:?}"
    );
    let event = &events[0];
    assert_eq!(event.reason, autoscaler_core::VALIDATION_REASON);
    assert_eq!(event.event_type, autoscaler_core::EventType::Warning);
    assert!(event.message.contains("utilization.target"), "{}", event.message);
}
