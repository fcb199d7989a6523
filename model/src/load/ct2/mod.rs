//! Loading CTranslate2 model directories (`model.bin`, `config.json`, vocabularies) into a
//! tessel [`Model`].
//!
//! Supported: the `TransformerSpec` encoder-decoder (binary versions 1 to 6) as
//! `ct2-transformers-converter` writes it for Marian (OPUS-MT), BART, mBART, M2M100/NLLB and
//! T5/mT5/Flan-T5, and as OpenNMT writes it: pre- or post-norm, LayerNorm or RMSNorm, ReLU /
//! GELU / tanh-GELU / swish, plain or gated feed-forward, shared or separate embeddings, tied
//! or separate output projection, stored (learned or sinusoidal) position tables, CTranslate2's
//! own sinusoid, or T5's relative attention bias, a norm after the embeddings, a zero start
//! embedding, scaled decoder outputs, with or without biases; and the `WhisperSpec`. The
//! optional parts are found from the variables present, as CTranslate2 does (the `spec` module's
//! table). Linear weights stored as `float16`, `bfloat16` or `int8` stay so in memory (unless
//! [`Ct2Options::weights`] asks otherwise): int8 ones with their per-row `weight_scale`, packed
//! as they are (`int8.rs`); `int16` weights, and int8 embedding tables, are dequantised to `f32`
//! (`q / scale`), so tessel computes on exactly the weights the file holds. Anything else
//! (relative position keys/values, ALiBi, rotary, multi-query attention, several source
//! embeddings, AWQ, input/output projections, a variable no part reads) is refused with a typed
//! [`Ct2Error`] naming the variable.
//!
//! The modules, one idea each: `binary` parses `model.bin` (once per load), `int8` keeps its
//! int8 linear weights as int8, `vars` gives access
//! to its variables, `spec` reads a `TransformerSpec`'s attributes, `transformer` builds the
//! layers, `seq2seq` assembles the encoder-decoder, `whisper` the `WhisperSpec`.
//!
//! Conventions mapped (checked against CTranslate2 itself by the `ct2_*` and
//! `translation_ct2` tests):
//! - CTranslate2's sinusoidal encoding is `[sin(p·ω_i) | cos(p·ω_i)]` (halves, not interleaved)
//!   with `ω_i = 10000^(-i/(d/2-1))`, positions counted from 1 (OpenNMT-tf's convention). It
//!   differs from tessel's interleaved table, so it is computed here and loaded as a learned
//!   table.
//! - Embeddings are multiplied by the `scale_embeddings` attribute: an `int8` flag (`√d` or 1)
//!   or the factor itself; absent, `√d`.
//! - Decoding starts from `config.json`'s `decoder_start_token` (default `<s>`), or from the
//!   zero start row of a `start_from_zero_embedding` model, and ends at its `eos_token`
//!   (default `</s>`); the norm epsilon is `layer_norm_epsilon` or CTranslate2's 1e-5
//!   (LayerNorm) / 1e-6 (RMSNorm).
//! - A source is fed as-is unless `add_source_bos` / `add_source_eos` ask for BOS / EOS
//!   ([`Ct2Model::source_ids`] applies them).

mod binary;
mod int8;
mod seq2seq;
mod spec;
mod transformer;
mod vars;
mod vocab;
pub mod whisper;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use binary::{parse, Dtype, ModelBin, Variable, MAX_BINARY_VERSION};
pub use seq2seq::START_LOGIT;
pub use vocab::Vocabulary;

use crate::load::LoadError;
use crate::model::Model;

