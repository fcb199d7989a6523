//! Hugging Face `tokenizer.json` files through the `tokenizers` crate (built without its C
//! dependencies: `fancy-regex` instead of Oniguruma, no C++ suffix array).
//!
//! Encoding and decoding are the crate's, so they are those of the Python `tokenizers`
//! library and of every `transformers` tokenizer backed by it; what this wrapper adds is typed
//! errors and the refusal to decode ids outside the vocabulary (the library skips them
//! silently). Golden test: `tests/hf.rs` (a byte-level BPE trained with the Python library).

use std::collections::HashSet;
use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::{read_file, TextError};
use crate::spm::charsmap;

mod bpe_json;

/// A tokenizer loaded from a `tokenizer.json`.
#[derive(Clone)]
pub struct HfTokenizer {
    /// The pipeline.
    tokenizer: Tokenizer,
    /// Ids of the added tokens marked special.
    special: HashSet<u32>,
    /// One past the largest id (model vocabulary and added tokens).
    vocab_size: usize,
    /// The file's name, for errors.
    name: String,
}

impl HfTokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: &Path) -> Result<Self, TextError> {
        let bytes = read_file(path)?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    /// Loads `tokenizer.json` content; `name` names it in errors.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Self, TextError> {
        let (tokenizer, max_model_id) = match bpe_json::read(bytes, valid_part) {
            Some(direct) => (direct.tokenizer, direct.max_model_id),
            None => {
                let tokenizer = Self::read_with_library(bytes, name)?;
                let max = tokenizer.get_vocab(false).values().copied().max();
                (tokenizer, max)
            }
        };
        let added = tokenizer.get_added_tokens_decoder();
        let special = added
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(&id, _)| id)
            .collect();
        // The largest id, not the count: a vocabulary may leave ids unused.
        let vocab_size = max_model_id
            .into_iter()
            .chain(added.keys().copied())
            .map(|id| id as usize + 1)
            .max()
            .unwrap_or(0);
        Ok(Self {
            tokenizer,
            special,
            vocab_size,
            name: name.to_owned(),
        })
    }

    /// Reads `tokenizer.json` content with `Tokenizer::from_bytes`, after checking what would
    /// make the library panic.
    fn read_with_library(bytes: &[u8], name: &str) -> Result<Tokenizer, TextError> {
        // `tokenizers` panics (`expect`) on invalid JSON inside a decoder, on a Precompiled
        // normalizer it cannot read and, when encoding, on a template naming a special token
        // it does not define: all are checked before it sees the bytes.
        let json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| TextError::malformed(name, e))?;
        validate_json(&json).map_err(|reason| TextError::malformed(name, reason))?;
        Tokenizer::from_bytes(bytes).map_err(|e| TextError::malformed(name, e))
    }

    /// Whether `bytes` read through the direct BPE reader, and what it built: for tests that
    /// hold it to the library's own reading.
    #[doc(hidden)]
    pub fn read_direct(bytes: &[u8]) -> Option<Tokenizer> {
        bpe_json::read(bytes, valid_part).map(|direct| direct.tokenizer)
    }

    /// `Tokenizer::from_bytes` on `bytes` behind the same checks as [`Self::from_bytes`]: the
    /// reference the direct reader is held to.
    #[doc(hidden)]
    pub fn read_library(bytes: &[u8]) -> Result<Tokenizer, TextError> {
        Self::read_with_library(bytes, "tokenizer.json")
    }

    /// Encodes `text`; `add_special_tokens` applies the file's post-processor (e.g. `</s>`).
    /// A post-processor that emits an id with no token (a file whose template names ids
    /// outside its vocabulary) is [`TextError::Malformed`].
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TextError> {
        let encoding = self
            .tokenizer
            .encode(text, add_special_tokens)
            .map_err(TextError::pipeline)?;
        let ids = encoding.get_ids();
        if let Some(&id) = ids
            .iter()
            .find(|&&id| self.tokenizer.id_to_token(id).is_none())
        {
            return Err(TextError::malformed(
                self.name.as_str(),
                format!("the pipeline emits id {id}, which has no token"),
            ));
        }
        Ok(ids.to_vec())
    }

    /// Decodes `ids`; `skip_special_tokens` drops the special added tokens. An id with no token
    /// is a [`TextError::UnknownId`].
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TextError> {
        self.check_ids(ids)?;
        self.tokenizer
            .decode(ids, skip_special_tokens)
            .map_err(TextError::pipeline)
    }

    /// Fails with [`TextError::UnknownId`] on the first id that has no token.
    pub fn check_ids(&self, ids: &[u32]) -> Result<(), TextError> {
        match ids
            .iter()
            .find(|&&id| self.tokenizer.id_to_token(id).is_none())
        {
            Some(&id) => Err(TextError::UnknownId {
                id,
                vocab_size: self.vocab_size,
            }),
            None => Ok(()),
        }
    }

    /// The id of a token (model vocabulary or added).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// The token of an id.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// Whether `id` is an added token marked special.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.contains(&id)
    }

    /// One past the largest id (ids below it may still have no token).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The underlying `tokenizers` pipeline.
    pub fn inner(&self) -> &Tokenizer {
        &self.tokenizer
    }
}

