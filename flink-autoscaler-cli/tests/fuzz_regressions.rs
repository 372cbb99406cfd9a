//! Replays every input the fuzzers of `fuzz/` found a bug with (`fuzz/regressions/<target>/`),
//! through the same entry points the fuzz targets call (`autoscaler_replay::fuzzing`). A normal
//! `cargo test` thus keeps every fuzzer finding fixed without a nightly toolchain.

use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
    ("replay_parse", autoscaler_replay::fuzzing::replay_parse),
    ("replay_whole", autoscaler_replay::fuzzing::replay_whole),
    ("flink_rest_models", autoscaler_replay::fuzzing::flink_rest_models),
    ("config_values", autoscaler_replay::fuzzing::config_values),
    ("excluded_periods", autoscaler_replay::fuzzing::excluded_periods),
    ("state_codec", autoscaler_replay::fuzzing::state_codec),
    ("yarn_responses", autoscaler_replay::fuzzing::yarn_responses),
];

#[test]
fn every_fuzzer_finding_stays_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut replayed = 0;
    let mut failures = Vec::new();
    for (name, target) in TARGETS {
        let dir = root.join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        for file in files.into_iter().filter(|f| f.is_file()) {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failures.push(file.display().to_string());
            }
            replayed += 1;
        }
    }
    assert!(failures.is_empty(), "inputs that fail again: {failures:?}");
    assert!(replayed > 0, "no regression input found under {}", root.display());
}

/// Every target accepts the trivial inputs (and the test above has something to compare with when
/// a target has no finding yet).
#[test]
fn every_target_takes_empty_and_junk_input() {
    for (_, target) in TARGETS {
        for input in [&b""[..], b"\0", b"{}", b"[]", b"\xff\xfe", b"{\"format\":1}"] {
            target(input);
        }
    }
}
