#![allow(missing_docs)] // criterion_group! generates undocumented items.
//! Criterion benchmarks of tessel's flash attention against the naive attention of the
//! `attention` suite (same cases; filter with `cargo bench --bench attention -- self-1024`).
//! Decode cases also time a streaming read of the same K and V bytes.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use tessel_bench::suites::attention::{Workload, CASES};

fn attention(c: &mut Criterion) {
    let isa = match tessel_model::isa_env::isa_from_env() {
        Ok(isa) => isa,
        Err(err) => panic!("TESSEL_ISA: {err}"),
    };
    for case in CASES {
        let mut group = c.benchmark_group(format!("attention/{}", case.name));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(case.flops() as u64));
        let mut work = Workload::new(*case, isa);
        group.bench_function(format!("tessel-{isa}"), |b| b.iter(|| work.run_tessel(isa)));
        group.bench_function("naive", |b| b.iter(|| work.run_naive()));
        if case.q_len == 1 {
            group.throughput(Throughput::Bytes(work.kv_bytes() as u64));
            group.bench_function("stream-read-kv", |b| b.iter(|| work.stream_kv()));
        }
        group.finish();
    }
}

criterion_group!(benches, attention);
criterion_main!(benches);
