//! The model families tessel opens from a Hugging Face directory, one row each: the
//! `model_type`s that name it, what it does (text or speech) and its loader. Adding a family
//! is adding its module under [`crate::load::hf`] and one row here.

use std::path::Path;

use crate::load::hf::{bart, led, longt5, t5, whisper};
use crate::load::LoadError;
use crate::model::Model;

use super::LoadSettings;

/// What a model does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modality {
    /// Text to text (translation, summarisation).
    Text,
    /// Speech to text (Whisper).
    Speech,
}

impl Modality {
    /// The task in words: "translation" or "speech recognition".
    pub fn describe(self) -> &'static str {
        match self {
            Modality::Text => "translation",
            Modality::Speech => "speech recognition",
        }
    }
}

/// A loader of a Hugging Face directory of one family.
pub type HfLoader = fn(&Path, &LoadSettings) -> Result<Model<'static>, LoadError>;

/// One family of [`FAMILIES`].
pub struct FamilyRow {
    /// The family's name in messages ("Marian", "M2M100/NLLB").
    pub name: &'static str,
    /// The `config.json` `model_type`s it reads.
    pub model_types: &'static [&'static str],
    /// What it does.
    pub modality: Modality,
    /// Loads a Hugging Face directory of the family.
    pub load: HfLoader,
}

impl core::fmt::Debug for FamilyRow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FamilyRow")
            .field("name", &self.name)
            .field("model_types", &self.model_types)
            .field("modality", &self.modality)
            .finish_non_exhaustive()
    }
}

impl PartialEq for FamilyRow {
    fn eq(&self, other: &FamilyRow) -> bool {
        self.name == other.name
    }
}

fn bart_family(dir: &Path, settings: &LoadSettings) -> Result<Model<'static>, LoadError> {
    Ok(bart::load_hf_dir(dir, settings.max_beam, &settings.options())?.1)
}

fn led_family(dir: &Path, settings: &LoadSettings) -> Result<Model<'static>, LoadError> {
    led::load_hf_dir(dir, settings.max_beam, &settings.options())
}

fn longt5_family(dir: &Path, settings: &LoadSettings) -> Result<Model<'static>, LoadError> {
    longt5::load_hf_dir(
        dir,
        settings.max_len,
        settings.max_beam,
        &settings.options(),
    )
}

fn t5_family(dir: &Path, settings: &LoadSettings) -> Result<Model<'static>, LoadError> {
    t5::load_hf_dir(
        dir,
        settings.max_len,
        settings.max_beam,
        &settings.options(),
    )
}

fn whisper_family(dir: &Path, settings: &LoadSettings) -> Result<Model<'static>, LoadError> {
    whisper::load_hf_dir(dir, settings.max_beam, &settings.options())
}

/// Every family tessel loads from a Hugging Face directory.
pub static FAMILIES: &[FamilyRow] = &[
    FamilyRow {
        name: "Marian",
        model_types: &["marian"],
        modality: Modality::Text,
        load: bart_family,
    },
    FamilyRow {
        name: "BART",
        model_types: &["bart"],
        modality: Modality::Text,
        load: bart_family,
    },
    FamilyRow {
        name: "mBART",
        model_types: &["mbart"],
        modality: Modality::Text,
        load: bart_family,
    },
    FamilyRow {
        name: "M2M100/NLLB",
        model_types: &["m2m_100"],
        modality: Modality::Text,
        load: bart_family,
    },
    FamilyRow {
        name: "Pegasus",
        model_types: &["pegasus"],
        modality: Modality::Text,
        load: bart_family,
    },
    FamilyRow {
        name: "LED",
        model_types: &["led"],
        modality: Modality::Text,
        load: led_family,
    },
    FamilyRow {
        name: "T5",
        model_types: &["t5", "mt5"],
        modality: Modality::Text,
        load: t5_family,
    },
    FamilyRow {
        name: "LongT5",
        model_types: &["longt5"],
        modality: Modality::Text,
        load: longt5_family,
    },
    FamilyRow {
        name: "Whisper",
        model_types: &["whisper"],
        modality: Modality::Speech,
        load: whisper_family,
    },
];

/// The family of a `config.json` `model_type`.
pub fn family(model_type: &str) -> Option<&'static FamilyRow> {
    FAMILIES
        .iter()
        .find(|row| row.model_types.contains(&model_type))
}

/// Every supported `model_type`, for messages: "marian, bart, …, whisper".
pub fn supported_model_types() -> String {
    let types: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|row| row.model_types)
        .copied()
        .collect();
    types.join(", ")
}
