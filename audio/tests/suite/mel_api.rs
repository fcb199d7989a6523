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

/// A 30 s-class test signal: a tone whose amplitude is `loud` on samples `range`, 1e-3 elsewhere.
fn tone(len: usize, loud: std::ops::Range<usize>, amplitude: f32) -> Vec<f32> {
    (0..len)
        .map(|i| (i as f32 * 0.3).sin() * if loud.contains(&i) { amplitude } else { 1e-3 })
        .collect()
}

#[test]
fn chunk_features_are_content_then_zero_columns() {
    let mut front = MelFrontEnd::new(80).expect("valid");
    let mut out = vec![f32::NAN; front.window_len()];
    let chunk = tone(12_345, 4000..8000, 0.5);
    assert_eq!(front.chunk_features(&chunk, &mut out), Ok(12_345 / 160));
    let max = out.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for row in out.chunks_exact(N_FRAMES) {
        assert!(row[..77].iter().all(|&v| v >= max - 2.0 && v <= max));
        assert!(row[77..].iter().all(|&v| v == 0.0));
    }
    // Away from the chunk's end (where the reflection of its 160 padding zeros differs from
    // the transcribe path's 30 s of zeros) and with the same maximum, the spectrogram's frames.
    let mut mel = vec![0.0; 80 * 77];
    front.spectrogram(&chunk, &mut mel).expect("spectrogram");
    for (row, full) in out.chunks_exact(N_FRAMES).zip(mel.chunks_exact(77)) {
        assert_eq!(row[..70], full[..70]);
    }
    // Silence: every content frame at log10(1e-10), its own maximum: (−10 + 4) / 4.
    assert_eq!(front.chunk_features(&[0.0; 1000], &mut out), Ok(6));
    for row in out.chunks_exact(N_FRAMES) {
        assert!(row[..6].iter().all(|&v| v == -1.5) && row[6..].iter().all(|&v| v == 0.0));
    }
}

#[test]
fn chunk_features_trim_to_30_s_normalised_over_the_whole_chunk() {
    let mut front = MelFrontEnd::new(80).expect("valid");
    let (mut long, mut first) = (vec![0.0; 80 * N_FRAMES], vec![0.0; 80 * N_FRAMES]);
    // 100 times louder past 30 s: the maximum, 4 decades of power above the first 30 s's,
    // comes from frames that are not stored; the stored ones are clamped at it − 8, which is
    // the first 30 s's maximum − 4, i.e. 1.0 below it once normalised.
    let chunk = tone(N_SAMPLES + 5000, N_SAMPLES..N_SAMPLES + 5000, 0.1);
    let head = &chunk[..N_SAMPLES];
    assert_eq!(front.chunk_features(&chunk, &mut long), Ok(N_FRAMES));
    assert_eq!(front.chunk_features(head, &mut first), Ok(N_FRAMES));
    let max = first.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = long.iter().copied().fold(f32::INFINITY, f32::min);
    assert!((floor - (max - 1.0)).abs() < 1e-5, "{floor} {max}");
    // Frames 2998 and 2999 read past 30 s: the loud tail in one, reflected zeros in the other.
    for (l, f) in long
        .chunks_exact(N_FRAMES)
        .zip(first.chunks_exact(N_FRAMES))
    {
        assert!(l[..2998].iter().zip(f).all(|(&l, &f)| l == f.max(floor)));
    }
}

#[test]
fn chunk_features_of_no_frame_and_bad_calls() {
    let mut front = MelFrontEnd::new(128).expect("valid");
    let mut out = vec![f32::NAN; 128 * N_FRAMES];
    for len in [0, 1, 159] {
        assert_eq!(front.chunk_features(&vec![0.5; len], &mut out), Ok(0));
        assert!(out.iter().all(|&v| v == 0.0), "{len}");
    }
    assert_eq!(front.chunk_features(&[0.5; 160], &mut out), Ok(1));
    assert_eq!(
        front.chunk_features(&[0.0, 0.1, f32::NEG_INFINITY], &mut out),
        Err(MelError::NonFinite { index: 2 })
    );
    assert_eq!(
        front.chunk_features(&[0.0; 400], &mut out[..128 * 3]),
        Err(MelError::OutputLength {
            expected: 128 * N_FRAMES,
            got: 128 * 3
        })
    );
}