/// Why a CTranslate2 model could not be loaded.
#[derive(Debug, Error)]
pub enum Ct2Error {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `model.bin` ends in the middle of a field.
    #[error("model.bin is truncated: {what} at byte {offset}")]
    Truncated {
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: usize,
    },
    /// A binary version this reader does not know.
    #[error("model.bin binary version {0} is not supported (1 to 6 are)")]
    UnsupportedVersion(u32),
    /// A string that is not NUL-terminated UTF-8.
    #[error("model.bin: bad string for {what} at byte {offset}")]
    BadString {
        /// The field.
        what: String,
        /// Where it starts.
        offset: usize,
    },
    /// A dtype id (or, before version 4, item size) outside the known set.
    #[error("variable `{name}` has unknown dtype id {id}")]
    UnknownDtype {
        /// Variable.
        name: String,
        /// The id.
        id: u8,
    },
    /// The byte count does not match shape × item size.
    #[error("variable `{name}` of shape {shape:?} declares {bytes} bytes")]
    ByteCount {
        /// Variable.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
        /// Declared bytes.
        bytes: usize,
    },
    /// Two variables or aliases share a name.
    #[error("variable `{0}` appears twice")]
    Duplicate(String),
    /// An alias names a variable that does not exist.
    #[error("alias `{alias}` points to missing variable `{target}`")]
    DanglingAlias {
        /// Alias.
        alias: String,
        /// Its target.
        target: String,
    },
    /// Bytes after the last alias.
    #[error("model.bin has {} bytes after its end at {offset}", len - offset)]
    TrailingBytes {
        /// End of the parsed content.
        offset: usize,
        /// File length.
        len: usize,
    },
    /// Neither a `TransformerSpec` nor a `WhisperSpec` model.
    #[error("spec `{0}` is not supported (TransformerSpec and WhisperSpec are)")]
    UnsupportedSpec(String),
    /// A model feature tessel does not implement.
    #[error("unsupported model feature: {feature} (variable `{variable}`)")]
    UnsupportedFeature {
        /// The feature.
        feature: String,
        /// The variable that reveals it.
        variable: String,
    },
    /// A variable whose dtype cannot be used where it is.
    #[error("variable `{name}` has unsupported dtype {dtype:?} here")]
    UnsupportedDtype {
        /// Variable.
        name: String,
        /// Its dtype.
        dtype: Dtype,
    },
    /// A required variable is absent.
    #[error("variable `{0}` is missing")]
    Missing(String),
    /// A variable with an unexpected shape.
    #[error("variable `{name}` has shape {got:?}, expected {expected:?}")]
    Shape {
        /// Variable.
        name: String,
        /// Expected.
        expected: Vec<usize>,
        /// Found.
        got: Vec<usize>,
    },
    /// An attribute with a value tessel cannot honour.
    #[error("attribute `{name}`: {reason}")]
    Attribute {
        /// Variable.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// `config.json` is malformed.
    #[error("config.json: {0}")]
    Config(String),
    /// A vocabulary file is malformed or absent.
    #[error("vocabulary {path}: {reason}")]
    Vocabulary {
        /// The file (or the directory when none was found).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A special token of `config.json` is not in the target vocabulary.
    #[error("token `{0}` is not in the target vocabulary")]
    MissingToken(String),
    /// The tessel model rejected the mapped weights.
    #[error(transparent)]
    Model(#[from] LoadError),
}

/// Session limits to plan the model for (CTranslate2 models do not carry them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ct2Options {
    /// Longest source (capped by a stored position table). Whisper (`WhisperSpec`) ignores it:
    /// its encoder reads whole 30 s windows, the stored table's positions.
    pub max_src_len: usize,
    /// Longest target, start token included (capped by a stored position table).
    pub max_tgt_len: usize,
    /// Widest beam.
    pub max_beam: usize,
    /// Storage of the linear layers' weights whatever `model.bin` holds, or `None` to keep
    /// the stored type (int8 stays int8, int16 becomes `f32`).
    pub weights: Option<crate::layers::WeightType>,
}

impl Default for Ct2Options {
    fn default() -> Ct2Options {
        Ct2Options {
            max_src_len: 512,
            max_tgt_len: 512,
            max_beam: 4,
            weights: None,
        }
    }
}

/// The special-token settings of a CTranslate2 `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ct2Tokens {
    /// First decoder input.
    pub decoder_start_token: String,
    /// End of sequence.
    pub eos_token: String,
    /// Beginning of sequence (added to sources when `add_source_bos`).
    pub bos_token: String,
    /// Unknown token.
    pub unk_token: String,
    /// Prepend `bos_token` to sources.
    pub add_source_bos: bool,
    /// Append `eos_token` to sources.
    pub add_source_eos: bool,
    /// LayerNorm epsilon, when the file sets one.
    pub layer_norm_epsilon: Option<f32>,
}

impl Ct2Tokens {
    /// Parses `config.json` text (absent fields take CTranslate2's defaults).
    pub fn from_json(text: &str) -> Result<Ct2Tokens, Ct2Error> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Ct2Error::Config(e.to_string()))?;
        let string = |key: &str, default: &str| -> Result<String, Ct2Error> {
            match value.get(key) {
                None | Some(serde_json::Value::Null) => Ok(default.to_owned()),
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(Ct2Error::Config(format!(
                    "`{key}` is {other}, not a string"
                ))),
            }
        };
        let flag = |key: &str| -> Result<bool, Ct2Error> {
            match value.get(key) {
                None | Some(serde_json::Value::Null) => Ok(false),
                Some(serde_json::Value::Bool(b)) => Ok(*b),
                Some(other) => Err(Ct2Error::Config(format!("`{key}` is {other}, not a bool"))),
            }
        };
        let layer_norm_epsilon = match value.get("layer_norm_epsilon") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Number(n)) => n.as_f64().map(|x| x as f32),
            Some(other) => {
                return Err(Ct2Error::Config(format!(
                    "`layer_norm_epsilon` is {other}, not a number"
                )))
            }
        };
        Ok(Ct2Tokens {
            decoder_start_token: string("decoder_start_token", "<s>")?,
            eos_token: string("eos_token", "</s>")?,
            bos_token: string("bos_token", "<s>")?,
            unk_token: string("unk_token", "<unk>")?,
            add_source_bos: flag("add_source_bos")?,
            add_source_eos: flag("add_source_eos")?,
            layer_norm_epsilon,
        })
    }
}

