//! The best (shortest) time of many single-threaded products per shape, as a fraction of the
//! best time of the same run's `fma-peak`: `TESSEL_ISA=avx2 cargo run --release -p tessel-bench
//! --example gemm_best -- 1024x1024x1024 1500x1536x384`; a shape written `i8:MxKxN` runs the
//! int8 product with the level's fastest int8 primitive (its rate counted as 2·m·k·n
//! operations, so a ratio above 1 is above the f32 peak; the primitive's own `int8-peak` is
//! printed beside `fma-peak` as the same ratio), `f16:MxKxN` and `bf16:MxKxN` the product
//! with the weight stored in 16 bits (widened in registers; `report gemm`'s `HALF_ROWS`), and
//! `attn:NAME` the attention case `NAME` of `report attention` (e.g. `attn:self-1024`).
//!
//! `report gemm` prints medians, which on a shared machine move by ±5% between runs; the best
//! of many runs moves less, so it is what compares two builds' blocking constants.

use std::process::ExitCode;
use std::time::{Duration, Instant};
use tessel_bench::suites::attention::{self, Workload};
use tessel_bench::suites::gemm::{Case, HalfCase, Weights};
use tessel_bench::suites::gemm_int8::{int8_peak, Int8Case};
use tessel_bench::suites::peaks::{fma_peak, PEAK_ITERATIONS};
use tessel_kernels::gemm::int8::I8Kernel;

/// Runs of `fma-peak` whose best time is the peak.
const PEAK_RUNS: usize = 30;
/// At least this many products per shape, and more until [`SHAPE_TIME`] has passed.
const MIN_RUNS: usize = 10;
const SHAPE_TIME: Duration = Duration::from_millis(1500);
const MAX_RUNS: usize = 500;

/// One measured product.
enum Job {
    F32(usize, usize, usize),
    Int8(usize, usize, usize),
    Half(Weights, usize, usize, usize),
    Attention(attention::Case),
}

/// `MxKxN`, `i8:MxKxN`, `f16:MxKxN`, `bf16:MxKxN` or `attn:NAME`.
fn parse(arg: &str) -> Option<Job> {
    if let Some(name) = arg.strip_prefix("attn:") {
        let case = attention::CASES.iter().find(|c| c.name == name)?;
        return Some(Job::Attention(*case));
    }
    let (kind, shape) = match arg.split_once(':') {
        Some((kind, shape)) => (kind, shape),
        None => ("f32", arg),
    };
    let mut dims = shape.split('x').map(|d| d.parse::<usize>().ok());
    let (m, k, n) = match (dims.next()??, dims.next()??, dims.next()??, dims.next()) {
        (m, k, n, None) => (m, k, n),
        _ => return None,
    };
    match kind {
        "f32" => Some(Job::F32(m, k, n)),
        "i8" => Some(Job::Int8(m, k, n)),
        "f16" => Some(Job::Half(Weights::F16, m, k, n)),
        "bf16" => Some(Job::Half(Weights::Bf16, m, k, n)),
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
                eprintln!(
                    "gemm_best: `{arg}` is not MxKxN, i8:MxKxN, f16:MxKxN, bf16:MxKxN or attn:NAME"
                );
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
    if shapes.iter().any(|job| matches!(job, Job::Int8(..))) {
        let kernel = I8Kernel::best(isa);
        let mut int8 = f64::MAX;
        for _ in 0..PEAK_RUNS {
            let start = Instant::now();
            let ops = int8_peak(kernel, PEAK_ITERATIONS);
            int8 = int8.min(start.elapsed().as_secs_f64() / ops);
        }
        if int8.is_finite() {
            print!(" int8-peak ({kernel}) {:.3}", peak / int8);
        }
    }
    for job in shapes {
        let (name, flops, best) = match job {
            Job::F32(m, k, n) => {
                let mut case = Case::new(m, k, n);
                let best = best_time(|| case.tessel(isa));
                (format!("{m}x{k}x{n}"), 2.0 * (m * k * n) as f64, best)
            }
            Job::Int8(m, k, n) => {
                let mut case = Int8Case::new(m, k, n);
                let kernel = I8Kernel::best(isa);
                let best = best_time(|| case.run_int8(kernel));
                (format!("i8:{m}x{k}x{n}"), 2.0 * (m * k * n) as f64, best)
            }
            Job::Half(weights, m, k, n) => {
                let mut case = HalfCase::new(m, k, n);
                let best = best_time(|| case.run(isa, weights));
                let name = format!("{}:{m}x{k}x{n}", weights.name());
                (name, 2.0 * (m * k * n) as f64, best)
            }
            Job::Attention(case) => {
                let mut work = Workload::new(case, isa);
                let best = best_time(|| work.run_tessel(isa));
                (format!("attn:{}", case.name), case.flops(), best)
            }
        };
        print!(" {name} {:.3}", flops * peak / best);
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
