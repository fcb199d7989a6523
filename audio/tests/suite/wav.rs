//! The WAV reader: every supported encoding decodes to the same mono 16 kHz samples (up to
//! its quantisation), channels are averaged, other rates are resampled, and every malformed or
//! unsupported input is a typed error.

use std::io::Cursor;
use std::path::Path;

use tessel_audio::resample::resample;
use tessel_audio::{load_wav, read_wav, AudioError, ReadOptions, MAX_SAMPLE_RATE};

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
        .repeat(60)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        read(&wav_bytes(3, 1, 16_000, 32, &data)).expect("reads"),
        [1.0, -1.0, 0.25].repeat(60)
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
    // 480 frames: 10 ms at 48 kHz.
    let data: Vec<u8> = frames
        .repeat(120)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for rate in [16_000, 48_000] {
        let samples = read(&wav_bytes(3, 2, rate, 32, &data)).expect("reads");
        assert!(!samples.is_empty());
        assert!(
            samples.iter().all(|v| v.is_finite() && v.abs() <= 1.0),
            "{rate} Hz: {samples:?}"
        );
    }
    let samples = read(&wav_bytes(3, 2, 16_000, 32, &data)).expect("reads");
    assert_eq!(samples, [-1.0, -1.0, 1.0, 0.5].repeat(120));
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

/// A chunk of a RIFF file: its id, body and declared size.
struct Chunk {
    id: [u8; 4],
    body: Vec<u8>,
    size: u32,
}

/// A chunk declaring its body's size.
fn chunk(id: &[u8; 4], body: &[u8]) -> Chunk {
    chunk_sized(id, body, body.len() as u32)
}

/// A chunk declaring `size` bytes, whatever its body holds.
fn chunk_sized(id: &[u8; 4], body: &[u8], size: u32) -> Chunk {
    Chunk {
        id: *id,
        body: body.to_vec(),
        size,
    }
}

/// A RIFF/WAVE file of `chunks`, each of odd size followed by a pad byte when `pad`; the RIFF
/// size is the file's unless given.
fn riff_file(chunks: &[Chunk], pad: bool, riff_size: Option<u32>) -> Vec<u8> {
    let mut file = b"RIFF\0\0\0\0WAVE".to_vec();
    for c in chunks {
        file.extend_from_slice(&c.id);
        file.extend_from_slice(&c.size.to_le_bytes());
        file.extend_from_slice(&c.body);
        if pad && c.body.len() % 2 == 1 {
            file.push(0);
        }
    }
    let size = riff_size.unwrap_or(file.len() as u32 - 8);
    file[4..8].copy_from_slice(&size.to_le_bytes());
    file
}

/// The body of a 16-byte fmt chunk with a block alignment of whole bytes.
fn fmt_body(tag: u16, channels: u16, rate: u32, bits: u16) -> Vec<u8> {
    wav_bytes(tag, channels, rate, bits, &[])[20..36].to_vec()
}

/// A `WAVE_FORMAT_EXTENSIBLE` fmt chunk of sub-format `sub`, `container`-bit samples of which
/// `valid` bits are used.
fn extensible_fmt(sub: u16, channels: u16, container: u16, valid: u16) -> Chunk {
    let mut body = fmt_body(0xFFFE, channels, 16_000, container);
    body.extend_from_slice(&22u16.to_le_bytes());
    body.extend_from_slice(&valid.to_le_bytes());
    body.extend_from_slice(&4u32.to_le_bytes());
    body.extend_from_slice(&sub.to_le_bytes());
    body.extend_from_slice(b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71");
    chunk(b"fmt ", &body)
}

/// The first `n` samples of the 16 kHz fixture as 16-bit PCM bytes, and as the reader's
/// samples (a 16 kHz mono file passes through unchanged).
fn speech(n: usize) -> (Vec<u8>, Vec<f32>) {
    let x = &speech_i16()[..n];
    let bytes = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    (bytes, x.iter().map(|&v| f32::from(v) / 32768.0).collect())
}

/// The mono 16-bit 16 kHz fmt chunk.
fn fmt16() -> Chunk {
    chunk(b"fmt ", &fmt_body(1, 1, 16_000, 16))
}

/// `bytes` read from a file (whose length the reader knows), with `options`.
fn load(bytes: &[u8], options: &ReadOptions) -> Result<Vec<f32>, AudioError> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("tessel-wav-{}-{n}.wav", std::process::id()));
    std::fs::write(&path, bytes).expect("temp file");
    let read = load_wav(&path, options).map(|a| a.samples);
    std::fs::remove_file(&path).expect("temp file");
    read
}

