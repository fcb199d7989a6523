//! tessel-vad: Silero VAD v6 (the voice activity detector faster-whisper ships) run natively,
//! with no ONNX runtime.
//!
//! - [`onnx`]: a small reader over the ONNX protobuf (`prost` messages declared by hand);
//! - [`silero`]: the model's 16 kHz graph, checked node by node, and its weights;
//! - [`Vad`] and [`VadState`]: the forward pass on tessel's kernels, allocation-free after
//!   creation: stream 512-sample windows, or [`Vad::speech_probabilities`] over a whole clip;
//! - [`locate`]: finding the model file (`silero_vad_v6.onnx`).

pub mod error;
pub mod locate;
mod model;
pub mod onnx;
pub mod silero;

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
