//! Hostile inputs for `replay`, generated: a valid scenario with one node anywhere in it replaced by
//! a hostile value (huge, negative, fractional, NaN, empty, wrong type, control characters, deep
//! nesting). Every case must either give a result or fail with one line naming a JSON path, and
//! must do so within a time and a memory bound: in process (the peak heap of one replay, counted by
//! this test binary's allocator), and through the binary (exit 0 with a result on stdout, or exit 2
//! with one line on stderr).

use peak_alloc::PeakAlloc;
use proptest::prelude::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting the bytes live and their peak.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Held by every test that measures the peak heap: the allocator's peak is process-wide, so two
/// such tests running at once would count each other's allocations.
static HEAP_MEASUREMENT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The most heap one replay of a hostile scenario (a few KB of JSON) may take: a valid scenario of
/// that size needs well under 1 MB, an input-driven allocation would reach far beyond.
const HEAP_BOUND: usize = 64 << 20;

fn base_scenarios() -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok())
        .collect()
}

fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(i64::MIN)),
        Just(serde_json::json!(4_294_967_291u64)),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(0)),
        Just(serde_json::json!(0.5)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!("NaN")),
        Just(serde_json::json!("")),
        Just(serde_json::json!("9223372036854775807 s")),
        Just(serde_json::json!("100000000 d")),
        Just(serde_json::json!("+262143-12-31T23:59:59Z")),
        Just(serde_json::json!("line\nbreak\u{1b}[31m")),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!(true)),
        (1usize..200).prop_map(|depth| {
            let mut v = Value::Null;
            for _ in 0..depth {
                v = Value::Array(vec![v]);
            }
            v
        }),
        "[a-z\\n\\x1b]{0,12}".prop_map(Value::String),
    ]
}

