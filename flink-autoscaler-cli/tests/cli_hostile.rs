//! The binary against hostile process conditions and inputs: a closed stderr pipe, endless input,
//! a YAML alias bomb, an interval at the end of time, signals while a call hangs.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
}

/// Runs `command` to completion, killing it after `limit`.
fn run_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let started = Instant::now();
    loop {
        match child.try_wait().expect("wait") {
            Some(_) => break,
            None if started.elapsed() > limit => {
                let _ = child.kill();
                panic!("still running after {limit:?}");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    child.wait_with_output().expect("output")
}

fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_closed_stderr_pipe_gives_an_exit_code_not_sigabrt() {
    // The write end of a pipe whose reader has exited: every write to it fails with EPIPE.
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().expect("true runs");
    let write_end = reader.stdin.take().expect("piped stdin");
    reader.wait().expect("true exits");
    let status = binary()
        .args(["replay", "/nonexistent/scenario.json"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(write_end))
        .status()
        .expect("the binary runs");
    // Before: eprintln! panicked, the panic hook's eprintln! panicked again and the process aborted.
    assert_eq!(status.code(), Some(2), "{status:?}");
}

#[test]
fn a_closed_stdout_pipe_fails_the_streamed_result_with_exit_1() {
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().expect("true runs");
    let write_end = reader.stdin.take().expect("piped stdin");
    reader.wait().expect("true exits");
    // A result larger than the output buffer: the write fails in the middle of the document.
    let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bench/dag-100.json");
    let output = binary()
        .arg("replay")
        .arg(&scenario)
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("cannot write the result: "), "{lines:?}");
}

#[cfg(unix)]
#[test]
fn replay_of_dev_zero_stops_at_the_input_limit() {
    let output = run_bounded(
        {
            let mut c = binary();
            c.args(["replay", "/dev/zero"]);
            c
        },
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(2));
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("/dev/zero") && lines[0].contains("limit of 67108864 bytes"),
        "{lines:?}"
    );
}

#[test]
fn replay_of_endless_stdin_stops_at_the_input_limit() {
    let mut child = binary()
        .args(["replay", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        let block = vec![b' '; 1 << 20];
        // Stops when the binary closes its end (after the limit).
        for _ in 0..200 {
            if stdin.write_all(&block).is_err() {
                return;
            }
        }
    });
    let output = child.wait_with_output().expect("output");
    let _ = writer.join();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("limit of 67108864 bytes"));
}

#[test]
fn a_yaml_alias_bomb_in_config_is_an_error_not_an_abort() {
    let dir = std::env::temp_dir().join(format!("fa-bomb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bomb.yaml");
    let mut bomb = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        bomb.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 9].join(",")
        ));
    }
    std::fs::write(&path, &bomb).expect("write the bomb");
    let mut command = binary();
    command.args([
        "run",
        "--state",
        "memory",
        "--flink-url",
        "http://127.0.0.1:9",
        "--config",
    ]);
    command.arg(&path);
    let output = run_bounded(command, Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("aliases"));
}

#[test]
fn an_interval_of_i64_max_seconds_runs_and_stops() {
    let mut command = binary();
    command.args([
        "run",
        "--state",
        "memory",
        "--flink-url",
        "http://127.0.0.1:9",
        "--interval",
        "9223372036854775807 s",
        "--run-for",
        "1 s",
    ]);
    let output = run_bounded(command, Duration::from_secs(60));
    // Before: the first cycle's `now + interval` overflowed and the process exited 3.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("internal error"), "{stderr}");
}

/// A JobManager that accepts connections and never answers: every call hangs until its timeout.
fn silent_server() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    (listener, url)
}

#[cfg(unix)]
fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn sigterm_during_a_hanging_call_stops_at_once() {
    let (_listener, url) = silent_server();
    let dir = std::env::temp_dir().join(format!("fa-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("conf.yaml");
    std::fs::write(&config, "job.autoscaler.flink.rest-client.timeout: 10 min\n").expect("config");
    let mut child = binary()
        .args(["run", "--state", "memory", "--flink-url", &url, "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = Instant::now();
    signal(child.id(), "TERM");
    let deadline = Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if signalled.elapsed() > deadline {
            let _ = child.kill();
            panic!("SIGTERM did not stop a run whose job list call hangs for 10 min");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "took {:?}",
        signalled.elapsed()
    );
}
