//! Runs `examples/fleet.rs` tiny (3 jobs, 2 cycles) and checks its last line's format.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The example binary cargo builds beside the test binaries (`target/<profile>/examples/fleet`).
fn fleet_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    profile_dir
        .join("examples")
        .join(format!("fleet{}", std::env::consts::EXE_SUFFIX))
}

/// The numbers of `fleet: jobs N, vertices V, cycles C, cpu per cycle X ms, p99 job-cycle Y us,
/// rss Z MB`, or `None` when the line has another shape.
fn parse_fleet_line(line: &str) -> Option<[f64; 6]> {
    let rest = line.strip_prefix("fleet: ")?;
    let parts: Vec<&str> = rest.split(", ").collect();
    let shapes = [
        ("jobs ", ""),
        ("vertices ", ""),
        ("cycles ", ""),
        ("cpu per cycle ", " ms"),
        ("p99 job-cycle ", " us"),
        ("rss ", " MB"),
    ];
    if parts.len() != shapes.len() {
        return None;
    }
    let mut out = [0.0; 6];
    for (i, (part, (prefix, suffix))) in parts.iter().zip(shapes).enumerate() {
        let number = part.strip_prefix(prefix)?.strip_suffix(suffix)?;
        out[i] = number.parse().ok()?;
    }
    Some(out)
}

#[test]
fn the_fleet_line_parser_rejects_other_shapes() {
    let good = "fleet: jobs 1000, vertices 10, cycles 5, cpu per cycle 12.5 ms, p99 job-cycle 830 us, rss 120 MB";
    assert_eq!(parse_fleet_line(good), Some([1000.0, 10.0, 5.0, 12.5, 830.0, 120.0]));
    assert_eq!(parse_fleet_line(&good.replace(" ms", "ms")), None);
    assert_eq!(parse_fleet_line(&good.replace("rss", "RSS")), None);
    assert_eq!(parse_fleet_line(&format!("{good}, extra 1")), None);
}

#[test]
fn a_tiny_fleet_prints_its_figures_on_the_last_line() {
    let binary = fleet_binary();
    if !binary.exists() {
        // `cargo test` builds the examples, `cargo test --test fleet_example` does not.
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--example", "fleet"]);
        if binary.components().any(|c| c.as_os_str() == "release") {
            build.arg("--release");
        }
        let status = wait_bounded(build.spawn().expect("cargo"), Duration::from_secs(900));
        assert!(status.success(), "cargo build --example fleet: {status}");
    }
    let dir = std::env::temp_dir().join(format!("fleet-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let state = format!("sqlite:{}", dir.join("state.db").display());
    let mut child = Command::new(&binary)
        .args(["--jobs", "3", "--vertices", "4", "--cycles", "2", "--state", &state])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the fleet example");
    let status = wait_bounded(&mut child, Duration::from_secs(120));
    let mut stdout = String::new();
    let mut stderr = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut stdout));
    child.stderr.take().map(|mut s| s.read_to_string(&mut stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let Some([jobs, vertices, cycles, cpu, p99, rss]) = parse_fleet_line(last) else {
        panic!("unexpected last line {last:?}");
    };
    assert_eq!((jobs, vertices, cycles), (3.0, 4.0, 2.0));
    assert!(cpu > 0.0 && p99 > 0.0 && rss > 0.0, "{last}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("cycle ")).count(),
        2,
        "{stdout}"
    );
}

/// Waits for `child`, killing it (and failing) after `limit`.
fn wait_bounded(
    mut child: impl std::borrow::BorrowMut<std::process::Child>,
    limit: Duration,
) -> std::process::ExitStatus {
    let child = child.borrow_mut();
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a child process did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
