//! The log-mel front end's contract: typed errors for bad calls, and the properties whisper's
//! definition implies (silence, trimming to 30 s, the clamp at max − 8).

use tessel_audio::{content_frames, segment, MelError, MelFrontEnd, N_FRAMES, N_SAMPLES};

#[test]
fn bad_calls_are_typed_errors() {
    assert!(matches!(
        MelFrontEnd::new(0),
        Err(MelError::Mels { n_mels: 0, .. })
    ));
    assert!(matches!(MelFrontEnd::new(257), Err(MelError::Mels { .. })));
    let mut front = MelFrontEnd::new(80).expect("valid");
    let mut out = vec![0.0; 80 * N_FRAMES - 1];
    assert_eq!(
        front.window(&[0.0; 10], &mut out),
        Err(MelError::OutputLength {
            expected: 80 * N_FRAMES,
            got: 80 * N_FRAMES - 1
        })
    );
    let mut out = vec![0.0; 80 * N_FRAMES];
    assert_eq!(
        front.window(&[0.0, f32::NAN], &mut out),
        Err(MelError::NonFinite { index: 1 })
    );
    assert_eq!(
        front.spectrogram(&[f32::INFINITY; 400], &mut vec![0.0; 80 * 2]),
        Err(MelError::NonFinite { index: 0 })
    );
    let mel = vec![0.0; 80 * 10];
    assert!(matches!(
        segment(&mel, 80, 5, 6, &mut out),
        Err(MelError::Segment { .. })
    ));
    assert!(matches!(
        segment(&mel, 80, usize::MAX, 2, &mut out),
        Err(MelError::Segment { .. })
    ));
    assert!(matches!(
        segment(&mel[1..], 80, 0, 1, &mut out),
        Err(MelError::InputLength { .. })
    ));
    assert!(matches!(
        segment(&mel, 80, 0, 1, &mut out[1..]),
        Err(MelError::OutputLength { .. })
    ));
}

#[test]
fn silence_and_empty_audio_are_whispers_floor() {
    let mut front = MelFrontEnd::new(80).expect("valid");
    let mut out = vec![f32::NAN; 80 * N_FRAMES];
    // All frames at log10(1e-10) = -10, the max; (−10 + 4) / 4 = −1.5.
    front.window(&[], &mut out).expect("empty");
    assert!(out.iter().all(|&v| v == -1.5));
    front.window(&[0.0; 1000], &mut out).expect("silence");
    assert!(out.iter().all(|&v| v == -1.5));
    let mut none: Vec<f32> = Vec::new();
    assert_eq!(front.spectrogram(&[0.5; 159], &mut none), Ok(0));
    segment(&none, 80, 0, 0, &mut out).expect("empty segment");
    assert!(out.iter().all(|&v| v == 0.0));
}

#[test]
fn audio_past_30_s_is_trimmed_and_the_clamp_holds() {
    let tone: Vec<f32> = (0..N_SAMPLES + 5000)
        .map(|i| 0.5 * (i as f32 * 0.3).sin() * if i % 7000 < 3500 { 1.0 } else { 1e-6 })
        .collect();
    let mut front = MelFrontEnd::new(128).expect("valid");
    let mut a = vec![0.0; 128 * N_FRAMES];
    let mut b = vec![0.0; 128 * N_FRAMES];
    front.window(&tone, &mut a).expect("long");
    front.window(&tone[..N_SAMPLES], &mut b).expect("exact");
    assert_eq!(a, b);
    let max = a.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = a.iter().copied().fold(f32::INFINITY, f32::min);
    // The clamp keeps 8 decades: (max_log − 8 + 4)/4 = max − 2.
    assert!((min - (max - 2.0)).abs() < 1e-6, "{min} {max}");
    assert_eq!(content_frames(tone.len()), (N_SAMPLES + 5000) / 160);
}
