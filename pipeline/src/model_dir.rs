//! A model directory for the pipeline: the [`Model`] and its [`Directory`] (format, family,
//! task and decoding defaults, from [`tessel_model::load::directory`], the one opener of model
//! paths), and the [`TextTokenizer`] the directory ships, loaded by [`ModelDir::load`].
//!
//! The tokenizer comes from the same directory (CTranslate2 conversions need the tokenizer
//! files copied next to `model.bin`, as `ct2-transformers-converter --copy_files` does), and
//! its ids must be the model's: a CTranslate2 vocabulary that disagrees with the tokenizer is
//! a typed error.

use std::path::Path;

use tessel_model::load::ct2;
use tessel_model::load::directory::{Directory, Loaded, Modality, OpenError};
use tessel_model::{Generation, Model};
use tessel_text::{Family, TextError, TextTokenizer};
use thiserror::Error;

pub use tessel_model::LoadSettings;

/// Why a model directory could not be loaded. Each names what is missing or wrong.
#[derive(Debug, Error)]
pub enum ModelDirError {
    /// The path could not be opened or its model loaded.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The tokenizer could not be loaded.
    #[error(transparent)]
    Tokenizer(#[from] TextError),
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

/// A loaded model directory.
pub struct ModelDir {
    /// The model, shared by sessions.
    pub model: Model<'static>,
    /// The directory's tokenizer.
    pub tokenizer: TextTokenizer,
    /// Decoding defaults.
    pub generation: Generation,
    /// What was opened.
    pub directory: Directory,
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
    Ok(Directory::open(dir)?.generation().clone())
}

impl ModelDir {
    /// Loads a Hugging Face or CTranslate2 model directory of a text-to-text model.
    pub fn load(dir: &Path, settings: LoadSettings) -> Result<ModelDir, ModelDirError> {
        ModelDir::from_directory(Directory::open(dir)?, settings)
    }

    /// Loads the model and tokenizer of a directory already opened.
    pub fn from_directory(
        directory: Directory,
        settings: LoadSettings,
    ) -> Result<ModelDir, ModelDirError> {
        let loaded = directory.load(&settings)?;
        let tokenizer = TextTokenizer::from_dir(directory.path())?;
        ModelDir::with_tokenizer(directory, loaded, tokenizer)
    }

    /// A directory's loaded model with its tokenizer, checked against the CTranslate2
    /// vocabulary where there is one.
    pub fn with_tokenizer(
        directory: Directory,
        loaded: Loaded,
        tokenizer: TextTokenizer,
    ) -> Result<ModelDir, ModelDirError> {
        if let Some(vocab) = &loaded.ct2 {
            check_vocabulary(&vocab.target, &tokenizer)?;
        }
        Ok(ModelDir {
            model: loaded.model,
            tokenizer,
            generation: directory.generation().clone(),
            directory,
        })
    }

    /// Whether the directory holds a speech model (Whisper).
    pub fn is_speech(&self) -> bool {
        self.directory.modality() == Some(Modality::Speech)
    }
}
