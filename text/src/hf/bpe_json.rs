//! A direct reader for the common shape of `tokenizer.json`: a BPE model (every Whisper,
//! BART, LED, GPT-2-style and most `transformers` fast tokenizers).
//!
//! `tokenizers` reads a model through `serde_json::Value` and serde's untagged buffering:
//! the 50,000-entry vocabulary and merge list of a Whisper tokenizer are parsed three times
//! over, and that parse is the longest part of loading a small model. This reader splits the
//! file's top level into raw JSON slices, reads the model's fields into their final types in
//! one pass, and builds the same `Tokenizer` through the library's public builders, in the
//! order its own deserializer uses: the model, normalizer, pre-tokenizer, post-processor,
//! decoder, truncation and padding, then the added tokens with `add_tokens`.
//!
//! It only answers when the file is exactly in the shape it reads; anything else (another
//! model type, a repeated key, an unknown field of the model, two tokens of one id, a part that
//! fails to read or to validate, a bad version) returns `None`, and the caller reads the file
//! the library's way, which gives the library's result or error. So where it answers, it builds what
//! `Tokenizer::from_bytes` builds (tested by serialising both: `tests/hf.rs`, and the
//! `tokenizer_files` fuzz target compares them on every input it reads).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tokenizers::models::bpe::{BpeBuilder, Merges, Vocab};
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PostProcessorWrapper,
    PreTokenizerWrapper, Tokenizer, TokenizerBuilder,
};

/// The builder of the library's `Tokenizer` pipeline.
type Builder = TokenizerBuilder<
    ModelWrapper,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// A tokenizer read directly, and the largest id its model's vocabulary holds.
pub(super) struct Direct {
    pub tokenizer: Tokenizer,
    pub max_model_id: Option<u32>,
}

/// Reads `bytes` when they hold a BPE `tokenizer.json` whose every part `validate` accepts;
/// `None` otherwise (the caller then reads them the library's way).
pub(super) fn read(bytes: &[u8], validate: impl Fn(&str) -> bool) -> Option<Direct> {
    let Parts(parts) = serde_json::from_slice(bytes).ok()?;
    let mut model = None;
    let mut builder = Builder::new();
    let mut added: Option<Vec<AddedToken>> = None;
    for (index, (key, raw)) in parts.iter().enumerate() {
        if parts[..index].iter().any(|(seen, _)| seen == key) {
            return None;
        }
        let text = raw.get();
        // The library's validation reads a top-level `type` as a processor's (none has one).
        if key == "type" || (key != "model" && !validate(text)) {
            return None;
        }
        match key.as_str() {
            "version" if serde_json::from_str::<String>(text).ok()? != "1.0" => return None,
            "model" => model = Some(serde_json::from_str::<BpeFields>(text).ok()?),
            "truncation" => builder = builder.with_truncation(serde_json::from_str(text).ok()?),
            "padding" => builder = builder.with_padding(serde_json::from_str(text).ok()?),
            "normalizer" => builder = builder.with_normalizer(serde_json::from_str(text).ok()?),
            "pre_tokenizer" => {
                builder = builder.with_pre_tokenizer(serde_json::from_str(text).ok()?)
            }
            "post_processor" => {
                builder = builder.with_post_processor(serde_json::from_str(text).ok()?)
            }
            "decoder" => builder = builder.with_decoder(serde_json::from_str(text).ok()?),
            "added_tokens" => {
                let tokens: Vec<AddedTokenWithId> = serde_json::from_str(text).ok()?;
                added = Some(tokens.into_iter().map(|t| t.token).collect());
            }
            _ => {}
        }
    }
    let model = model?;
    let max_model_id = model.vocab.values().copied().max();
    let mut tokenizer: Tokenizer = builder.with_model(model.build()?).build().ok()?.into();
    tokenizer.add_tokens(&added.unwrap_or_default());
    Some(Direct {
        tokenizer,
        max_model_id,
    })
}

/// The top level of the file: its keys in order, each with its value's raw JSON.
struct Parts<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Parts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PartsVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for PartsVisitor<'a> {
            type Value = Parts<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Parts<'a>, M::Error> {
                let mut parts = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'a RawValue>()? {
                    parts.push(entry);
                }
                Ok(Parts(parts))
            }
        }
        deserializer.deserialize_map(PartsVisitor(std::marker::PhantomData))
    }
}

/// An added token and the id the file gives it (the library checks the id only to warn).
#[derive(Deserialize)]
struct AddedTokenWithId {
    #[allow(dead_code)]
    id: u32,
    #[serde(flatten)]
    token: AddedToken,
}

/// The merges, as pairs or as the older `"a b"` strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum MergeList {
    Pairs(Merges),
    Lines(Vec<String>),
}

/// A BPE model's fields, as `tokenizers` reads them; a field it would not read refuses.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BpeFields {
    #[serde(rename = "type")]
    kind: String,
    dropout: Option<f32>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    fuse_unk: Option<bool>,
    byte_fallback: Option<bool>,
    ignore_merges: Option<bool>,
    vocab: Vocab,
    merges: MergeList,
}

impl BpeFields {
    /// The model, or `None` when it is not BPE or the library's builder refuses it.
    fn build(self) -> Option<ModelWrapper> {
        if self.kind != "BPE" || !ids_unique(&self.vocab) {
            return None;
        }
        let mut builder = BpeBuilder::new();
        if let Some(dropout) = self.dropout {
            builder = builder.dropout(dropout);
        }
        if let Some(unk) = self.unk_token {
            builder = builder.unk_token(unk);
        }
        if let Some(prefix) = self.continuing_subword_prefix {
            builder = builder.continuing_subword_prefix(prefix);
        }
        if let Some(suffix) = self.end_of_word_suffix {
            builder = builder.end_of_word_suffix(suffix);
        }
        if let Some(fuse) = self.fuse_unk {
            builder = builder.fuse_unk(fuse);
        }
        if let Some(fallback) = self.byte_fallback {
            builder = builder.byte_fallback(fallback);
        }
        if let Some(ignore) = self.ignore_merges {
            builder = builder.ignore_merges(ignore);
        }
        let merges = match self.merges {
            MergeList::Pairs(pairs) => pairs,
            MergeList::Lines(lines) => merge_lines(lines)?,
        };
        let bpe = builder.vocab_and_merges(self.vocab, merges).build().ok()?;
        Some(ModelWrapper::BPE(bpe))
    }
}

/// Whether no two tokens of `vocab` share an id. Where two do, the library keeps the one its
/// hash map yields last, which changes from one reading to the next, so no other reading can
/// build what it builds: such a file is left to it.
fn ids_unique(vocab: &Vocab) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(vocab.len());
    vocab.values().all(|&id| seen.insert(id))
}

/// `"a b"` merge lines as pairs, skipping `#version` lines; `None` for a line that is not
/// two parts split by one space (the library's `BadMerges`).
fn merge_lines(lines: Vec<String>) -> Option<Merges> {
    lines
        .iter()
        .filter(|line| !line.starts_with("#version"))
        .map(|line| {
            let mut parts = line.split(' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(a), Some(b), None) => Some((a.to_owned(), b.to_owned())),
                _ => None,
            }
        })
        .collect()
}
