//! `tessel_audio::read_wav` on arbitrary bytes, and on WAV files synthesised from the input
//! (format tag PCM / float / extensible / ADPCM / A-law, 1–8 channels, awkward and extreme
//! rates, 8–64-bit samples, honest, forged or streamed data lengths, an odd `LIST` chunk with
//! or without its pad byte) so the fuzzer reaches the sample decoder and the resampler
//! quickly. Oracle: `Ok` audio lasts at least 10 ms, is as long as `ceil(frames · 16000 /
//! rate)`, finite and within [-1, 1], and its log-mel spectrogram computes; otherwise a typed
//! `AudioError`; never a panic. `-malloc_limit_mb` catches any buffer sized from a forged
//! header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessel_audio::{content_frames, read_wav, MelFrontEnd, ReadOptions};

const RATES: [u32; 9] = [
    16_000, 8_000, 11_025, 22_050, 44_100, 48_000, 4_000, 384_000, 3_999,
];
const BITS: [u16; 7] = [16, 8, 24, 32, 64, 12, 0];
const TAGS: [u16; 5] = [1, 3, 0xFFFE, 2, 6];
const PCM_GUID: [u8; 16] = *b"\x01\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71";
const FLOAT_GUID: [u8; 16] = *b"\x03\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71";

/// A RIFF/WAVE file whose fmt fields come from `spec` and whose data is `rest`.
fn synthesize(spec: &[u8; 6], rest: &[u8]) -> Vec<u8> {
    let tag = TAGS[usize::from(spec[0]) % TAGS.len()];
    let channels = 1 + u16::from(spec[1] % 8);
    let rate = RATES[usize::from(spec[2]) % RATES.len()];
    let bits = BITS[usize::from(spec[3]) % BITS.len()];
    let container = if spec[4] & 1 == 1 && bits == 24 {
        4
    } else {
        bits.div_ceil(8)
    };
    let block = channels.wrapping_mul(container);
    let mut fmt = Vec::new();
    fmt.extend_from_slice(&tag.to_le_bytes());
    fmt.extend_from_slice(&channels.to_le_bytes());
    fmt.extend_from_slice(&rate.to_le_bytes());
    fmt.extend_from_slice(&rate.wrapping_mul(u32::from(block)).to_le_bytes());
    fmt.extend_from_slice(&block.to_le_bytes());
    fmt.extend_from_slice(&(container * 8).to_le_bytes());
    if tag == 0xFFFE {
        fmt.extend_from_slice(&22u16.to_le_bytes());
        fmt.extend_from_slice(&bits.to_le_bytes());
        fmt.extend_from_slice(&0u32.to_le_bytes());
        fmt.extend_from_slice(if spec[4] & 2 == 2 {
            &FLOAT_GUID
        } else {
            &PCM_GUID
        });
    }
    let data_len = if spec[4] & 0x30 != 0 {
        // Streamed, as ffmpeg writes to a pipe (0xFFFFFFFF) or others do (0).
        if spec[4] & 0x10 != 0 {
            u32::MAX
        } else {
            0
        }
    } else if spec[5] & 0x80 == 0x80 {
        // A forged length: up to ~4 GB announced.
        u32::from(spec[5]) << 24 | rest.len() as u32
    } else {
        rest.len() as u32
    };
    let mut file = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
    file.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
    file.extend_from_slice(&fmt);
    if spec[4] & 4 != 0 {
        // An odd LIST chunk, with its pad byte or (bit 3) without, as many writers do.
        file.extend_from_slice(b"LIST\x05\0\0\0INFO!");
        if spec[4] & 8 == 0 {
            file.push(0);
        }
    }
    file.extend_from_slice(b"data");
    file.extend_from_slice(&data_len.to_le_bytes());
    file.extend_from_slice(rest);
    let riff = if spec[4] & 0x30 != 0 {
        data_len
    } else {
        (file.len() - 8) as u32
    };
    file[4..8].copy_from_slice(&riff.to_le_bytes());
    file
}

fn check(bytes: &[u8]) {
    let options = ReadOptions { max_seconds: 120 };
    let Ok(audio) = read_wav(bytes, &options) else {
        return;
    };
    assert!(
        audio.source_frames * 100 >= u64::from(audio.source_rate),
        "under 10 ms"
    );
    let expected = (audio.source_frames as f64 * 16_000.0 / f64::from(audio.source_rate)).ceil();
    assert_eq!(audio.samples.len(), expected as usize);
    assert!(audio
        .samples
        .iter()
        .all(|v| v.is_finite() && v.abs() <= 1.0));
    let mut front = MelFrontEnd::new(80).expect("80 mel bins");
    let mut mel = vec![0.0f32; 80 * content_frames(audio.samples.len())];
    front
        .spectrogram(&audio.samples, &mut mel)
        .expect("finite audio has a spectrogram");
    assert!(mel.iter().all(|v| v.is_finite()));
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((&mode, rest)) if mode & 1 == 1 && rest.len() >= 6 => {
            let spec: [u8; 6] = rest[..6].try_into().expect("6 bytes");
            check(&synthesize(&spec, &rest[6..]));
        }
        Some((_, rest)) => check(rest),
        None => {}
    }
});
