//! The WAV reader: every supported encoding decodes to the same mono 16 kHz samples (up to
//! its quantisation), channels are averaged, other rates are resampled, and every malformed or
//! unsupported input is a typed error.

use std::io::Cursor;
use std::path::Path;

use tessel_audio::resample::resample;
use tessel_audio::{read_wav, AudioError, ReadOptions, MAX_SAMPLE_RATE};

/// A WAVE file with a 16-byte fmt chunk (`tag` 1 = PCM, 3 = IEEE float).
fn wav_bytes(tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8]) -> Vec<u8> {
    let block = channels * bits.div_ceil(8);
    let mut fmt = Vec::new();
    fmt.extend_from_slice(&tag.to_le_bytes());
    fmt.extend_from_slice(&channels.to_le_bytes());
    fmt.extend_from_slice(&rate.to_le_bytes());
    fmt.extend_from_slice(&(rate * u32::from(block)).to_le_bytes());
    fmt.extend_from_slice(&block.to_le_bytes());
    fmt.extend_from_slice(&bits.to_le_bytes());
    let mut body = b"WAVEfmt ".to_vec();
    body.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
    body.extend_from_slice(&fmt);
    body.extend_from_slice(b"data");
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(data);
    let mut file = b"RIFF".to_vec();
    file.extend_from_slice(&(body.len() as u32).to_le_bytes());
    file.extend_from_slice(&body);
    file
}

fn read(bytes: &[u8]) -> Result<Vec<f32>, AudioError> {
    read_wav(Cursor::new(bytes), &ReadOptions::default()).map(|a| a.samples)
}

/// The 16 kHz fixture's samples as 16-bit integers.
fn speech_i16() -> Vec<i16> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/speech_16k_s16_mono.wav");
    let bytes = std::fs::read(path).expect("fixture");
    bytes[44..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

#[test]
fn sixteen_bit_mono_at_16k_is_whispers_scaling_exactly() {
    let x = speech_i16();
    let data: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let got = read(&wav_bytes(1, 1, 16_000, 16, &data)).expect("reads");
    let want: Vec<f32> = x.iter().map(|&v| f32::from(v) / 32768.0).collect();
    assert_eq!(got, want);
}

#[test]
fn every_encoding_decodes_to_the_same_samples_within_its_quantisation() {
    let x: Vec<f64> = speech_i16()
        .iter()
        .map(|&v| f64::from(v) / 32768.0)
        .collect();
    // (tag, bits, encoder, quantisation step)
    type Encode = fn(f64) -> Vec<u8>;
    let cases: [(u16, u16, Encode, f64); 5] = [
        (
            1,
            8,
            |v| vec![((v * 128.0).round().clamp(-128.0, 127.0) as i16 + 128) as u8],
            1.0 / 128.0,
        ),
        (
            1,
            16,
            |v| ((v * 32768.0).round() as i16).to_le_bytes().to_vec(),
            1.0 / 32768.0,
        ),
        (
            1,
            24,
            |v| ((v * 8_388_608.0).round() as i32).to_le_bytes()[..3].to_vec(),
            2f64.powi(-23),
        ),
        (
            1,
            32,
            |v| {
                ((v * 2_147_483_648.0).round() as i32)
                    .to_le_bytes()
                    .to_vec()
            },
            2f64.powi(-31),
        ),
        (3, 32, |v| (v as f32).to_le_bytes().to_vec(), 0.0),
    ];
    for (tag, bits, encode, step) in cases {
        let data: Vec<u8> = x.iter().flat_map(|&v| encode(v)).collect();
        let got = read(&wav_bytes(tag, 1, 16_000, bits, &data)).expect("reads");
        assert_eq!(got.len(), x.len());
        let worst = got
            .iter()
            .zip(&x)
            .map(|(&g, &w)| (f64::from(g) - w).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= step / 2.0 + 1e-7,
            "tag {tag}, {bits} bits: {worst}"
        );
    }
}

#[test]
fn channels_are_averaged() {
    let x = speech_i16();
    for channels in [2u16, 3, 6] {
        // Channel c holds x scaled by (c + 1) / channels, alternating sign.
        let mut data = Vec::new();
        let mut want = Vec::new();
        for &v in &x {
            let mut sum = 0.0f64;
            for c in 0..channels {
                let sign = if c % 2 == 0 { 1 } else { -1 };
                let s = (i32::from(v) * i32::from(c + 1) * sign / i32::from(channels)) as i16;
                data.extend_from_slice(&s.to_le_bytes());
                sum += f64::from(s) / 32768.0;
            }
            want.push(sum / f64::from(channels));
        }
        let got = read(&wav_bytes(1, channels, 16_000, 16, &data)).expect("reads");
        assert_eq!(got.len(), x.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-6,
                "{channels} channels: {g} vs {w}"
            );
        }
    }
}