impl Default for Ct2Tokens {
    /// CTranslate2's defaults (what an empty `config.json` means).
    fn default() -> Ct2Tokens {
        Ct2Tokens {
            decoder_start_token: "<s>".to_owned(),
            eos_token: "</s>".to_owned(),
            bos_token: "<s>".to_owned(),
            unk_token: "<unk>".to_owned(),
            add_source_bos: false,
            add_source_eos: false,
            layer_norm_epsilon: None,
        }
    }
}

/// A loaded CTranslate2 model: the tessel model plus what a host needs to feed it.
#[derive(Debug)]
pub struct Ct2Model {
    /// The model, ready for [`crate::Session::new`].
    pub model: Model<'static>,
    /// Its vocabularies and special-token settings.
    pub vocab: Ct2Vocab,
}

/// A CTranslate2 directory's vocabularies and special-token settings: what its
/// `translate_batch` maps tokens with.
#[derive(Clone, Debug)]
pub struct Ct2Vocab {
    /// Source vocabulary (ids are embedding rows).
    pub source: Vocabulary,
    /// Target vocabulary. A `start_from_zero_embedding` model (Marian) has one more target
    /// row than tokens: its start row, the model's `bos_id`, which is never produced.
    pub target: Vocabulary,
    /// Special-token settings.
    pub tokens: Ct2Tokens,
}

impl Ct2Vocab {
    /// Source token ids for `tokens`, with BOS/EOS added as `config.json` asks; unknown tokens
    /// map to the unknown token (or id 0 when the vocabulary has none).
    pub fn source_ids<S: AsRef<str>>(&self, tokens: &[S]) -> Vec<u32> {
        let v = &self.source;
        let id = |t: &str| {
            v.id(t)
                .or_else(|| v.id(&self.tokens.unk_token))
                .unwrap_or(0)
        };
        let mut ids = Vec::with_capacity(tokens.len() + 2);
        if self.tokens.add_source_bos {
            ids.push(id(&self.tokens.bos_token));
        }
        ids.extend(tokens.iter().map(|t| id(t.as_ref())));
        if self.tokens.add_source_eos {
            ids.push(id(&self.tokens.eos_token));
        }
        ids
    }
}

/// Whether `dir` looks like a CTranslate2 model directory (it holds `model.bin`).
pub fn is_ct2_dir(dir: &Path) -> bool {
    dir.join("model.bin").is_file()
}

