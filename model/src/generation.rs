//! A model's own decoding defaults: Hugging Face's `generation_config.json` (or, for older
//! checkpoints without one, the same keys in `config.json`) read into [`DecodeOptions`].
//!
//! Read: `num_beams`, `num_return_sequences`, `max_length`, `max_new_tokens`, `min_length`,
//! `length_penalty`, `repetition_penalty`, `no_repeat_ngram_size`, `bad_words_ids`,
//! `suppress_tokens`, `forced_bos_token_id`, `forced_eos_token_id`, `decoder_start_token_id`,
//! `eos_token_id` (a list keeps its first id, the one search stops at), `renormalize_logits`. Absent or `null` keys
//! take `transformers`' defaults (`max_length` 20, one beam, penalties off). Sampling keys
//! (`do_sample`, `temperature`, `top_k`, `top_p`) are kept in [`Generation::sampling`] for the
//! host. `early_stopping` (`true`, `false`, `"never"`; absent: `false`, as in `transformers`)
//! becomes [`DecodeOptions::early_stopping`].

use serde_json::Value;
use thiserror::Error;

use crate::decoding::DecodeOptions;
use crate::search::EarlyStopping;

/// Why a generation config was refused.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GenerationError {
    /// Not a JSON object.
    #[error("generation config is not a JSON object: {0}")]
    NotJson(String),
    /// A key has a value of the wrong type or out of range.
    #[error("generation config: `{key}` {reason}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

/// The sampling settings of a generation config (not applied by [`DecodeOptions`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingDefaults {
    /// `do_sample`.
    pub do_sample: bool,
    /// `temperature`.
    pub temperature: Option<f32>,
    /// `top_k`.
    pub top_k: Option<usize>,
    /// `top_p`.
    pub top_p: Option<f32>,
}

/// A model's decoding defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The options, ready to search with (the host may change any of them).
    pub options: DecodeOptions,
    /// `eos_token_id`, when the file sets it.
    pub eos: Option<u32>,
    /// Sampling settings, for the host to pass on.
    pub sampling: SamplingDefaults,
}

fn uint(v: &Value, key: &'static str) -> Result<Option<u64>, GenerationError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x.as_u64().map(Some).ok_or(GenerationError::BadValue {
            key,
            reason: "is not a non-negative integer",
        }),
    }
}

fn id(v: &Value, key: &'static str) -> Result<Option<u32>, GenerationError> {
    uint(v, key)?
        .map(|x| {
            u32::try_from(x).map_err(|_| GenerationError::BadValue {
                key,
                reason: "is not a token id",
            })
        })
        .transpose()
}

fn count(v: &Value, key: &'static str) -> Result<Option<usize>, GenerationError> {
    Ok(uint(v, key)?.map(|x| usize::try_from(x).unwrap_or(usize::MAX)))
}

fn float(v: &Value, key: &'static str) -> Result<Option<f32>, GenerationError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() => Ok(Some(f as f32)),
            _ => Err(GenerationError::BadValue {
                key,
                reason: "is not a finite number",
            }),
        },
    }
}

fn flag(v: &Value, key: &'static str) -> Result<bool, GenerationError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(GenerationError::BadValue {
            key,
            reason: "is not true or false",
        }),
    }
}

fn early_stopping(v: &Value) -> Result<EarlyStopping, GenerationError> {
    match v.get("early_stopping") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(EarlyStopping::Heuristic),
        Some(Value::Bool(true)) => Ok(EarlyStopping::WhenFull),
        Some(Value::String(s)) if s == "never" => Ok(EarlyStopping::Never),
        Some(_) => Err(GenerationError::BadValue {
            key: "early_stopping",
            reason: "is not true, false or \"never\"",
        }),
    }
}

fn ids(v: &Value, key: &'static str) -> Result<Vec<u32>, GenerationError> {
    id_list(v.get(key), key)
}

fn id_list(v: Option<&Value>, key: &'static str) -> Result<Vec<u32>, GenerationError> {
    let bad = GenerationError::BadValue {
        key,
        reason: "is not a list of token ids",
    };
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or(bad.clone())
            })
            .collect(),
        Some(_) => Err(bad),
    }
}

impl Generation {
    /// Reads `generation_config.json` text.
    pub fn from_json(text: &str) -> Result<Generation, GenerationError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| GenerationError::NotJson(e.to_string()))?;
        Generation::from_value(&value)
    }

    /// Reads the keys from a parsed JSON object.
    pub fn from_value(v: &Value) -> Result<Generation, GenerationError> {
        if !v.is_object() {
            return Err(GenerationError::NotJson("not an object".to_owned()));
        }
        let beams = count(v, "num_beams")?.unwrap_or(1);
        if beams == 0 {
            return Err(GenerationError::BadValue {
                key: "num_beams",
                reason: "must be at least 1",
            });
        }
        let mut options = DecodeOptions::beam(beams, 1);
        options.max_new_tokens = count(v, "max_new_tokens")?;
        options.max_length = count(v, "max_length")?.unwrap_or(20);
        options.num_hypotheses = count(v, "num_return_sequences")?.unwrap_or(1).max(1);
        options.min_length = count(v, "min_length")?.unwrap_or(0);
        options.search.length_penalty = float(v, "length_penalty")?.unwrap_or(1.0);
        options.repetition_penalty = float(v, "repetition_penalty")?.unwrap_or(1.0);
        if options.repetition_penalty <= 0.0 {
            return Err(GenerationError::BadValue {
                key: "repetition_penalty",
                reason: "must be positive",
            });
        }
        options.no_repeat_ngram_size = count(v, "no_repeat_ngram_size")?.unwrap_or(0);
        options.suppress_tokens = ids(v, "suppress_tokens")?;
        options.bad_words = match v.get("bad_words_ids") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(words)) => {
                let mut out = Vec::with_capacity(words.len());
                for word in words {
                    out.push(id_list(Some(word), "bad_words_ids")?);
                }
                out
            }
            Some(_) => {
                return Err(GenerationError::BadValue {
                    key: "bad_words_ids",
                    reason: "is not a list of lists of token ids",
                })
            }
        };
        options.early_stopping = early_stopping(v)?;
        options.renormalize_logits = flag(v, "renormalize_logits")?;
        options.forced_bos = id(v, "forced_bos_token_id")?;
        options.forced_eos = id(v, "forced_eos_token_id")?;
        options.decoder_start = id(v, "decoder_start_token_id")?;
        let eos = match v.get("eos_token_id") {
            Some(Value::Array(_)) => ids(v, "eos_token_id")?.first().copied(),
            _ => id(v, "eos_token_id")?,
        };
        let sampling = SamplingDefaults {
            do_sample: v.get("do_sample").and_then(Value::as_bool).unwrap_or(false),
            temperature: float(v, "temperature")?,
            top_k: count(v, "top_k")?,
            top_p: float(v, "top_p")?,
        };
        Ok(Generation {
            options,
            eos,
            sampling,
        })
    }
}
