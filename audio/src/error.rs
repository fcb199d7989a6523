//! The typed errors of the audio front end.

use std::path::PathBuf;

/// What the WAV reader supports, quoted by the errors that refuse a file.
pub(crate) const SUPPORTED: &str = "WAV (RIFF/WAVE) files with 8/16/24/32-bit integer PCM or \
     32/64-bit IEEE float samples, any number of channels";

/// Why an audio file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AudioError {
    /// The stream could not be read (not a format problem).
    #[error("cannot read the audio: {0}")]
    Io(#[source] std::io::Error),
    /// The file could not be opened or read (missing, unreadable, a directory, …).
    #[error("cannot read the audio file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not a WAV file; `found` names the container when it is recognised.
    #[error("{found} files are not supported: tessel reads {SUPPORTED}")]
    UnsupportedContainer {
        /// The recognised container (e.g. "MP3", "FLAC"), or "unknown".
        found: &'static str,
    },
    /// A WAV file in a compressed or vendor format (anything but PCM and IEEE float).
    #[error("compressed format not supported: {name} (format tag {}); tessel reads {SUPPORTED}",
        tag_text(*tag))]
    Compressed {
        /// The format tag (of the `fmt ` chunk, or of the `WAVE_FORMAT_EXTENSIBLE` sub-format).
        tag: u16,
        /// The format's name, e.g. "MS-ADPCM".
        name: &'static str,
    },
    /// A WAV file whose sample encoding is not supported.
    #[error("unsupported WAV encoding ({what}): tessel reads {SUPPORTED}")]
    UnsupportedEncoding {
        /// The encoding found.
        what: String,
    },
    /// The WAV header is ill-formed.
    #[error("malformed WAV file: {0}")]
    Malformed(String),
    /// The file ends inside its header, before the first sample.
    #[error("truncated WAV file: it ends after {bytes} bytes, inside {inside}")]
    Truncated {
        /// Bytes in the file.
        bytes: u64,
        /// The part of the header cut short.
        inside: String,
    },
    /// The file holds no sample.
    #[error("the audio is empty (the WAV file holds no samples)")]
    Empty,
    /// Shorter than 10 ms, one mel frame ([`crate::HOP_LENGTH`] samples at 16 kHz).
    #[error("the audio lasts {:.2} ms, less than the minimum of 10 ms (one mel frame)", seconds * 1e3)]
    TooShort {
        /// The duration of the file's samples, in seconds.
        seconds: f64,
    },
    /// Longer than [`ReadOptions::max_seconds`](crate::ReadOptions::max_seconds).
    #[error("the audio lasts {}more than the maximum of {max_seconds} s", lasts(*seconds))]
    TooLong {
        /// The duration, in seconds; `None` when the data's end is unknown (a stream whose
        /// samples went past the limit).
        seconds: Option<f64>,
        /// The limit in force.
        max_seconds: u32,
    },
    /// A sample rate outside the supported range.
    #[error("sample rate {rate} Hz is not supported (supported: {min}..={max} Hz)")]
    SampleRate {
        /// The file's rate.
        rate: u32,
        /// Lowest supported rate.
        min: u32,
        /// Highest supported rate.
        max: u32,
    },
    /// A float sample that is NaN or infinite.
    #[error("sample {index} is not a finite number")]
    NonFinite {
        /// Index of the sample (all channels interleaved).
        index: u64,
    },
    /// The resampler refused its setup or a chunk (not expected for supported rates).
    #[error("resampling to 16 kHz failed: {0}")]
    Resample(String),
    /// Memory for the decoded audio could not be reserved.
    #[error("out of memory reserving {bytes} bytes for the decoded audio")]
    OutOfMemory {
        /// The reservation that failed.
        bytes: usize,
    },
}

/// A format tag as people quote it: decimal below 256, hexadecimal above.
fn tag_text(tag: u16) -> String {
    if tag < 0x100 {
        tag.to_string()
    } else {
        format!("0x{tag:04X}")
    }
}

/// The duration quoted by [`AudioError::TooLong`], when known.
fn lasts(seconds: Option<f64>) -> String {
    seconds.map_or_else(String::new, |s| format!("{s:.1} s, "))
}

/// Why the log-mel front end refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MelError {
    /// The number of mel bins is outside `1..=MAX_MELS`.
    #[error("{n_mels} mel bins are not supported (1..={max}; whisper uses 80 or 128)")]
    Mels {
        /// The requested count.
        n_mels: usize,
        /// [`crate::mel::MAX_MELS`].
        max: usize,
    },
    /// The output buffer does not have the length the call writes.
    #[error("output buffer holds {got} values, the call writes {expected}")]
    OutputLength {
        /// Values the call writes.
        expected: usize,
        /// Values the buffer holds.
        got: usize,
    },
    /// An input buffer does not have the length its shape announces.
    #[error("input buffer holds {got} values, its shape needs {expected}")]
    InputLength {
        /// Values the shape needs.
        expected: usize,
        /// Values the buffer holds.
        got: usize,
    },
    /// A segment that does not fit in the spectrogram or in one window.
    #[error("segment [{seek}, {seek} + {size}) does not fit a spectrogram of {frames} frames or a window of 3000")]
    Segment {
        /// First frame.
        seek: usize,
        /// Frames requested.
        size: usize,
        /// Frames of the spectrogram.
        frames: usize,
    },
    /// A NaN or infinite sample.
    #[error("sample {index} is not a finite number")]
    NonFinite {
        /// Index of the sample.
        index: usize,
    },
    /// The FFT refused its buffers (an internal invariant; not expected).
    #[error("FFT failed: {0}")]
    Fft(String),
}
