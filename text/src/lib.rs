//! Tokenizers for tessel's model families, from a model directory's own files.
//!
//! - [`spm::SentencePiece`]: SentencePiece `.model`/`.spm` files (unigram and BPE), ids and
//!   text identical to the Python `sentencepiece` library.
//! - [`hf::HfTokenizer`]: Hugging Face `tokenizer.json` through the `tokenizers` crate.
//! - [`whisper::WhisperTokenizer`]: Whisper's byte-level BPE with its special tokens, decoded as
//!   openai-whisper decodes.
//! - [`TextTokenizer`]: the family conventions of `transformers` on top (Marian, mBART-50,
//!   NLLB, M2M100, T5, BART, Whisper), loaded by [`TextTokenizer::from_dir`].

pub mod error;
pub mod family;
pub mod hf;
pub mod languages;
pub mod spm;
pub mod whisper;

pub use error::TextError;
pub use family::{Family, TextTokenizer};