#[test]
fn float_samples_beyond_full_scale_are_clipped_as_ffmpeg_does() {
    let data: Vec<u8> = [1.5f32, -2.0, 0.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        read(&wav_bytes(3, 1, 16_000, 32, &data)).expect("reads"),
        vec![1.0, -1.0, 0.25]
    );
}

/// Two channels near the largest `f32` (the fuzzer's find): their sum overflowed to infinity,
/// and the resampler turned it into NaN samples. Huge samples clamp to `MAX_FLOAT_SAMPLE`
/// first, so the audio stays finite and clips to full scale.
#[test]
fn huge_float_samples_stay_finite_through_mixing_and_resampling() {
    let frames = [
        -1.74e38f32,
        -3.04e38,
        0.0,
        -2.6e33,
        3.4e38,
        3.4e38,
        0.5,
        0.5,
    ];
    let data: Vec<u8> = frames.iter().flat_map(|v| v.to_le_bytes()).collect();
    for rate in [16_000, 48_000] {
        let samples = read(&wav_bytes(3, 2, rate, 32, &data)).expect("reads");
        assert!(!samples.is_empty());
        assert!(
            samples.iter().all(|v| v.is_finite() && v.abs() <= 1.0),
            "{rate} Hz: {samples:?}"
        );
    }
    let samples = read(&wav_bytes(3, 2, 16_000, 32, &data)).expect("reads");
    assert_eq!(samples, vec![-1.0, -1.0, 1.0, 0.5]);
}

