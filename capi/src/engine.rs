//! Everything the C API takes from the engine's construction side, in one place: loading a
//! model from a directory (the format detected), the embedded numbers model, the arena size
//! for given limits, and creating a session that holds its model through the C handle.
//!
//! Directory detection, in order: `model.bin` is a CTranslate2 directory; a `config.json`
//! with a `model_type` is a Hugging Face directory (`whisper`, `t5`/`mt5`, and the BART family
//! for every other type, whose loader names the types it reads); a `config.json` without one
//! is tessel's own `nn.Transformer` layout. A `vocab.json` in the numbers model's format is
//! attached as the model's text vocabulary.

use std::path::Path;
use std::sync::Arc;

use tessel_cli::numbers::{Numbers, Vocab};
use tessel_kernels::Isa;
use tessel_model::ct2::{self, Ct2Options};
use tessel_model::families::{bart, t5, whisper};
use tessel_model::session::ModelRef;
use tessel_model::{ArenaPlan, Limits, LoadOptions, Model, Session, SessionError, WeightType};

use crate::model::ModelHandle;
use crate::status::{tessel_status, Error};

/// How a directory's model is loaded.
#[derive(Clone, Copy, Debug)]
pub struct LoadSettings {
    /// Widest beam (formats whose config does not state it).
    pub max_beam: usize,
    /// Longest source and target (formats whose config does not state it).
    pub max_len: usize,
    /// Linear weight storage, or `None` for the stored type.
    pub weights: Option<WeightType>,
}

/// A loaded model and, when its directory has one, its text vocabulary.
pub struct Loaded {
    /// The model.
    pub model: Model<'static>,
    /// The numbers-format vocabulary.
    pub vocab: Option<Vocab>,
}

fn load_error(error: impl std::fmt::Display + Send + 'static) -> Error {
    Error::boxed(tessel_status::TESSEL_ERR_LOAD, error)
}

/// The `model_type` of a Hugging Face `config.json`, `None` for tessel's own config.
fn model_type(config_json: &str) -> Result<Option<String>, Error> {
    let value: serde_json::Value = serde_json::from_str(config_json).map_err(load_error)?;
    Ok(value
        .get("model_type")
        .and_then(|t| t.as_str())
        .map(str::to_owned))
}

/// Loads the model in `dir`, detecting its format as the module says.
pub fn load_dir(dir: &Path, settings: LoadSettings) -> Result<Loaded, Error> {
    let options = LoadOptions {
        weights: settings.weights,
    };
    let model = if ct2::is_ct2_dir(dir) {
        let options = Ct2Options {
            max_src_len: settings.max_len,
            max_tgt_len: settings.max_len,
            max_beam: settings.max_beam,
            weights: settings.weights,
        };
        ct2::load_dir(dir, options).map_err(load_error)?.model
    } else {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| load_error(format!("{}: {e}", path.display())))?;
        match model_type(&text)?.as_deref() {
            None => Model::load_dir_with(dir, &options).map_err(load_error)?,
            Some("whisper") => {
                whisper::load_hf_dir(dir, settings.max_beam, &options).map_err(load_error)?
            }
            Some("t5" | "mt5") => {
                t5::load_hf_dir(dir, settings.max_len, settings.max_beam, &options)
                    .map_err(load_error)?
            }
            Some(_) => {
                bart::load_hf_dir(dir, settings.max_beam, &options)
                    .map_err(load_error)?
                    .1
            }
        }
    };
    let vocab = match std::fs::read_to_string(dir.join("vocab.json")) {
        Ok(text) => Vocab::from_json(&text, model.config()).ok(),
        Err(_) => None,
    };
    Ok(Loaded { model, vocab })
}

/// The numbers model compiled into the library, with its vocabulary.
pub fn numbers() -> Result<Loaded, Error> {
    let (model, vocab) = Numbers::embedded().map_err(load_error)?.into_parts();
    Ok(Loaded {
        model,
        vocab: Some(vocab),
    })
}

/// A session's hold on its model: the C handle's reference count keeps the model alive.
pub struct SharedModel(pub Arc<ModelHandle>);

impl ModelRef for SharedModel {
    fn model(&self) -> &Model<'_> {
        &self.0.model
    }
}

/// The session type behind a `tessel_session`.
pub type EngineSession = Session<SharedModel>;

/// The arena bytes a session over `model` with `limits` allocates.
pub fn arena_bytes(model: &Model, limits: Limits) -> Result<usize, Error> {
    ArenaPlan::with_limits(model.config(), limits)
        .map(|plan| plan.total_bytes())
        .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))
}

/// A session over `model` at `isa` planned for `limits`: the arena's one allocation.
pub fn new_session(
    model: Arc<ModelHandle>,
    isa: Isa,
    limits: Limits,
) -> Result<EngineSession, Error> {
    Session::with_limits(SharedModel(model), isa, limits).map_err(|e| {
        let status = match e {
            SessionError::OutOfMemory { .. } => tessel_status::TESSEL_ERR_OUT_OF_MEMORY,
            SessionError::Limits(_)
            | SessionError::Threads(_)
            | SessionError::BufferTooSmall { .. } => tessel_status::TESSEL_ERR_ARGUMENT,
        };
        Error::boxed(status, e)
    })
}
