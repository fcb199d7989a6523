//! Criterion benchmarks of the row-wise kernels (the `norm` suite's cases): tessel vs a
//! `copy_from_slice` of the same bytes and vs naive scalar loops. `TESSEL_ISA` forces tessel's
//! level; `NORM_OPS=softmax,rmsnorm` narrows the ops measured, `NORM_WIDTHS` / `NORM_ROWS` the
//! shapes.

use criterion::{criterion_main, Criterion, Throughput};
use std::time::Duration;
use tessel_bench::suites::norm::{sizes, Case, Op, ROWS, WIDTHS};

fn bench(c: &mut Criterion) {
    let isa = tessel_model::isa_env::isa_from_env().expect("TESSEL_ISA names a supported level");
    let (widths, row_counts) = (sizes("NORM_WIDTHS", &WIDTHS), sizes("NORM_ROWS", &ROWS));
    for op in Op::selected() {
        for &width in &widths {
            for &rows in &row_counts {
                let mut case = Case::new(op, rows, width);
                let mut group = c.benchmark_group(format!("norm/{}", case.name()));
                group
                    .sample_size(10)
                    .warm_up_time(Duration::from_millis(100))
                    .measurement_time(Duration::from_millis(300))
                    .throughput(Throughput::Bytes(case.bytes() as u64));
                group.bench_function(format!("tessel-{isa}"), |b| b.iter(|| case.tessel(isa)));
                group.bench_function("copy", |b| b.iter(|| case.copy()));
                group.bench_function("naive", |b| b.iter(|| case.naive()));
                group.finish();
            }
        }
    }
}

// The macro defines an undocumented public function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
criterion_main!(group::benches);
