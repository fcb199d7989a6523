//! Reading WAV files into mono 16 kHz samples, as whisper's `load_audio` (ffmpeg `-ac 1 -ar
//! 16000 -f s16le`) does.
//!
//! Decoding is `hound`'s. Supported: RIFF/WAVE with `WAVE_FORMAT_PCM`, `WAVE_FORMAT_IEEE_FLOAT`
//! or `WAVE_FORMAT_EXTENSIBLE` (PCM or float sub-format), integer samples of 8 (unsigned), 16,
//! 24 (in 3- or 4-byte containers) or 32 bits, float samples of 32 bits, 1 to 65535 channels,
//! [`MIN_SAMPLE_RATE`]`..=`[`MAX_SAMPLE_RATE`] Hz. Everything else is a typed [`AudioError`]
//! naming what is supported; other containers (MP3, FLAC, Ogg, AIFF, RF64, …) are recognised
//! by their magic bytes and named.
//!
//! Samples are scaled to [-1, 1) (integers divided by 2^(bits−1), as ffmpeg converts them),
//! each frame's channels averaged (ffmpeg's `-ac 1` for stereo: 0.5·L + 0.5·R; for layouts
//! with an LFE or surround channels ffmpeg weights them differently), streamed through the
//! resampler ([`crate::resample`]) and finally clamped to [-1, 1] as ffmpeg's conversion to
//! 16-bit clips (float WAVs may exceed full scale). Float samples beyond ±[`MAX_FLOAT_SAMPLE`]
//! (96 dB over full scale) are first clamped there, so that averaging the channels and
//! resampling stay finite (two channels near the largest `f32` would overflow their sum).
//! Unlike ffmpeg, the result is not rounded to 16 bits: the difference is below 2^-16 per
//! sample.
//!
//! Memory: the reader never sizes a buffer from the header alone. It reserves the 16 kHz
//! output for at most [`ReadOptions::max_seconds`] (refusing longer files from the header
//! before reading any sample), capped by a first reservation of one minute that grows only as
//! real samples arrive, so a short file with a forged header costs nothing.

use std::io::{self, Read};
use std::path::Path;

use crate::resample::To16k;
use crate::AudioError;

/// Largest magnitude of a float sample, in full scales: larger finite ones are clamped to it.
pub const MAX_FLOAT_SAMPLE: f32 = 65_536.0;

/// Lowest sample rate accepted, in Hz.
pub const MIN_SAMPLE_RATE: u32 = 4_000;
/// Highest sample rate accepted, in Hz.
pub const MAX_SAMPLE_RATE: u32 = 384_000;
/// Default [`ReadOptions::max_seconds`]: one hour (230 MB of 16 kHz `f32` samples).
pub const DEFAULT_MAX_SECONDS: u32 = 3600;

/// Samples per channel decoded before each hand-over to the resampler.
const BLOCK_FRAMES: usize = 4096;
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
    /// Bits per sample in the file.
    pub bits_per_sample: u16,
    /// Whether the file's samples are IEEE floats.
    pub float: bool,
    /// Frames (samples per channel) in the file.
    pub source_frames: u64,
}

/// Reads the WAV file at `path` (see [`read_wav`]).
pub fn load_wav(path: &Path, options: &ReadOptions) -> Result<WavAudio, AudioError> {
    let file = std::fs::File::open(path).map_err(AudioError::Io)?;
    read_wav(io::BufReader::new(file), options)
}

