//! Reading WAV files into mono 16 kHz samples, as whisper's `load_audio` (ffmpeg `-ac 1 -ar
//! 16000 -f s16le`) does.
//!
//! The header is walked as ffmpeg and Python's `wave` walk it (the private `riff` module: pad
//! bytes after odd chunks, or their common omission; other chunks skipped; streamed WAVs). Supported:
//! RIFF/WAVE with `WAVE_FORMAT_PCM`, `WAVE_FORMAT_IEEE_FLOAT` or `WAVE_FORMAT_EXTENSIBLE` (PCM
//! or float sub-format), integer samples of 8 (unsigned), 16, 24 or 32 bits, float samples of
//! 32 or 64 bits, 1 to 65535 channels, [`MIN_SAMPLE_RATE`]`..=`[`MAX_SAMPLE_RATE`] Hz. An
//! extensible format's samples are read by their container width (24 valid bits in 32-bit
//! containers are 32-bit samples), as ffmpeg reads them. Everything else is a typed
//! [`AudioError`] naming what is supported: compressed formats by name and format tag, other
//! containers (MP3, FLAC, Ogg, AIFF, RF64, …) by their magic bytes.
//!
//! The samples are the data chunk's, up to its declared size or the end of the file, whichever
//! comes first (a header announcing more than the file holds is read to the end, as players
//! do); a streamed WAV's run to the end of the file; a trailing partial frame is dropped.
//! Audio shorter than 10 ms (one mel frame, [`crate::HOP_LENGTH`] samples at 16 kHz) is
//! refused ([`AudioError::TooShort`]), as is audio longer than [`ReadOptions::max_seconds`]
//! ([`AudioError::TooLong`]): before reading any sample when the file's length is known
//! ([`load_wav`]), otherwise as soon as the samples read pass the limit.
//!
//! Samples are scaled to [-1, 1) (integers divided by 2^(bits−1), as ffmpeg converts them),
//! each frame's channels averaged (ffmpeg's `-ac 1` for stereo: 0.5·L + 0.5·R; for layouts
//! with an LFE or surround channels ffmpeg weights them differently), streamed through the
//! resampler ([`crate::resample`]) and finally clamped to [-1, 1] as ffmpeg's conversion to
//! 16-bit clips (float WAVs may exceed full scale). Float samples beyond ±[`MAX_FLOAT_SAMPLE`]
//! (96 dB over full scale) are first clamped there, so that averaging the channels and
//! resampling stay finite (two channels near the largest `f32` would overflow their sum); NaN
//! and infinite samples are refused ([`AudioError::NonFinite`]). Unlike ffmpeg, the result is
//! not rounded to 16 bits: the difference is below 2^-16 per sample.
//!
//! Memory: the reader never sizes a buffer from the header alone. It reserves the 16 kHz
//! output for at most [`ReadOptions::max_seconds`], capped by a first reservation of one
//! minute that grows only as real samples arrive, so a short file with a forged header costs
//! nothing; it reads the file through a buffer of at most 64 KiB (or one frame).

use std::io::{self, Read};
use std::path::Path;

use crate::resample::To16k;
use crate::riff::{self, Encoding, Format, Header};
use crate::AudioError;

/// Largest magnitude of a float sample, in full scales: larger finite ones are clamped to it.
pub const MAX_FLOAT_SAMPLE: f32 = 65_536.0;

/// Lowest sample rate accepted, in Hz.
pub const MIN_SAMPLE_RATE: u32 = 4_000;
/// Highest sample rate accepted, in Hz.
pub const MAX_SAMPLE_RATE: u32 = 384_000;
/// Default [`ReadOptions::max_seconds`]: one hour (230 MB of 16 kHz `f32` samples).
pub const DEFAULT_MAX_SECONDS: u32 = 3600;

/// Bytes of samples read (and frames handed to the resampler) at a time, unless one frame
/// is larger.
const READ_BYTES: usize = 64 * 1024;
/// The first reservation of output samples: one minute at 16 kHz.
const FIRST_RESERVE: usize = 60 * crate::SAMPLE_RATE as usize;

/// Limits of [`read_wav`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Longest audio accepted, in seconds. Memory is about 64 kB per second of audio.
    pub max_seconds: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            max_seconds: DEFAULT_MAX_SECONDS,
        }
    }
}

/// Audio read from a WAV file: mono samples at 16 kHz, and what the file held.
#[derive(Debug, Clone, PartialEq)]
pub struct WavAudio {
    /// Mono samples at [`crate::SAMPLE_RATE`], in [-1, 1].
    pub samples: Vec<f32>,
    /// The file's sample rate in Hz.
    pub source_rate: u32,
    /// The file's channel count.
    pub channels: u16,
    /// Bits per sample in the file (the valid bits of a `WAVE_FORMAT_EXTENSIBLE` format).
    pub bits_per_sample: u16,
    /// Whether the file's samples are IEEE floats.
    pub float: bool,
    /// Frames (samples per channel) read from the file: whole frames only.
    pub source_frames: u64,
}

