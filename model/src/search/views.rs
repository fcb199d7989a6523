//! What the host sees of a search: each step's logits (read-only, or open to a logits
//! processor) and the finished hypotheses.

/// What the host sees after each decoder step.
#[derive(Clone, Copy, Debug)]
pub struct StepView<'a> {
    /// Step index (0 for the step whose input is BOS).
    pub step: usize,
    /// Raw logits, `beams × vocab`, row `i` for live hypothesis `i`.
    pub logits: &'a [f32],
    /// Live hypotheses.
    pub beams: usize,
    /// Target vocabulary size.
    pub vocab: usize,
}

/// A step's logits before the search reads them, open to change (suppressing tokens,
/// forcing a token, penalties): what a logits processor sees.
#[derive(Debug)]
pub struct StepLogits<'a> {
    /// Step index (0 for the step after the prefix's last token).
    pub step: usize,
    /// Raw logits, `beams × vocab`, row `i` for live hypothesis `i`; the search ranks
    /// continuations by these after the processor has run (`-inf` removes a token).
    pub logits: &'a mut [f32],
    /// Live hypotheses.
    pub beams: usize,
    /// Target vocabulary size.
    pub vocab: usize,
    pub(super) history: &'a [u32],
    pub(super) stride: usize,
}

impl StepLogits<'_> {
    /// What a per-step callback sees of these logits.
    pub fn view(&self) -> StepView<'_> {
        StepView {
            step: self.step,
            logits: self.logits,
            beams: self.beams,
            vocab: self.vocab,
        }
    }

    /// The tokens hypothesis `beam` has generated so far (`step` of them, the prefix excluded).
    pub fn tokens(&self, beam: usize) -> &[u32] {
        &self.history[beam * self.stride..beam * self.stride + self.step]
    }

    /// Hypothesis `beam`'s row of logits.
    pub fn row_mut(&mut self, beam: usize) -> &mut [f32] {
        &mut self.logits[beam * self.vocab..(beam + 1) * self.vocab]
    }

    /// Hypothesis `beam`'s tokens so far and its row of logits, together.
    pub fn tokens_and_row_mut(&mut self, beam: usize) -> (&[u32], &mut [f32]) {
        let tokens = &self.history[beam * self.stride..beam * self.stride + self.step];
        (
            tokens,
            &mut self.logits[beam * self.vocab..(beam + 1) * self.vocab],
        )
    }
}

/// One finished hypothesis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hypothesis<'a> {
    /// Generated tokens (BOS excluded, EOS included when produced).
    pub tokens: &'a [u32],
    /// Sum of log-probabilities divided by `len^length_penalty`.
    pub score: f32,
}

/// The finished hypotheses of a search, best first, borrowed from the session's arena.
#[derive(Clone, Copy, Debug)]
pub struct Hypotheses<'a> {
    pub(super) tokens: &'a [u32],
    pub(super) lens: &'a [u32],
    pub(super) scores: &'a [f32],
    pub(super) count: usize,
    pub(super) stride: usize,
}

impl<'a> Hypotheses<'a> {
    /// Number of hypotheses.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Hypothesis `i` (0 is the best).
    pub fn get(&self, i: usize) -> Option<Hypothesis<'a>> {
        if i >= self.count {
            return None;
        }
        let len = self.lens[i] as usize;
        Some(Hypothesis {
            tokens: &self.tokens[i * self.stride..i * self.stride + len],
            score: self.scores[i],
        })
    }

    /// The best hypothesis.
    pub fn best(&self) -> Option<Hypothesis<'a>> {
        self.get(0)
    }

    /// All hypotheses, best first.
    pub fn iter(&self) -> impl Iterator<Item = Hypothesis<'a>> + '_ {
        (0..self.count).filter_map(|i| self.get(i))
    }
}
