//! Logits processors: the per-step edits that translation users expect, applied to a
//! [`StepLogits`] before the search ranks its rows. Each one is a plain function over one
//! hypothesis's row and its *context*: the decoder start token followed by the tokens the
//! hypothesis has generated (forced ones included), which is what `transformers` calls
//! `input_ids` for an encoder-decoder (CTranslate2: the generated tokens only). Nothing here
//! allocates.
//!
//! Semantics (each equal to the `transformers` processor named, checked by the golden test
//! `tests/tests/suite/decoding_golden.rs`):
//! - [`repetition_penalty`] (`RepetitionPenaltyLogitsProcessor`): every distinct token of the
//!   context has its score `s` replaced by `s · θ` when `s < 0`, else `s / θ`, once, however
//!   often it occurs. The context includes the decoder start token in `transformers`, not in
//!   CTranslate2 ([`Processors::context_has_start`]).
//! - [`ban_repeated_ngrams`] (`NoRepeatNGramLogitsProcessor`): a token that would complete an
//!   n-gram already present in the context gets `-inf`; nothing while the context plus the
//!   new token is shorter than `n`.
//! - [`ban_sequences`] (`NoBadWordsLogitsProcessor`): a banned sequence of one token is
//!   always `-inf`; a longer one bans its last token when the context ends with the rest.
//! - [`min_length`] (`MinLengthLogitsProcessor`): EOS is `-inf` while the context (start token
//!   included) is shorter than the minimum length.
//! - [`force`] (`ForcedBOSLogitsProcessor`, `ForcedEOSLogitsProcessor`, and the target prefix
//!   of CTranslate2): every token but the forced one becomes `-inf` and the forced one `0`, so
//!   a forced token adds exactly 0 to a hypothesis's log-probability (its log-softmax is 0).
//!
//! [`Processors`] runs them in `transformers`' order for every live hypothesis.

pub mod whisper;

use crate::search::StepLogits;

/// The token at `i` of a context made of `start` (when there is one) followed by `tokens`.
#[inline]
fn at(start: Option<u32>, tokens: &[u32], i: usize) -> u32 {
    match start {
        Some(s) if i == 0 => s,
        Some(_) => tokens[i - 1],
        None => tokens[i],
    }
}

/// The length of that context.
#[inline]
fn context_len(start: Option<u32>, tokens: &[u32]) -> usize {
    tokens.len() + usize::from(start.is_some())
}

/// Divides positive and multiplies negative scores of every distinct context token by
/// `penalty` (> 0; 1 changes nothing). A token is penalised once, at its first occurrence
/// (a quadratic scan of the context instead of a set, so nothing allocates).
pub fn repetition_penalty(row: &mut [f32], start: Option<u32>, tokens: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let len = context_len(start, tokens);
    for i in 0..len {
        let t = at(start, tokens, i);
        if (0..i).any(|j| at(start, tokens, j) == t) {
            continue;
        }
        if let Some(s) = row.get_mut(t as usize) {
            *s = if *s < 0.0 { *s * penalty } else { *s / penalty };
        }
    }
}

