//! Tokenizers for tessel's model families, from a model directory's own files.
//!
//! - [`spm::SentencePiece`]: SentencePiece `.model`/`.spm` files (unigram and BPE, with or
//!   without byte fallback), ids and text identical to the Python `sentencepiece` library.
//!   The protobuf is read with `prost` and segmented by the `tokenizers` crate; the module doc
//!   says why this and not the C++ bindings.
//! - [`hf::HfTokenizer`]: Hugging Face `tokenizer.json` through the `tokenizers` crate, built
//!   without C (`fancy-regex`).
//! - [`whisper::WhisperTokenizer`]: Whisper's byte-level BPE with the special tokens of the
//!   multilingual, `.en` and large-v3 vocabularies, decoded as openai-whisper decodes.
//! - [`TextTokenizer`]: the `transformers` conventions of each family on top (Marian, M2M100,
//!   NLLB, mBART-50, mBART, T5, BART, Whisper), loaded by [`TextTokenizer::from_dir`], which
//!   detects the family and the files; missing or malformed files and language codes that are
//!   not the family's are [`TextError`]s.
//!
//! What a translation command does with it:
//!
//! ```no_run
//! use tessel_text::TextTokenizer;
//!
//! # fn main() -> Result<(), tessel_text::TextError> {
//! let dir = std::path::Path::new("nllb-200-distilled-600M");
//! let tok = TextTokenizer::from_dir(dir)?.with_languages(Some("eng_Latn"), Some("fra_Latn"))?;
//! let source_ids = tok.encode("The weather is nice today.")?; // eng_Latn ... </s>
//! let first_generated = tok.forced_bos_id()?; // Some(fra_Latn)
//! # let generated_ids: Vec<u32> = Vec::new();
//! let text = tok.decode(&generated_ids)?; // special tokens skipped
//! # let _ = (source_ids, first_generated, text);
//! # Ok(())
//! # }
//! ```
//!
//! and a transcription command:
//!
//! ```no_run
//! use tessel_text::whisper::Task;
//! use tessel_text::TextTokenizer;
//!
//! # fn main() -> Result<(), tessel_text::TextError> {
//! let tok = TextTokenizer::from_dir(std::path::Path::new("whisper-tiny"))?;
//! let whisper = tok.whisper().expect("a Whisper directory");
//! let mut prompt = whisper.encode_prompt("Glossary: tessel.")?; // <|startofprev|> ...
//! prompt.extend(whisper.sot_sequence(Some("de"), Some(Task::Transcribe))?);
//! prompt.push(whisper.no_timestamps());
//! let suppress = whisper.non_speech_tokens()?;
//! # let generated: Vec<u32> = Vec::new();
//! let text = whisper.decode(&generated)?; // text tokens only, as openai-whisper
//! let timed = whisper.decode_with_timestamps(&generated)?; // "<|0.00|> Hallo<|1.20|>"
//! # let _ = (suppress, text, timed);
//! # Ok(())
//! # }
//! ```

pub mod error;
pub mod family;
pub mod hf;
pub mod languages;
pub mod spm;
pub mod whisper;

pub use error::TextError;
pub use family::{Family, TextTokenizer};
