//! Criterion benchmarks of the GEMM: tessel vs the `gemm` crate on the suite's shapes (and the
//! streaming-read floor for `m = 1`). `TESSEL_ISA` forces tessel's level.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use tessel_bench::suites::gemm::{Case, CASES};

fn bench(c: &mut Criterion) {
    let isa = tessel_model::isa_env::isa_from_env().expect("TESSEL_ISA names a supported level");
    for (m, k, n) in CASES {
        let mut case = Case::new(m, k, n);
        let mut group = c.benchmark_group(format!("gemm/{}", case.name()));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(800))
            .throughput(Throughput::Elements(case.flops() as u64));
        group.bench_function(format!("tessel-{isa}"), |b| b.iter(|| case.tessel(isa)));
        group.bench_function("gemm-crate", |b| b.iter(|| case.gemm_crate()));
        if m == 1 {
            group.bench_function(format!("stream-read-{isa}"), |b| {
                b.iter(|| std::hint::black_box(case.stream_read(isa)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
