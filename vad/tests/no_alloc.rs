//! Proves that running the VAD allocates nothing after `Vad::open` and the state's creation:
//! streaming window by window, batches over two threads' worth of scratch, a reset, and
//! refused calls, counted by a global allocator that counts the measuring thread only.

use std::path::Path;

use tessel_kernels::gemm::Sequential;
use tessel_tests::counting::{allocations, ThreadCounting};
use tessel_vad::{Vad, WINDOW};

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

#[test]
fn streaming_allocates_nothing() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/silero_vad_v6.onnx");
    let vad = Vad::open(&path).expect("model loads");
    // 2 s of a chirp.
    let audio: Vec<f32> = (0..32 * WINDOW * 2)
        .map(|i| {
            let t = i as f32 / 16_000.0;
            0.3 * (2.0 * std::f32::consts::PI * (200.0 + 300.0 * t) * t).sin()
        })
        .collect();
    let mut state = vad.state();
    let mut batched = vad.state_with(16, 2);
    let mut probabilities = vec![0.0f32; audio.len() / WINDOW];
    let mut streamed = vec![0.0f32; audio.len() / WINDOW];
    let count = allocations(|| {
        for (window, p) in audio.chunks_exact(WINDOW).zip(streamed.iter_mut()) {
            *p = vad.process(&mut state, window).expect("window");
        }
        vad.process_windows(&mut batched, &audio, &mut probabilities, &Sequential)
            .expect("batch");
        batched.reset();
        vad.process_windows(&mut batched, &audio, &mut probabilities, &Sequential)
            .expect("batch after reset");
        assert!(vad.process(&mut state, &audio[..100]).is_err());
        assert!(vad
            .process_windows(
                &mut state,
                &audio[..WINDOW],
                &mut probabilities[..2],
                &Sequential
            )
            .is_err());
    });
    assert_eq!(count, 0, "{count} allocations");
    assert!(probabilities.iter().all(|p| (0.0..=1.0).contains(p)));
    assert!(streamed
        .iter()
        .zip(&probabilities)
        .all(|(a, b)| (a - b).abs() <= 1e-5));
}
