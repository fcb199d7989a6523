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
//!
//! [`peek`] tells what a directory holds (format, family, text or speech) from its small files
//! alone, so a command can refuse the wrong kind of model, or a truncated weights file
//! ([`check_safetensors`]), before loading anything.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tessel_model::families::{bart, t5, whisper};
use tessel_model::{ct2, Generation, GenerationError, LoadError, LoadOptions, Model, WeightType};
use tessel_text::{Family, TextError, TextTokenizer};
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

/// The family a Hugging Face directory's `config.json` names, and the parsed file.
fn hf_config(dir: &Path) -> Result<(HfFamily, Value), ModelDirError> {
    let path = dir.join("config.json");
    let config = read_json(&path)?.ok_or_else(|| ModelDirError::MissingFile {
        path: path.clone(),
        needs: "a Hugging Face directory has config.json; a CTranslate2 one has model.bin",
    })?;
    let model_type = config
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    let family =
        HfFamily::from_model_type(model_type).ok_or_else(|| ModelDirError::UnknownModelType {
            model_type: model_type.to_owned(),
            path,
        })?;
    Ok((family, config))
}

/// The decoding defaults: `generation_config.json`, else `config.json`'s keys.
fn generation(dir: &Path, config: Option<&Value>) -> Result<Generation, ModelDirError> {
    let empty = Value::Object(Default::default());
    match read_json(&dir.join("generation_config.json"))? {
        Some(v) => Ok(Generation::from_value(&v)?),
        None => Ok(Generation::from_value(config.unwrap_or(&empty))?),
    }
}

/// Checks that a CTranslate2 vocabulary is the one `ct2-transformers-converter` writes for
/// this tokenizer: every token at the tokenizer's id, except the rows the converter adds past
/// the tokenizer's vocabulary to fill the embedding, which it names `<extra_id_N>` (T5) or
/// `madeupwordN` (M2M100), N counting from 0 at the first row past the vocabulary. Anything
/// else is [`ModelDirError::VocabularyMismatch`].
pub fn check_vocabulary(
    vocabulary: &ct2::Vocabulary,
    tokenizer: &TextTokenizer,
) -> Result<(), ModelDirError> {
    let size = tokenizer.vocab_size();
    for id in 0..vocabulary.len() {
        let token = vocabulary.token(id as u32).unwrap_or_default();
        let found = tokenizer.token_to_id(token);
        if found == Some(id as u32) || is_padding_row(tokenizer.family(), token, id, size) {
            continue;
        }
        return Err(ModelDirError::VocabularyMismatch {
            token: token.to_owned(),
            model: id as u32,
            tokenizer: found,
        });
    }
    Ok(())
}

/// Whether `token` at row `id` is the converter's name for a padding row of a vocabulary of
/// `size` tokens.
fn is_padding_row(family: Family, token: &str, id: usize, size: usize) -> bool {
    let Some(n) = id.checked_sub(size) else {
        return false;
    };
    let name = match family {
        Family::T5 => token
            .strip_prefix("<extra_id_")
            .and_then(|t| t.strip_suffix('>')),
        Family::M2m100 => token.strip_prefix("madeupword"),
        _ => None,
    };
    name.is_some_and(|digits| digits == n.to_string())
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
        let (family, config) = hf_config(dir)?;
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
        check_vocabulary(&loaded.target_vocabulary, &tokenizer)?;
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

/// What a model directory holds, told from its small files before any weight is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peeked {
    /// The directory's format (and family, for Hugging Face directories).
    pub kind: Kind,
    /// Whether the model reads audio (Whisper) rather than text.
    pub speech: bool,
}

impl Peeked {
    /// The model in words, for messages: "a BART translation model (Hugging Face)".
    pub fn describe(&self) -> String {
        let task = if self.speech {
            "speech recognition"
        } else {
            "translation"
        };
        match self.kind {
            Kind::HuggingFace(family) => {
                let name = match family {
                    HfFamily::Marian => "Marian",
                    HfFamily::Bart => "BART",
                    HfFamily::MBart => "mBART",
                    HfFamily::M2m100 => "M2M100/NLLB",
                    HfFamily::T5 => "T5",
                    HfFamily::Whisper => "Whisper",
                };
                format!("a {name} {task} model (Hugging Face)")
            }
            Kind::CTranslate2 if self.speech => {
                format!("a Whisper {task} model (CTranslate2)")
            }
            Kind::CTranslate2 => format!("a {task} model (CTranslate2)"),
        }
    }
}