fn read_file(path: &Path) -> Result<Vec<u8>, Ct2Error> {
    std::fs::read(path).map_err(|source| Ct2Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// `path` mapped read-only: the weights are read once, from the page cache, by the packing
/// that copies them into the model's own buffers.
fn map_file(path: &Path) -> Result<memmap2::Mmap, Ct2Error> {
    let io = |source| Ct2Error::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the map is read-only and lives only for the load; every weight is copied into the
    // model's own buffers before it is dropped. As with every mmap, a concurrent truncation of
    // the file by another process is outside what this can guard against.
    unsafe { memmap2::Mmap::map(&file) }.map_err(io)
}

/// Loads a CTranslate2 model directory.
pub fn load_dir(dir: &Path, options: Ct2Options) -> Result<Ct2Model, Ct2Error> {
    let bytes = map_file(&dir.join("model.bin"))?;
    let file = parse(&bytes)?;
    if file.spec == "WhisperSpec" {
        let vocabulary =
            Vocabulary::read(dir, "vocabulary")?.ok_or_else(|| Ct2Error::Vocabulary {
                path: dir.join("vocabulary.json"),
                reason: "a Whisper model needs vocabulary.json (or .txt)".to_owned(),
            })?;
        let model = whisper::build(&file, &vocabulary, options)?;
        let tokens = Ct2Tokens {
            decoder_start_token: whisper::START_OF_TRANSCRIPT.to_owned(),
            eos_token: whisper::END_OF_TEXT.to_owned(),
            bos_token: whisper::START_OF_TRANSCRIPT.to_owned(),
            unk_token: whisper::END_OF_TEXT.to_owned(),
            add_source_bos: false,
            add_source_eos: false,
            layer_norm_epsilon: None,
        };
        return Ok(Ct2Model {
            model,
            vocab: Ct2Vocab {
                source: vocabulary.clone(),
                target: vocabulary,
                tokens,
            },
        });
    }
    let config_path = dir.join("config.json");
    let tokens = if config_path.is_file() {
        let text = String::from_utf8(read_file(&config_path)?)
            .map_err(|e| Ct2Error::Config(e.to_string()))?;
        Ct2Tokens::from_json(&text)?
    } else {
        Ct2Tokens::default()
    };
    let (source, target) = match Vocabulary::read(dir, "shared_vocabulary")? {
        Some(shared) => (shared.clone(), shared),
        None => {
            let missing = |stem: &str| Ct2Error::Vocabulary {
                path: dir.join(format!("{stem}.json")),
                reason: "no shared_vocabulary or source/target vocabulary (.json or .txt)"
                    .to_owned(),
            };
            let source = Vocabulary::read(dir, "source_vocabulary")?
                .ok_or_else(|| missing("source_vocabulary"))?;
            let target = Vocabulary::read(dir, "target_vocabulary")?
                .ok_or_else(|| missing("target_vocabulary"))?;
            (source, target)
        }
    };
    from_file(&file, tokens, source, target, options)
}

/// Builds a model from `model.bin` bytes, the parsed `config.json` and the vocabularies.
pub fn from_parts(
    model_bin: &[u8],
    tokens: Ct2Tokens,
    source_vocabulary: Vocabulary,
    target_vocabulary: Vocabulary,
    options: Ct2Options,
) -> Result<Ct2Model, Ct2Error> {
    let file = parse(model_bin)?;
    from_file(&file, tokens, source_vocabulary, target_vocabulary, options)
}

/// Builds a model from a parsed `TransformerSpec` file.
fn from_file(
    file: &ModelBin<'_>,
    tokens: Ct2Tokens,
    source_vocabulary: Vocabulary,
    target_vocabulary: Vocabulary,
    options: Ct2Options,
) -> Result<Ct2Model, Ct2Error> {
    let model = seq2seq::build(
        file,
        &tokens,
        &source_vocabulary,
        &target_vocabulary,
        options,
    )?;
    Ok(Ct2Model {
        model,
        vocab: Ct2Vocab {
            source: source_vocabulary,
            target: target_vocabulary,
            tokens,
        },
    })
}
