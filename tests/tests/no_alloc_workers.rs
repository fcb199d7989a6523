//! Proves that a session's GEMM workers allocate nothing once the session exists: not as they
//! start (a thread allocates as it starts, and the OS may schedule a worker late), not while
//! they run. Every thread's allocations are counted, so this binary runs without the test
//! harness (`harness = false`): no other thread is at work while it counts.

use std::time::Duration;

use tessel_kernels::gemm::Parallel;
use tessel_model::{Config, Limits, Model, Request, SearchOptions, Session, ThreadPool};
use tessel_tests::counting::{process_allocations, ProcessCounting};
use tessel_tests::for_each_isa;

#[global_allocator]
static GLOBAL: ProcessCounting = ProcessCounting;

/// Allocations any thread makes while `run` runs.
fn counted(run: impl FnOnce()) -> usize {
    let before = process_allocations();
    run();
    process_allocations() - before
}

/// New pools, used at once: a worker that started only after `ThreadPool::new` returned would
/// allocate inside the count (the pause gives it the time to).
fn a_new_pools_workers_have_started() {
    for round in 0..20 {
        let pool = ThreadPool::new(4).expect("pool");
        let count = counted(|| {
            std::thread::sleep(Duration::from_millis(2));
            for tasks in [2, 5, 8] {
                pool.run(tasks, &|i| {
                    std::hint::black_box(i);
                });
            }
        });
        assert_eq!(count, 0, "round {round}: allocations after ThreadPool::new");
    }
}

fn config() -> Config {
    Config {
        d_model: 128,
        heads: 4,
        encoder_layers: 2,
        decoder_layers: 2,
        d_ff: 512,
        src_vocab: 300,
        tgt_vocab: 2048,
        max_src_len: 24,
        max_tgt_len: 16,
        max_beam: 4,
        ..Config::transformer_base()
    }
}

/// Encode, greedy and beam search on three threads, at every ISA level.
fn a_threaded_session_allocates_nothing() {
    let model = Model::random(config(), 11).expect("model");
    let src: Vec<u32> = (0..20).map(|i| 3 + (i * 37) % 290).collect();
    for_each_isa(|isa| {
        let limits = Limits::of(model.config()).with_threads(3);
        let mut session = Session::with_limits(&model, isa, limits).expect("session");
        let mut steps = 0usize;
        let count = counted(|| {
            std::thread::sleep(Duration::from_millis(2));
            session.encode(&src).expect("encode");
            let greedy = SearchOptions {
                stop_at_eos: false,
                ..SearchOptions::greedy(12)
            };
            session
                .generate(Request::new(greedy).on_step(|_| steps += 1))
                .expect("greedy");
            session.encode(&src[..7]).expect("encode again");
            let beam = SearchOptions {
                stop_at_eos: false,
                ..SearchOptions::beam(4, 12)
            };
            session
                .generate(Request::new(beam).on_step(|_| steps += 1))
                .expect("beam");
        });
        assert_eq!(steps, 24, "{isa}");
        assert_eq!(count, 0, "{isa}: allocations by a three-thread session");
    });
}

fn main() {
    // The counter counts: a check that it is installed.
    let seen = counted(|| {
        std::hint::black_box(vec![1u8; 64]);
    });
    assert!(seen >= 1, "the counting allocator is not installed");
    a_new_pools_workers_have_started();
    a_threaded_session_allocates_nothing();
    println!("no_alloc_workers: 3 checks passed");
}
