//! Finding `silero_vad_v6.onnx`: a path the caller gives, else the copy the `faster-whisper`
//! Python package ships in `faster_whisper/assets/`, located by asking `python3` (then
//! `python`) where the package is, without importing it.
//!
//! The `silero-vad` package's `silero_vad.onnx` is another export (one graph for 8 and
//! 16 kHz, a combined state input) and is refused by [`crate::silero`], so it is not searched.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::VadError;

/// The model's file name.
pub const MODEL_FILE: &str = "silero_vad_v6.onnx";

/// Prints the directory of the `faster_whisper` package, or nothing.
const FIND_PACKAGE: &str = "import importlib.util as u; s = u.find_spec('faster_whisper'); \
print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";

/// `explicit` when given (it must be a file), else faster-whisper's copy. The error names
/// what was tried and the `--vad-model` option.
pub fn find_model(explicit: Option<&Path>) -> Result<PathBuf, VadError> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path.to_path_buf());
        }
        return Err(VadError::NotFound(format!(
            "{} is not a file",
            path.display()
        )));
    }
    let mut tried = Vec::new();
    for python in ["python3", "python"] {
        match Command::new(python).args(["-c", FIND_PACKAGE]).output() {
            Ok(output) if output.status.success() => {
                let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
                if dir.is_empty() {
                    tried.push(format!("{python} has no faster_whisper package"));
                    continue;
                }
                let path = Path::new(&dir).join("assets").join(MODEL_FILE);
                if path.is_file() {
                    return Ok(path);
                }
                tried.push(format!("{} does not exist", path.display()));
            }
            Ok(_) => tried.push(format!("{python} failed")),
            Err(e) => tried.push(format!("{python}: {e}")),
        }
    }
    Err(VadError::NotFound(tried.join("; ")))
}
