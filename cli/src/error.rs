//! Everything a command can fail with, each cause kept as its own typed error.

use std::path::PathBuf;

use tessel_kernels::IsaError;
use tessel_model::load::ct2::Ct2Error;
use tessel_model::{ConfigError, LoadError, RunError, SessionError};
use tessel_numbers::NumbersError;
use thiserror::Error;

/// Why a command failed.
#[derive(Debug, Error)]
pub enum CliError {
    /// `tessel transcribe` failed (model directory, audio, options or a model call).
    #[error(transparent)]
    Transcribe(#[from] tessel_pipeline::transcribe::TranscribeError),
    /// The voice activity detector could not be found, loaded or run.
    #[error("--vad: {0}")]
    Vad(#[from] tessel_vad::VadError),
    /// The audio file could not be read.
    #[error("{0}")]
    Audio(#[from] tessel_audio::AudioError),
    /// `TESSEL_ISA` names an unknown level or one this CPU lacks.
    #[error("TESSEL_ISA: {0}")]
    Isa(#[from] IsaError),
    /// A file given on the command line could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A config file is invalid.
    #[error("{path}: {source}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: ConfigError,
    },
    /// No arena can be planned for this config and these limits.
    #[error("cannot plan the arena: {0}")]
    Plan(ConfigError),
    /// A tessel model could not be built.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A model could not be packed, or a packed image could not be loaded.
    #[error(transparent)]
    Pack(#[from] tessel_model::load::image::PackError),
    /// A CTranslate2 model could not be loaded.
    #[error(transparent)]
    Ct2(#[from] Ct2Error),
    /// The session could not be set up.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Encoding or search failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The embedded model could not be set up.
    #[error(transparent)]
    Numbers(#[from] NumbersError),
    /// The embedded model refused a text or failed on it.
    #[error("{text:?}: {source}")]
    Reading {
        /// The text.
        text: String,
        /// Why.
        source: NumbersError,
    },
    /// `tessel translate` failed: the model directory, the tokenizer or a translation.
    #[error(transparent)]
    Translate(#[from] tessel_pipeline::TranslateError),
    /// Options that cannot be used together.
    #[error("{0}")]
    BadOption(&'static str),
    /// Option values that contradict each other or the model.
    #[error("{0}")]
    Invalid(String),
    /// A model directory's tokenizer does not fit its model.
    #[error(transparent)]
    ModelDir(#[from] tessel_pipeline::model_dir::ModelDirError),
    /// A model path could not be told apart, a file in it is damaged, or its model could not
    /// be loaded.
    #[error(transparent)]
    Open(#[from] tessel_model::OpenError),
    /// The model directory holds another kind of model than the command needs.
    #[error("{} is {what}; `{command}` needs {needs}", dir.display())]
    WrongModel {
        /// The directory.
        dir: PathBuf,
        /// What it holds.
        what: String,
        /// The command.
        command: &'static str,
        /// What the command needs.
        needs: &'static str,
    },
    /// The input file cannot be read.
    #[error("cannot read the input file {}: {source}", path.display())]
    InputFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The sessions' arenas would not fit in the memory available.
    #[error(
        "{sessions} sessions of {bytes_each} bytes each need {} bytes ({:.2} GB), more than \
         the {available} bytes available ({:.2} GB, MemAvailable): use fewer --threads or a \
         smaller --beam",
        *bytes_each as u128 * *sessions as u128,
        *bytes_each as f64 * *sessions as f64 / 1e9,
        *available as f64 / 1e9
    )]
    TooLittleMemory {
        /// One session's arena.
        bytes_each: usize,
        /// Sessions asked for.
        sessions: usize,
        /// Bytes available.
        available: u64,
    },
    /// Some input lines could not be translated (each reported as it came).
    #[error("{failed} of {total} inputs failed (each named above); the others were translated")]
    LinesFailed {
        /// Lines that failed.
        failed: usize,
        /// Lines read.
        total: usize,
    },
    /// A translating thread could not be started.
    #[error("cannot start a translating thread: {0}")]
    ThreadSpawn(std::io::Error),
    /// A translating thread panicked (an internal error).
    #[error("a translating thread stopped unexpectedly")]
    WorkerPanicked,
    /// The report could not be written (for instance a closed pipe).
    #[error("writing the output: {0}")]
    Write(#[from] std::io::Error),
}