/// Every node of `v` by its path of keys / indexes.
fn paths(v: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                prefix.push(Value::String(k.clone()));
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                prefix.push(Value::from(i));
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'v>(v: &'v mut Value, path: &[Value]) -> Option<&'v mut Value> {
    let mut node = v;
    for step in path {
        node = match step {
            Value::String(k) => node.get_mut(k.as_str())?,
            Value::Number(i) => node.get_mut(usize::try_from(i.as_u64()?).ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// A base scenario with one node replaced by `replacement`, or (with `rename`) one key renamed to
/// carry a newline and an ANSI escape.
fn hostile_scenario(scenario: usize, node: &prop::sample::Index, replacement: Value, rename: bool) -> String {
    let bases = base_scenarios();
    let mut doc = bases[scenario % bases.len()].clone();
    let mut all = Vec::new();
    paths(&doc, &mut Vec::new(), &mut all);
    let path = node.get(&all).clone();
    if rename && let Some((Value::String(key), parent_path)) = path.split_last().map(|(l, p)| (l.clone(), p.to_vec())) {
        if let Some(Value::Object(map)) = node_mut(&mut doc, &parent_path)
            && let Some(value) = map.remove(&key)
        {
            map.insert(format!("{key}\n\u{1b}[2J"), value);
        }
    } else if let Some(target) = node_mut(&mut doc, &path) {
        *target = replacement;
    }
    doc.to_string()
}

/// Runs `flink-autoscaler replay FILE` on `text`, killed after `limit`: (exit code, stdout, stderr).
fn replay_binary(text: &str, limit: Duration) -> (Option<i32>, String, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let stem = std::env::temp_dir().join(format!(
        "replay-hostile-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let [input, out, err] = ["json", "out", "err"].map(|ext| stem.with_extension(ext));
    std::fs::write(&input, text).expect("write the scenario");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .arg("replay")
        .arg(&input)
        .stdout(Stdio::from(std::fs::File::create(&out).expect("stdout file")))
        .stderr(Stdio::from(std::fs::File::create(&err).expect("stderr file")))
        .spawn()
        .expect("the binary starts");
    let started = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait") {
            Some(status) => break status,
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("replay still running after {limit:?} on {text}");
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let result = (status.code(), read(&out), read(&err));
    for p in [input, out, err] {
        let _ = std::fs::remove_file(p);
    }
    result
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn the_binary_exits_0_with_a_result_or_2_with_one_line(
        scenario in 0usize..64,
        node in any::<prop::sample::Index>(),
        replacement in hostile_value(),
        rename in any::<bool>(),
    ) {
        let text = hostile_scenario(scenario, &node, replacement, rename);
        let (code, stdout, stderr) = replay_binary(&text, Duration::from_secs(20));
        match code {
            Some(0) => {
                let result: Value = serde_json::from_str(&stdout).map_err(|e| TestCaseError::fail(format!("stdout is not JSON ({e}): {stdout}")))?;
                prop_assert_eq!(&result["format"], "flink-autoscaler-result/1");
            }
            Some(2) => {
                prop_assert_eq!(stderr.lines().count(), 1, "stderr: {:?}", stderr);
                prop_assert!(stderr.contains("invalid scenario: "), "{}", stderr);
                prop_assert!(!stderr.contains('\u{1b}'), "{:?}", stderr);
                prop_assert!(stdout.is_empty(), "stdout on error: {}", stdout);
            }
            other => prop_assert!(false, "exit {:?}, stderr {:?} on {}", other, stderr, text),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn a_hostile_node_gives_a_result_or_one_line_naming_a_path(
        scenario in 0usize..64,
        node in any::<prop::sample::Index>(),
        replacement in hostile_value(),
        rename in any::<bool>(),
    ) {
        let text = hostile_scenario(scenario, &node, replacement, rename);
        let _measuring = HEAP_MEASUREMENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let started = Instant::now();
        ALLOCATOR.reset_peak_usage();
        let baseline = ALLOCATOR.current_usage();
        let outcome = autoscaler_replay::replay_str(&text);
        let heap = ALLOCATOR.peak_usage().saturating_sub(baseline);
        let elapsed = started.elapsed();
        prop_assert!(elapsed < Duration::from_secs(5), "took {elapsed:?} on {text}");
        prop_assert!(heap < HEAP_BOUND, "peak heap {heap} bytes on {text}");
        match outcome {
            Ok(result) => {
                prop_assert_eq!(&result["format"], "flink-autoscaler-result/1");
                // What the binary streams is the document, byte for byte.
                let mut streamed = Vec::new();
                autoscaler_replay::parse_scenario(&text)
                    .and_then(autoscaler_replay::replay_result)
                    .map_err(|e| TestCaseError::fail(format!("second replay failed: {e}")))?
                    .write_json(&mut streamed)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(String::from_utf8_lossy(&streamed), format!("{result}\n"));
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(!message.contains('\n') && !message.contains('\r') && !message.contains('\u{1b}'), "{message:?}");
                prop_assert!(message.starts_with("invalid scenario: "), "{message}");
                prop_assert!(!e.path.is_empty(), "no JSON path: {message}");
            }
        }
    }
}

/// A FORWARD chain of `n` vertices with two snapshots a minute apart, every vertex 50% busy.
fn chain_scenario(n: usize) -> String {
    let id = |i: usize| format!("v{i}");
    let vertices: Vec<Value> = (0..n)
        .map(|i| serde_json::json!({"id": id(i), "parallelism": 1, "max_parallelism": 128}))
        .collect();
    let edges: Vec<Value> = (1..n)
        .map(|i| serde_json::json!({"from": id(i - 1), "to": id(i), "ship_strategy": "FORWARD"}))
        .collect();
    let snapshot = |at: &str, k: u64| {
        let metrics: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                let m = if i == 0 {
                    serde_json::json!({"NUM_RECORDS_IN": 0, "NUM_RECORDS_OUT": k * 60_000, "LOAD": 0.5, "LAG": 0})
                } else {
                    serde_json::json!({"NUM_RECORDS_IN": k * 60_000, "NUM_RECORDS_OUT": k * 60_000, "LOAD": 0.5,
                                       "NUM_RECORDS_IN_PER_SECOND": 1000})
                };
                (id(i), m)
            })
            .collect();
        serde_json::json!({"at": at, "vertices": metrics})
    };
    serde_json::json!({
        "format": "flink-autoscaler-scenario/1",
        "now": "2024-05-01T10:01:00Z",
        "config": {"job.autoscaler.metrics.window": "1 min", "job.autoscaler.stabilization.interval": "1 min"},
        "job": {"running_since": "2024-05-01T09:00:00Z"},
        "topology": {"vertices": vertices, "edges": edges},
        "metrics": [snapshot("2024-05-01T10:00:00Z", 0), snapshot("2024-05-01T10:01:00Z", 1)],
    })
    .to_string()
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The peak heap of replaying `text` as the binary does (parse, replay, stream the result out),
/// the text itself excluded, and the length of the result.
fn replay_peak_heap(text: &str) -> (usize, usize) {
    ALLOCATOR.reset_peak_usage();
    let baseline = ALLOCATOR.current_usage();
    let scenario = autoscaler_replay::parse_scenario(text).expect("a valid chain");
    let result = autoscaler_replay::replay_result(scenario).expect("replayed");
    let mut out = Counter(0);
    result.write_json(&mut out).expect("written");
    drop(result);
    (ALLOCATOR.peak_usage().saturating_sub(baseline), out.0)
}

/// A long chain costs memory in proportion to its length: doubling the vertices at most a little
/// more than doubles the peak heap, which stays within a small multiple of the input and output
/// (the result is streamed, never held: a 10^5-vertex chain, 31 MB in and 108 MB out, peaks at
/// 270 MB RSS in release).
#[test]
fn a_long_chain_takes_memory_in_proportion_to_its_length() {
    let _measuring = HEAP_MEASUREMENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let small_text = chain_scenario(1_000);
    let large_text = chain_scenario(4_000);
    let (small, _) = replay_peak_heap(&small_text);
    let (large, large_out) = replay_peak_heap(&large_text);
    assert!(
        large < small * 5,
        "1,000 vertices: {small} bytes, 4,000 vertices: {large} bytes"
    );
    // About 2.6 KB a vertex, 1.9 times the input and output together; a result built in memory
    // before it is written (a JSON tree is ten times its text) would take several times that.
    assert!(large / 4_000 < 8 << 10, "{} bytes per vertex", large / 4_000);
    let in_and_out = large_text.len() + large_out;
    assert!(
        large < 4 * in_and_out,
        "peak heap {large} bytes for {} bytes in and {large_out} out",
        large_text.len()
    );
}
