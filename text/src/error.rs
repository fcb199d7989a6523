//! The one error type of the crate: every failure names the file, token or language at fault.

use std::path::PathBuf;

/// Why a tokenizer could not be loaded, or could not encode or decode.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A file the tokenizer needs is not in the model directory.
    #[error("{family} tokenizer: missing file {path} (needs {needs})")]
    MissingFile {
        /// The family whose files were looked for.
        family: &'static str,
        /// The file that is missing.
        path: PathBuf,
        /// The files this family reads, for the message.
        needs: &'static str,
    },
    /// The directory has no tokenizer file at all.
    #[error("no tokenizer in {dir}: expected tokenizer.json, a SentencePiece model (*.model, *.spm) or source.spm/target.spm with vocab.json")]
    NoTokenizer {
        /// The model directory.
        dir: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file was read but its content is not what the format requires.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The file or part of it (for example `tokenizer.json` or `spiece.model: piece 7`).
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is valid but uses a feature this crate does not implement.
    #[error("unsupported {what}: {reason}")]
    Unsupported {
        /// The file or option.
        what: String,
        /// What is not supported.
        reason: String,
    },
    /// A language code that the tokenizer has no token for, or a token that is not one of the
    /// family's language codes (`</s>` for example).
    #[error(
        "{family} tokenizer has no language code {code:?} (valid codes look like: {examples})"
    )]
    UnknownLanguage {
        /// The family.
        family: &'static str,
        /// The code asked for.
        code: String,
        /// A few codes it does know and how many there are, for the message.
        examples: String,
    },
    /// A language code was given for a model whose tokenizer has no language codes.
    #[error("this {family} model has no language codes (got {side} language {code:?}){hint}")]
    NoLanguages {
        /// The family.
        family: &'static str,
        /// `"source"` or `"target"`.
        side: &'static str,
        /// The code given.
        code: String,
        /// How the family selects a language instead, if it can (empty otherwise).
        hint: &'static str,
    },
    /// The family needs a language code and none was given or configured.
    #[error("{family} tokenizer needs a {side} language code")]
    LanguageRequired {
        /// The family.
        family: &'static str,
        /// `"source"` or `"target"`.
        side: &'static str,
    },
    /// A token id outside the vocabulary was given to decode.
    #[error("token id {id} is outside the vocabulary of {vocab_size} tokens")]
    UnknownId {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// The text holds a special token's text, which the reference refuses to encode as text
    /// (tiktoken's `disallowed_special="all"`, used by openai-whisper).
    #[error("text contains the special token {token:?}")]
    SpecialTokenInText {
        /// The special token found.
        token: String,
    },
    /// The `tokenizers` library failed while encoding or decoding.
    #[error("tokenizer pipeline: {0}")]
    Pipeline(String),
}

impl TextError {
    /// A [`TextError::Malformed`] for `what` with the displayed `reason`.
    pub(crate) fn malformed(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Malformed {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// A [`TextError::Unsupported`] for `what`.
    pub(crate) fn unsupported(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Unsupported {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// A [`TextError::Pipeline`] from an error of the `tokenizers` library.
    pub(crate) fn pipeline(e: impl std::fmt::Display) -> Self {
        Self::Pipeline(e.to_string())
    }
}

/// Reads a whole file, mapping failures to [`TextError::Io`].
pub(crate) fn read_file(path: &std::path::Path) -> Result<Vec<u8>, TextError> {
    std::fs::read(path).map_err(|source| TextError::Io {
        path: path.to_path_buf(),
        source,
    })
}
