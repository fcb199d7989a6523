//! Whisper's audio front end, as the reference implementation (`openai-whisper`'s
//! `whisper.audio`) defines it:
//!
//! 1. [`read_wav`] / [`load_wav`] decode a WAV file (8/16/24/32-bit integer PCM or 32/64-bit
//!    float, any channel count, any rate in [`MIN_SAMPLE_RATE`]`..=`[`MAX_SAMPLE_RATE`]), mix
//!    the channels down to mono by averaging them, and resample to 16 kHz with a band-limited
//!    sinc resampler ([`resample`]), streaming: memory is the 16 kHz output (64 kB per second
//!    of audio) whatever the file's rate and channel count, bounded by
//!    [`ReadOptions::max_seconds`].
//! 2. [`MelFrontEnd`] turns 16 kHz samples into whisper's log-mel spectrogram: n_fft 400, hop
//!    160, periodic Hann window, reflect-padded centred STFT, power spectrum without the last
//!    frame, the Slaney mel filterbank ([`filters`]), `log10(max(x, 1e-10))`, clamp at
//!    `max − 8`, `(x + 4) / 4`. Planned once; each call writes into the caller's buffer and
//!    allocates nothing.
//!
//! Every error is typed ([`AudioError`], [`MelError`]); no public function panics on any input.
//!
//! ```
//! use tessel_audio::{load_wav, segment, content_frames, MelFrontEnd, ReadOptions, N_FRAMES};
//!
//! let audio = load_wav("tests/fixtures/speech_22k_s16_stereo.wav".as_ref(), &ReadOptions::default())?;
//! let mut front = MelFrontEnd::new(80)?;                 // plans the FFT, filters, scratch
//! // One 30 s window, as `log_mel_spectrogram(pad_or_trim(audio))`:
//! let mut window = vec![0.0f32; front.window_len()];     // [80][3000]
//! front.window(&audio.samples, &mut window)?;
//! // Or whisper's transcribe path: the whole file's mel, then 30 s windows from it.
//! let frames = content_frames(audio.samples.len());
//! let mut mel = vec![0.0f32; 80 * frames];
//! front.spectrogram(&audio.samples, &mut mel)?;
//! segment(&mel, 80, 0, frames.min(N_FRAMES), &mut window)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub mod filters;
pub mod mel;
pub mod resample;
mod riff;
pub mod wav;

pub use error::{AudioError, MelError};
pub use mel::{content_frames, segment, MelFrontEnd};
pub use wav::{load_wav, read_wav, ReadOptions, WavAudio, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE};

/// The sample rate whisper's model takes, in Hz.
pub const SAMPLE_RATE: u32 = 16_000;
/// The STFT's frame length (and FFT size) in samples.
pub const N_FFT: usize = 400;
/// The STFT's hop in samples (10 ms).
pub const HOP_LENGTH: usize = 160;
/// Samples in one 30 s window.
pub const N_SAMPLES: usize = 30 * SAMPLE_RATE as usize;
/// Mel frames in one 30 s window.
pub const N_FRAMES: usize = N_SAMPLES / HOP_LENGTH;
/// Frequency bins of the one-sided spectrum (`N_FFT / 2 + 1`).
pub const N_FREQS: usize = N_FFT / 2 + 1;
