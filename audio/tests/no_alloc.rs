//! Proves that the log-mel front end allocates nothing after `MelFrontEnd::new`: a 30 s
//! window, the transcribe-path spectrogram, a segment, the batched pipeline's per-chunk
//! features (short, long and empty chunks) and refused calls, counted by a global
//! allocator that counts the allocations of the measuring thread only.

use tessel_audio::{content_frames, segment, MelFrontEnd, N_FRAMES, N_SAMPLES};
use tessel_tests::counting::{allocations, ThreadCounting};

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

#[test]
fn mel_calls_allocate_nothing() {
    // 31.3 s of a deterministic chirp: two windows on the transcribe path.
    let audio: Vec<f32> = (0..500_800)
        .map(|i| {
            let t = i as f32 / 16_000.0;
            0.3 * (2.0 * std::f32::consts::PI * (200.0 + 50.0 * t) * t).sin()
        })
        .collect();
    for n_mels in [80, 128] {
        let mut front = MelFrontEnd::new(n_mels).expect("valid n_mels");
        let frames = content_frames(audio.len());
        let mut window = vec![0.0f32; front.window_len()];
        let mut mel = vec![0.0f32; n_mels * frames];
        let mut short = vec![0.0f32; 3];
        let count = allocations(|| {
            front
                .window(&audio[..N_SAMPLES], &mut window)
                .expect("window");
            front
                .window(&audio[..12_345], &mut window)
                .expect("short window");
            front.spectrogram(&audio, &mut mel).expect("spectrogram");
            segment(&mel, n_mels, 0, N_FRAMES, &mut window).expect("window 1");
            segment(&mel, n_mels, N_FRAMES, frames - N_FRAMES, &mut window).expect("window 2");
            front
                .chunk_features(&audio[..123_456], &mut window)
                .expect("chunk");
            front
                .chunk_features(&audio, &mut window)
                .expect("long chunk");
            front.chunk_features(&[], &mut window).expect("empty chunk");
            assert!(front.window(&audio, &mut short).is_err());
            assert!(front.chunk_features(&audio, &mut short).is_err());
            assert!(segment(&mel, n_mels, frames, 1, &mut window).is_err());
        });
        assert_eq!(count, 0, "{n_mels} mel bins: {count} allocations");
        assert!(window.iter().all(|v| v.is_finite()) && mel.iter().all(|v| v.is_finite()));
    }
}
