//! Attention timed in thread CPU time rather than wall time: on a machine shared with other
//! jobs, a preempted run inflates wall time but not the CPU time of the measuring thread. Prints
//! the best of several runs per case (tessel, and the streaming read of K and V for the decode
//! cases) and the ratios the targets are stated in: causal / non-causal time at equal `n`, and
//! decode time / streaming-read time. Run with
//! `cargo bench -p tessel-bench --bench attention_cpu [-- runs]` (`TESSEL_ISA` picks the level).

use std::hint::black_box;
use tessel_bench::suites::attention::{Workload, CASES};

/// CPU time consumed by this thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Best CPU time per call of `f` over `runs` runs of `inner` calls each.
fn best_ns(runs: usize, inner: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..runs)
        .map(|_| {
            let start = thread_cpu_ns();
            for _ in 0..inner {
                f();
            }
            (thread_cpu_ns() - start) as f64 / inner as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let isa = match tessel_model::isa_env::isa_from_env() {
        Ok(isa) => isa,
        Err(err) => panic!("TESSEL_ISA: {err}"),
    };
    // `cargo bench` passes `--bench`; a bare number sets the runs per case.
    let runs = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(5);
    let mut times = Vec::new();
    for case in CASES {
        let mut work = Workload::new(*case, isa);
        let inner = if case.q_len == 1 { 200 } else { 1 };
        let tessel = best_ns(runs, inner, || work.run_tessel(isa));
        println!(
            "{:<20} tessel-{isa:<8} {:>10.3} ms",
            case.name,
            tessel / 1e6
        );
        times.push((case.name, tessel));
        if case.q_len == 1 {
            let stream = best_ns(runs, inner, || {
                black_box(work.stream_kv());
            });
            println!(
                "{:<20} stream-read-kv  {:>10.3} ms   tessel / stream {:.3}",
                case.name,
                stream / 1e6,
                tessel / stream
            );
        }
    }
    let time = |name: &str| times.iter().find(|(n, _)| *n == name).map(|&(_, t)| t);
    for n in [128, 512, 1024, 2048] {
        let plain = time(&format!("self-{n}"));
        let causal = time(&format!("self-{n}-causal"));
        if let (Some(plain), Some(causal)) = (plain, causal) {
            println!("causal / non-causal n={n:<5} {:.3}", causal / plain);
        }
    }
}
