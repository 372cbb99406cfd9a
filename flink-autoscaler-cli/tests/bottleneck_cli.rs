//! `flink-autoscaler bottleneck` rejects bad arguments with a one-line message before any request
//! (its real-cluster behaviour is checked by the end-to-end test, `e2e/run-e2e.sh --root-cause-check`).

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .arg("bottleneck")
        .args(args)
        .output()
        .expect("run flink-autoscaler");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_arguments_are_named() {
    let (code, stderr) = run(&["--flink-url", "http://127.0.0.1:9", "--samples", "0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--samples must be between 1 and 100"), "{stderr}");
    let (code, stderr) = run(&["--flink-url", "http://127.0.0.1:9", "--interval", "5 mins"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--interval \"5 mins\""), "{stderr}");
    // Nothing listens on port 9: the job list cannot be fetched, said on one line.
    let (code, stderr) = run(&["--flink-url", "http://127.0.0.1:9", "--samples", "1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("listing the jobs"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}
