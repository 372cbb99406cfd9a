//! Record, then replay: the simulator's job is recorded through the hooks `run --record` installs
//! (`RecordingCollector`, `DecisionPublisher`, `Recorder`), then `replay --recording` runs the pure
//! cycle over the recording. With the recorded configuration it reproduces every recorded decision
//! record; with a changed target utilization it diverges, and says where and why.

use autoscaler_core::record::{JobOutcome, VertexReason};
use autoscaler_replay::recording::{Entry, Recorder, RecorderOptions, open_recording_file, read_recording_file};
use autoscaler_replay::recording_replay::{RecordingReplay, WhatIf, render, replay_recording};
use autoscaler_sim::harness::{SimAutoscaler, SimCollector, SimEventHandler, example_configuration};
use autoscaler_sim::sim_instant;
use autoscaler_sim::{Simulator, workloads};
use flink_autoscaler_cli::recording::{DecisionPublisher, RecordingCollector};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the recorded run left: the recording, the rescales the simulator applied and the
/// `ScalingReport` events the live cycles emitted (simulated instant, message).
type Recorded = (PathBuf, usize, Vec<(Duration, String)>);

/// Records 40 simulated minutes of the quickstart job (cycle every 10 s) once per test binary.
fn recording() -> &'static Recorded {
    static RECORDING: OnceLock<Recorded> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fa-record-replay-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let recorder = Arc::new(Recorder::new(&dir, RecorderOptions::default()).unwrap_or_else(|e| panic!("{e}")));
        let sim = Simulator::new(workloads::quickstart()).unwrap_or_else(|e| panic!("{e}"));
        let hooks = recorder.clone();
        let mut auto = SimAutoscaler::wrapped(sim, example_configuration(), Duration::from_secs(10), |c, h| {
            let collector: SimCollector = Arc::new(RecordingCollector::new(c, hooks.clone()));
            let handler: SimEventHandler = Arc::new(DecisionPublisher::new(h, None, Some(hooks)));
            (collector, handler)
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        runtime.block_on(auto.run_until(Duration::from_secs(2400), |_| {}));
        let rescales = auto.handle().lock().rescales().len();
        let reports = auto
            .take_events()
            .into_iter()
            .filter(|e| e.reason == "ScalingReport")
            .map(|e| (e.at, e.message))
            .collect();
        (recorder.path_of("quickstart"), rescales, reports)
    })
}

fn replay(what_if: &WhatIf) -> RecordingReplay {
    let reader = open_recording_file(&recording().0).unwrap_or_else(|e| panic!("{e}"));
    replay_recording(reader, what_if).unwrap_or_else(|e| panic!("{e}"))
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap_or_else(|| panic!("non-UTF-8 temp path"))
}

#[test]
fn the_recorded_configuration_reproduces_every_recorded_decision() {
    let (path, rescales, _) = recording();
    let recorded = read_recording_file(path).unwrap_or_else(|e| panic!("{e}"));
    let decisions: Vec<_> = recorded
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Decision(r) => Some(r),
            _ => None,
        })
        .collect();
    let recorded_scales = decisions.iter().filter(|r| r.outcome == JobOutcome::Scale).count();
    assert!(recorded_scales >= 1, "the simulated job never scaled");
    assert!(*rescales >= 1);

    let r = replay(&WhatIf::default());
    // Every collection is a cycle; every cycle with a collection has its recorded decision.
    let snapshots = recorded
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Snapshot(_)))
        .count();
    assert_eq!(r.cycles.len(), snapshots);
    assert_eq!(r.recorded, snapshots);
    assert_eq!(r.reproduced, r.recorded, "{}", render(&r));
    // Restarts leave cycles without a collection: recorded as not ready, nothing to replay.
    assert_eq!(r.uncollected, decisions.len() - snapshots);
    assert_eq!(r.summary.rescales.len(), recorded_scales);
    assert!(r.what_if_summary.is_none() && r.first_divergence.is_none());
    // Parallelism over time: parse (the bottleneck) starts at 1 and ends where the job ended.
    let parse = &r.summary.parallelism["parse"];
    assert_eq!(parse[0].parallelism, 1);
    let last_topology = recorded.entries.iter().rev().find_map(|e| match e {
        Entry::Topology { topology, .. } => Some(topology.clone()),
        _ => None,
    });
    let final_parse = last_topology
        .and_then(|t| t.get("parse").map(|v| v.parallelism.get()))
        .unwrap_or_default();
    assert_eq!(parse.last().map(|s| s.parallelism), Some(final_parse));
    assert!(final_parse > 1);
    // parse was above the band before its first rescale.
    assert!(r.summary.outside_band["parse"].above_max_s > 0);

    let text = render(&r);
    assert!(
        text.contains(&format!("reproduced {0} of {0} recorded decisions", r.recorded)),
        "{text}"
    );
    assert!(text.contains("parallelism over time:"), "{text}");
    assert!(text.contains("time outside the utilization band:"), "{text}");
}