/// A sine through the resampler: the right length, and the same sine at 16 kHz shifted by
/// less than 1.5 output samples. rubato trims its delay in whole samples and the fractional
/// rest stays: the output leads the input by 1.01 samples (63 µs) at 8 kHz, 0.25 at 11.025,
/// 0.12 at 22.05, 0.56 at 44.1, 0.33 at 48 and 0.67 at 96 kHz (printed as `delay`).
#[test]
fn resampling_keeps_a_tone_and_the_length() {
    for rate in [8_000u32, 11_025, 22_050, 44_100, 48_000, 96_000] {
        let n = rate as usize / 2 + 37;
        let tone = |t: f64| (2.0 * std::f64::consts::PI * 440.0 * t).sin() * 0.5;
        let x: Vec<f32> = (0..n)
            .map(|i| tone(i as f64 / f64::from(rate)) as f32)
            .collect();
        let y = resample(&x, rate).expect("supported rate");
        assert_eq!(
            y.len(),
            (n as f64 * 16_000.0 / f64::from(rate)).ceil() as usize,
            "{rate}"
        );
        // Away from the clip's edges (the filter's half-length), the sine is reproduced.
        let error = |delay: f64| {
            y[400..y.len() - 400]
                .iter()
                .enumerate()
                .map(|(i, &v)| (f64::from(v) - tone(((i + 400) as f64 - delay) / 16_000.0)).abs())
                .fold(0.0, f64::max)
        };
        let (delay, worst) = (-150..=150)
            .map(|d| f64::from(d) / 100.0)
            .map(|d| (d, error(d)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("candidates");
        println!("{rate} Hz: delay {delay:+.2} samples, max error {worst:.2e}");
        assert!(worst < 2e-3, "{rate} Hz: {worst} at delay {delay}");
    }
}

#[test]
fn sixteen_khz_is_passed_through() {
    let x = vec![0.1f32, -0.2, 0.3];
    assert_eq!(resample(&x, 16_000).expect("pass-through"), x);
}

#[test]
fn a_stereo_22k_file_reads_to_16k_mono() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/speech_22k_s16_stereo.wav");
    let audio = tessel_audio::load_wav(&path, &ReadOptions::default()).expect("reads");
    assert_eq!(
        (audio.channels, audio.source_rate, audio.bits_per_sample),
        (2, 22_050, 16)
    );
    assert!(!audio.float);
    assert_eq!(
        audio.samples.len(),
        (audio.source_frames as f64 * 16_000.0 / 22_050.0).ceil() as usize
    );
}

#[test]
fn other_containers_are_named() {
    let cases: [(&[u8], &str); 6] = [
        (b"fLaC\0\0\0\x22 some flac", "FLAC"),
        (b"OggS\0\x02\0\0\0\0\0\0", "Ogg (Vorbis/Opus/FLAC)"),
        (b"ID3\x04\0\0\0\0\0\0\0\0", "MP3/AAC (MPEG audio)"),
        (b"FORM\0\0\0\x20AIFF", "AIFF"),
        (b"RF64\xff\xff\xff\xffWAVE", "RF64/BW64 (64-bit WAV)"),
        (b"hello, world", "unknown (not RIFF/WAVE)"),
    ];
    for (bytes, name) in cases {
        match read(bytes) {
            Err(AudioError::UnsupportedContainer { found }) => assert_eq!(found, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    let message = read(b"fLaC\0\0\0\x22").unwrap_err().to_string();
    assert!(
        message.contains("FLAC") && message.contains("16/24/32-bit"),
        "{message}"
    );
}

#[test]
fn unsupported_encodings_are_typed() {
    // ADPCM (tag 2), A-law (6), 64-bit float, 12-bit PCM, 48-bit PCM.
    let cases = [(2u16, 4u16), (6, 8), (3, 64), (1, 12), (1, 48)];
    for (tag, bits) in cases {
        let bytes = wav_bytes(tag, 1, 16_000, bits, &[0; 48]);
        match read(&bytes) {
            Err(AudioError::UnsupportedEncoding { .. } | AudioError::Malformed(_)) => {}
            other => panic!("tag {tag}, {bits} bits: {other:?}"),
        }
    }
    // The common ones name what is supported.
    for (tag, bits) in [(2u16, 4u16), (6, 8), (3, 64)] {
        let err = read(&wav_bytes(tag, 1, 16_000, bits, &[0; 48])).unwrap_err();
        assert!(
            matches!(err, AudioError::UnsupportedEncoding { .. }),
            "tag {tag}: {err:?}"
        );
        assert!(err.to_string().contains("32-bit IEEE float"), "{err}");
    }
}

#[test]
fn empty_truncated_and_malformed_inputs_are_typed() {
    assert!(matches!(read(b""), Err(AudioError::Empty)));
    assert!(matches!(
        read(&wav_bytes(1, 1, 16_000, 16, &[])),
        Err(AudioError::Empty)
    ));

    // Data chunk announcing 1000 samples, holding 10.
    let mut bytes = wav_bytes(1, 1, 16_000, 16, &[0; 2000]);
    bytes.truncate(44 + 20);
    match read(&bytes) {
        Err(AudioError::Truncated {
            expected: 1000,
            read: 10,
        }) => {}
        other => panic!("{other:?}"),
    }
    // Cut inside the header, and every prefix of a valid file: typed errors, never a panic.
    let whole = wav_bytes(1, 2, 22_050, 16, &[1; 64]);
    for cut in 0..whole.len() {
        assert!(read(&whole[..cut]).is_err(), "prefix of {cut} bytes");
    }
    // Zero channels; block alignment smaller than the channel count.
    let mut zero = wav_bytes(1, 1, 16_000, 16, &[0; 4]);
    zero[22] = 0;
    assert!(matches!(read(&zero), Err(AudioError::Malformed(_))));
    let mut bad_align = wav_bytes(1, 4, 16_000, 16, &[0; 8]);
    bad_align[32] = 2;
    assert!(read(&bad_align).is_err());
}

#[test]
fn non_finite_floats_and_bad_rates_are_refused() {
    let data: Vec<u8> = [0.5f32, f32::NAN]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(matches!(
        read(&wav_bytes(3, 1, 16_000, 32, &data)),
        Err(AudioError::NonFinite { index: 1 })
    ));
    for rate in [1u32, 3_999, MAX_SAMPLE_RATE + 1] {
        match read(&wav_bytes(1, 1, rate, 16, &[0; 4])) {
            Err(AudioError::SampleRate { rate: r, .. }) => assert_eq!(r, rate),
            other => panic!("{rate}: {other:?}"),
        }
    }
}

#[test]
fn duration_is_bounded_before_reading_and_forged_lengths_cost_nothing() {
    // Two seconds against a one-second limit.
    let bytes = wav_bytes(1, 1, 16_000, 16, &[0; 64_000]);
    let one = ReadOptions { max_seconds: 1 };
    assert!(matches!(
        read_wav(Cursor::new(&bytes), &one),
        Err(AudioError::TooLong { .. })
    ));
    // A 60-byte file whose header announces ~4 GB of samples (~37 h at 16 kHz stereo).
    let mut forged = wav_bytes(1, 2, 16_000, 16, &[0; 16]);
    forged[40..44].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    assert!(matches!(read(&forged), Err(AudioError::TooLong { .. })));
    let lenient = ReadOptions {
        max_seconds: u32::MAX,
    };
    assert!(matches!(
        read_wav(Cursor::new(&forged), &lenient),
        Err(AudioError::Truncated { read: 8, .. })
    ));
}
