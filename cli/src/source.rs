//! The model a `run`, `bench` or `plan` command works on: a tessel directory, a CTranslate2
//! directory, or seeded random weights for a config file or for Transformer-base.

use std::path::{Path, PathBuf};

use tessel_model::ct2::{self, Ct2Options};
use tessel_model::image;
use tessel_model::{Config, LoadOptions, Model, WeightType};
use tessel_pipeline::model_dir;

use crate::args::ModelArgs;
use crate::error::CliError;

/// Where the model comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// `config.json` + `model.safetensors`.
    Tessel(PathBuf),
    /// A CTranslate2 directory (`model.bin`).
    Ct2(PathBuf),
    /// A packed image file (`tessel pack`).
    Image(PathBuf),
    /// Seeded random weights; `name` says where `config` came from.
    Random {
        /// The shape.
        config: Config,
        /// `transformer-base` or the config file's path.
        name: String,
    },
}

/// A model, built, with a line saying what it is.
pub struct Built {
    /// The model.
    pub model: Model<'static>,
    /// What was loaded, for the report.
    pub what: String,
}

impl Source {
    /// The source `args` name (a config file is read here).
    pub fn of(args: &ModelArgs) -> Result<Source, CliError> {
        match (&args.model, &args.config) {
            (Some(file), _) if file.is_file() => Ok(Source::Image(file.clone())),
            (Some(dir), _) if ct2::is_ct2_dir(dir) => Ok(Source::Ct2(dir.clone())),
            (Some(dir), _) => {
                hugging_face_refused(dir)?;
                Ok(Source::Tessel(dir.clone()))
            }
            (None, Some(file)) => Ok(Source::Random {
                config: read_config(file)?,
                name: file.display().to_string(),
            }),
            (None, None) => Ok(Source::transformer_base()),
        }
    }

    /// Transformer-base with random weights.
    pub fn transformer_base() -> Source {
        Source::Random {
            config: Config::transformer_base(),
            name: "transformer-base".to_owned(),
        }
    }

    /// Whether the weights are seeded random ones.
    pub fn is_random(&self) -> bool {
        matches!(self, Source::Random { .. })
    }

    /// The config, reading no weights when the source allows (a CTranslate2 directory is
    /// loaded whole, planned for `ct2_limits`).
    pub fn config(&self, ct2_limits: Ct2Options) -> Result<Config, CliError> {
        match self {
            Source::Tessel(dir) => read_config(&dir.join("config.json")),
            Source::Ct2(dir) => Ok(ct2::load_dir(dir, ct2_limits)?.model.config().clone()),
            Source::Image(file) => Ok(image::load(file)?.config().clone()),
            Source::Random { config, .. } => Ok(config.clone()),
        }
    }

    /// Builds the model: `weights` overrides the stored types, `seed` seeds random weights,
    /// `ct2_limits` bounds a CTranslate2 model.
    pub fn build(
        &self,
        weights: Option<WeightType>,
        seed: u64,
        ct2_limits: Ct2Options,
    ) -> Result<Built, CliError> {
        let options = LoadOptions { weights };
        match self {
            Source::Tessel(dir) => {
                let weights = dir.join("model.safetensors");
                if weights.is_file() {
                    model_dir::check_safetensors(&weights)?;
                }
                Ok(Built {
                    model: Model::load_dir_with(dir, &options)?,
                    what: dir.display().to_string(),
                })
            }
            Source::Ct2(dir) => {
                let options = Ct2Options {
                    weights,
                    ..ct2_limits
                };
                Ok(Built {
                    model: ct2::load_dir(dir, options)?.model,
                    what: format!("{} (CTranslate2)", dir.display()),
                })
            }
            Source::Image(file) => {
                let model = image::load(file)?;
                if weights.is_some_and(|w| model_weights_differ(&model, w)) {
                    return Err(CliError::Pack(image::PackError::Mismatch(
                        "--weights cannot convert a packed image; pack it again with --weights",
                    )));
                }
                Ok(Built {
                    model,
                    what: format!("{} (packed image)", file.display()),
                })
            }
            Source::Random { config, name } => Ok(Built {
                model: Model::random_with(config.clone(), seed, &options)?,
                what: format!("{name}, seeded random weights (seed {seed})"),
            }),
        }
    }
}

/// Whether any linear layer of `model` is stored otherwise than as `weights`.
fn model_weights_differ(model: &Model<'_>, weights: WeightType) -> bool {
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

/// A Hugging Face directory (its `config.json` names a `model_type`) is not a tessel one: say
/// what it is and where it runs, instead of a missing field of tessel's config.
fn hugging_face_refused(dir: &Path) -> Result<(), CliError> {
    let Ok(text) = std::fs::read_to_string(dir.join("config.json")) else {
        return Ok(());
    };
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let Some(model_type) = value.get("model_type").and_then(|v| v.as_str()) else {
        return Ok(());
    };
    let what = model_dir::peek(dir).map_or_else(
        |_| format!("a Hugging Face `{model_type}` directory"),
        |peeked| peeked.describe(),
    );
    Err(CliError::WrongModel {
        dir: dir.to_owned(),
        what,
        command: "run`, `plan` and `pack",
        needs: "a tessel directory (tessel's config.json and model.safetensors), a CTranslate2 \
                conversion or a packed image; Hugging Face directories run with `translate` \
                and `transcribe`",
    })
}

/// Reads a tessel `config.json`.
fn read_config(path: &Path) -> Result<Config, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
        path: path.to_owned(),
        source,
    })?;
    Config::from_json(&text).map_err(|source| CliError::Config {
        path: path.to_owned(),
        source,
    })
}