/// Reads the WAV file at `path` (see [`read_wav`]); I/O errors name the file.
pub fn load_wav(path: &Path, options: &ReadOptions) -> Result<WavAudio, AudioError> {
    let named = |source| AudioError::File {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(named)?;
    let meta = file.metadata().map_err(named)?;
    let len = meta.is_file().then_some(meta.len());
    decode(io::BufReader::new(file), len, options).map_err(|e| match e {
        AudioError::Io(source) => named(source),
        other => other,
    })
}

/// Decodes a WAV stream to mono 16 kHz samples (module docs: formats, scaling, limits,
/// memory).
pub fn read_wav<R: Read>(reader: R, options: &ReadOptions) -> Result<WavAudio, AudioError> {
    decode(reader, None, options)
}

/// [`read_wav`] on a stream of `len` bytes, when known.
fn decode<R: Read>(
    reader: R,
    len: Option<u64>,
    options: &ReadOptions,
) -> Result<WavAudio, AudioError> {
    let (header, data) = riff::read_header(reader)?;
    let format = header.format;
    let rate = format.rate;
    if !(MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&rate) {
        return Err(AudioError::SampleRate {
            rate,
            min: MIN_SAMPLE_RATE,
            max: MAX_SAMPLE_RATE,
        });
    }
    let frames_hint = expected_frames(&header, len, options)?;
    let mut resampler = To16k::new(rate)?;
    let mut samples = Vec::new();
    let reserve = resampler.output_len(frames_hint).min(FIRST_RESERVE);
    grow_for(&mut samples, reserve)?;
    let data = data.take(header.data_len.unwrap_or(u64::MAX));
    let frames = resample_frames(data, &format, options, &mut resampler, &mut samples)?;
    if frames == 0 {
        return Err(AudioError::Empty);
    }
    if frames * 100 < u64::from(rate) {
        return Err(AudioError::TooShort {
            seconds: frames as f64 / f64::from(rate),
        });
    }
    grow_for(&mut samples, resampler.tail_len())?;
    resampler.finish(&mut samples)?;
    for s in &mut samples {
        *s = s.clamp(-1.0, 1.0);
    }
    Ok(WavAudio {
        samples,
        source_rate: rate,
        channels: format.channels,
        bits_per_sample: format.bits,
        float: format.encoding.is_float(),
        source_frames: frames,
    })
}

/// The frames the samples are expected to hold, to size the output: exact when the stream's
/// `len` is known (audio longer than `options` allow is then refused here), else what the data
/// chunk declares, at most the limit.
fn expected_frames(
    header: &Header,
    len: Option<u64>,
    options: &ReadOptions,
) -> Result<u64, AudioError> {
    let rate = header.format.rate;
    let max_frames = u64::from(options.max_seconds) * u64::from(rate);
    let frame = header.format.frame_bytes() as u64;
    let Some(len) = len else {
        return Ok(header
            .data_len
            .map_or(max_frames, |d| (d / frame).min(max_frames)));
    };
    let left = len.saturating_sub(header.data_start);
    let frames = header.data_len.map_or(left, |declared| declared.min(left)) / frame;
    if frames > max_frames {
        return Err(AudioError::TooLong {
            seconds: Some(frames as f64 / f64::from(rate)),
            max_seconds: options.max_seconds,
        });
    }
    Ok(frames)
}

/// Reads the whole frames of `data`, mixes each down to mono and resamples it into `samples`;
/// returns the frames read. Audio longer than `options` allow is [`AudioError::TooLong`].
fn resample_frames(
    mut data: impl Read,
    format: &Format,
    options: &ReadOptions,
    resampler: &mut To16k,
    samples: &mut Vec<f32>,
) -> Result<u64, AudioError> {
    let max_frames = u64::from(options.max_seconds) * u64::from(format.rate);
    let frame = format.frame_bytes();
    let mut bytes = vec![0u8; (READ_BYTES / frame).max(1) * frame];
    let mut mono = Vec::with_capacity(bytes.len() / frame);
    let mut frames = 0u64;
    loop {
        let got = riff::read_up_to(&mut data, &mut bytes).map_err(AudioError::Io)?;
        let whole = got / frame;
        if frames + whole as u64 > max_frames {
            return Err(AudioError::TooLong {
                seconds: None,
                max_seconds: options.max_seconds,
            });
        }
        let first = frames * u64::from(format.channels);
        mix_down(format, &bytes[..whole * frame], first, &mut mono)?;
        frames += whole as u64;
        grow_for(samples, resampler.max_output_per_block(mono.len()))?;
        resampler.push(&mono, samples)?;
        mono.clear();
        if got < bytes.len() {
            return Ok(frames);
        }
    }
}

/// Appends the mono average of each frame of `bytes` (whole frames) to `mono`; `first` is the
/// index of the first sample, for errors.
fn mix_down(
    format: &Format,
    bytes: &[u8],
    first: u64,
    mono: &mut Vec<f32>,
) -> Result<(), AudioError> {
    let width = format.encoding.bytes();
    let channels = usize::from(format.channels);
    let scale = 1.0 / channels as f32;
    for (i, frame) in bytes.chunks_exact(width * channels).enumerate() {
        let mut sum = 0f32;
        for (c, raw) in frame.chunks_exact(width).enumerate() {
            let value = sample(format.encoding, raw);
            if !value.is_finite() {
                return Err(AudioError::NonFinite {
                    index: first + (i * channels + c) as u64,
                });
            }
            sum += value.clamp(-f64::from(MAX_FLOAT_SAMPLE), f64::from(MAX_FLOAT_SAMPLE)) as f32;
        }
        mono.push(sum * scale);
    }
    Ok(())
}

/// One sample of `encoding` from its bytes, integers scaled to [-1, 1).
fn sample(encoding: Encoding, b: &[u8]) -> f64 {
    match encoding {
        Encoding::U8 => (f64::from(b[0]) - 128.0) / 128.0,
        Encoding::S16 => f64::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0,
        Encoding::S24 => f64::from(i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) / 8_388_608.0,
        Encoding::S32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])) / 2_147_483_648.0,
        Encoding::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Encoding::F64 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

/// Reserves room for `more` samples, fallibly.
fn grow_for(samples: &mut Vec<f32>, more: usize) -> Result<(), AudioError> {
    samples
        .try_reserve(more)
        .map_err(|_| AudioError::OutOfMemory {
            bytes: (samples.len() + more) * std::mem::size_of::<f32>(),
        })
}
