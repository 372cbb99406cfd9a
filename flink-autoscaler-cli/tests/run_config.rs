//! The service's configuration through the binary: an invalid base configuration exits 1 listing
//! every bad key, `validate`, `FLINK_CONF_DIR`, `-D` and `--key value`, SIGHUP with a valid and an
//! invalid file, the database retried at start with the reason named, and the SQLite file's
//! absolute path in the log.
//!
//! The fake Flink cluster (blocking HTTP on 127.0.0.1) lists one RUNNING job and serves its
//! configuration; everything else is 404, so no cycle gets as far as a decision.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const JOB: &str = "69d8f5332ed995a1c6cf4baa8d8018bb";

/// A fake Flink JobManager: `/jobs/overview`, the job's configuration, 404 otherwise; counts the
/// job list requests.
struct FakeFlink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    overviews: Arc<AtomicUsize>,
}

impl FakeFlink {
    fn start(job_config: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let overviews = Arc::new(AtomicUsize::new(0));
        let (flag, count) = (Arc::clone(&stop), Arc::clone(&overviews));
        let overview = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../autoscaler-realizer/tests/fixtures/jobs-overview.json"
        ))
        .expect("fixture");
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &overview, job_config, &count),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self { addr, stop, overviews }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn job_lists_served(&self) -> usize {
        self.overviews.load(Ordering::Relaxed)
    }
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn answer(stream: TcpStream, overview: &str, job_config: &str, overviews: &AtomicUsize) {
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
        overviews.fetch_add(1, Ordering::Relaxed);
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

/// A local port nothing listens on.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A fresh temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fa-run-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn command(args: &[&str], envs: &[(&str, &str)], cwd: Option<&Path>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"));
    command
        .args(args)
        .env_remove("FLINK_CONF_DIR")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command
}

