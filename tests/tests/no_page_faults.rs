//! Proves that a session's arena is resident from the moment the session exists: encode and a
//! whole beam search on a fresh session take no page fault on the calling thread (counted by
//! `getrusage(RUSAGE_THREAD)`), where an arena faulted in on first use takes one per page it
//! touches. A first session over the same model runs the same calls before counting, so the
//! code, the stack and the model's weights are already in memory. Linux on x86-64 only: arenas
//! are huge-page backed mappings on Linux, and under qemu-user (the aarch64 run) a thread's
//! counts include the emulator's own faults.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use tessel_model::{
    Config, FfnActivation, Model, NormPlacement, Positions, Request, SearchOptions, Session,
};

/// Minor and major page faults of the calling thread so far.
fn thread_faults() -> u64 {
    let mut usage = core::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes one `rusage` through the valid, exclusive pointer and reads
    // nothing else; `RUSAGE_THREAD` is a valid selector on Linux.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    assert_eq!(status, 0, "getrusage");
    // SAFETY: zero-initialised, then filled in by the successful call above.
    let usage = unsafe { usage.assume_init() };
    (usage.ru_minflt + usage.ru_majflt) as u64
}

/// An arena of several huge pages (the encoder's working rows dominate it).
fn config() -> Config {
    Config {
        d_model: 256,
        heads: 4,
        encoder_layers: 2,
        decoder_layers: 2,
        d_ff: 512,
        src_vocab: 97,
        tgt_vocab: 101,
        max_src_len: 512,
        max_tgt_len: 64,
        max_beam: 4,
        norm: NormPlacement::Pre,
        activation: FfnActivation::Relu,
        positions: Positions::Sinusoidal,
        ..Config::transformer_base()
    }
}

/// Encodes `src` and runs a beam search of width 4 to the length limit.
fn run(session: &mut Session<&Model>, src: &[u32]) {
    session.encode(src).expect("encode");
    let options = SearchOptions {
        stop_at_eos: false,
        ..SearchOptions::beam(4, 63)
    };
    let found = session.generate(Request::new(options)).expect("generate");
    assert!(found.best().is_some(), "a hypothesis");
}

#[test]
fn a_fresh_session_takes_no_page_fault() {
    let model = Model::random(config(), 3).expect("model");
    let isa = tessel_kernels::Isa::best();
    let src: Vec<u32> = (0..512u32).map(|i| (i * 7 + 2) % 97).collect();
    let mut warm = Session::new(&model, isa).expect("session");
    run(&mut warm, &src);

    let mut fresh = Session::new(&model, isa).expect("session");
    let arena = fresh.plan().total_bytes();
    assert!(
        arena >= 8 << 20,
        "arena of {arena} bytes: too small to span huge pages"
    );
    let before = thread_faults();
    run(&mut fresh, &src);
    let faults = thread_faults() - before;
    assert_eq!(
        faults, 0,
        "page faults in the first calls on a {arena}-byte arena"
    );
}