/// Bans (`-inf`) every token that would complete an `n`-gram already present in the context
/// (`n` ≥ 1; 0 turns it off).
pub fn ban_repeated_ngrams(row: &mut [f32], start: Option<u32>, tokens: &[u32], n: usize) {
    let len = context_len(start, tokens);
    if n == 0 || len < n {
        return;
    }
    // The last n - 1 tokens against the first n - 1 of every n-gram of the context.
    let suffix = len + 1 - n;
    for i in 0..=len - n {
        let same = (0..n - 1).all(|j| at(start, tokens, i + j) == at(start, tokens, suffix + j));
        if same {
            if let Some(s) = row.get_mut(at(start, tokens, i + n - 1) as usize) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
}

/// Bans the last token of each sequence of `sequences` whose other tokens end the context
/// (a sequence of one token is always banned); empty sequences are ignored.
pub fn ban_sequences<S: AsRef<[u32]>>(
    row: &mut [f32],
    start: Option<u32>,
    tokens: &[u32],
    sequences: &[S],
) {
    let len = context_len(start, tokens);
    for seq in sequences {
        let seq = seq.as_ref();
        let Some((&last, head)) = seq.split_last() else {
            continue;
        };
        let ends_with = head.len() <= len
            && head
                .iter()
                .enumerate()
                .all(|(j, &t)| at(start, tokens, len - head.len() + j) == t);
        if ends_with {
            if let Some(s) = row.get_mut(last as usize) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
}

/// Bans `eos` while the context (start token included, `context_len` tokens) is shorter than
/// `min_length`.
pub fn min_length(row: &mut [f32], context_len: usize, min_length: usize, eos: u32) {
    if context_len < min_length {
        if let Some(s) = row.get_mut(eos as usize) {
            *s = f32::NEG_INFINITY;
        }
    }
}

/// Makes `token` the only possible continuation: `0` for it, `-inf` for every other token.
pub fn force(row: &mut [f32], token: u32) {
    row.fill(f32::NEG_INFINITY);
    if let Some(s) = row.get_mut(token as usize) {
        *s = 0.0;
    }
}

/// The processors of one search, borrowed from its options.
#[derive(Clone, Copy, Debug)]
pub struct Processors<'a> {
    /// The decoder start token.
    pub start: u32,
    /// Whether the context the repetition penalty, the n-gram and the sequence bans look at
    /// begins with the start token (`transformers`) or with the first generated token
    /// (CTranslate2, which never penalises the start token: it matters when the start token
    /// can be generated, as NLLB's and BART's `</s>`).
    pub context_has_start: bool,
    /// End of sequence.
    pub eos: u32,
    /// Token forced at the first step (`forced_bos_token_id`), if any.
    pub forced_bos: Option<u32>,
    /// Tokens forced after it, in order (the target prefix).
    pub prefix: &'a [u32],
    /// Token forced at the last step (`forced_eos_token_id`), if any.
    pub forced_eos: Option<u32>,
    /// The step that is the last one (`max_steps - 1`), for `forced_eos`.
    pub last_step: usize,
    /// Repetition penalty θ (1: off).
    pub repetition_penalty: f32,
    /// No-repeat n-gram size (0: off).
    pub no_repeat_ngram_size: usize,
    /// Tokens never generated.
    pub suppress: &'a [u32],
    /// Banned token sequences.
    pub bad_words: &'a [Vec<u32>],
    /// Minimum context length (start token included) before EOS is allowed.
    pub min_length: usize,
}

impl Processors<'_> {
    /// Applies every processor to every live hypothesis's row of `step`.
    pub fn apply(&self, step: &mut StepLogits<'_>) {
        for b in 0..step.beams {
            let (tokens, row) = step.tokens_and_row_mut(b);
            self.apply_row(step_index(tokens), tokens, row);
        }
    }

    /// The token forced at `step`: the forced BOS, then the prefix.
    pub fn forced(&self, step: usize) -> Option<u32> {
        match self.forced_bos {
            Some(bos) if step == 0 => Some(bos),
            Some(_) => self.prefix.get(step - 1).copied(),
            None => self.prefix.get(step).copied(),
        }
    }

    /// How many steps are forced.
    pub fn forced_len(&self) -> usize {
        usize::from(self.forced_bos.is_some()) + self.prefix.len()
    }

    /// The processors for one hypothesis at `step`, with its generated `tokens`.
    fn apply_row(&self, step: usize, tokens: &[u32], row: &mut [f32]) {
        if let Some(token) = self.forced(step) {
            force(row, token);
            return;
        }
        let start = Some(self.start).filter(|_| self.context_has_start);
        repetition_penalty(row, start, tokens, self.repetition_penalty);
        ban_repeated_ngrams(row, start, tokens, self.no_repeat_ngram_size);
        ban_sequences(row, start, tokens, self.bad_words);
        min_length(row, tokens.len() + 1, self.min_length, self.eos);
        for &t in self.suppress {
            if let Some(s) = row.get_mut(t as usize) {
                *s = f32::NEG_INFINITY;
            }
        }
        if let Some(eos) = self.forced_eos.filter(|_| step == self.last_step) {
            force(row, eos);
        }
    }
}

/// The step a hypothesis is at: the number of tokens it has generated.
#[inline]
fn step_index(tokens: &[u32]) -> usize {
    tokens.len()
}
