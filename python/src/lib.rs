//! The extension module `tessel._tessel` of the Python package `tessel` (python/tessel holds
//! its Python side): [`Translator`](translator::Translator), CTranslate2's `Translator` API
//! over batched sessions, and [`WhisperModel`](whisper::WhisperModel), faster-whisper's API
//! over transcription sessions (with [`BatchedPipeline`](batched::BatchedPipeline),
//! faster-whisper's `BatchedInferencePipeline` over batched ones), and
//! [`Model`](session::Model) with its [`Session`](session::Session), the token-level Rust
//! API. Every model call runs with the GIL released; the model is shared, each call takes a
//! session of its own from a pool (sessions are planned once, their arenas reused by every
//! later call of the same shape).

use pyo3::prelude::*;

mod batched;
mod errors;
mod pool;
mod session;
mod settings;
mod translator;
mod whisper;

/// The module: its classes, its exception and what the CPU runs.
#[pymodule]
fn _tessel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<translator::Translator>()?;
    m.add_class::<translator::TranslationResult>()?;
    m.add_class::<translator::ScoringResult>()?;
    m.add_class::<translator::AsyncTranslationResult>()?;
    m.add_class::<translator::GenerationStepResult>()?;
    m.add_class::<translator::TokenStream>()?;
    m.add_class::<session::Model>()?;
    m.add_class::<session::Session>()?;
    m.add_class::<session::ArenaView>()?;
    m.add_class::<whisper::WhisperModel>()?;
    m.add_class::<whisper::SegmentStream>()?;
    m.add_class::<batched::BatchedPipeline>()?;
    let py = m.py();
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("LoadError", py.get_type::<errors::LoadError>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    m.add(
        "UnsupportedError",
        py.get_type::<errors::UnsupportedError>(),
    )?;
    m.add("RunError", py.get_type::<errors::RunError>())?;
    m.add_function(wrap_pyfunction!(isa, m)?)?;
    Ok(())
}

/// The instruction set the kernels run at: the best the CPU has, or `TESSEL_ISA`'s.
#[pyfunction]
fn isa() -> PyResult<String> {
    Ok(settings::isa()?.to_string())
}
