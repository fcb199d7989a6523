//! A model directory, whatever made it: the [`Model`], its [`TextTokenizer`] and its decoding
//! defaults ([`Generation`]), loaded by [`ModelDir::load`].
//!
//! Detection: a directory holding `model.bin` is a CTranslate2 conversion (loaded by
//! [`tessel_model::ct2::load_dir`]); otherwise `config.json`'s `model_type` picks the Hugging
//! Face family: `marian`, `bart`, `mbart`, `m2m_100` (M2M100 and NLLB), `t5`, `mt5` and
//! `whisper`; any other type (`nllb-moe`, a mixture of experts, among them) is
//! [`ModelDirError::UnknownModelType`].
//! The tokenizer comes from the same directory (CTranslate2 conversions need the tokenizer
//! files copied next to `model.bin`, as `ct2-transformers-converter --copy_files` does), and
//! its ids must be the model's: a CTranslate2 vocabulary that disagrees with the tokenizer is
//! a typed error. Decoding defaults come from `generation_config.json`, else from the same keys
//! in `config.json` (older checkpoints), else `transformers`' defaults.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tessel_model::families::{bart, t5, whisper};
use tessel_model::{ct2, Generation, GenerationError, LoadError, LoadOptions, Model, WeightType};
use tessel_text::{TextError, TextTokenizer};
use thiserror::Error;

/// What kind of directory was loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A Hugging Face directory of this `model_type` family.
    HuggingFace(HfFamily),
    /// A CTranslate2 conversion (`model.bin`).
    CTranslate2,
}

/// The Hugging Face families tessel loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HfFamily {
    /// `marian`.
    Marian,
    /// `bart`.
    Bart,
    /// `mbart`.
    MBart,
    /// `m2m_100` (M2M100 and NLLB).
    M2m100,
    /// `t5` and `mt5`.
    T5,
    /// `whisper`.
    Whisper,
}

/// The `model_type`s [`ModelDir::load`] reads, for messages.
pub const SUPPORTED_MODEL_TYPES: &str =
    "marian, bart, mbart, m2m_100 (M2M100, NLLB), t5, mt5, whisper";

impl HfFamily {
    /// The family of a `config.json` `model_type`.
    pub fn from_model_type(model_type: &str) -> Option<HfFamily> {
        Some(match model_type {
            "marian" => HfFamily::Marian,
            "bart" => HfFamily::Bart,
            "mbart" => HfFamily::MBart,
            "m2m_100" => HfFamily::M2m100,
            "t5" | "mt5" => HfFamily::T5,
            "whisper" => HfFamily::Whisper,
            _ => return None,
        })
    }
}

