//! The model: Silero VAD v6 as faster-whisper ships it (`assets/silero_vad_v6.onnx`, MIT; see
//! its README there), built into the library, or a file the caller names.
//!
//! The `silero-vad` package's `silero_vad.onnx` is another export (one graph for 8 and
//! 16 kHz, a combined state input) and is refused by [`crate::silero`].

use std::path::Path;

use crate::error::VadError;
use crate::model::Vad;

/// The model's file name.
pub const MODEL_FILE: &str = "silero_vad_v6.onnx";

/// The bytes of `silero_vad_v6.onnx` (1 245 151 bytes, the `faster-whisper` 1.2.1 wheel's
/// `faster_whisper/assets/silero_vad_v6.onnx`, unchanged).
pub const BUILT_IN: &[u8] = include_bytes!("../../assets/silero_vad_v6.onnx");

/// The model in the file at `path` when given, else the built-in one.
pub fn open_model(path: Option<&Path>) -> Result<Vad, VadError> {
    match path {
        Some(path) => Vad::open(path),
        None => Vad::from_bytes(BUILT_IN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_model_is_the_v6_graph() {
        let vad = open_model(None).expect("the built-in model");
        let silence = vec![0.0f32; 16_000];
        let probabilities = vad.speech_probabilities(&silence).expect("probabilities");
        // Padded to whole windows, as faster-whisper pads.
        assert_eq!(probabilities.len(), 16_000usize.div_ceil(crate::WINDOW));
        assert!(probabilities.iter().all(|p| (0.0..0.5).contains(p)));
    }

    #[test]
    fn a_missing_file_is_named() {
        let missing = Path::new("/nonexistent/silero_vad_v6.onnx");
        let Err(error) = open_model(Some(missing)) else {
            panic!("a missing file opened")
        };
        assert!(error.to_string().contains("/nonexistent"), "{error}");
    }
}