fn spawn(args: &[&str], envs: &[(&str, &str)]) -> Child {
    command(args, envs, None).spawn().expect("spawn")
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

/// Runs the binary to its end (at most 60 s).
fn run(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    finish(spawn(args, envs))
}

/// `GET path` on `addr`: (status, body with chunks joined), or `None` while nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
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
fn poll(addr: SocketAddr, path: &str, done: impl Fn(u16, &str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let answer = get(addr, path);
        if let Some((status, body)) = &answer
            && done(*status, body)
        {
            return body.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "GET {path}: no acceptable answer in 30 s, last {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_invalid_base_configuration_exits_1_listing_every_bad_key() {
    let dir = temp_dir("invalid");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "job.autoscaler.utilization.target: 2.5\n\
         job.autoscaler.metrics.window: forever\n\
         job.autoscaler.utilisation.max: 0.9\n\
         autoscaler.standalone.control-loop.parallelism: many\n",
    )
    .expect("config");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let (code, _, stderr) = run(
        &[
            "run",
            "--config",
            &config.display().to_string(),
            "--flink-url",
            &closed,
            "--state",
            "memory",
            "-D",
            "job.autoscaler.scale-down.max-factor=-1",
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "fails fast");
    assert!(stderr.contains("invalid configuration (4 problems)"), "{stderr}");
    for key in [
        "job.autoscaler.utilization.target",
        "job.autoscaler.metrics.window",
        "autoscaler.standalone.control-loop.parallelism",
        "job.autoscaler.scale-down.max-factor",
    ] {
        assert!(stderr.contains(key), "{key} is not named:\n{stderr}");
    }
    // A typo is a warning naming the closest key, not a problem.
    assert!(
        stderr.contains(
            "unknown key job.autoscaler.utilisation.max, ignored (did you mean job.autoscaler.utilization.max?)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("standalone autoscaler starting"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validate_prints_the_effective_configuration_redacted_and_every_problem() {
    let dir = temp_dir("validate");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "job.autoscaler.utilization.target: 0.5\n\
         autoscaler.standalone.state-store.type: JDBC\n\
         autoscaler.standalone.jdbc.url: jdbc:postgresql://db:5432/x?password=Hunter2Secret\n\
         autoscaler.service.source.prod.auth.password: env:PROD_PW\n\
         autoscaler.service.source.prod.auth.username: flink\n",
    )
    .expect("config");
    let path = config.display().to_string();
    let (code, stdout, stderr) = run(
        &[
            "validate",
            "--config",
            &path,
            "-Djob.autoscaler.utilization.target=0.6",
            "--job.autoscaler.metrics.window",
            "7 min",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("# configuration file: {path}")), "{stdout}");
    assert!(
        stdout.contains("job.autoscaler.utilization.target: 0.6  # -D"),
        "{stdout}"
    );
    assert!(
        stdout.contains("job.autoscaler.metrics.window: 7 min  # -D"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("autoscaler.standalone.state-store.type: JDBC  # {path}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("job.autoscaler.restart.time: 5 min  # default"),
        "{stdout}"
    );
    assert!(stdout.contains("password=***"), "{stdout}");
    assert!(!stdout.contains("Hunter2Secret"), "a secret leaked:\n{stdout}");
    assert!(stdout.contains("the configuration is valid"), "{stdout}");

    let (code, stdout, _) = run(
        &[
            "validate",
            "--config",
            &path,
            "-D",
            "job.autoscaler.utilization.target=2.5",
            "-Djob.autoscaler.restart.time=soon",
            "-Djob.autoscaler.stabilisation.interval=1 min",
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("error: The AutoScalerOption job.autoscaler.utilization.target is invalid"),
        "{stdout}"
    );
    assert!(
        stdout.contains("error: invalid value \"soon\" for job.autoscaler.restart.time"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: unknown key job.autoscaler.stabilisation.interval, ignored (did you mean job.autoscaler.stabilization.interval?)"),
        "{stdout}"
    );
    assert!(stdout.contains("2 problems"), "{stdout}");

    let (code, _, stderr) = run(&["validate", "--config", "/nonexistent/config.yaml"], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("/nonexistent/config.yaml"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_config_the_file_comes_from_flink_conf_dir_and_flags_override_it() {
    let flink = FakeFlink::start("[]");
    let dir = temp_dir("conf-dir");
    // The legacy file only: Flink reads config.yaml first, then flink-conf.yaml.
    let dead = format!("http://127.0.0.1:{}", free_port());
    std::fs::write(
        dir.join("flink-conf.yaml"),
        format!(
            "autoscaler.service.flink-clusters: prod={dead}\n\
             autoscaler.standalone.state-store.type: JDBC\n"
        ),
    )
    .expect("config");
    let conf_dir = dir.display().to_string();
    let (code, stdout, _) = run(&["validate"], &[("FLINK_CONF_DIR", &conf_dir)]);
    assert_eq!(code, Some(1), "the JDBC store needs a URL:\n{stdout}");
    assert!(
        stdout.contains(&format!("# configuration file: {conf_dir}/flink-conf.yaml")),
        "{stdout}"
    );
    assert!(stdout.contains("autoscaler.standalone.jdbc.url: required"), "{stdout}");

    // `run` reads the same file; `-D` and the Java entrypoint's `--key value` override it.
    let (code, _, stderr) = run(
        &[
            "run",
            "--autoscaler.service.flink-clusters",
            &format!("prod={}", flink.url()),
            "-Dautoscaler.standalone.state-store.type=MEMORY",
            "--autoscaler.standalone.control-loop.interval=1 s",
            "--run-for",
            "3 s",
        ],
        &[("FLINK_CONF_DIR", &conf_dir)],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("configuration read"), "{stderr}");
    assert!(stderr.contains(&format!("{conf_dir}/flink-conf.yaml")), "{stderr}");
    assert!(
        flink.job_lists_served() >= 2,
        "the overridden source was polled every second:\n{stderr}"
    );

    let missing = dir.join("empty");
    std::fs::create_dir_all(&missing).expect("dir");
    let (code, _, stderr) = run(
        &["run", "--state", "memory", "--run-for", "1 s"],
        &[("FLINK_CONF_DIR", &missing.display().to_string())],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("holds neither config.yaml nor flink-conf.yaml"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
fn hangup(child: &Child) {
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// A job whose own configuration targets 0.9: valid alone, misconfigured under a base whose
/// `utilization.max` is below it.
#[cfg(unix)]
const JOB_TARGETS_0_9: &str = r#"[{"key":"job.autoscaler.utilization.target","value":"0.9"}]"#;

#[cfg(unix)]
#[test]
fn sighup_applies_a_valid_file_from_the_next_cycle_and_keeps_the_old_one_for_an_invalid_file() {
    let flink = FakeFlink::start(JOB_TARGETS_0_9);
    let dir = temp_dir("sighup");
    let config = dir.join("config.yaml");
    let write = |text: &str| std::fs::write(&config, text).expect("config");
    write("job.autoscaler.utilization.max: 1.0\n");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let mut child = spawn(
        &[
            "run",
            "--config",
            &config.display().to_string(),
            "--flink-url",
            &format!("prod={}", flink.url()),
            "--state",
            "memory",
            "--interval",
            "500 ms",
            "--run-for",
            "12 s",
            "--metrics-addr",
            &addr.to_string(),
        ],
        &[],
    );
    let job = format!("/jobs/prod/{JOB}");
    let gauge = format!("flink_autoscaler_job_misconfigured{{source=\"prod\",job_id=\"{JOB}\"}}");
    // A few cycles with the valid base: the job is not misconfigured, nothing reloaded yet.
    poll(addr, "/metrics", |_, body| {
        // The gauge is served only for a misconfigured job.
        !body.contains(&gauge)
            && body.contains("flink_autoscaler_cycles_total{")
            && body.contains("flink_autoscaler_config_reloads_total{outcome=\"rejected\"} 0")
    });

    write("job.autoscaler.utilization.max: 0.8\n");
    hangup(&child);
    let record = poll(addr, &job, |s, body| s == 200 && body.contains("\"misconfigured\""));
    assert!(record.contains("job.autoscaler.utilization.max"), "{record}");
    poll(addr, "/metrics", |_, body| {
        body.contains(&format!("{gauge} 1"))
            && body.contains("flink_autoscaler_config_reloads_total{outcome=\"applied\"} 1")
    });

    // An invalid file is refused: the process lives on with the last valid base.
    write("job.autoscaler.utilization.target: 2.5\n");
    hangup(&child);
    let metrics = poll(addr, "/metrics", |_, body| {
        body.contains("flink_autoscaler_config_reloads_total{outcome=\"rejected\"} 1")
    });
    assert!(metrics.contains(&format!("{gauge} 1")), "{metrics}");
    assert!(
        child.try_wait().expect("wait").is_none(),
        "SIGHUP must not end the process"
    );

    let (code, _, stderr) = finish(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("SIGHUP: configuration reloaded"), "{stderr}");
    assert!(
        stderr.contains("SIGHUP: the configuration is invalid, keeping the running one")
            && stderr.contains("job.autoscaler.utilization.target"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_database_is_retried_for_the_startup_timeout_and_named() {
    let port = free_port();
    let started = Instant::now();
    let (code, _, stderr) = run(
        &[
            "run",
            "--flink-url",
            &format!("http://127.0.0.1:{}", free_port()),
            "--state",
            &format!("postgres://app:Pw4Db123@127.0.0.1:{port}/x"),
            "-Dautoscaler.service.startup-timeout=2 s",
        ],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("connection refused by 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(stderr.contains("gave up after"), "retried:\n{stderr}");
    assert!(!stderr.contains("Pw4Db123"), "a password leaked:\n{stderr}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}"
    );
}

#[test]
fn the_sqlite_files_absolute_path_is_logged() {
    let dir = temp_dir("sqlite");
    let out = command(
        &[
            "run",
            "--flink-url",
            &format!("http://127.0.0.1:{}", free_port()),
            "--state",
            "sqlite:relative-state.db",
            "--run-for",
            "1 s",
        ],
        &[],
        Some(&dir),
    )
    .spawn()
    .expect("spawn");
    let (code, _, stderr) = finish(out);
    assert_eq!(code, Some(0), "{stderr}");
    let absolute = dir.join("relative-state.db");
    assert!(absolute.is_file());
    assert!(stderr.contains(&absolute.display().to_string()), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job whose own configuration has a typo in a `job.autoscaler.*` key.
const JOB_WITH_A_TYPO: &str = r#"[{"key":"job.autoscaler.utilisation.target","value":"0.5"}]"#;

#[test]
fn an_unknown_key_in_a_jobs_own_configuration_is_warned_about_once() {
    let flink = FakeFlink::start(JOB_WITH_A_TYPO);
    let (code, _, stderr) = run(
        &[
            "run",
            "--flink-url",
            &format!("prod={}", flink.url()),
            "--state",
            "memory",
            "--interval",
            "500 ms",
            "--run-for",
            "3 s",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(flink.job_lists_served() >= 2, "several cycles ran:\n{stderr}");
    let warning =
        "unknown key job.autoscaler.utilisation.target, ignored (did you mean job.autoscaler.utilization.target?)";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("prod/{JOB}")),
        "the warning names the job:\n{stderr}"
    );
}