/// Tells what `dir` holds from `config.json`'s `model_type` (Hugging Face) or the spec name at
/// the start of `model.bin` (CTranslate2), without reading the weights; a Hugging Face
/// directory's `model.safetensors` is also checked to be whole ([`check_safetensors`]).
pub fn peek(dir: &Path) -> Result<Peeked, ModelDirError> {
    if !dir.is_dir() {
        return Err(ModelDirError::NotADirectory(dir.to_owned()));
    }
    if ct2::is_ct2_dir(dir) {
        let spec = ct2_spec(&dir.join("model.bin"))?;
        return Ok(Peeked {
            kind: Kind::CTranslate2,
            speech: spec == "WhisperSpec",
        });
    }
    let (family, _) = hf_config(dir)?;
    let weights = dir.join("model.safetensors");
    if weights.is_file() {
        check_safetensors(&weights)?;
    }
    Ok(Peeked {
        kind: Kind::HuggingFace(family),
        speech: family == HfFamily::Whisper,
    })
}

/// The spec name a CTranslate2 `model.bin` starts with (binary version 2 on; version 1 files
/// hold a `TransformerSpec` and no name).
fn ct2_spec(path: &Path) -> Result<String, ModelDirError> {
    use std::io::Read;
    let io = |source| ModelDirError::Read {
        path: path.to_owned(),
        source,
    };
    let truncated = |detail: &str| ModelDirError::Truncated {
        path: path.to_owned(),
        detail: detail.to_owned(),
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 6];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    if got < 4 {
        return Err(truncated("it ends inside its binary version"));
    }
    let version = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if version < 2 {
        return Ok("TransformerSpec".to_owned());
    }
    if got < 6 {
        return Err(truncated("it ends inside its spec name"));
    }
    let len = u16::from_le_bytes([head[4], head[5]]);
    let mut name = Vec::with_capacity(usize::from(len));
    file.take(u64::from(len))
        .read_to_end(&mut name)
        .map_err(io)?;
    if name.len() < usize::from(len) {
        return Err(truncated("it ends inside its spec name"));
    }
    Ok(String::from_utf8_lossy(name.strip_suffix(&[0]).unwrap_or(&name)).into_owned())
}

/// The largest header a safetensors reader accepts (the `safetensors` crate's limit): a
/// larger declared length is a malformed file, left to the loader to report.
const MAX_SAFETENSORS_HEADER: u64 = 100_000_000;

/// Checks that a safetensors file holds every byte its header describes: the 8-byte header
/// length, the header, and the data up to the last tensor's end. A shorter file is
/// [`ModelDirError::Truncated`]; anything else wrong is left to the loader.
pub fn check_safetensors(path: &Path) -> Result<(), ModelDirError> {
    use std::io::Read;
    let io = |source| ModelDirError::Read {
        path: path.to_owned(),
        source,
    };
    let truncated = |detail: String| {
        Err(ModelDirError::Truncated {
            path: path.to_owned(),
            detail,
        })
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len < 8 {
        return truncated(format!("{len} bytes, less than its 8-byte header length"));
    }
    let mut size = [0u8; 8];
    file.read_exact(&mut size).map_err(io)?;
    let header = u64::from_le_bytes(size);
    if header > MAX_SAFETENSORS_HEADER {
        return Ok(());
    }
    if 8 + header > len {
        return truncated(format!(
            "{len} bytes, but its header alone declares {}",
            8 + header
        ));
    }
    let mut text = Vec::with_capacity(header as usize);
    file.take(header).read_to_end(&mut text).map_err(io)?;
    let Ok(Value::Object(tensors)) = serde_json::from_slice::<Value>(&text) else {
        return Ok(());
    };
    let data_end = tensors
        .values()
        .filter_map(|t| t.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    let needed = (8 + header).saturating_add(data_end);
    if needed > len {
        return truncated(format!(
            "{len} bytes, but its header describes {needed} (tensor data is missing)"
        ));
    }
    Ok(())
}
