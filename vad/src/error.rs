//! The crate's one error type.

use std::path::PathBuf;

use tessel_kernels::KernelError;

/// Everything that can go wrong reading a VAD model or running it.
#[derive(Debug, thiserror::Error)]
pub enum VadError {
    /// The model file could not be read.
    #[error("cannot read the VAD model {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are not an ONNX protobuf.
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// A tensor of the file is malformed or of an unexpected type.
    #[error("ONNX tensor `{name}`: {reason}")]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The graph is not Silero VAD v6's 16 kHz graph as this crate implements it.
    #[error("not the Silero VAD v6 graph tessel runs: {0}")]
    Graph(String),
    /// Only 16 kHz audio is supported.
    #[error("Silero VAD runs at 16000 Hz in tessel, not {0} Hz (resample first)")]
    SampleRate(u32),
    /// A call's arguments are inconsistent (a window of the wrong length, a short buffer).
    #[error("invalid VAD call: {0}")]
    InvalidArgument(&'static str),
    /// A kernel refused its arguments (a bug: the shapes are fixed at creation).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}
