//! The recording format: what the recorder writes reads back identically, files rotate at their
//! size bound and every file stays self-contained.

use autoscaler_core::config::Configuration;
use autoscaler_metrics::collection::{AggregatedMetric, FlinkMetric, IoMetrics, RawJobMetrics};
use autoscaler_metrics::{EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexSpec};
use autoscaler_replay::recording::{
    Entry, RecordedMetrics, Recorder, RecorderOptions, read_recording, read_recording_file,
};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};

fn at(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_714_557_600, 0).single().unwrap_or_default() + TimeDelta::seconds(s)
}

fn topology(p: u32) -> JobTopology {
    let mut src = VertexSpec::new("src", 1, 128);
    src.name = Some("Source: datagen".to_owned());
    src.num_source_partitions = 4;
    JobTopology::new(
        vec![src, VertexSpec::new("sink", p, 128)],
        vec![EdgeSpec::new("src", "sink", ShipStrategy::Hash)],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn raw(i: u64) -> RawJobMetrics {
    let mut raw = RawJobMetrics::default();
    let busy = AggregatedMetric {
        min: 100.0,
        max: 950.0,
        avg: 500.0,
        sum: 1000.0,
        skew: f64::NAN,
    };
    raw.vertex_metrics.insert(
        VertexId::new("sink"),
        [(FlinkMetric::BusyTimePerSec, busy)].into_iter().collect(),
    );
    raw.io_metrics.insert(
        VertexId::new("sink"),
        IoMetrics {
            num_records_in: 1000 * i,
            num_records_out: 0,
            accumulated_busy_time: f64::NAN,
        },
    );
    raw
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fa-recording-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn round_trip() {
    let dir = temp_dir("round-trip");
    let recorder = Recorder::new(&dir, RecorderOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let config = Configuration::from_iter([("job.autoscaler.metrics.window", "1 m")]);
    for i in 0..3 {
        let p = if i < 2 { 1 } else { 2 };
        recorder
            .record_collection(
                "job/1",
                at(i * 10),
                &config,
                &topology(p),
                at(-60),
                Some(2.0),
                None,
                RecordedMetrics::Flink(raw(i as u64)),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let path = recorder.path_of("job/1");
    assert_eq!(path.file_name().and_then(|n| n.to_str()), Some("job_1.jsonl"));
    let recording = read_recording_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recording.job, "job/1");
    let kinds: Vec<&str> = recording
        .entries
        .iter()
        .map(|e| match e {
            Entry::Config { .. } => "config",
            Entry::Topology { .. } => "topology",
            Entry::Snapshot(_) => "snapshot",
            Entry::Decision(_) => "decision",
        })
        .collect();
    // The configuration once; the topology again when the sink's parallelism changed.
    assert_eq!(
        kinds,
        ["config", "topology", "snapshot", "snapshot", "topology", "snapshot"]
    );
    match &recording.entries[1] {
        Entry::Topology { topology: t, .. } => assert_eq!(**t, topology(1)),
        other => panic!("{other:?}"),
    }
    match &recording.entries[3] {
        Entry::Snapshot(s) => {
            assert_eq!(s.at, at(10));
            assert_eq!(s.job_running_since, at(-60));
            assert_eq!(s.task_manager_cpu, Some(2.0));
            let RecordedMetrics::Flink(m) = &s.metrics else {
                panic!("{:?}", s.metrics)
            };
            assert_eq!(m.io_metrics["sink"].num_records_in, 1000);
            assert!(m.io_metrics["sink"].accumulated_busy_time.is_nan());
            assert_eq!(m.vertex_metrics["sink"][&FlinkMetric::BusyTimePerSec].max, 950.0);
        }
        other => panic!("{other:?}"),
    }
    // A crash mid-line: the truncated last line is skipped.
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let truncated = &text[..text.len() - 20];
    let back = read_recording(truncated).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.entries.len(), 5);
    // A broken line in the middle is an error naming it.
    let broken = text.replacen("\"kind\":\"snapshot\"", "\"kind\":\"snapshop\"", 1);
    let err = read_recording(&broken).err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(err, "invalid recording: line 4: unknown kind \"snapshop\"");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rotation_bounds_files_and_keeps_each_self_contained() {
    let dir = temp_dir("rotation");
    let options = RecorderOptions {
        max_file_bytes: 4096,
        keep_rotated: 2,
    };
    let recorder = Recorder::new(&dir, options).unwrap_or_else(|e| panic!("{e}"));
    let config = Configuration::from_iter([("job.autoscaler.metrics.window", "1 m")]);
    for i in 0..100 {
        recorder
            .record_collection(
                "j",
                at(i),
                &config,
                &topology(1),
                at(-60),
                None,
                None,
                RecordedMetrics::Flink(raw(i as u64)),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    files.sort();
    assert_eq!(files, ["j.1.jsonl", "j.2.jsonl", "j.jsonl"]);
    for f in &files {
        let path = dir.join(f);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(u64::MAX);
        assert!(size <= 4096, "{f}: {size} bytes");
        let recording = read_recording_file(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(matches!(recording.entries[0], Entry::Config { .. }), "{f}");
        assert!(matches!(recording.entries[1], Entry::Topology { .. }), "{f}");
        assert!(recording.entries.len() > 2, "{f}");
    }
    // The newest file ends with the last snapshot.
    let newest = read_recording_file(&dir.join("j.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    match newest.entries.last() {
        Some(Entry::Snapshot(s)) => assert_eq!(s.at, at(99)),
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