/// Decodes a WAV stream to mono 16 kHz samples (module docs: formats, scaling, memory).
pub fn read_wav<R: Read>(mut reader: R, options: &ReadOptions) -> Result<WavAudio, AudioError> {
    let mut head = [0u8; 12];
    let got = read_up_to(&mut reader, &mut head).map_err(AudioError::Io)?;
    if got == 0 {
        return Err(AudioError::Empty);
    }
    if let Some(found) = foreign_container(&head[..got]) {
        return Err(AudioError::UnsupportedContainer { found });
    }
    let mut wav = hound::WavReader::new(io::Cursor::new(head).take(got as u64).chain(reader))
        .map_err(header_error)?;
    let spec = wav.spec();
    check_encoding(&spec)?;
    if !(MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&spec.sample_rate) {
        return Err(AudioError::SampleRate {
            rate: spec.sample_rate,
            min: MIN_SAMPLE_RATE,
            max: MAX_SAMPLE_RATE,
        });
    }
    let channels = usize::from(spec.channels);
    let frames = u64::from(wav.duration());
    if frames == 0 {
        return Err(AudioError::Empty);
    }
    let seconds = frames as f64 / f64::from(spec.sample_rate);
    if seconds > f64::from(options.max_seconds) {
        return Err(AudioError::TooLong {
            seconds,
            max_seconds: options.max_seconds,
        });
    }

    let mut resampler = To16k::new(spec.sample_rate)?;
    let expected_out = resampler.output_len(frames);
    let mut samples = Vec::new();
    let reserve = expected_out.min(FIRST_RESERVE);
    samples
        .try_reserve_exact(reserve)
        .map_err(|_| AudioError::OutOfMemory {
            bytes: reserve * std::mem::size_of::<f32>(),
        })?;

    let expected = u64::from(wav.len());
    let mut decoder = Decoder::new(&spec);
    let mut mono = Vec::with_capacity(BLOCK_FRAMES);
    let mut frame_sum = 0f32;
    let mut in_frame = 0usize;
    let scale = 1.0 / channels as f32;
    let mut read = 0u64;
    let mut iter = SampleIter::new(&mut wav, spec.sample_format);
    while let Some(next) = iter.next() {
        let value = match next {
            Ok(v) => decoder.scale(v),
            Err(hound::Error::IoError(e)) if is_eof(&e) => {
                return Err(AudioError::Truncated { expected, read });
            }
            Err(hound::Error::IoError(e)) => return Err(AudioError::Io(e)),
            Err(hound::Error::Unsupported | hound::Error::TooWide) => {
                return Err(AudioError::UnsupportedEncoding {
                    what: format!(
                        "{}-bit samples in containers of another width",
                        spec.bits_per_sample
                    ),
                });
            }
            Err(e) => return Err(AudioError::Malformed(e.to_string())),
        };
        if !value.is_finite() {
            return Err(AudioError::NonFinite { index: read });
        }
        read += 1;
        frame_sum += value.clamp(-MAX_FLOAT_SAMPLE, MAX_FLOAT_SAMPLE);
        in_frame += 1;
        if in_frame == channels {
            mono.push(frame_sum * scale);
            frame_sum = 0.0;
            in_frame = 0;
            if mono.len() == BLOCK_FRAMES {
                grow_for(&mut samples, resampler.max_output_per_block(BLOCK_FRAMES))?;
                resampler.push(&mono, &mut samples)?;
                mono.clear();
            }
        }
    }
    grow_for(
        &mut samples,
        resampler.max_output_per_block(mono.len()) + resampler.tail_len(),
    )?;
    resampler.push(&mono, &mut samples)?;
    resampler.finish(&mut samples)?;
    for s in &mut samples {
        *s = s.clamp(-1.0, 1.0);
    }
    Ok(WavAudio {
        samples,
        source_rate: spec.sample_rate,
        channels: spec.channels,
        bits_per_sample: spec.bits_per_sample,
        float: spec.sample_format == hound::SampleFormat::Float,
        source_frames: frames,
    })
}

/// Reserves room for `more` samples, fallibly.
fn grow_for(samples: &mut Vec<f32>, more: usize) -> Result<(), AudioError> {
    samples
        .try_reserve(more)
        .map_err(|_| AudioError::OutOfMemory {
            bytes: (samples.len() + more) * std::mem::size_of::<f32>(),
        })
}

