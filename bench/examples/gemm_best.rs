//! The best (shortest) time of many single-threaded products per shape, as a fraction of the
//! best time of the same run's `fma-peak`: `TESSEL_ISA=avx2 cargo run --release -p tessel-bench
//! --example gemm_best -- 1024x1024x1024 1500x1536x384`; a shape written `i8:MxKxN` runs the
//! int8 product with the level's fastest int8 primitive (its rate counted as 2·m·k·n
//! operations, so a ratio above 1 is above the f32 peak).
//!
//! `report gemm` prints medians, which on a shared machine move by ±5% between runs; the best
//! of many runs moves less, so it is what compares two builds' blocking constants.

use std::process::ExitCode;
use std::time::{Duration, Instant};
use tessel_bench::suites::gemm::{fma_peak, Case, PEAK_ITERATIONS};
use tessel_bench::suites::gemm_int8::Int8Case;
use tessel_kernels::gemm::int8::I8Kernel;

/// Runs of `fma-peak` whose best time is the peak.
const PEAK_RUNS: usize = 30;
/// At least this many products per shape, and more until [`SHAPE_TIME`] has passed.
const MIN_RUNS: usize = 10;
const SHAPE_TIME: Duration = Duration::from_millis(1500);
const MAX_RUNS: usize = 500;

/// `m × k × n` and whether the product is int8 (`i8:` before the shape).
fn parse(arg: &str) -> Option<(bool, usize, usize, usize)> {
    let (int8, shape) = match arg.strip_prefix("i8:") {
        Some(shape) => (true, shape),
        None => (false, arg),
    };
    let mut dims = shape.split('x').map(|d| d.parse::<usize>().ok());
    match (dims.next()??, dims.next()??, dims.next()??, dims.next()) {
        (m, k, n, None) => Some((int8, m, k, n)),
        _ => None,
    }
}

fn main() -> ExitCode {
    let isa = match tessel_model::isa_env::isa_from_env() {
        Ok(isa) => isa,
        Err(err) => {
            eprintln!("gemm_best: TESSEL_ISA: {err}");
            return ExitCode::from(2);
        }
    };
    let mut shapes = Vec::new();
    for arg in std::env::args().skip(1) {
        match parse(&arg) {
            Some(shape) => shapes.push(shape),
            None => {
                eprintln!("gemm_best: `{arg}` is not m x k x n (e.g. 512x512x512)");
                return ExitCode::from(2);
            }
        }
    }
    // Seconds per floating-point operation at the peak.
    let mut peak = f64::MAX;
    for _ in 0..PEAK_RUNS {
        let start = Instant::now();
        let flops = fma_peak(isa, PEAK_ITERATIONS);
        peak = peak.min(start.elapsed().as_secs_f64() / flops);
    }
    print!("{} fma-peak {:.1} GFLOP/s", isa.level(), 1e-9 / peak);
    for (int8, m, k, n) in shapes {
        let best = if int8 {
            let mut case = Int8Case::new(m, k, n);
            let kernel = I8Kernel::best(isa);
            best_time(|| case.run_int8(kernel))
        } else {
            let mut case = Case::new(m, k, n);
            best_time(|| case.tessel(isa))
        };
        let flops = 2.0 * (m * k * n) as f64;
        let prefix = if int8 { "i8:" } else { "" };
        print!(" {prefix}{m}x{k}x{n} {:.3}", flops * peak / best);
    }
    println!();
    ExitCode::SUCCESS
}

/// The shortest of [`MIN_RUNS`] or more timed calls of `run` (after one untimed call).
fn best_time(mut run: impl FnMut()) -> f64 {
    run();
    let mut best = f64::MAX;
    let start = Instant::now();
    let mut runs = 0;
    while runs < MIN_RUNS || (start.elapsed() < SHAPE_TIME && runs < MAX_RUNS) {
        let t = Instant::now();
        run();
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    best
}
