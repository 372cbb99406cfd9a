//! The service benchmark, tiny: `run` (this crate's binary, debug build) against the fake
//! JobManager for a few one-second cycles. It checks the shape of the benchmark's last line and
//! that the figures were measured; it asserts nothing about speed.

use flink_fake_jobmanager::bench::{self, BenchOptions, StateChoice};
use std::time::{Duration, Instant};

#[test]
fn the_service_bench_prints_one_line_of_measured_figures() {
    let work_dir = std::env::temp_dir().join(format!("service-bench-test-{}", std::process::id()));
    let options = BenchOptions {
        autoscaler: env!("CARGO_BIN_EXE_flink-autoscaler").into(),
        jobs: 3,
        vertices: 3,
        hot_every: 0,
        interval: "1s".to_owned(),
        warmup_cycles: 1,
        cycles: 3,
        state: StateChoice::Sqlite,
        settings: Vec::new(),
        log_level: Some("warn".to_owned()),
        work_dir: work_dir.clone(),
        perf_output: None,
    };
    let started = Instant::now();
    let mut progress = Vec::new();
    let report = bench::run(&options, &mut progress);
    let _ = std::fs::remove_dir_all(&work_dir);
    let report = report.unwrap_or_else(|e| panic!("{e:#}\n{}", String::from_utf8_lossy(&progress)));
    // The bench bounds every wait (5 intervals + 60 s without a cycle is an error).
    assert!(started.elapsed() < Duration::from_secs(120));

    let line = report.to_string();
    assert!(!line.contains('\n'), "{line}");
    let prefix = "service: jobs 3, vertices 3, interval 1s, state sqlite, cpu per job-cycle ";
    let rest = line.strip_prefix(prefix).unwrap_or_else(|| panic!("{line}"));
    let fields: Vec<&str> = rest.split(", ").collect();
    let number = |field: &str, name: &str, unit: &str| -> f64 {
        let value = field
            .strip_prefix(name)
            .and_then(|v| v.strip_suffix(unit))
            .unwrap_or_else(|| panic!("{field:?} is not `{name}<number>{unit}` in {line}"));
        value.trim().parse().unwrap_or_else(|_| panic!("{value:?} in {line}"))
    };
    assert_eq!(fields.len(), 6, "{line}");
    number(fields[0], "", " us");
    assert!(number(fields[1], "rss ", " MB") > 0.0, "{line}");
    number(fields[2], "hwm ", " MB");
    assert!(number(fields[3], "metrics ", " B") > 0.0, "{line}");
    // At least the job details and one aggregated-metrics query per vertex and cycle. The window
    // closes when a cycle starts, so a job-cycle still running then has its details counted and
    // perhaps not all its vertex queries: at most one per job (one that runs when the window
    // opens only adds queries, its details being counted before).
    let (jobs, vertices) = (options.jobs as f64, options.vertices as f64);
    let floor = vertices + 1.0 - vertices * jobs / report.job_cycles.max(1) as f64;
    let requests = number(fields[4], "requests per job-cycle ", "");
    assert!(requests >= floor && requests > 2.0, "{requests} < {floor}: {line}");
    number(fields[5], "load ", "");
    assert!(report.rss_bytes > 0 && report.hwm_bytes >= report.rss_bytes);
    assert!(
        report.requests_by_endpoint.contains_key("GET /jobs/:jobid"),
        "{report:?}"
    );
}
