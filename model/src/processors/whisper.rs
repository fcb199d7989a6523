//! Whisper's decoding rules as a logits processor, as openai-whisper's `decoding.py` and
//! CTranslate2 apply them to every step of a search (greedy or beam):
//!
//! 1. **Suppress blank** (first generated step only): the tokens of `" "` and `<|endoftext|>`.
//! 2. **Suppress tokens**: the model's list (`suppress_tokens` / `suppress_ids`, the
//!    non-speech symbols).
//! 3. **Timestamp rules** (when the prompt asks for timestamps):
//!    - `<|notimestamps|>` is never generated;
//!    - timestamps come in pairs except directly before `<|endoftext|>`: after a lone
//!      timestamp only another timestamp or `<|endoftext|>` may follow; after a pair, no
//!      timestamp;
//!    - timestamps never decrease, and a segment has a non-zero length (after a pair's
//!      second timestamp, or any text, the next timestamp is strictly later);
//!    - the first generated token is a timestamp, at most `max_initial_timestamp_index`
//!      steps (of 20 ms) from the start;
//!    - when the probability mass of all timestamps exceeds that of the most likely text
//!      token, only timestamps remain.

use tessel_kernels::Isa;

use crate::ops::{logsumexp, max};
use crate::search::StepLogits;

/// openai-whisper's default first-timestamp limit: 1 s in steps of 20 ms.
pub const MAX_INITIAL_TIMESTAMP_INDEX: u32 = 50;

/// The ids and options the rules need (from the tokenizer and the model's config).
#[derive(Clone, Debug)]
pub struct WhisperRules<'a> {
    /// `<|endoftext|>`.
    pub eot: u32,
    /// `<|notimestamps|>`.
    pub no_timestamps: u32,
    /// The first timestamp token, `<|0.00|>`; every id from it on is a timestamp.
    pub timestamp_begin: u32,
    /// The tokens of `" "`, suppressed with `<|endoftext|>` at the first step (empty: no
    /// blank suppression).
    pub blank: &'a [u32],
    /// Suppressed at every step.
    pub suppress: &'a [u32],
    /// Apply the timestamp rules (the prompt does not end in `<|notimestamps|>`).
    pub timestamps: bool,
    /// The latest first timestamp, in 20 ms steps (`None`: no limit).
    pub max_initial_timestamp_index: Option<u32>,
}

fn mask(row: &mut [f32], ids: impl IntoIterator<Item = u32>) {
    for id in ids {
        if let Some(v) = row.get_mut(id as usize) {
            *v = f32::NEG_INFINITY;
        }
    }
}

impl WhisperRules<'_> {
    /// Applies the rules to every live hypothesis of `step`.
    pub fn apply(&self, isa: Isa, step: &mut StepLogits<'_>) {
        self.apply_from(isa, step, 0);
    }

    /// Applies the rules to every live hypothesis of `step` of a search whose first
    /// `sample_begin` tokens are forced (a prefix), as CTranslate2 does: the blank is
    /// suppressed at step `sample_begin`; the timestamp rules read the tokens from
    /// `sample_begin` on and apply after it (the first-step rules only at step 0 of a search
    /// without a prefix); before and at it, only `<|notimestamps|>` is masked.
    pub fn apply_from(&self, isa: Isa, step: &mut StepLogits<'_>, sample_begin: usize) {
        let at = step.step;
        let timed = at > sample_begin || (at == 0 && sample_begin == 0);
        for beam in 0..step.beams {
            let (last, penultimate, last_timestamp) = {
                let all = step.tokens(beam);
                let tokens = &all[sample_begin.min(all.len())..];
                let n = tokens.len();
                let last_timestamp = tokens.iter().rev().find(|&&t| self.is_timestamp(t));
                (
                    n.checked_sub(1).map(|i| tokens[i]),
                    n.checked_sub(2).map(|i| tokens[i]),
                    last_timestamp.copied(),
                )
            };
            let row = step.row_mut(beam);
            if at == sample_begin && !self.blank.is_empty() {
                mask(row, self.blank.iter().copied().chain([self.eot]));
            }
            mask(row, self.suppress.iter().copied());
            if self.timestamps && timed {
                self.timestamp_rules(isa, row, at == 0, (last, penultimate), last_timestamp);
            } else if self.timestamps {
                mask(row, [self.no_timestamps]);
            }
        }
    }

    fn is_timestamp(&self, token: u32) -> bool {
        token >= self.timestamp_begin
    }

    fn timestamp_rules(
        &self,
        isa: Isa,
        row: &mut [f32],
        first: bool,
        (last, penultimate): (Option<u32>, Option<u32>),
        last_timestamp: Option<u32>,
    ) {
        let len = row.len();
        let begin = (self.timestamp_begin as usize).min(len);
        let eot = (self.eot as usize).min(len);
        mask(row, [self.no_timestamps]);
        let last_was = last.is_some_and(|t| self.is_timestamp(t));
        let penultimate_was = penultimate.is_none_or(|t| self.is_timestamp(t));
        if last_was {
            if penultimate_was {
                row[begin..].fill(f32::NEG_INFINITY);
            } else {
                row[..eot].fill(f32::NEG_INFINITY);
            }
        }
        if let Some(t) = last_timestamp {
            let floor = if last_was && !penultimate_was {
                t
            } else {
                t + 1
            };
            row[begin..(floor as usize).clamp(begin, len)].fill(f32::NEG_INFINITY);
        }
        if first {
            row[..begin].fill(f32::NEG_INFINITY);
            if let Some(index) = self.max_initial_timestamp_index {
                let last_allowed = self.timestamp_begin as usize + index as usize;
                if last_allowed + 1 < len {
                    row[last_allowed + 1..].fill(f32::NEG_INFINITY);
                }
            }
        }
        // The mass of every timestamp against the most likely text token (log-softmax shares
        // its normaliser, so the raw logits compare alike).
        let timestamps = logsumexp(isa, &row[begin..]);
        let text = max(isa, &row[..begin]);
        if timestamps > text {
            row[..begin].fill(f32::NEG_INFINITY);
        }
    }
}
