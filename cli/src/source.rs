//! The model a `run`, `bench`, `plan` or `pack` command works on: a model path opened by
//! [`Directory::open`] (a tessel, Hugging Face or CTranslate2 directory, or a packed image),
//! or seeded random weights for a config file or for Transformer-base.

use std::path::Path;

use tessel_model::load::directory::{Directory, Format};
use tessel_model::{Config, LoadOptions, LoadSettings, Model, WeightType};

use crate::args::ModelArgs;
use crate::error::CliError;

/// Where the model comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A model directory or packed image.
    Path(Directory),
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
    /// The source `args` name (a model path is opened, a config file read, here).
    pub fn of(args: &ModelArgs) -> Result<Source, CliError> {
        match (&args.model, &args.config) {
            (Some(path), _) => Ok(Source::Path(Directory::open(path)?)),
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

    /// The config, reading no weights when the source allows (other formats are loaded
    /// whole, planned for `limits`).
    pub fn config(&self, limits: LoadSettings) -> Result<Config, CliError> {
        match self {
            Source::Path(dir) if *dir.format() == Format::Tessel => {
                read_config(&dir.path().join("config.json"))
            }
            Source::Path(dir) => Ok(dir.load(&limits)?.model.config().clone()),
            Source::Random { config, .. } => Ok(config.clone()),
        }
    }

    /// Builds the model: `weights` overrides the stored types, `seed` seeds random weights,
    /// `limits` bounds a model whose files do not (CTranslate2, T5).
    pub fn build(
        &self,
        weights: Option<WeightType>,
        seed: u64,
        limits: LoadSettings,
    ) -> Result<Built, CliError> {
        match self {
            Source::Path(dir) => Ok(Built {
                model: dir.load(&LoadSettings { weights, ..limits })?.model,
                what: what(dir),
            }),
            Source::Random { config, name } => Ok(Built {
                model: Model::random_with(config.clone(), seed, &LoadOptions { weights })?,
                what: format!("{name}, seeded random weights (seed {seed})"),
            }),
        }
    }
}

/// The report's line for a model path: the path and its format.
fn what(dir: &Directory) -> String {
    let path = dir.path().display();
    match dir.format() {
        Format::Tessel => path.to_string(),
        Format::Image => format!("{path} (packed image)"),
        Format::CTranslate2 { .. } => format!("{path} (CTranslate2)"),
        Format::HuggingFace(row) => format!("{path} (Hugging Face {})", row.name),
    }
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
