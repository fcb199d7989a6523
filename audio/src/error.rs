//! The typed errors of the audio front end.

/// What the WAV reader supports, quoted by the errors that refuse a file.
pub(crate) const SUPPORTED: &str = "WAV (RIFF/WAVE) files with 8/16/24/32-bit integer PCM or \
     32-bit IEEE float samples, any number of channels";

/// Why an audio file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AudioError {
    /// The file could not be opened or read (not a format problem).
    #[error("cannot read the audio file: {0}")]
    Io(#[source] std::io::Error),
    /// Not a WAV file; `found` names the container when it is recognised.
    #[error("{found} files are not supported: tessel reads {SUPPORTED}")]
    UnsupportedContainer {
        /// The recognised container (e.g. "MP3", "FLAC"), or "unknown".
        found: &'static str,
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
    /// The data chunk ends before the samples its header announces.
    #[error(
        "truncated WAV file: the header announces {expected} samples, the data ends after {read}"
    )]
    Truncated {
        /// Samples (all channels) announced by the data chunk's length.
        expected: u64,
        /// Samples read before the end of the data.
        read: u64,
    },
    /// The file holds no sample.
    #[error("the audio is empty (the WAV file holds no samples)")]
    Empty,
    /// Longer than [`ReadOptions::max_seconds`](crate::ReadOptions::max_seconds).
    #[error("the audio lasts {seconds:.1} s, more than the maximum of {max_seconds} s")]
    TooLong {
        /// The duration the header announces, in seconds.
        seconds: f64,
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