/// Why a model directory could not be loaded. Each names what is missing or wrong.
#[derive(Debug, Error)]
pub enum ModelDirError {
    /// The path is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
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
        "model_type `{model_type}` in {path} is not supported (supported: {SUPPORTED_MODEL_TYPES})"
    )]
    UnknownModelType {
        /// The `model_type` found (empty when the key is absent).
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
    /// The weights could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The CTranslate2 model could not be loaded.
    #[error(transparent)]
    Ct2(#[from] ct2::Ct2Error),
    /// The tokenizer could not be loaded.
    #[error(transparent)]
    Tokenizer(#[from] TextError),
    /// The generation config is invalid.
    #[error(transparent)]
    Generation(#[from] GenerationError),
    /// The CTranslate2 vocabulary and the tokenizer give a token different ids.
    #[error("token {token:?} is id {model} in the CTranslate2 vocabulary but {tokenizer:?} in the tokenizer")]
    VocabularyMismatch {
        /// The token.
        token: String,
        /// Its id in the model's vocabulary.
        model: u32,
        /// Its id in the tokenizer (`None`: absent).
        tokenizer: Option<u32>,
    },
}

/// What to plan the model for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSettings {
    /// Widest beam sessions may use.
    pub max_beam: usize,
    /// Longest source and target for models without a position table (T5) or a stored
    /// length (CTranslate2).
    pub max_len: usize,
    /// Storage of the linear layers (`None`: as stored).
    pub weights: Option<WeightType>,
}

impl Default for LoadSettings {
    fn default() -> LoadSettings {
        LoadSettings {
            max_beam: 4,
            max_len: 512,
            weights: None,
        }
    }
}

/// A loaded model directory.
pub struct ModelDir {
    /// The model, shared by sessions.
    pub model: Model<'static>,
    /// The directory's tokenizer.
    pub tokenizer: TextTokenizer,
    /// Decoding defaults.
    pub generation: Generation,
    /// What was detected.
    pub kind: Kind,
}

fn read_json(path: &Path) -> Result<Option<Value>, ModelDirError> {
    if !path.is_file() {
        return Ok(None);
    }
    let bad = |reason: String| ModelDirError::Json {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

fn require(dir: &Path, name: &str, needs: &'static str) -> Result<(), ModelDirError> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(())
    } else {
        Err(ModelDirError::MissingFile { path, needs })
    }
}

/// The decoding defaults: `generation_config.json`, else `config.json`'s keys.
fn generation(dir: &Path, config: Option<&Value>) -> Result<Generation, ModelDirError> {
    let empty = Value::Object(Default::default());
    match read_json(&dir.join("generation_config.json"))? {
        Some(v) => Ok(Generation::from_value(&v)?),
        None => Ok(Generation::from_value(config.unwrap_or(&empty))?),
    }
}

/// The decoding defaults of the model directory `dir` ([`ModelDir::generation`]) without
/// loading its weights: what a host reads to plan its sessions (the beam) before loading.
pub fn generation_defaults(dir: &Path) -> Result<Generation, ModelDirError> {
    if ct2::is_ct2_dir(dir) {
        return generation(dir, None);
    }
    let config = read_json(&dir.join("config.json"))?;
    generation(dir, config.as_ref())
}

impl ModelDir {
    /// Loads a Hugging Face or CTranslate2 model directory.
    pub fn load(dir: &Path, settings: LoadSettings) -> Result<ModelDir, ModelDirError> {
        if !dir.is_dir() {
            return Err(ModelDirError::NotADirectory(dir.to_owned()));
        }
        if ct2::is_ct2_dir(dir) {
            return ModelDir::load_ct2(dir, settings);
        }
        let config_path = dir.join("config.json");
        let config = read_json(&config_path)?.ok_or_else(|| ModelDirError::MissingFile {
            path: config_path.clone(),
            needs: "a Hugging Face directory has config.json; a CTranslate2 one has model.bin",
        })?;
        let model_type = config
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("");
        let family = HfFamily::from_model_type(model_type).ok_or_else(|| {
            ModelDirError::UnknownModelType {
                model_type: model_type.to_owned(),
                path: config_path.clone(),
            }
        })?;
        require(dir, "model.safetensors", "the weights, as safetensors")?;
        let options = LoadOptions {
            weights: settings.weights,
        };
        let model = match family {
            HfFamily::T5 => t5::load_hf_dir(dir, settings.max_len, settings.max_beam, &options)?,
            HfFamily::Whisper => whisper::load_hf_dir(dir, settings.max_beam, &options)?,
            _ => bart::load_hf_dir(dir, settings.max_beam, &options)?.1,
        };
        let tokenizer = TextTokenizer::from_dir(dir)?;
        let generation = generation(dir, Some(&config))?;
        Ok(ModelDir {
            model,
            tokenizer,
            generation,
            kind: Kind::HuggingFace(family),
        })
    }

    fn load_ct2(dir: &Path, settings: LoadSettings) -> Result<ModelDir, ModelDirError> {
        let loaded = ct2::load_dir(
            dir,
            ct2::Ct2Options {
                max_src_len: settings.max_len,
                max_tgt_len: settings.max_len,
                max_beam: settings.max_beam,
                weights: settings.weights,
            },
        )?;
        let tokenizer = TextTokenizer::from_dir(dir)?;
        let vocabulary = &loaded.target_vocabulary;
        for id in 0..vocabulary.len() as u32 {
            let token = vocabulary.token(id).unwrap_or_default();
            let found = tokenizer.token_to_id(token);
            if found != Some(id) {
                return Err(ModelDirError::VocabularyMismatch {
                    token: token.to_owned(),
                    model: id,
                    tokenizer: found,
                });
            }
        }
        let mut generation = generation(dir, None)?;
        // CTranslate2 keeps the start token in its own config, already the model's `bos_id`.
        generation.options.decoder_start = None;
        Ok(ModelDir {
            model: loaded.model,
            tokenizer,
            generation,
            kind: Kind::CTranslate2,
        })
    }
}