/// Whether one top-level part of a `tokenizer.json` passes [`validate_json`].
fn valid_part(part: &str) -> bool {
    serde_json::from_str(part).is_ok_and(|json| validate_json(&json).is_ok())
}

/// Checks what the `tokenizers` crate trusts in a `tokenizer.json`: every `Precompiled`
/// normalizer's character map is a base64 string of a blob that [`charsmap::validate`] accepts
/// (it panics on one it cannot parse, and reads the trie without bounds checks while
/// normalizing), and every `TemplateProcessing` defines the special tokens its templates name,
/// each with as many ids as tokens (it looks them up with `[]` while encoding).
fn validate_json(json: &serde_json::Value) -> Result<(), String> {
    match json {
        serde_json::Value::Object(map) => {
            if map.get("type").and_then(serde_json::Value::as_str) == Some("TemplateProcessing") {
                validate_template(map)?;
            }
            if map.get("type").and_then(serde_json::Value::as_str) == Some("Precompiled") {
                let text = map
                    .get("precompiled_charsmap")
                    .and_then(serde_json::Value::as_str)
                    .ok_or("Precompiled normalizer without a precompiled_charsmap string")?;
                let blob =
                    base64::decode(text).map_err(|e| format!("precompiled_charsmap: {e}"))?;
                charsmap::validate(&blob).map_err(|e| format!("precompiled_charsmap: {e}"))?;
            }
            map.values().try_for_each(validate_json)
        }
        serde_json::Value::Array(items) => items.iter().try_for_each(validate_json),
        _ => Ok(()),
    }
}

/// A `TemplateProcessing` object: its templates' special tokens are defined, with as many
/// ids as tokens.
fn validate_template(map: &serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    let specials = map
        .get("special_tokens")
        .and_then(serde_json::Value::as_object);
    for (name, token) in specials.into_iter().flatten() {
        let len = |key: &str| {
            token
                .get(key)
                .and_then(serde_json::Value::as_array)
                .map(Vec::len)
        };
        if len("ids") != len("tokens") {
            return Err(format!(
                "template special token {name:?}: ids and tokens differ in length"
            ));
        }
    }
    let pieces = ["single", "pair"]
        .iter()
        .filter_map(|k| map.get(*k).and_then(serde_json::Value::as_array))
        .flatten();
    for piece in pieces {
        let Some(id) = piece
            .get("SpecialToken")
            .and_then(|t| t.get("id"))
            .and_then(serde_json::Value::as_str)
        else {
            continue;
        };
        if !specials.is_some_and(|s| s.contains_key(id)) {
            return Err(format!(
                "template names special token {id:?}, which it does not define"
            ));
        }
    }
    Ok(())
}
