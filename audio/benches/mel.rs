//! The log-mel front end on one 30 s window (80 and 128 bins) and the resampler on 30 s of
//! 44.1 kHz audio. Name the CPU beside any figure quoted from this bench.

use criterion::{criterion_main, Criterion};
use tessel_audio::{resample::resample, MelFrontEnd, N_FRAMES, N_SAMPLES};

/// A deterministic speech-like test signal: a few harmonics under a slow envelope plus noise.
fn signal(n: usize, rate: f32) -> Vec<f32> {
    let mut state = 0x2545_f491_u32;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let t = i as f32 / rate;
            let envelope = 0.5 + 0.5 * (2.0 * std::f32::consts::PI * 3.0 * t).sin();
            let tone: f32 = (1..6)
                .map(|h| (2.0 * std::f32::consts::PI * 140.0 * h as f32 * t).sin() / h as f32)
                .sum();
            0.2 * envelope * tone + 0.01 * (state as f32 / u32::MAX as f32 - 0.5)
        })
        .collect()
}

fn mel(c: &mut Criterion) {
    let audio = signal(N_SAMPLES, 16_000.0);
    for n_mels in [80, 128] {
        let mut front = MelFrontEnd::new(n_mels).expect("valid n_mels");
        let mut out = vec![0.0f32; n_mels * N_FRAMES];
        c.bench_function(&format!("mel{n_mels}_30s_window"), |b| {
            b.iter(|| front.window(&audio, &mut out).expect("valid buffers"))
        });
    }
    let audio44 = signal(30 * 44_100, 44_100.0);
    c.bench_function("resample_30s_44100_to_16000", |b| {
        b.iter(|| resample(&audio44, 44_100).expect("supported rate"))
    });
}

// The macro defines an undocumented public function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::mel);
}
criterion_main!(group::benches);
