//! Replay cases: every `tests/scenarios/*.json` carries an `expect` section (ignored by the tool)
//! holding the parts of the result that must match; every `tests/invalid/*.json` must be rejected
//! with exit code 2 and a message naming `expect_error_path`. The reference's own results on the
//! benchmark scenarios (`tests/fixtures/bench/*.expected.json`) must match in full.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    out.sort();
    out
}

fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => false,
    }
}

/// Scaling reports list one `{ Vertex ID ... }` entry per vertex in an unspecified order (the
/// reference's HashMap order): compare the header and the set of entries.
fn same_report(a: &str, e: &str) -> bool {
    fn split(s: &str) -> Option<(&str, Vec<&str>)> {
        let start = s.find("{ Vertex ID ")?;
        let (header, body) = s.split_at(start);
        let mut entries: Vec<&str> = body.split_inclusive('}').collect();
        entries.sort_unstable();
        Some((header, entries))
    }
    matches!((split(a), split(e)), (Some(x), Some(y)) if x == y)
}

/// Checks that `actual` contains `expected` (objects: every expected key; arrays: same length,
/// events compared as multisets; numbers numerically). Returns the first mismatch path.
fn contains(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let av = a.get(k).ok_or_else(|| format!("{path}.{k}: missing in result"))?;
                contains(av, ev, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} elements, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            let mut unmatched: Vec<&Value> = a.iter().collect();
            for (i, ev) in e.iter().enumerate() {
                let pos = unmatched.iter().position(|av| contains(av, ev, path).is_ok());
                match pos {
                    Some(p) => {
                        unmatched.remove(p);
                    }
                    None => return Err(format!("{path}[{i}]: no element matches {ev} in {actual}")),
                }
            }
            Ok(())
        }
        (Value::Number(_), Value::Number(_)) if numbers_equal(actual, expected) => Ok(()),
        (Value::String(a), Value::String(e)) if same_report(a, e) => Ok(()),
        _ if actual == expected => Ok(()),
        _ => Err(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn run_cli(path: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .arg("replay")
        .arg(path)
        .output()
        .expect("run flink-autoscaler");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn scenario_cases_match_their_expectations() {
    let cases = files("../tests/scenarios");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(case).expect("read case");
        let scenario: Value = serde_json::from_str(&text).expect("case is JSON");
        let result = match autoscaler_replay::replay_str(&text) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{}: rejected: {e}", case.display()));
                continue;
            }
        };
        if let Err(m) = contains(&result, &scenario["expect"], "result") {
            failures.push(format!("{}: {m}", case.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn reference_results_on_the_bench_scenarios_match_in_full() {
    for name in ["chain-10", "dag-100"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bench");
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("scenario");
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{name}.expected.json"))).expect("expected"),
        )
        .expect("expected JSON");
        let result = autoscaler_replay::replay_str(&text).expect("valid scenario");
        contains(&result, &expected, name).unwrap_or_else(|m| panic!("{m}"));
        // And nothing more than the reference reports, but for what the contract added after the
        // fixtures were recorded: the root-cause `explanation` (null here: the scenarios carry no
        // BACKPRESSURE) and `config_changes` (without any memory configuration tuning finds no
        // memory spec, so the returned changes are empty, or `null` when the decision does not
        // reach tuning), the decision `record`, and each decided vertex's `unmeasured` flag
        // (false: every vertex of these scenarios has its busy time).
        let mut reference_part = result.clone();
        if let Some(vertices) = reference_part["decision"]["vertices"].as_object_mut() {
            for (id, vertex) in vertices.iter_mut() {
                let flag = vertex.as_object_mut().and_then(|v| v.remove("unmeasured"));
                assert_eq!(flag, Some(Value::Bool(false)), "{name}: {id} unmeasured");
            }
        }
        if let Some(fields) = reference_part.as_object_mut() {
            assert_eq!(fields.remove("explanation"), Some(Value::Null), "{name}: explanation");
            let record = fields.remove("record").unwrap_or_default();
            assert_eq!(record["format"], "flink-autoscaler-decision/1", "{name}: record");
            let changes = fields.remove("config_changes");
            assert!(
                matches!(&changes, Some(Value::Null))
                    || changes == Some(serde_json::json!({"overrides": {}, "removals": []})),
                "{name}: config_changes {changes:?}"
            );
        }
        contains(&expected, &reference_part, name).unwrap_or_else(|m| panic!("extra output: {m}"));
    }
}

#[test]
fn invalid_scenarios_exit_2_naming_the_field() {
    for case in files("../tests/invalid") {
        let (code, stdout, stderr) = run_cli(&case);
        assert_eq!(code, 2, "{}: exit code {code}, stderr {stderr}", case.display());
        assert!(stdout.is_empty(), "{}: printed {stdout}", case.display());
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{}: one line expected: {stderr}",
            case.display()
        );
        assert!(stderr.starts_with("invalid scenario: "), "{}: {stderr}", case.display());
        let text = std::fs::read_to_string(&case).expect("read case");
        if let Ok(v) = serde_json::from_str::<Value>(&text)
            && let Some(path) = v["expect_error_path"].as_str()
        {
            assert!(
                stderr.contains(&format!(": {path}: ")),
                "{}: expected path {path} in {stderr}",
                case.display()
            );
        }
    }
}

#[test]
fn replay_reads_stdin_and_prints_one_json_object() {
    use std::io::Write;
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/decision-only-scale-up.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .args(["replay", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let text = std::fs::read(&case).expect("read");
    child.stdin.take().expect("stdin").write_all(&text).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["format"], "flink-autoscaler-result/1");
    assert_eq!(v["decision"]["outcome"], "scale");
}

#[test]
fn missing_file_is_invalid_input() {
    let (code, stdout, stderr) = run_cli(Path::new("/nonexistent/scenario.json"));
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.starts_with("invalid scenario: "), "{stderr}");
}

/// `BACKPRESSURE` changes no decision: every scenario replays to the same result, `explanation`
/// aside, with all its `BACKPRESSURE` samples removed; without them the explanation is null.
#[test]
fn backpressure_changes_nothing_but_the_explanation() {
    let mut with_backpressure = 0;
    for case in files("../tests/scenarios") {
        let text = std::fs::read_to_string(&case).expect("read case");
        let mut scenario: Value = serde_json::from_str(&text).expect("case is JSON");
        let mut removed = 0;
        if let Some(snapshots) = scenario["metrics"].as_array_mut() {
            for snapshot in snapshots {
                if let Some(vertices) = snapshot["vertices"].as_object_mut() {
                    for metrics in vertices.values_mut() {
                        if let Some(m) = metrics.as_object_mut() {
                            removed += usize::from(m.remove("BACKPRESSURE").is_some());
                        }
                    }
                }
            }
        }
        if removed == 0 {
            continue;
        }
        with_backpressure += 1;
        let mut with = autoscaler_replay::replay_str(&text).expect("valid scenario");
        let mut without = autoscaler_replay::replay_str(&scenario.to_string()).expect("still valid");
        assert_eq!(without["explanation"], Value::Null, "{}", case.display());
        assert!(with["explanation"].is_object(), "{}", case.display());
        for result in [&mut with, &mut without] {
            if let Some(fields) = result.as_object_mut() {
                fields.remove("explanation");
            }
            // The decision record's root-cause fields come from BACKPRESSURE too; nothing else.
            if let Some(record) = result["record"].as_object_mut() {
                record.remove("bottlenecks");
                record.remove("root_cause");
                if let Some(vertices) = record.get_mut("vertices").and_then(Value::as_object_mut) {
                    for v in vertices.values_mut().filter_map(Value::as_object_mut) {
                        v.remove("role");
                        v.remove("bottleneck");
                    }
                }
            }
        }
        assert_eq!(with, without, "{}: BACKPRESSURE changed the result", case.display());
    }
    assert!(
        with_backpressure >= 5,
        "only {with_backpressure} scenarios carry BACKPRESSURE"
    );
}

/// The binary streams the result ([`autoscaler_replay::ReplayResult::write_json`]): byte
/// for byte the document `replay` builds, as compact JSON, then a newline.
#[test]
fn the_streamed_result_is_byte_for_byte_the_built_document() {
    let mut cases = files("../tests/scenarios");
    cases.extend(
        files("../tests/fixtures/bench")
            .into_iter()
            .filter(|p| !p.to_string_lossy().ends_with(".expected.json")),
    );
    for case in &cases {
        let name = case.display();
        let text = std::fs::read_to_string(case).expect("read case");
        let built = autoscaler_replay::replay_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let built = format!("{}\n", serde_json::to_string(&built).expect("serializable"));
        let scenario = autoscaler_replay::parse_scenario(&text).expect("valid scenario");
        let borrowed = autoscaler_replay::replay(&scenario).expect("valid scenario");
        assert_eq!(format!("{borrowed}\n"), built, "{name}: replay(&scenario)");
        let mut streamed = Vec::new();
        autoscaler_replay::replay_result(scenario)
            .expect("valid scenario")
            .write_json(&mut streamed)
            .expect("written");
        let first_difference = |bytes: &[u8]| bytes.iter().zip(built.as_bytes()).position(|(a, b)| a != b);
        assert!(
            streamed == built.as_bytes(),
            "{name}: streamed {} bytes, built {}, first difference at {:?}",
            streamed.len(),
            built.len(),
            first_difference(&streamed)
        );
        let out = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
            .arg("replay")
            .arg(case)
            .output()
            .expect("run flink-autoscaler");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            out.stdout == built.as_bytes(),
            "{name}: printed {} bytes, built {}, first difference at {:?}",
            out.stdout.len(),
            built.len(),
            first_difference(&out.stdout)
        );
    }
}
