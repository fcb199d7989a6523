//! The one opener of model paths: [`Directory::open`] reads what a path holds from its small
//! files (the format, the family from the [`registry`], the task, the decoding defaults)
//! without reading a weight, and [`Directory::load`] builds the [`Model`].
//!
//! Formats, told in this order:
//! - a file starting with the packed image's magic: a tessel image (`tessel pack`);
//! - a directory holding `model.bin`: a CTranslate2 conversion, speech when its spec is
//!   `WhisperSpec`;
//! - a directory whose `config.json` has a `model_type`: a Hugging Face directory of the
//!   [`registry::FAMILIES`] row naming that type, any other type an
//!   [`OpenError::UnknownModelType`] listing the supported ones;
//! - a directory whose `config.json` has none: tessel's own `nn.Transformer` layout.
//!
//! Decoding defaults come from `generation_config.json`, else (Hugging Face only) from the
//! same keys in `config.json` (older checkpoints), else `transformers`' defaults. A
//! CTranslate2 model keeps its start token in its own config (its `bos_id`), so its defaults
//! carry none.

mod error;
pub mod probe;
pub mod registry;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use error::OpenError;
pub use registry::{FamilyRow, Modality, FAMILIES};

use crate::generation::Generation;
use crate::layers::WeightType;
use crate::load::ct2::{self, Ct2Options, Ct2Vocab};
use crate::load::image;
use crate::load::LoadOptions;
use crate::model::Model;

/// What to plan a model for, where its files do not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSettings {
    /// Widest beam sessions may use.
    pub max_beam: usize,
    /// Longest source and target for models without a position table (T5) or a stored
    /// length (CTranslate2 translation models).
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

impl LoadSettings {
    /// The weight layout options of these settings.
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            weights: self.weights,
        }
    }

    fn ct2(&self) -> Ct2Options {
        Ct2Options {
            max_src_len: self.max_len,
            max_tgt_len: self.max_len,
            max_beam: self.max_beam,
            weights: self.weights,
        }
    }
}

/// The format of a model path.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// A Hugging Face directory of this family.
    HuggingFace(&'static FamilyRow),
    /// A CTranslate2 conversion whose `model.bin` holds this spec.
    CTranslate2 {
        /// `TransformerSpec`, `WhisperSpec`, ….
        spec: String,
    },
    /// tessel's own `config.json` + `model.safetensors` (`nn.Transformer` names).
    Tessel,
    /// A packed tessel image file.
    Image,
}

/// A model path, opened: what it holds, read from its small files.
#[derive(Clone, Debug)]
pub struct Directory {
    path: PathBuf,
    format: Format,
    config: Option<Value>,
    generation_config: Option<Value>,
    generation: Generation,
}

/// A loaded model and, for a CTranslate2 conversion, the vocabulary its ids index.
pub struct Loaded {
    /// The model.
    pub model: Model<'static>,
    /// A CTranslate2 directory's vocabularies and token settings (`None` for other formats).
    pub ct2: Option<Ct2Vocab>,
}

impl Directory {
    /// Opens `path`, a model directory or a packed image file, reading no weight. A Hugging
    /// Face directory's `model.safetensors`, when present, is checked to be whole.
    pub fn open(path: &Path) -> Result<Directory, OpenError> {
        if path.is_file() {
            return if probe::is_image_file(path) {
                Ok(Directory::of(path, Format::Image, None, None)?)
            } else {
                Err(OpenError::NotAModel(path.to_owned()))
            };
        }
        if !path.is_dir() {
            return Err(OpenError::NotFound(path.to_owned()));
        }
        let generation_config = probe::read_json(&path.join("generation_config.json"))?;
        if ct2::is_ct2_dir(path) {
            let spec = probe::ct2_spec(&path.join("model.bin"))?;
            let config = probe::read_json(&path.join("config.json"))?;
            return Directory::of(
                path,
                Format::CTranslate2 { spec },
                config,
                generation_config,
            );
        }
        let config_path = path.join("config.json");
        let config = probe::read_json(&config_path)?.ok_or_else(|| OpenError::MissingFile {
            path: config_path.clone(),
            needs: "a Hugging Face or tessel directory has config.json; a CTranslate2 one has \
                    model.bin",
        })?;
        let format = match config.get("model_type").map(Value::as_str) {
            None => Format::Tessel,
            Some(model_type) => {
                let model_type = model_type.unwrap_or_default();
                let row =
                    registry::family(model_type).ok_or_else(|| OpenError::UnknownModelType {
                        model_type: model_type.to_owned(),
                        path: config_path,
                    })?;
                let weights = path.join("model.safetensors");
                if weights.is_file() {
                    probe::check_safetensors(&weights)?;
                }
                Format::HuggingFace(row)
            }
        };
        Directory::of(path, format, Some(config), generation_config)
    }