#[test]
fn a_lower_target_utilization_diverges_and_says_where() {
    let what_if = WhatIf::parse(&["job.autoscaler.utilization.target=0.5".to_owned()], None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let r = replay(&what_if);
    assert_eq!(r.changes_take_effect, Some(true));
    // The recorded configuration still reproduces the recording beside the what-if.
    assert_eq!(r.reproduced, r.recorded);
    let first = r
        .first_divergence
        .unwrap_or_else(|| panic!("no divergence: {}", render(&r)));
    let cycle = &r.cycles[first - 1];
    let divergence = cycle.divergence.as_ref().unwrap_or_else(|| panic!("cycle {first}"));
    // The first divergence is parse's first scale-up: to 4 at 70 %, to more at 50 %.
    let parse = divergence
        .vertices
        .iter()
        .find(|v| v.vertex == "parse")
        .unwrap_or_else(|| panic!("{divergence:?}"));
    assert_eq!(parse.recorded_config.reason, VertexReason::ScaleUp);
    assert_eq!(parse.what_if.reason, VertexReason::ScaleUp);
    assert!(parse.what_if.target > parse.recorded_config.target, "{parse:?}");
    assert!(divergence.rescale);
    assert_eq!(r.metrics_stale_from, Some(first));
    // Every cycle before it decided alike.
    assert!(r.cycles[..first - 1].iter().all(|c| c.divergence.is_none()));
    let what_if_summary = r
        .what_if_summary
        .as_ref()
        .unwrap_or_else(|| panic!("no what-if summary"));
    assert!(what_if_summary.parallelism["parse"].iter().any(|s| s.parallelism > 4));

    let text = render(&r);
    assert!(
        text.contains("what-if: job.autoscaler.utilization.target=0.5"),
        "{text}"
    );
    assert!(text.contains("  diverges: parse: recorded config 1 -> "), "{text}");
    assert!(
        text.contains(&format!(
            "divergence: {} of {} cycles, the first at cycle {first}",
            r.divergent_cycles,
            r.cycles.len()
        )),
        "{text}"
    );
    assert!(
        text.contains("the recorded metrics no longer describe the what-if job"),
        "{text}"
    );
}

#[test]
fn from_and_to_report_a_range_with_the_state_carried_into_it() {
    let all = replay(&WhatIf::default());
    let at = |i: usize| all.cycles[i].at.to_rfc3339();
    let what_if = WhatIf::parse(&[], Some(&at(20)), Some(&at(59))).unwrap_or_else(|e| panic!("{e}"));
    let r = replay(&what_if);
    assert_eq!(r.cycles.len(), 40);
    assert_eq!(r.cycles[0].at, all.cycles[20].at);
    // The cycles before the range ran: the window and the history are the recorded job's.
    assert_eq!(r.reproduced, r.recorded);
    assert_eq!(r.recorded, 40);
}

#[test]
fn the_command_prints_the_replay_and_its_json_feeds_explain() {
    let path = path_str(&recording().0);
    let (code, stdout, stderr) = cli(&["replay", "--recording", path]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("replay of the recording of \"quickstart\": "),
        "{stdout}"
    );
    assert!(stdout.contains("reproduced "), "{stdout}");
    let (code, stdout, stderr) = cli(&[
        "replay",
        "--recording",
        path,
        "--set",
        "job.autoscaler.target.utilization=0.5",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("diverges: parse"), "{stdout}");
    assert!(stdout.contains("no longer describe the what-if job"), "{stdout}");

    let (code, json, stderr) = cli(&["replay", "--recording", path, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(doc["format"], "flink-autoscaler-recording-replay/1");
    let records = autoscaler_replay::explain::records_in(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), doc["cycles"].as_array().map_or(0, Vec::len));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let path = path_str(&recording().0);
    let dir = std::env::temp_dir().join(format!("fa-record-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let mut lines: Vec<&str> = text.lines().collect();
    lines[5] = "{\"kind\":\"snapshot\",";
    let malformed = dir.join("malformed.jsonl");
    std::fs::write(&malformed, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{e}"));
    let no_header = dir.join("no-header.jsonl");
    std::fs::write(&no_header, "{\"kind\":\"config\"}\n").unwrap_or_else(|e| panic!("{e}"));
    let malformed = path_str(&malformed).to_owned();
    let no_header = path_str(&no_header).to_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--recording", &malformed], "invalid recording: line 6: "),
        (
            vec!["--recording", &no_header],
            "invalid recording: line 1: expected a header line",
        ),
        (
            vec!["--recording", "/nonexistent/r.jsonl"],
            "cannot read the recording: /nonexistent/r.jsonl: ",
        ),
        (vec!["--recording", "/dev/zero"], "invalid recording: line 1: "),
        (
            vec!["--recording", path, "--set", "job.autoscaler.nope=1"],
            "invalid --set \"job.autoscaler.nope=1\": unknown key",
        ),
        (
            vec!["--recording", path, "--set", "job.autoscaler.utilization.target=high"],
            "invalid --set \"job.autoscaler.utilization.target=high\": ",
        ),
        (
            vec!["--recording", path, "--from", "noon"],
            "invalid --from \"noon\": expected an RFC 3339 time",
        ),
        (
            vec!["--recording", path, "--to", "2024-13-01T00:00:00Z"],
            "invalid --to \"2024-13-01T00:00:00Z\": ",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["replay"];
        all.extend(args.iter().copied());
        let (code, stdout, stderr) = cli(&all);
        assert_eq!(code, 2, "{all:?}: {stderr}");
        assert!(stdout.is_empty(), "{all:?}: {stdout}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{all:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{all:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_live_scaling_report_adds_the_bottleneck_line_of_the_decision_record() {
    let (path, _, reports) = recording();
    let recorded = read_recording_file(path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!reports.is_empty(), "no scaling report");
    let mut with_line = 0;
    for (at, message) in reports {
        let record = recorded
            .entries
            .iter()
            .find_map(|e| match e {
                Entry::Decision(r) if r.at == sim_instant(*at) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no decision record at {at:?}"));
        // The reference's text, one line, then the record's root-cause line when there is one.
        let (reference, added) = message
            .split_once('\n')
            .map_or((message.as_str(), None), |(a, b)| (a, Some(b)));
        assert!(
            reference.starts_with("Scaling execution enabled, begin scaling vertices:{ Vertex ID "),
            "{message}"
        );
        assert_eq!(added, record.root_cause.as_deref(), "{message}");
        with_line += usize::from(added.is_some());
    }
    assert!(with_line >= 1, "{reports:?}");
    let first = reports.iter().find_map(|(_, m)| m.split_once('\n')).map(|(_, l)| l);
    assert!(
        first.is_some_and(|l| l.starts_with("bottleneck: parse (busy ") && l.contains("backpressuring")),
        "{first:?}"
    );
}

#[test]
fn a_change_that_leaves_the_options_as_recorded_is_noted() {
    // The recording sets metrics.window to 3 min already: the same value changes nothing.
    let what_if = WhatIf::parse(&["job.autoscaler.metrics.window=3 min".to_owned()], None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let r = replay(&what_if);
    assert_eq!(r.changes_take_effect, Some(false));
    assert_eq!(r.divergent_cycles, 0);
    assert!(r.first_divergence.is_none() && r.metrics_stale_from.is_none());
    let text = render(&r);
    assert!(
        text.contains("note: the changes leave the recorded options as they are"),
        "{text}"
    );
    assert!(text.contains("divergence: none"), "{text}");
}
