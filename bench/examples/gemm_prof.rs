//! Temporary profiling driver (not committed).
use std::time::Instant;
use tessel_bench::suites::gemm::Case;
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (m, k, n, reps) = (args[0], args[1], args[2], args[3]);
    let isa = tessel_model::isa_env::isa_from_env().unwrap();
    let mut case = Case::new(m, k, n);
    let (mut best_t, mut best_c) = (f64::MAX, f64::MAX);
    for _ in 0..reps {
        let t = Instant::now();
        case.tessel(isa);
        best_t = best_t.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        case.gemm_crate();
        best_c = best_c.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{m}x{k}x{n}: tessel {:.1} crate {:.1} ratio {:.2}",
        case.flops() / best_t / 1e9,
        case.flops() / best_c / 1e9,
        best_c / best_t
    );
}