    fn of(
        path: &Path,
        format: Format,
        config: Option<Value>,
        generation_config: Option<Value>,
    ) -> Result<Directory, OpenError> {
        let empty = Value::Object(Default::default());
        let source = match (&generation_config, &format, &config) {
            (Some(generation), _, _) => generation,
            (None, Format::HuggingFace(_), Some(config)) => config,
            _ => &empty,
        };
        let mut generation = Generation::from_value(source)?;
        if matches!(format, Format::CTranslate2 { .. }) {
            generation.options.decoder_start = None;
        }
        Ok(Directory {
            path: path.to_owned(),
            format,
            config,
            generation_config,
            generation,
        })
    }

    /// The path opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// The Hugging Face family, for a Hugging Face directory.
    pub fn family(&self) -> Option<&'static FamilyRow> {
        match self.format {
            Format::HuggingFace(row) => Some(row),
            _ => None,
        }
    }

    /// What the model does, where the small files tell (a packed image says it only once
    /// loaded: [`crate::Config::front_end`]).
    pub fn modality(&self) -> Option<Modality> {
        match &self.format {
            Format::HuggingFace(row) => Some(row.modality),
            Format::CTranslate2 { spec } if spec == "WhisperSpec" => Some(Modality::Speech),
            Format::CTranslate2 { .. } | Format::Tessel => Some(Modality::Text),
            Format::Image => None,
        }
    }

    /// The decoding defaults.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    /// The parsed `config.json` (Hugging Face, CTranslate2 or tessel's), when there is one.
    pub fn config_json(&self) -> Option<&Value> {
        self.config.as_ref()
    }

    /// The parsed `generation_config.json`, when there is one.
    pub fn generation_config_json(&self) -> Option<&Value> {
        self.generation_config.as_ref()
    }

    /// The model in words, for messages: "a Hugging Face BART model (translation)".
    pub fn describe(&self) -> String {
        let task = self.modality().map_or("", Modality::describe);
        match &self.format {
            Format::HuggingFace(row) => format!("a Hugging Face {} model ({task})", row.name),
            Format::CTranslate2 { .. } if self.modality() == Some(Modality::Speech) => {
                format!("a CTranslate2 Whisper model ({task})")
            }
            Format::CTranslate2 { .. } => format!("a CTranslate2 model ({task})"),
            Format::Tessel => format!("a tessel nn.Transformer model ({task})"),
            Format::Image => "a packed tessel image".to_owned(),
        }
    }

    /// Loads the model, planned for `settings`.
    pub fn load(&self, settings: &LoadSettings) -> Result<Loaded, OpenError> {
        let model = match &self.format {
            Format::HuggingFace(row) => {
                self.require("model.safetensors", "the weights, as safetensors")?;
                (row.load)(&self.path, settings)?
            }
            Format::CTranslate2 { .. } => {
                let loaded = ct2::load_dir(&self.path, settings.ct2())?;
                return Ok(Loaded {
                    model: loaded.model,
                    ct2: Some(loaded.vocab),
                });
            }
            Format::Tessel => {
                self.require("model.safetensors", "the weights, as safetensors")?;
                probe::check_safetensors(&self.path.join("model.safetensors"))?;
                Model::load_dir_with(&self.path, &settings.options())?
            }
            Format::Image => self.load_image(settings.weights)?,
        };
        Ok(Loaded { model, ct2: None })
    }

    fn require(&self, name: &str, needs: &'static str) -> Result<(), OpenError> {
        let path = self.path.join(name);
        if path.is_file() {
            Ok(())
        } else {
            Err(OpenError::MissingFile { path, needs })
        }
    }

    /// A packed image, which keeps the weight types it was packed with.
    fn load_image(&self, weights: Option<WeightType>) -> Result<Model<'static>, OpenError> {
        let model = image::load(&self.path)?;
        if weights.is_some_and(|w| weights_differ(&model, w)) {
            return Err(OpenError::ImageWeights(self.path.clone()));
        }
        Ok(model)
    }
}

/// Whether any linear layer of `model` is stored otherwise than as `weights`.
fn weights_differ(model: &Model<'_>, weights: WeightType) -> bool {
    let stacks = [model.encoder(), model.decoder()];
    let blocks = stacks.iter().flat_map(|s| s.blocks());
    let layers = blocks.flat_map(|b| {
        let (_, attention) = b.self_attention_layer();
        let (_, ffn) = b.feed_forward_layer();
        [attention.qkv(), attention.output(), ffn.up(), ffn.output()]
    });
    layers
        .chain([model.generator()])
        .any(|l| l.weight_type() != weights)
}

#[cfg(test)]
mod tests;
