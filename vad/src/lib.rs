//! tessel-vad: Silero VAD v6 (the voice activity detector faster-whisper ships) run natively,
//! with no ONNX runtime.
//!
//! - [`onnx`]: a small reader over the ONNX protobuf (`prost` messages declared by hand);
//! - [`silero`]: the model's 16 kHz graph, checked node by node, and its weights.

pub mod error;
pub mod onnx;
pub mod silero;

pub use error::VadError;
pub use silero::{CONTEXT, WINDOW};
