//! How `translate_batch`'s tokens map to ids and back: a CTranslate2 directory's own
//! vocabularies and `config.json` (unknown tokens as its `unk_token`, the special tokens its
//! config adds to sources), or a Hugging Face directory's tokenizer vocabulary (unknown tokens
//! as `<unk>`).

use tessel_model::load::ct2::Ct2Vocab;
use tessel_pipeline::Hypothesis;
use tessel_text::TextTokenizer;

use super::TranslationResult;
use crate::errors;
use pyo3::PyResult;

/// Where tokens get their ids.
pub enum Tokens {
    /// A CTranslate2 directory's vocabularies and token settings.
    Ct2(Box<Ct2Vocab>),
    /// A tokenizer's vocabulary.
    Tokenizer(Box<TextTokenizer>),
}

impl Tokens {
    /// A source's ids, cut to `max_input_length` tokens first (0: no cut).
    pub fn source_ids(&self, tokens: &[String], max_input_length: usize) -> PyResult<Vec<u32>> {
        let tokens = match max_input_length {
            0 => tokens,
            n => &tokens[..tokens.len().min(n)],
        };
        match self {
            Tokens::Ct2(vocab) => Ok(vocab.source_ids(tokens)),
            Tokens::Tokenizer(tokenizer) => tokens
                .iter()
                .map(|t| match tokenizer.token_to_id(t) {
                    Some(id) => Ok(id),
                    None => self.unk(t),
                })
                .collect(),
        }
    }

    /// A target token's id.
    pub fn target_id(&self, token: &str) -> Option<u32> {
        match self {
            Tokens::Ct2(vocab) => vocab.target.id(token),
            Tokens::Tokenizer(tokenizer) => tokenizer.target_token_to_id(token),
        }
    }

    /// Target tokens' ids: every token must be in the target vocabulary.
    pub fn target_ids(&self, tokens: &[String]) -> PyResult<Vec<u32>> {
        tokens
            .iter()
            .map(|t| {
                self.target_id(t).ok_or_else(|| {
                    errors::input(format!("target token {t:?} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// `suppress_sequences` (and the unknown token when `disable_unk`) as banned sequences.
    pub fn suppressed(
        &self,
        sequences: Option<&[Vec<String>]>,
        disable_unk: bool,
    ) -> PyResult<Vec<Vec<u32>>> {
        let mut banned = Vec::new();
        for sequence in sequences.unwrap_or_default() {
            banned.push(self.target_ids(sequence)?);
        }
        if disable_unk {
            banned.push(vec![self.unk(self.unk_token())?]);
        }
        Ok(banned)
    }

    /// One source's hypotheses as tokens: without a final `eos` unless `return_end_token`,
    /// with their scores when `return_scores`; an empty source has one empty hypothesis.
    pub fn result(
        &self,
        hyps: Vec<Hypothesis>,
        eos: u32,
        return_end_token: bool,
        return_scores: bool,
    ) -> TranslationResult {
        let mut hypotheses = Vec::with_capacity(hyps.len().max(1));
        let mut scores = Vec::new();
        for h in hyps {
            let mut ids = h.tokens.as_slice();
            if !return_end_token {
                if let Some((&last, rest)) = ids.split_last() {
                    if last == eos {
                        ids = rest;
                    }
                }
            }
            hypotheses.push(ids.iter().map(|&id| self.token(id)).collect());
            if return_scores {
                scores.push(h.score);
            }
        }
        if hypotheses.is_empty() {
            hypotheses.push(Vec::new());
            if return_scores {
                scores.push(0.0);
            }
        }
        TranslationResult {
            hypotheses,
            scores,
            attention: Vec::new(),
            logits: Vec::new(),
        }
    }

    /// A target id's token; ids past the vocabulary (the padding rows of T5's embedding) read
    /// as the unknown token.
    pub fn token(&self, id: u32) -> String {
        let found = match self {
            Tokens::Ct2(vocab) => vocab.target.token(id).map(str::to_owned),
            Tokens::Tokenizer(tokenizer) => tokenizer.id_to_token(id),
        };
        found.unwrap_or_else(|| self.unk_token().to_owned())
    }

    fn unk_token(&self) -> &str {
        match self {
            Tokens::Ct2(vocab) => &vocab.tokens.unk_token,
            Tokens::Tokenizer(_) => "<unk>",
        }
    }

    /// The unknown token's id, for `token`, which the vocabulary lacks.
    fn unk(&self, token: &str) -> PyResult<u32> {
        self.target_id(self.unk_token()).ok_or_else(|| {
            errors::input(format!(
                "token {token:?} is not in the vocabulary, which has no {}",
                self.unk_token()
            ))
        })
    }
}