/// A LIST chunk of odd size before or after fmt: padded as RIFF requires (refused before as
/// "ends inside its header"), or unpadded as many writers do; both read as the file without
/// it. The data size 832 = 0x340 starts with the printable `@`, so the bytes after the
/// unpadded LIST also look like a chunk id at the padded place ("ata@").
#[test]
fn an_odd_chunk_reads_with_its_pad_byte_or_without_it() {
    let (data, want) = speech(416);
    let list = || chunk(b"LIST", b"INFOISFT\x05\0\0\0tessl");
    for pad in [true, false] {
        for list_first in [false, true] {
            let chunks = if list_first {
                [list(), fmt16(), chunk(b"data", &data)]
            } else {
                [fmt16(), list(), chunk(b"data", &data)]
            };
            let bytes = riff_file(&chunks, pad, None);
            let label = format!("pad {pad}, LIST first {list_first}");
            assert_eq!(read(&bytes).expect(&label), want, "{label}");
        }
    }
    // An odd fmt chunk (extra byte) and an odd unknown chunk, padded.
    let mut body = fmt_body(1, 1, 16_000, 16);
    body.push(0xAB);
    let chunks = [
        chunk(b"fmt ", &body),
        chunk(b"abcd", b"xyz"),
        chunk(b"data", &data),
    ];
    assert_eq!(read(&riff_file(&chunks, true, None)).expect("reads"), want);
    // An unpadded odd chunk, then an empty data chunk ending the file: empty, not truncated.
    let chunks = [fmt16(), list(), chunk(b"data", &[])];
    assert!(matches!(
        read(&riff_file(&chunks, false, None)),
        Err(AudioError::Empty)
    ));
}

/// ffmpeg writing to a pipe leaves the RIFF and data sizes at 0xFFFFFFFF (others write 0):
/// the samples run to the end of the file, as ffmpeg reads them.
#[test]
fn a_streamed_wav_reads_to_the_end_of_the_file() {
    let (data, want) = speech(800);
    for (riff, size) in [(u32::MAX, u32::MAX), (u32::MAX, 0), (0, 0), (0, u32::MAX)] {
        let chunks = [fmt16(), chunk_sized(b"data", &data, size)];
        let bytes = riff_file(&chunks, true, Some(riff));
        let label = format!("RIFF size {riff:#x}, data size {size:#x}");
        assert_eq!(read(&bytes).expect(&label), want, "{label}");
        let from_file = load(&bytes, &ReadOptions::default()).expect(&label);
        assert_eq!(from_file, want, "{label}");
    }
    // A data chunk of size 0 at the end the RIFF size declares is empty, not streamed.
    let empty = riff_file(&[fmt16(), chunk(b"data", &[])], true, None);
    assert!(matches!(read(&empty), Err(AudioError::Empty)));
}

/// A data size beyond the end of the file is read to the end (whole frames), as players and
/// Python's `wave` read it; it was refused as too long or truncated.
#[test]
fn a_header_announcing_more_data_than_the_file_holds_reads_to_the_end() {
    let (data, want) = speech(800);
    let mut held = data.clone();
    held.push(0x7F); // Half a frame: dropped.
    for declared in [data.len() as u32 * 2, 0xFFFF_FFF0] {
        let bytes = riff_file(
            &[fmt16(), chunk_sized(b"data", &held, declared)],
            false,
            None,
        );
        assert_eq!(read(&bytes).expect("stream"), want, "{declared}");
        let from_file = load(&bytes, &ReadOptions::default()).expect("file");
        assert_eq!(from_file, want, "{declared}");
    }
    // Stereo: the last whole frame is kept, a lone left sample dropped.
    let stereo: Vec<u8> = data.chunks(2).flat_map(|s| [s, s].concat()).collect();
    let mut held = stereo.clone();
    held.extend_from_slice(&[1, 2]);
    let chunks = [
        chunk(b"fmt ", &fmt_body(1, 2, 16_000, 16)),
        chunk_sized(b"data", &held, u32::MAX - 1),
    ];
    assert_eq!(read(&riff_file(&chunks, false, None)).expect("reads"), want);
}

