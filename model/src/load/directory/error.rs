//! Why a model path could not be opened or loaded; each variant names the file and what is
//! wrong with it.

use std::path::PathBuf;

use thiserror::Error;

use crate::generation::GenerationError;
use crate::load::ct2::Ct2Error;
use crate::load::image::PackError;
use crate::load::LoadError;

use super::registry::supported_model_types;

/// Why a model path could not be opened or loaded.
#[derive(Debug, Error)]
pub enum OpenError {
    /// Nothing is at the path.
    #[error("{0}: no such file or directory")]
    NotFound(PathBuf),
    /// The path is a file that is not a packed tessel image.
    #[error("{0} is neither a model directory nor a packed tessel image")]
    NotAModel(PathBuf),
    /// A file the directory needs is not there.
    #[error("{path} is missing ({needs})")]
    MissingFile {
        /// The file.
        path: PathBuf,
        /// Why it is needed.
        needs: &'static str,
    },
    /// `config.json` names a model type tessel does not load.
    #[error(
        "model_type `{model_type}` in {path} is not supported (supported: {})",
        supported_model_types()
    )]
    UnknownModelType {
        /// The `model_type` found.
        model_type: String,
        /// The `config.json`.
        path: PathBuf,
    },
    /// A JSON file could not be read or parsed.
    #[error("{path}: {reason}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file ends before what its own header describes.
    #[error("{path} is truncated: {detail}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// How much it holds and how much it should.
        detail: String,
    },
    /// A packed image was asked for another weight type than it holds.
    #[error("{0}: a packed image keeps the weight types it was packed with; pack it again with the weight type wanted")]
    ImageWeights(PathBuf),
    /// The weights could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The CTranslate2 model could not be loaded.
    #[error(transparent)]
    Ct2(#[from] Ct2Error),
    /// The packed image could not be loaded.
    #[error(transparent)]
    Image(#[from] PackError),
    /// The generation config is invalid.
    #[error(transparent)]
    Generation(#[from] GenerationError),
}
