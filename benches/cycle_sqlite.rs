//! Criterion benchmark of one full autoscaler cycle through `JobAutoScalerImpl` on the SQLite
//! state store, flush included, on the bench scenarios `chain-10` and `dag-100` (`tests/fixtures/bench/`).
//!
//! The store is a SQLite file in the temporary directory holding the scenario's state as the
//! previous cycle left it (the window before the last snapshot, flushed), its cache loaded, as in
//! a long-running process. Each timed iteration is one `run_cycle`: collect the last snapshot,
//! window, evaluate, decide, persist and flush in one transaction. Between iterations (not timed)
//! the state is put back as it was and flushed. Before timing, one cycle is measured for the bytes
//! of state it writes (printed as `cycle_sqlite/NAME: N bytes written per cycle, of which the
//! window W`, beside the length of the new snapshot's JSON).
//!
//! `cargo bench --bench cycle_sqlite`

mod support;

use autoscaler_core::{AutoScalerStateStore, JobAutoScalerImpl, scaling::DecisionOutcome};
use autoscaler_state::AnyStateStore;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Ctx, Discard, preload, prepare};

fn bench_cycle_sqlite(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("cycle_sqlite");
    for name in ["chain-10", "dag-100"] {
        let p = prepare(name);
        let now = p.scenario.now;
        let path = std::env::temp_dir().join(format!("cycle-sqlite-{}-{name}.db", std::process::id()));
        let store = Arc::new(
            rt.block_on(AnyStateStore::open(&format!("sqlite:{}", path.display())))
                .expect("sqlite store"),
        );
        let as_store: Arc<dyn AutoScalerStateStore<String, Ctx>> = store.clone();
        rt.block_on(preload(&*as_store, &p));
        let autoscaler =
            JobAutoScalerImpl::new(p.collector.clone(), store.clone(), Arc::new(Discard), Arc::new(Discard))
                .with_clock(Arc::new(move || now));
        // One check outside the timing: the cycle decides what the reference decides, and writes
        // what it writes.
        let (before, window_before) = (store.bytes_written(), store.window_bytes_written());
        let outcome = rt.block_on(autoscaler.run_cycle(&p.ctx)).expect("cycle");
        assert_eq!(outcome.decision_outcome(), Some(DecisionOutcome::Scale), "{name}");
        let latest = p.collector.latest_encoding_len();
        println!(
            "cycle_sqlite/{name}: {} bytes written per cycle, of which the window {} (the new snapshot's JSON is {latest} bytes)",
            store.bytes_written() - before,
            store.window_bytes_written() - window_before,
        );
        rt.block_on(preload(&*as_store, &p));

        group.throughput(Throughput::Elements(p.scenario.topology.len() as u64));
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut timed = Duration::ZERO;
                for _ in 0..iterations {
                    let start = Instant::now();
                    black_box(rt.block_on(autoscaler.run_cycle(&p.ctx)).expect("cycle"));
                    timed += start.elapsed();
                    rt.block_on(preload(&*as_store, &p));
                }
                timed
            })
        });
        rt.block_on(store.close());
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = bench_cycle_sqlite
}
criterion_main!(benches);
