//! No password reaches a log line or an error message of `flink-autoscaler run`: the process is run
//! with passwords in every place a user might put one, and its whole output is searched for them.

use std::process::Command;
use std::time::{Duration, Instant};

const SECRET: &str = "Sup3rS3cretPw";

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

/// Runs the binary with `args`, bounded to 60 s, and returns (exit code, stdout + stderr).
fn run(args: &[String]) -> (Option<i32>, String) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .args(args)
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn assert_no_secret(text: &str) {
    assert!(!text.contains(SECRET), "a password leaked into the output:\n{text}");
    assert!(!text.contains("Sup3rS3cret"), "a part of the password leaked:\n{text}");
}

#[test]
fn database_passwords_never_appear_in_startup_errors() {
    let port = closed_port();
    for state in [
        format!("postgres://app:{SECRET}@127.0.0.1:{port}/db"),
        format!("mysql://app:{SECRET}@127.0.0.1:{port}/db"),
        format!("postgres://127.0.0.1:{port}/db?user=app&password={SECRET}"),
        format!("mysql://127.0.0.1:{port}/db?password={SECRET}&ssl-mode=disabled"),
        format!("redis://app:{SECRET}@127.0.0.1:{port}"),
    ] {
        let (code, text) = run(&[
            "run".into(),
            "--flink-url".into(),
            format!("http://127.0.0.1:{port}"),
            "--state".into(),
            state,
            "--run-for".into(),
            "1 s".into(),
            // The database is retried for the startup timeout (60 s by default).
            "-Dautoscaler.service.startup-timeout=1 s".into(),
        ]);
        assert_eq!(code, Some(1), "startup fails:\n{text}");
        assert!(text.contains("--state"), "the error names the flag:\n{text}");
        assert_no_secret(&text);
    }
}

#[test]
fn source_url_credentials_never_appear_in_logs() {
    let port = closed_port();
    let (code, text) = run(&[
        "run".into(),
        "--flink-url".into(),
        format!("prod=http://admin:{SECRET}@127.0.0.1:{port}"),
        "--yarn-rm-url".into(),
        format!("rm=http://admin:{SECRET}@127.0.0.1:{port}/"),
        "--state".into(),
        "memory".into(),
        "--interval".into(),
        "1 s".into(),
        "--run-for".into(),
        "3 s".into(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("standalone autoscaler starting"), "{text}");
    assert!(
        text.contains("could not list the jobs of a source"),
        "the failing sources are reported:\n{text}"
    );
    assert!(
        text.contains("password on the command line"),
        "a warning says where to put it instead:\n{text}"
    );
    assert_no_secret(&text);
}