/// Integer or float samples of one file, as hound yields them.
enum SampleIter<'a, R: Read> {
    Int(hound::WavSamples<'a, R, i32>),
    Float(hound::WavSamples<'a, R, f32>),
}

impl<'a, R: Read> SampleIter<'a, R> {
    fn new(wav: &'a mut hound::WavReader<R>, format: hound::SampleFormat) -> Self {
        match format {
            hound::SampleFormat::Int => Self::Int(wav.samples()),
            hound::SampleFormat::Float => Self::Float(wav.samples()),
        }
    }

    fn next(&mut self) -> Option<Result<Raw, hound::Error>> {
        match self {
            Self::Int(it) => it.next().map(|r| r.map(Raw::Int)),
            Self::Float(it) => it.next().map(|r| r.map(Raw::Float)),
        }
    }
}

/// One decoded sample before scaling.
enum Raw {
    Int(i32),
    Float(f32),
}

/// Scales raw samples to [-1, 1).
struct Decoder {
    int_scale: f32,
}

impl Decoder {
    fn new(spec: &hound::WavSpec) -> Self {
        let bits = i32::from(spec.bits_per_sample.clamp(1, 32));
        Self {
            int_scale: (-(bits - 1) as f32).exp2(),
        }
    }

    fn scale(&mut self, raw: Raw) -> f32 {
        match raw {
            Raw::Int(v) => v as f32 * self.int_scale,
            Raw::Float(v) => v,
        }
    }
}

/// Refuses encodings hound would decode wrongly or not at all, before reading samples.
fn check_encoding(spec: &hound::WavSpec) -> Result<(), AudioError> {
    let ok = match spec.sample_format {
        hound::SampleFormat::Int => matches!(spec.bits_per_sample, 8 | 16 | 24 | 32),
        hound::SampleFormat::Float => spec.bits_per_sample == 32,
    };
    if ok {
        return Ok(());
    }
    let kind = match spec.sample_format {
        hound::SampleFormat::Int => "integer PCM",
        hound::SampleFormat::Float => "IEEE float",
    };
    Err(AudioError::UnsupportedEncoding {
        what: format!("{}-bit {kind}", spec.bits_per_sample),
    })
}

/// Maps a header error of hound to ours.
fn header_error(e: hound::Error) -> AudioError {
    match e {
        hound::Error::IoError(e) if is_eof(&e) => {
            AudioError::Malformed("the file ends inside its header".into())
        }
        hound::Error::IoError(e) => AudioError::Io(e),
        hound::Error::Unsupported => AudioError::UnsupportedEncoding {
            what: "a compressed or vendor format tag (e.g. ADPCM, A-law, mu-law, MP3-in-WAV)"
                .into(),
        },
        hound::Error::FormatError(reason) if reason.starts_with("bits per sample is not 32") => {
            AudioError::UnsupportedEncoding {
                what: "IEEE float that is not 32-bit".into(),
            }
        }
        hound::Error::FormatError(reason) if reason.contains("not a multiple of 8") => {
            AudioError::UnsupportedEncoding {
                what: "samples whose width is not a whole number of bytes (e.g. 4-bit ADPCM)"
                    .into(),
            }
        }
        other => AudioError::Malformed(other.to_string()),
    }
}

/// hound reports a short read as `Other("Failed to read enough bytes.")`; std as
/// `UnexpectedEof`.
fn is_eof(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::UnexpectedEof
        || (e.kind() == io::ErrorKind::Other && e.to_string().contains("read enough bytes"))
}

/// Names a container that is not RIFF/WAVE from its first bytes.
fn foreign_container(head: &[u8]) -> Option<&'static str> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    if starts(b"RIFF") {
        return match head.get(8..12) {
            Some(b"WAVE") | None => None,
            Some(b"AVI ") => Some("AVI"),
            Some(b"WEBP") => Some("WebP"),
            Some(_) => Some("RIFF (not WAVE)"),
        };
    }
    Some(if starts(b"RF64") || starts(b"BW64") {
        "RF64/BW64 (64-bit WAV)"
    } else if starts(b"fLaC") {
        "FLAC"
    } else if starts(b"OggS") {
        "Ogg (Vorbis/Opus/FLAC)"
    } else if starts(b"ID3") || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0) {
        "MP3/AAC (MPEG audio)"
    } else if starts(b"FORM") {
        "AIFF"
    } else if head.get(4..8) == Some(b"ftyp") {
        "MP4/M4A"
    } else if starts(&[0x1A, 0x45, 0xDF, 0xA3]) {
        "Matroska/WebM"
    } else if starts(b".snd") {
        "Sun/NeXT AU"
    } else if starts(b"caff") {
        "Core Audio (CAF)"
    } else {
        "unknown (not RIFF/WAVE)"
    })
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_named() {
        assert_eq!(foreign_container(b"fLaC\0\0\0\x22"), Some("FLAC"));
        assert_eq!(foreign_container(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(foreign_container(b"ID3\x04"), Some("MP3/AAC (MPEG audio)"));
        assert_eq!(foreign_container(b"\0\0\0\x20ftypM4A "), Some("MP4/M4A"));
    }
}
