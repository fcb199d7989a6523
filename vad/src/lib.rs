//! tessel-vad: Silero VAD v6 (the voice activity detector faster-whisper ships) run natively,
//! with no ONNX runtime, and faster-whisper's speech timestamps over its probabilities.
//!
//! - [`onnx`]: a small reader over the ONNX protobuf (`prost` messages declared by hand);
//! - [`silero`]: the model's 16 kHz graph, checked node by node, and its weights;
//! - [`Vad`] and [`VadState`]: the forward pass on tessel's kernels, allocation-free after
//!   creation: stream 512-sample windows, or [`Vad::speech_probabilities`] over a whole clip;
//! - [`timestamps`]: faster-whisper's `VadOptions`, `get_speech_timestamps`, `collect_chunks`
//!   and `SpeechTimestampsMap`;
//! - [`locate`]: the model, built in (`silero_vad_v6.onnx`) or from a file.
//!
//! ```no_run
//! use tessel_vad::timestamps::{speech_timestamps, VadOptions};
//!
//! let vad = tessel_vad::locate::open_model(None)?;
//! let audio = vec![0.0f32; 16_000]; // 16 kHz mono
//! let probabilities = vad.speech_probabilities(&audio)?;
//! let speech = speech_timestamps(&probabilities, audio.len(), &VadOptions::default());
//! # Ok::<(), tessel_vad::VadError>(())
//! ```

pub mod error;
pub mod locate;
mod model;
pub mod onnx;
pub mod silero;
pub mod timestamps;

pub use error::VadError;
pub use model::{Vad, VadState, DEFAULT_BATCH};
pub use silero::{CONTEXT, WINDOW};

/// The only sample rate the model runs at.
pub const SAMPLE_RATE: u32 = 16_000;

/// Refuses any sample rate but 16 kHz ([`VadError::SampleRate`]): the 8 kHz branch of Silero
/// VAD is not in the model faster-whisper ships.
pub fn check_sample_rate(rate: u32) -> Result<(), VadError> {
    if rate == SAMPLE_RATE {
        Ok(())
    } else {
        Err(VadError::SampleRate(rate))
    }
}
