//! What if: replays one recorded scenario under two configurations and prints what changes.
//!
//! ```text
//! cargo run --example what_if                                  # the bundled chain-10 recording
//! cargo run --example what_if -- my-scenario.json \
//!     job.autoscaler.utilization.target=0.5 job.autoscaler.restart.time=1min
//! ```
//!
//! The scenario (`flink-autoscaler-scenario/1`, see `replay-format.md`) is replayed once as
//! recorded and once with the given `key=value` overrides on top of its `config` (default:
//! `job.autoscaler.utilization.target=0.5`), through the library's `replay` API, and the two
//! decisions are compared vertex by vertex.

use autoscaler_replay::replay_str;
use serde_json::Value;

const DEFAULT_SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bench/chain-10.json");

fn with_overrides(scenario: &Value, overrides: &[(String, String)]) -> Value {
    let mut changed = scenario.clone();
    if !changed.get("config").is_some_and(Value::is_object) {
        changed["config"] = Value::Object(serde_json::Map::new());
    }
    for (key, value) in overrides {
        changed["config"][key.as_str()] = Value::String(value.clone());
    }
    changed
}

fn parallelism(result: &Value, vertex: &str) -> String {
    result["decision"]["parallelism"][vertex]
        .as_u64()
        .map_or_else(|| "-".to_owned(), |p| p.to_string())
}

fn metric(result: &Value, vertex: &str, name: &str) -> f64 {
    result["evaluated"]["vertices"][vertex][name]["current"]
        .as_f64()
        .unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| DEFAULT_SCENARIO.to_owned());
    let mut overrides: Vec<(String, String)> = args
        .map(|a| match a.split_once('=') {
            Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
            None => Err(format!("expected key=value, got {a:?}")),
        })
        .collect::<Result<_, _>>()?;
    if overrides.is_empty() {
        overrides.push(("job.autoscaler.utilization.target".to_owned(), "0.5".to_owned()));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let scenario: Value = serde_json::from_str(&text)?;
    let base = replay_str(&text)?;
    let what_if = replay_str(&serde_json::to_string(&with_overrides(&scenario, &overrides))?)?;

    println!("scenario: {path}");
    let changes: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("what if:  {}", changes.join(" "));
    println!();
    println!(
        "{:<10} {:>9} {:>9} {:>16} {:>16}",
        "vertex", "recorded", "what-if", "scale-up thr.", "scale-down thr."
    );
    let vertices: Vec<String> = scenario["topology"]["vertices"]
        .as_array()
        .map(|vs| vs.iter().filter_map(|v| v["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut differing = 0;
    for v in &vertices {
        let (a, b) = (parallelism(&base, v), parallelism(&what_if, v));
        let mark = if a == b { "" } else { "  <- differs" };
        differing += usize::from(a != b);
        let thresholds = |r: &Value| {
            format!(
                "{:.0}/{:.0}",
                metric(r, v, "SCALE_UP_RATE_THRESHOLD"),
                metric(r, v, "SCALE_DOWN_RATE_THRESHOLD")
            )
        };
        println!(
            "{v:<10} {a:>9} {b:>9} {:>16} {:>16}{mark}",
            thresholds(&base),
            thresholds(&what_if)
        );
    }
    println!();
    for (name, result) in [("recorded", &base), ("what-if", &what_if)] {
        let decision = &result["decision"];
        let reason = decision["reason"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let total: u64 = decision["parallelism"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        println!(
            "{name:<9} outcome {}{reason}, total parallelism {total}",
            decision["outcome"].as_str().unwrap_or("?")
        );
    }
    println!("{differing} of {} vertices decide differently", vertices.len());
    Ok(())
}