#[test]
fn sixty_four_bit_floats_and_extensible_formats_read_as_ffmpeg_reads_them() {
    let (s16, want) = speech(800);
    let f64s: Vec<u8> = want
        .iter()
        .flat_map(|&v| f64::from(v).to_le_bytes())
        .collect();
    assert_eq!(
        read(&wav_bytes(3, 1, 16_000, 64, &f64s)).expect("f64"),
        want
    );
    // 24 valid bits in 32-bit containers are left-justified: read as 32-bit samples.
    let s32: Vec<u8> = speech_i16()[..800]
        .iter()
        .flat_map(|&v| (i32::from(v) << 16).to_le_bytes())
        .collect();
    let f32s: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
    let cases = [
        (extensible_fmt(1, 1, 16, 16), s16),
        (extensible_fmt(1, 1, 32, 24), s32),
        (extensible_fmt(3, 1, 32, 32), f32s),
        (extensible_fmt(3, 1, 64, 0), f64s),
    ];
    for (i, (fmt, data)) in cases.into_iter().enumerate() {
        let bytes = riff_file(&[fmt, chunk(b"data", &data)], true, None);
        assert_eq!(read(&bytes).expect("extensible"), want, "case {i}");
    }
}

#[test]
fn compressed_formats_are_named_with_their_format_tag() {
    let cases = [
        (2u16, 4u16, "MS-ADPCM (format tag 2)"),
        (6, 8, "A-law (format tag 6)"),
        (0x55, 0, "MP3 (format tag 85)"),
        (
            0x1234,
            16,
            "an unknown or vendor format (format tag 0x1234)",
        ),
    ];
    for (tag, bits, name) in cases {
        let err = read(&wav_bytes(tag, 1, 16_000, bits, &[0; 48])).unwrap_err();
        assert!(
            matches!(err, AudioError::Compressed { tag: t, .. } if t == tag),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("compressed format not supported: {name}")),
            "{message}"
        );
    }
    // MS-ADPCM as the sub-format of WAVE_FORMAT_EXTENSIBLE.
    let bytes = riff_file(
        &[extensible_fmt(2, 1, 4, 4), chunk(b"data", &[0; 48])],
        true,
        None,
    );
    assert!(matches!(
        read(&bytes),
        Err(AudioError::Compressed { tag: 2, .. })
    ));
}

