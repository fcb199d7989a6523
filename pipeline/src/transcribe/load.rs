//! A Whisper model directory: the weights (a CTranslate2 `WhisperSpec` directory with
//! `model.bin`, or a Hugging Face directory with `config.json` + `model.safetensors`), the
//! tokenizer (`tokenizer.json`) the directory ships, and whether it says the model is
//! English-only.

use std::path::Path;

use serde_json::Value;

use tessel_model::ct2::{self, Ct2Options};
use tessel_model::families::whisper;
use tessel_model::{LoadOptions, Model, WeightType};
use tessel_text::hf::HfTokenizer;
use tessel_text::whisper::WhisperTokenizer;

use super::types::TranscribeError;

/// Most encoder positions and decoder positions a Whisper directory is read with (the
/// stored position tables cap them).
const MAX_POSITIONS: usize = 1500;
const MAX_TARGET: usize = 448;

/// Loads the model and tokenizer of `dir`, planned for beams up to `max_beam`, the linear
/// layers stored as `weights` (or as the file stores them).
pub fn load_dir(
    dir: &Path,
    max_beam: usize,
    weights: Option<WeightType>,
) -> Result<(Model<'static>, WhisperTokenizer), TranscribeError> {
    if !dir.is_dir() {
        return Err(TranscribeError::ModelDir {
            dir: dir.to_owned(),
            reason: "not a directory".into(),
        });
    }
    let model = if dir.join("model.bin").is_file() {
        let options = Ct2Options {
            max_src_len: MAX_POSITIONS,
            max_tgt_len: MAX_TARGET,
            max_beam,
            weights,
        };
        ct2::load_dir(dir, options)?.model
    } else if dir.join("model.safetensors").is_file() {
        whisper::load_hf_dir(dir, max_beam, &LoadOptions { weights })?
    } else {
        return Err(TranscribeError::ModelDir {
            dir: dir.to_owned(),
            reason: "no model.bin (CTranslate2) or model.safetensors (Hugging Face)".into(),
        });
    };
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(TranscribeError::ModelDir {
            dir: dir.to_owned(),
            reason: "no tokenizer.json".into(),
        });
    }
    let tokenizer = WhisperTokenizer::new(HfTokenizer::from_file(&path)?, "tokenizer.json")?;
    Ok((model, tokenizer))
}

/// The vocabulary size of the English-only (`.en`) checkpoints; openai-whisper calls a model
/// multilingual from 51865 tokens on.
const ENGLISH_ONLY_VOCAB: usize = 51864;

/// `dir/name` parsed, or `None` when absent or malformed (the loader reports those).
fn json(dir: &Path, name: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether the directory says its model is English-only: openai-whisper's `.en` vocabulary
/// of 51864 tokens, a CTranslate2 `config.json` whose `lang_ids` is empty (its converter
/// lists the language tokens of multilingual models only), or a Hugging Face
/// `generation_config.json` with `is_multilingual: false`.
pub fn english_only(dir: &Path, model: &Model<'_>) -> bool {
    if model.config().tgt_vocab == ENGLISH_ONLY_VOCAB {
        return true;
    }
    if dir.join("model.bin").is_file() {
        let config = json(dir, "config.json");
        let lang_ids = config.as_ref().and_then(|c| c.get("lang_ids"));
        return lang_ids
            .and_then(Value::as_array)
            .is_some_and(|ids| ids.is_empty());
    }
    let generation = json(dir, "generation_config.json");
    let multilingual = generation.as_ref().and_then(|g| g.get("is_multilingual"));
    multilingual.and_then(Value::as_bool) == Some(false)
}
