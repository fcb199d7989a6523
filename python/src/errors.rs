//! The exceptions of `tessel`: `tessel.Error`, and under it `LoadError` (a model directory
//! that cannot be loaded), `InputError` (what the caller passed: options, audio, tokens,
//! language codes, lengths over the limits), `UnsupportedError` (an `InputError`: an argument
//! of the reference API that tessel does not implement yet) and `RunError` (a model call that
//! failed). Each carries the typed Rust error's message.

use pyo3::exceptions::PyException;
use pyo3::PyErr;
use tessel_pipeline::transcribe::{TranscribeError, VadError};
use tessel_pipeline::TranslateError;
use tessel_text::TextError;

pyo3::create_exception!(_tessel, Error, PyException, "Every error tessel raises.");
pyo3::create_exception!(
    _tessel,
    LoadError,
    Error,
    "A model directory that cannot be loaded (missing, malformed, unsupported)."
);
pyo3::create_exception!(
    _tessel,
    InputError,
    Error,
    "An input or option the model refuses (the message says which and why)."
);
pyo3::create_exception!(
    _tessel,
    UnsupportedError,
    InputError,
    "An argument of the reference API that tessel does not implement yet."
);
pyo3::create_exception!(_tessel, RunError, Error, "A model call that failed.");

/// A model directory that cannot be loaded.
pub fn load(error: impl std::fmt::Display) -> PyErr {
    LoadError::new_err(error.to_string())
}

/// A caller-side failure.
pub fn input(error: impl std::fmt::Display) -> PyErr {
    InputError::new_err(error.to_string())
}

/// A failed model call or a thread that could not start.
pub fn run(error: impl std::fmt::Display) -> PyErr {
    RunError::new_err(error.to_string())
}

/// An argument of the reference API that tessel does not implement yet, given a value other
/// than its default.
pub fn unsupported(name: &str, why: &str) -> PyErr {
    UnsupportedError::new_err(format!("tessel does not support {name} yet ({why})"))
}

/// A translation error as the exception its cause calls for.
pub fn translate(error: TranslateError) -> PyErr {
    match error {
        TranslateError::Tokenizer(TextError::UnknownId { .. }) => run(error),
        TranslateError::Tokenizer(_)
        | TranslateError::SourceTooLong { .. }
        | TranslateError::Run(_) => input(error),
        TranslateError::ModelDir(_) | TranslateError::NotTextModel(_) => load(error),
        TranslateError::Session(_) => run(error),
    }
}

/// A transcription error as the exception its cause calls for.
pub fn transcribe(error: TranscribeError) -> PyErr {
    match error {
        TranscribeError::Text(TextError::UnknownId { .. })
        | TranscribeError::Run(_)
        | TranscribeError::Session(_)
        | TranscribeError::Stopped => run(error),
        TranscribeError::Text(_)
        | TranscribeError::Audio(_)
        | TranscribeError::Mel(_)
        | TranscribeError::EmptyAudio
        | TranscribeError::BadOption(_) => input(error),
        TranscribeError::ModelDir { .. }
        | TranscribeError::Open(_)
        | TranscribeError::NotWhisper(_)
        | TranscribeError::Load(_)
        | TranscribeError::Ct2(_) => load(error),
        TranscribeError::Vad(VadError::SampleRate(_) | VadError::InvalidArgument(_)) => {
            input(error)
        }
        TranscribeError::Vad(VadError::Kernel(_)) => run(error),
        TranscribeError::Vad(_) => load(error),
    }
}
