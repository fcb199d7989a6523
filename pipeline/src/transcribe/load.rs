//! A Whisper model directory: the weights (a CTranslate2 `WhisperSpec` directory with
//! `model.bin`, or a Hugging Face directory with `config.json` + `model.safetensors`, opened
//! by [`Directory::open`]), the tokenizer (`tokenizer.json`) the directory
//! ships, and whether it says the model is English-only.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use tessel_model::load::directory::{Directory, Format, Modality, OpenError};
use tessel_model::{LoadSettings, Model, WeightType};
use tessel_text::hf::HfTokenizer;
use tessel_text::whisper::WhisperTokenizer;

use super::types::TranscribeError;

/// Most decoder positions a Whisper directory is read with (the stored position tables cap
/// them; the encoder always reads its stored 1500).
const MAX_TARGET: usize = 448;

/// The typed error of an open or load failure.
fn open_error(error: OpenError) -> TranscribeError {
    match error {
        OpenError::Load(e) => TranscribeError::Load(e),
        OpenError::Ct2(e) => TranscribeError::Ct2(e),
        e => TranscribeError::Open(e),
    }
}

/// Loads the model and tokenizer of `dir`, planned for beams up to `max_beam`, the linear
/// layers stored as `weights` (or as the file stores them), with what the directory says of
/// itself.
pub fn load_dir(
    dir: &Path,
    max_beam: usize,
    weights: Option<WeightType>,
) -> Result<(Arc<Model<'static>>, WhisperTokenizer, Directory), TranscribeError> {
    let (model, tokenizer, directory, ()) =
        load_dir_then(dir, max_beam, weights, |_, _| Ok::<_, TranscribeError>(()))?;
    Ok((model, tokenizer, directory))
}

/// [`load_dir`], running `meanwhile` on the loaded model while the tokenizer (a few MB of
/// JSON, parsed on another thread from the start) may still be parsing: work that needs the
/// weights only overlaps the parse. Errors come in the order the steps would give them one
/// after the other: the weights', the tokenizer's, then `meanwhile`'s.
pub fn load_dir_then<T, E: From<TranscribeError>>(
    dir: &Path,
    max_beam: usize,
    weights: Option<WeightType>,
    meanwhile: impl FnOnce(&Arc<Model<'static>>, &Directory) -> Result<T, E>,
) -> Result<(Arc<Model<'static>>, WhisperTokenizer, Directory, T), E> {
    let directory = Directory::open(dir).map_err(open_error)?;
    if directory.modality() != Some(Modality::Speech) {
        return Err(TranscribeError::NotWhisper(format!(
            "{} holds {}",
            dir.display(),
            directory.describe()
        ))
        .into());
    }
    let settings = LoadSettings {
        max_beam,
        max_len: MAX_TARGET,
        weights,
    };
    let path = dir.join("tokenizer.json");
    let (loaded, tokenizer) = std::thread::scope(|scope| {
        let tokenizer = path
            .is_file()
            .then(|| scope.spawn(|| read_tokenizer(&path)));
        let loaded = directory.load(&settings).map_err(open_error).map(|loaded| {
            let model = Arc::new(loaded.model);
            let done = meanwhile(&model, &directory);
            (model, done)
        });
        let tokenizer = tokenizer.map(|thread| {
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        (loaded, tokenizer)
    });
    let (model, done) = loaded?;
    let tokenizer = tokenizer.ok_or_else(|| TranscribeError::ModelDir {
        dir: dir.to_owned(),
        reason: "no tokenizer.json".into(),
    })??;
    Ok((model, tokenizer, directory, done?))
}

fn read_tokenizer(path: &Path) -> Result<WhisperTokenizer, TranscribeError> {
    Ok(WhisperTokenizer::new(
        HfTokenizer::from_file(path)?,
        "tokenizer.json",
    )?)
}

/// The vocabulary size of the English-only (`.en`) checkpoints; openai-whisper calls a model
/// multilingual from 51865 tokens on.
const ENGLISH_ONLY_VOCAB: usize = 51864;

/// Whether the directory says its model is English-only: openai-whisper's `.en` vocabulary
/// of 51864 tokens, a CTranslate2 `config.json` whose `lang_ids` is empty (its converter
/// lists the language tokens of multilingual models only), or a Hugging Face
/// `generation_config.json` with `is_multilingual: false`.
pub fn english_only(directory: &Directory, model: &Model<'_>) -> bool {
    if model.config().tgt_vocab == ENGLISH_ONLY_VOCAB {
        return true;
    }
    if let Format::CTranslate2 { .. } = directory.format() {
        let lang_ids = directory.config_json().and_then(|c| c.get("lang_ids"));
        return lang_ids
            .and_then(Value::as_array)
            .is_some_and(|ids| ids.is_empty());
    }
    let generation = directory.generation_config_json();
    let multilingual = generation.and_then(|g| g.get("is_multilingual"));
    multilingual.and_then(Value::as_bool) == Some(false)
}

/// Every head of the last half of the decoder layers (`layers / 2 ..`), CTranslate2's
/// converter's default `alignment_heads`.
pub fn default_alignment_heads(config: &tessel_model::Config) -> Vec<(usize, usize)> {
    let (layers, heads) = (config.decoder_layers, decoder_heads(config));
    (layers / 2..layers)
        .flat_map(|layer| (0..heads).map(move |head| (layer, head)))
        .collect()
}

/// The heads of the decoder's cross-attention, which word timings read.
fn decoder_heads(config: &tessel_model::Config) -> usize {
    config.heads_in(tessel_model::config::StackKind::Decoder)
}

/// The cross-attention heads word timings read: `alignment_heads` of a CTranslate2
/// `config.json` or a Hugging Face `generation_config.json` (pairs `[layer, head]`), else
/// [`default_alignment_heads`]; ordered by layer (stable), as CTranslate2 gathers them.
pub fn alignment_heads(
    directory: &Directory,
    config: &tessel_model::Config,
) -> Result<Vec<(usize, usize)>, TranscribeError> {
    let listed = match directory.format() {
        Format::CTranslate2 { .. } => directory.config_json(),
        _ => directory.generation_config_json(),
    }
    .and_then(|c| c.get("alignment_heads"))
    .filter(|v| !v.is_null());
    let Some(listed) = listed else {
        return Ok(default_alignment_heads(config));
    };
    let bad = || {
        TranscribeError::NotWhisper(format!(
            "alignment_heads must be [layer, head] pairs within {} layers of {} heads",
            config.decoder_layers,
            decoder_heads(config)
        ))
    };
    let mut heads = Vec::new();
    for pair in listed.as_array().ok_or_else(bad)? {
        let pair = pair.as_array().filter(|p| p.len() == 2).ok_or_else(bad)?;
        let index = |v: &Value| v.as_u64().and_then(|v| usize::try_from(v).ok());
        let (Some(layer), Some(head)) = (index(&pair[0]), index(&pair[1])) else {
            return Err(bad());
        };
        if layer >= config.decoder_layers || head >= decoder_heads(config) {
            return Err(bad());
        }
        heads.push((layer, head));
    }
    if heads.is_empty() {
        return Ok(default_alignment_heads(config));
    }
    heads.sort_by_key(|&(layer, _)| layer);
    Ok(heads)
}