#[test]
fn audio_under_ten_ms_says_its_duration_and_the_minimum() {
    let err = read(&wav_bytes(1, 1, 16_000, 16, &[0; 200])).unwrap_err();
    assert!(matches!(err, AudioError::TooShort { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("6.25 ms") && message.contains("minimum of 10 ms"),
        "{message}"
    );
    // 10 ms is enough, at 16 and 44.1 kHz; one frame less is not.
    for (rate, frames) in [(16_000u32, 160usize), (44_100, 441)] {
        let ok = read(&wav_bytes(1, 1, rate, 16, &vec![0; 2 * frames]));
        assert!(ok.is_ok(), "{rate} Hz: {ok:?}");
        let short = read(&wav_bytes(1, 1, rate, 16, &vec![0; 2 * frames - 2]));
        assert!(
            matches!(short, Err(AudioError::TooShort { .. })),
            "{short:?}"
        );
    }
    // No sample at all is empty.
    assert!(matches!(
        read(&wav_bytes(1, 1, 16_000, 16, &[])),
        Err(AudioError::Empty)
    ));
    assert!(matches!(read(b""), Err(AudioError::Empty)));
}

#[test]
fn a_missing_or_unreadable_audio_path_is_named() {
    let missing = std::env::temp_dir().join("tessel-no-such-audio.wav");
    let directory = std::env::temp_dir();
    for path in [missing, directory] {
        let err = load_wav(&path, &ReadOptions::default()).unwrap_err();
        assert!(
            matches!(&err, AudioError::File { path: p, .. } if p == &path),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
}

/// Every cut inside the header is "truncated" (the byte count and the part cut short), but at a
/// chunk boundary (no data chunk); a cut inside the samples reads the whole frames before it.
#[test]
fn a_file_cut_inside_its_header_is_truncated() {
    let (data, want) = speech(400);
    let whole = wav_bytes(1, 1, 16_000, 16, &data);
    for cut in (1..44).filter(|&c| c != 12 && c != 36) {
        let err = read(&whole[..cut]).unwrap_err();
        assert!(
            matches!(err, AudioError::Truncated { bytes, .. } if bytes == cut as u64),
            "{cut}: {err:?}"
        );
        assert!(err.to_string().starts_with("truncated WAV file"), "{err}");
    }
    for (cut, what) in [(12, "no fmt chunk"), (36, "no data chunk")] {
        let err = read(&whole[..cut]).unwrap_err().to_string();
        assert!(err.contains(what), "{err}");
    }
    let cut = read(&whole[..44 + 2 * 300 + 1]).expect("reads");
    assert_eq!(cut, want[..300]);
    // A chunk declaring more than the file holds, before the data chunk.
    let bytes = riff_file(&[fmt16(), chunk_sized(b"LIST", &[0; 20], 1000)], true, None);
    let err = read(&bytes).unwrap_err().to_string();
    assert!(
        err.contains("truncated") && err.contains("`LIST` chunk of 1000 bytes"),
        "{err}"
    );
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

/// The limit holds from the header for a file (the length is known), and as soon as the
/// samples pass it for a stream; a forged length sizes nothing and the real samples are read.
#[test]
fn duration_is_bounded_and_forged_lengths_cost_nothing() {
    // Two seconds against a one-second limit.
    let bytes = wav_bytes(1, 1, 16_000, 16, &[0; 64_000]);
    let one = ReadOptions { max_seconds: 1 };
    assert!(matches!(
        read_wav(Cursor::new(&bytes), &one),
        Err(AudioError::TooLong {
            seconds: None,
            max_seconds: 1
        })
    ));
    let err = load(&bytes, &one).unwrap_err();
    assert!(
        matches!(err, AudioError::TooLong { seconds: Some(s), .. } if s == 2.0),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("2.0 s, more than the maximum of 1 s"));
    // A 684-byte file whose header announces ~4 GB of samples (~37 h at 16 kHz stereo).
    let mut forged = wav_bytes(1, 2, 16_000, 16, &[0; 640]);
    forged[40..44].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    assert_eq!(read(&forged).expect("reads").len(), 160);
    assert_eq!(load(&forged, &one).expect("reads").len(), 160);
}

/// The bad inputs of the "Bad audio inputs" table in `fuzz/README.md`, and what each gets
/// (printed as the table's rows with `--nocapture`).
#[test]
fn bad_inputs_get_the_errors_the_fuzz_readme_lists() {
    let data = vec![0u8; 640];
    let with_fmt = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut body = fmt_body(1, 1, 16_000, 16);
        edit(&mut body);
        riff_file(&[chunk(b"fmt ", &body), chunk(b"data", &data)], true, None)
    };
    let floats = |v: f32| {
        let samples: Vec<u8> = [0.0, 0.5, -0.5, v]
            .repeat(40)
            .iter()
            .flat_map(|s: &f32| s.to_le_bytes())
            .collect();
        wav_bytes(3, 1, 16_000, 32, &samples)
    };
    let mut wrong_id = wav_bytes(1, 1, 16_000, 16, &data);
    wrong_id[8..12].copy_from_slice(b"WAVX");
    let vendor_guid = {
        let mut fmt = extensible_fmt(1, 1, 16, 16);
        fmt.body[26] ^= 0xFF;
        riff_file(&[fmt, chunk(b"data", &data)], true, None)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty file", vec![], "the audio is empty"),
        ("no RIFF header (raw PCM)", vec![1; 640], "unknown (not RIFF/WAVE) files"),
        ("wrong WAVE id (`WAVX`)", wrong_id, "RIFF (not WAVE) files"),
        ("RIFX (big-endian)", b"RIFX\0\0\0\x24WAVE".to_vec(), "RIFX"),
        ("RF64", b"RF64\xff\xff\xff\xffWAVE".to_vec(), "RF64/BW64"),
        ("cut inside the RIFF header", b"RIFF\x24\0\0\0WA".to_vec(), "truncated"),
        ("RIFF header only", b"RIFF\x04\0\0\0WAVE".to_vec(), "no fmt chunk"),
        (
            "missing fmt chunk",
            riff_file(&[chunk(b"data", &data)], true, None),
            "the data chunk comes before the fmt chunk",
        ),
        (
            "missing data chunk",
            riff_file(&[fmt16()], true, None),
            "no data chunk",
        ),
        ("zero channels", with_fmt(&|f| f[2] = 0), "0 channels"),
        (
            "zero sample rate",
            with_fmt(&|f| f[4..8].fill(0)),
            "sample rate 0 Hz is not supported",
        ),
        (
            "sample rate 3999 Hz",
            with_fmt(&|f| f[4..8].copy_from_slice(&3999u32.to_le_bytes())),
            "sample rate 3999 Hz",
        ),
        ("0 bits per sample", with_fmt(&|f| f[14] = 0), "0 bits per sample"),
        (
            "12-bit PCM",
            with_fmt(&|f| f[14] = 12),
            "unsupported WAV encoding (12-bit integer PCM)",
        ),
        (
            "16-bit float",
            with_fmt(&|f| f[0] = 3),
            "unsupported WAV encoding (16-bit IEEE float)",
        ),
        (
            "block align 3 for mono 16-bit",
            with_fmt(&|f| f[12] = 3),
            "block align 3 does not match 1 channel(s) of 16-bit samples",
        ),
        (
            "24-bit PCM in 4-byte blocks (not extensible)",
            with_fmt(&|f| {
                f[12] = 4;
                f[14] = 24;
            }),
            "block align 4 does not match",
        ),
        (
            "fmt chunk of 14 bytes",
            with_fmt(&|f| f.truncate(14)),
            "fewer than the 16",
        ),
        (
            "WAVE_FORMAT_EXTENSIBLE with an 18-byte fmt",
            with_fmt(&|f| {
                f[0..2].copy_from_slice(&0xFFFEu16.to_le_bytes());
                f.extend_from_slice(&[0, 0]);
            }),
            "WAVE_FORMAT_EXTENSIBLE fmt chunk of 18 bytes",
        ),
        ("extensible vendor sub-format GUID", vendor_guid, "sub-format"),
        (
            "MS-ADPCM",
            wav_bytes(2, 1, 16_000, 4, &data),
            "compressed format not supported: MS-ADPCM (format tag 2)",
        ),
        (
            "mu-law",
            wav_bytes(7, 1, 16_000, 8, &data),
            "mu-law (format tag 7)",
        ),
        ("NaN float sample", floats(f32::NAN), "sample 3 is not a finite number"),
        ("+inf float sample", floats(f32::INFINITY), "sample 3 is not"),
        (
            "fmt chunk declaring 4 GB",
            riff_file(&[chunk_sized(b"fmt ", &fmt16().body, u32::MAX)], true, None),
            "truncated WAV file: it ends after 36 bytes, inside its `fmt ` chunk of 4294967295 bytes",
        ),
        (
            "LIST chunk declaring 4 GB",
            riff_file(
                &[fmt16(), chunk_sized(b"LIST", b"INFO", 0xFFFF_FFF0)],
                true,
                None,
            ),
            "inside its `LIST` chunk of 4294967280 bytes",
        ),
        (
            "5 ms of samples",
            wav_bytes(1, 1, 16_000, 16, &data[..160]),
            "the audio lasts 5.00 ms, less than the minimum of 10 ms",
        ),
    ];
    for (name, bytes, want) in cases {
        let message = match read(&bytes) {
            Ok(samples) => panic!("{name}: read {} samples", samples.len()),
            Err(e) => e.to_string(),
        };
        println!("| {name} | {message} |");
        assert!(message.contains(want), "{name}: {message}");
    }
}
