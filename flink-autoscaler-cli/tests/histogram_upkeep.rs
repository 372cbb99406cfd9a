//! The Prometheus histograms' upkeep: without a scrape, the exporter keeps every sample until
//! something folds it into the buckets. A service that nobody scrapes must not grow with each
//! request it makes; this test counts the heap with its own allocator.

use flink_autoscaler_cli::service::metrics::spawn_histogram_upkeep;
use metrics::Recorder as _;
use peak_alloc::PeakAlloc;
use std::time::Duration;

/// The system allocator, counting the bytes live.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Samples recorded: 8 bytes each while kept, about 4 MB in all.
const SAMPLES: usize = 500_000;

#[test]
fn unscraped_histogram_samples_are_folded_and_freed() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(flink_autoscaler_cli::service::metrics::LATENCY_BUCKETS)
        .expect("buckets")
        .build_recorder();
    let handle = recorder.handle();
    let key = metrics::Key::from_name("test_latency_seconds");
    let metadata = metrics::Metadata::new(module_path!(), metrics::Level::INFO, None);
    let histogram = recorder.register_histogram(&key, &metadata);
    // A first sample and upkeep, so the buckets exist before the baseline.
    histogram.record(0.002);
    handle.run_upkeep();

    let before = ALLOCATOR.current_usage();
    for i in 0..SAMPLES {
        histogram.record((i % 100) as f64 / 1000.0);
    }
    let kept = ALLOCATOR.current_usage().saturating_sub(before);
    assert!(kept >= SAMPLES * 8, "the samples are kept until folded: {kept} bytes");

    runtime.block_on(async {
        let upkeep = spawn_histogram_upkeep(handle.clone(), Duration::from_millis(10));
        // Freed blocks are reclaimed when the exporter's epoch advances: a few upkeeps.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let left = ALLOCATOR.current_usage().saturating_sub(before);
            if left < kept / 10 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{left} of {kept} bytes still held after 10 s of upkeep"
            );
        }
        upkeep.abort();
    });
    let rendered = handle.render();
    let count = format!("test_latency_seconds_count {}", SAMPLES + 1);
    assert!(rendered.contains(&count), "every sample counted once: {rendered}");
}
