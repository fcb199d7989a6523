//! Greedy and beam search over a session's decoder, with all state in the arena.
//!
//! Beam search keeps `beam` live hypotheses; at each step it takes the best `2·beam`
//! continuations (summed log-probabilities), moves those ending in EOS to the finished set
//! (score divided by `length^length_penalty`, length counting EOS) and keeps the best `beam`
//! others, reordering the self-attention cache rows in place. It stops when `beam` hypotheses
//! have finished or after `max_steps` tokens (live beams are then finished as they are).
//! Greedy search is the one-beam case without the log-softmax over the whole vocabulary.
//!
//! Under `transformers`' rules ([`Session::generate_as_transformers`]) the finished set is
//! `transformers`' beam hypotheses: each step, the candidates among the best `beam` that end
//! (EOS, or any token at the last step) are offered to a set of the `beam` best finished
//! hypotheses by normalised score, where a better one replaces the worst. When the search
//! stops is [`EarlyStopping`]: as soon as the set is full (`early_stopping=True`), or only when
//! the best live hypothesis, normalised as if it ended now (`False`) or, with a positive length
//! penalty, at the length limit (`"never"`), cannot beat the worst finished one
//! (`_check_early_stop_heuristic` in `transformers`' `generation/utils.py`); always at the
//! length limit. Under CTranslate2's rules ([`Session::generate_as_ctranslate2`]) every ending
//! candidate among the best `beam` is registered (possibly more than `beam` in all), the best
//! `num_hypotheses` are returned, and the search stops as its `BeamSearch` does.
//!
//! Sampling ([`SearchOptions::sampling`], one beam only) draws each token from
//! `softmax(logits / T)` after the logits processors ran (see [`crate::sampling`]) instead of
//! taking the argmax. The hypothesis score is still the sum of the log-probabilities of the
//! chosen tokens under the *untempered* processed distribution, `log_softmax(logits)[token]`,
//! as openai-whisper accumulates `sum_logprobs` at every temperature (its fallback compares
//! `sum_logprobs / (len + 1)` against a threshold), then normalised as for greedy search.

use crate::forward::Tokens;
use crate::ops::{argmax, log_softmax, logsumexp};
use crate::plan::search_parts;
use crate::sampling::{sample, Sampling};
use crate::session::{check_tokens, Arena, ModelRef, RunError, Session};

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchOptions {
    /// Beam width; 1 is greedy.
    pub beam: usize,
    /// Tokens to generate at most (decoder positions, the BOS input included).
    pub max_steps: usize,
    /// Exponent α of the length normalisation `score / length^α` (0: raw sum).
    pub length_penalty: f32,
    /// Finish a hypothesis when it produces EOS; `false` treats EOS as an ordinary token, so
    /// every search runs exactly `max_steps` steps (benchmarks).
    pub stop_at_eos: bool,
    /// Draw each token at random instead of taking the most likely one (`beam` must be 1);
    /// `None` is greedy or beam search.
    pub sampling: Option<Sampling>,
}

impl SearchOptions {
    /// Greedy search of at most `max_steps` tokens, stopping at EOS.
    pub fn greedy(max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam: 1,
            max_steps,
            length_penalty: 1.0,
            stop_at_eos: true,
            sampling: None,
        }
    }

    /// Beam search of width `beam`, at most `max_steps` tokens, length penalty 1.
    pub fn beam(beam: usize, max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam,
            ..SearchOptions::greedy(max_steps)
        }
    }

    /// One hypothesis of at most `max_steps` tokens, each drawn as `sampling` says.
    pub fn sample(sampling: Sampling, max_steps: usize) -> SearchOptions {
        SearchOptions {
            sampling: Some(sampling),
            ..SearchOptions::greedy(max_steps)
        }
    }
}

/// When a beam search under `transformers`' rules stops before its length limit
/// (`early_stopping` of `transformers.generate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyStopping {
    /// `early_stopping=True`: as soon as `beam` hypotheses have finished.
    WhenFull,
    /// `early_stopping=False` (`transformers`' default): once `beam` hypotheses have finished
    /// and the best live one, its score normalised by its current length, is no better than
    /// the worst finished one.
    #[default]
    Heuristic,
    /// `early_stopping="never"`: as `Heuristic`, but with a positive length penalty the live
    /// score is normalised by the length limit (the best it could reach), so the search
    /// nearly always runs to the limit.
    Never,
}

/// Which reference's beam search rules a search follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rules {
    /// tessel's own: the first `beam` finished hypotheses, stop then.
    Plain,
    /// CTranslate2's `BeamSearch` (see [`Session::generate_as_ctranslate2`]).
    CTranslate2 {
        /// Hypotheses asked for (`num_hypotheses`), which its early exit waits for.
        num_hypotheses: usize,
        /// Steps forced by a target prefix before the first free one.
        forced: usize,
    },
    /// `transformers`': the best `beam` of the best candidates that finished, with its
    /// stopping rule.
    Transformers(EarlyStopping),
}

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
    history: &'a [u32],
    stride: usize,
}

impl StepLogits<'_> {
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
    tokens: &'a [u32],
    lens: &'a [u32],
    scores: &'a [f32],
    count: usize,
    stride: usize,
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

/// The search state carved from the arena.
struct State<'a> {
    history: [&'a mut [u32]; 2],
    finished: &'a mut [u32],
    finished_len: &'a mut [u32],
    finished_score: &'a mut [f32],
    beam_score: &'a mut [f32],
    cand_score: &'a mut [f32],
    cand_beam: &'a mut [u32],
    cand_token: &'a mut [u32],
}

/// Tokens [`State::offer_row`] tests against the last kept score at once.
const OFFER_BLOCK: usize = 16;

impl<'a> State<'a> {
    fn new(search: &'a mut [f32], beam: usize, tgt: usize) -> State<'a> {
        let mut rest = search;
        let mut parts = search_parts(beam, tgt).map(|n| {
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(n);
            rest = tail;
            Some(head)
        });
        let mut take = |i: usize| parts[i].take().unwrap_or_default();
        let u32s = |p: &'a mut [f32]| -> &'a mut [u32] { bytemuck::cast_slice_mut(p) };
        State {
            history: [u32s(take(0)), u32s(take(1))],
            finished: u32s(take(2)),
            finished_len: u32s(take(3)),
            finished_score: take(4),
            beam_score: take(5),
            cand_score: take(6),
            cand_beam: u32s(take(7)),
            cand_token: u32s(take(8)),
        }
    }

    /// Inserts a candidate into the descending top-`k` list of `count` entries (impossible ones,
    /// scored NaN or -inf, never).
    fn offer(&mut self, count: &mut usize, k: usize, score: f32, beam: u32, token: u32) {
        let full = *count == k;
        // NaN never ranks; -inf is a continuation a logits processor ruled out.
        if score.is_nan() || score == f32::NEG_INFINITY || (full && score <= self.cand_score[k - 1])
        {
            return;
        }
        let mut at = (*count).min(k - 1);
        while at > 0 && self.cand_score[at - 1] < score {
            self.cand_score[at] = self.cand_score[at - 1];
            self.cand_beam[at] = self.cand_beam[at - 1];
            self.cand_token[at] = self.cand_token[at - 1];
            at -= 1;
        }
        self.cand_score[at] = score;
        self.cand_beam[at] = beam;
        self.cand_token[at] = token;
        *count = (*count + 1).min(k);
    }

    /// Offers `base + lp` for every token of one beam's row of log-probabilities, in token
    /// order, as [`State::offer`] would one by one. Once the list is full, blocks of
    /// [`OFFER_BLOCK`] tokens none of which beats the last kept score are skipped after one
    /// comparison each, a loop the compiler vectorises: the same `f32` sums are compared, so
    /// exactly the candidates `offer` would take are offered.
    fn offer_row(&mut self, count: &mut usize, k: usize, base: f32, beam: u32, row: &[f32]) {
        if k == 0 {
            return;
        }
        let mut token = 0;
        while token < row.len() && *count < k {
            self.offer(count, k, base + row[token], beam, token as u32);
            token += 1;
        }
        let mut blocks = row[token..].chunks_exact(OFFER_BLOCK);
        for block in &mut blocks {
            let last = self.cand_score[k - 1];
            if block
                .iter()
                .fold(false, |any, &lp| any | (base + lp > last))
            {
                for (i, &lp) in block.iter().enumerate() {
                    self.offer(count, k, base + lp, beam, (token + i) as u32);
                }
            }
            token += OFFER_BLOCK;
        }
        for (i, &lp) in blocks.remainder().iter().enumerate() {
            self.offer(count, k, base + lp, beam, (token + i) as u32);
        }
    }

    /// Records a finished hypothesis: `history[cur]` row `beam` up to `len - 1`, then `last`.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        slot: usize,
        cur: usize,
        beam: usize,
        len: usize,
        last: u32,
        score: f32,
        tgt: usize,
    ) {
        let (src, dst) = (beam * tgt, slot * tgt);
        self.finished[dst..dst + len - 1].copy_from_slice(&self.history[cur][src..src + len - 1]);
        self.finished[dst + len - 1] = last;
        self.finished_len[slot] = len as u32;
        self.finished_score[slot] = score;
    }

    /// Continues hypothesis `from` of `history[cur]` with `token` as live hypothesis `slot` of
    /// the other history, scored `score`.
    #[allow(clippy::too_many_arguments)]
    fn keep(
        &mut self,
        cur: usize,
        step: usize,
        slot: usize,
        from: usize,
        token: u32,
        score: f32,
        tgt: usize,
    ) {
        let (src, dst) = (from * tgt, slot * tgt);
        let [a, b] = &mut self.history;
        let (old, new) = if cur == 0 { (&*a, b) } else { (&*b, a) };
        new[dst..dst + step].copy_from_slice(&old[src..src + step]);
        new[dst + step] = token;
        self.beam_score[slot] = score;
    }

    /// Offers a finished hypothesis to the set of the best `beam` (`count` so far): it takes a
    /// free slot, else replaces the worst when it scores better.
    #[allow(clippy::too_many_arguments)]
    fn offer_finished(
        &mut self,
        count: &mut usize,
        beam: usize,
        cur: usize,
        from: usize,
        len: usize,
        last: u32,
        score: f32,
        tgt: usize,
    ) {
        let slot = if *count < beam {
            *count += 1;
            *count - 1
        } else {
            let worst = self.worst_finished(beam);
            if score <= self.finished_score[worst] {
                return;
            }
            worst
        };
        self.finish(slot, cur, from, len, last, score, tgt);
    }

    /// The slot of the lowest score among the first `count` finished hypotheses (`count` > 0).
    fn worst_finished(&self, count: usize) -> usize {
        (1..count).fold(0, |worst, i| {
            if self.finished_score[i] < self.finished_score[worst] {
                i
            } else {
                worst
            }
        })
    }

    /// Sorts the first `count` finished hypotheses by score, best first (insertion sort).
    fn sort_finished(&mut self, count: usize, tgt: usize) {
        for i in 1..count {
            let mut j = i;
            while j > 0 && self.finished_score[j - 1] < self.finished_score[j] {
                self.finished_score.swap(j - 1, j);
                self.finished_len.swap(j - 1, j);
                let (a, b) = self.finished.split_at_mut(j * tgt);
                a[(j - 1) * tgt..].swap_with_slice(&mut b[..tgt]);
                j -= 1;
            }
        }
    }
}

/// One beam step's candidates as the selection rules see them.
#[derive(Clone, Copy, Debug)]
struct BeamStep {
    /// Beam width.
    beam: usize,
    /// Candidates, best first, in the state's `cand_*` lists.
    count: usize,
    /// Step index; the candidates are the `step + 1`-th tokens.
    step: usize,
    /// The history the live hypotheses are in.
    cur: usize,
    /// Stride of the histories (the planned target length).
    tgt: usize,
    /// The token that ends a hypothesis; `None` when EOS is an ordinary token.
    eos: Option<u32>,
    /// Exponent of the length normalisation.
    length_penalty: f32,
    /// Whether this is the last step the length limits allow.
    last: bool,
}

impl BeamStep {
    fn len(&self) -> usize {
        self.step + 1
    }
}

/// What a search has finished so far.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    /// Finished hypotheses held.
    finished: usize,
    /// Hypotheses CTranslate2's rules registered (may exceed those held: only the best `beam`
    /// are kept).
    registered: usize,
    /// Whether the best candidate of some step ended (CTranslate2's `top_beam_finished`).
    top_finished: bool,
}

impl Tally {
    /// CTranslate2's stop before the length limit: with a length penalty of 0, once a step's
    /// best candidate has ended and `num_hypotheses` are registered; else once `beam` are
    /// (`patience` 1).
    fn ctranslate2_done(&self, beam: usize, num_hypotheses: usize, length_penalty: f32) -> bool {
        if length_penalty == 0.0 {
            self.top_finished && self.registered >= num_hypotheses
        } else {
            self.registered >= beam
        }
    }
}

impl State<'_> {
    fn is_eos(&self, at: &BeamStep, c: usize) -> bool {
        Some(self.cand_token[c]) == at.eos
    }

    /// Candidate `c` continues as live hypothesis `slot`.
    fn keep_candidate(
        &mut self,
        at: &BeamStep,
        c: usize,
        slot: usize,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) {
        let (score, from, token) = (
            self.cand_score[c],
            self.cand_beam[c] as usize,
            self.cand_token[c],
        );
        self.keep(at.cur, at.step, slot, from, token, score, at.tgt);
        parents[slot] = from as u32;
        step_tokens[slot] = token;
    }

    /// Candidate `c` ends: offered to the best `beam` finished hypotheses.
    fn register(&mut self, at: &BeamStep, c: usize, tally: &mut Tally) {
        let (score, from, token) = (
            self.cand_score[c],
            self.cand_beam[c] as usize,
            self.cand_token[c],
        );
        let norm = normalise(score, at.len(), at.length_penalty);
        let (beam, cur, len, tgt) = (at.beam, at.cur, at.len(), at.tgt);
        self.offer_finished(&mut tally.finished, beam, cur, from, len, token, norm, tgt);
    }

    /// tessel's and `transformers`' selection: the best `beam` candidates that are not EOS
    /// live on. An EOS candidate finishes while fewer than `beam` have (tessel), or, under
    /// `transformers`' rules, when it ranks among the best `beam`, where at the last step
    /// every such candidate ends. Returns the live hypotheses.
    fn select_best(
        &mut self,
        at: &BeamStep,
        transformers: bool,
        tally: &mut Tally,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> usize {
        let mut kept = 0;
        for c in 0..at.count {
            let at_eos = self.is_eos(at, c);
            if transformers && (at_eos || at.last) && c < at.beam {
                self.register(at, c, tally);
            }
            if at_eos {
                if !transformers && tally.finished < at.beam {
                    let (score, from, token) = (
                        self.cand_score[c],
                        self.cand_beam[c] as usize,
                        self.cand_token[c],
                    );
                    let norm = normalise(score, at.len(), at.length_penalty);
                    self.finish(tally.finished, at.cur, from, at.len(), token, norm, at.tgt);
                    tally.finished += 1;
                }
            } else if kept < at.beam {
                self.keep_candidate(at, c, kept, parents, step_tokens);
                kept += 1;
            }
        }
        kept
    }

    /// CTranslate2's selection (`BeamSearch::search`): each of the best `beam` candidates
    /// that ends (EOS, any at the last step) is registered and its place taken by the next of
    /// the other candidates that is not EOS. At the first free step after a forced prefix an
    /// EOS below the best candidate neither ends nor lives (CTranslate2 scores it -1e10), and
    /// may be such a replacement. Returns the live hypotheses.
    fn select_ctranslate2(
        &mut self,
        at: &BeamStep,
        first_free: bool,
        tally: &mut Tally,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> usize {
        let dead = |st: &Self, c: usize| first_free && c > 0 && st.is_eos(at, c);
        let mut kept = 0;
        let mut secondary = at.beam;
        for slot in 0..at.count.min(at.beam) {
            let mut take = slot;
            if (self.is_eos(at, slot) && !dead(self, slot)) || at.last {
                tally.top_finished |= slot == 0;
                tally.registered += 1;
                self.register(at, slot, tally);
                let replacement =
                    (secondary..at.count).find(|&j| dead(self, j) || !self.is_eos(at, j));
                if let Some(j) = replacement {
                    take = j;
                    secondary = j + 1;
                }
            }
            if !at.last && !dead(self, take) {
                self.keep_candidate(at, take, kept, parents, step_tokens);
                kept += 1;
            }
        }
        kept
    }

    /// Whether a beam search under `transformers`' rules stops after a step that generated
    /// the `len`-th token, with `finished` hypotheses finished and the live ones' scores in
    /// `beam_score`, best first (`transformers`' `_beam_search_has_unfinished_sequences`).
    fn transformers_done(
        &self,
        finished: usize,
        beam: usize,
        early_stopping: EarlyStopping,
        len: usize,
        options: &SearchOptions,
    ) -> bool {
        if finished < beam {
            return false;
        }
        let alpha = options.length_penalty;
        let horizon = match early_stopping {
            EarlyStopping::WhenFull => return true,
            EarlyStopping::Never if alpha > 0.0 => options.max_steps,
            EarlyStopping::Heuristic | EarlyStopping::Never => len,
        };
        let best_live = normalise(self.beam_score[0], horizon, alpha);
        let worst = self.finished_score[self.worst_finished(finished)];
        // `transformers` goes on while the best live hypothesis could still do better.
        best_live <= worst
    }
}

fn normalise(score: f32, len: usize, alpha: f32) -> f32 {
    if alpha == 0.0 {
        score
    } else {
        score / libm::powf(len as f32, alpha)
    }
}

impl<M: ModelRef, A: Arena> Session<M, A> {
    fn check_search(&self, options: &SearchOptions) -> Result<(), RunError> {
        if self.source_len().is_none() {
            return Err(RunError::NotEncoded);
        }
        let limits = self.limits();
        if options.beam == 0 || options.beam > limits.max_beam {
            return Err(RunError::BadBeam {
                beam: options.beam,
                max: limits.max_beam,
            });
        }
        if options.max_steps == 0 {
            return Err(RunError::BadOption("max_steps must be positive"));
        }
        if options.max_steps > limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len: options.max_steps,
                max: limits.max_tgt_len,
            });
        }
        if !options.length_penalty.is_finite() {
            return Err(RunError::BadOption("length_penalty must be finite"));
        }
        if let Some(sampling) = &options.sampling {
            if options.beam != 1 {
                return Err(RunError::BadOption("sampling needs beam 1"));
            }
            sampling.check().map_err(RunError::BadOption)?;
        }
        Ok(())
    }

    /// Greedy or beam search from BOS over the encoded source; `on_step` sees the raw logits of
    /// every step (afterwards, beam search turns them into log-probabilities in place). Returns
    /// the finished hypotheses, best first (at most `beam`), borrowed from the arena until the
    /// next call on the session.
    pub fn generate(
        &mut self,
        options: &SearchOptions,
        on_step: impl FnMut(StepView<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        let bos = self.model().config().bos_id;
        self.generate_from(&[bos], options, on_step)
    }

    /// [`Session::generate`] after a forced start: `prefix` (BOS first, then e.g. language or
    /// task tokens) is fed in one batched [`Session::prefill`], and the search continues from
    /// its last token. Hypotheses hold only the tokens generated after the prefix; the prefix
    /// and `max_steps` together take `prefix.len() - 1 + max_steps` target positions.
    pub fn generate_from(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        mut on_step: impl FnMut(StepView<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.generate_with(prefix, options, |step| {
            on_step(StepView {
                step: step.step,
                logits: step.logits,
                beams: step.beams,
                vocab: step.vocab,
            })
        })
    }

    /// [`Session::generate_from`] with a logits processor: `process` may change each step's
    /// raw logits (and sees each hypothesis's tokens so far) before the search ranks them.
    pub fn generate_with(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.search_processed(prefix, options, Rules::Plain, process)
    }

    /// [`Session::generate_with`] with the rules of CTranslate2's beam search
    /// (`BeamSearch::search`, `translate_batch` with `num_hypotheses`): of the step's `2·beam`
    /// candidates, each of the best `beam` that ends (EOS, or any at the last step) is
    /// registered as finished and its place taken by the next candidate of the other `beam`
    /// that is not EOS. Registered hypotheses are ranked by normalised score and the best
    /// `num_hypotheses` returned. The search stops at the length limit, or with a length
    /// penalty of 0 once the best candidate of some step has ended and `num_hypotheses` are
    /// registered, or else once `beam` are. The first free step after `forced` forced steps
    /// (a target prefix, a forced BOS) finishes only on its best candidate: an EOS further down
    /// ends no hypothesis and takes its beam out of the search (CTranslate2 scores it -1e10).
    pub fn generate_as_ctranslate2(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        num_hypotheses: usize,
        forced: usize,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        let rules = Rules::CTranslate2 {
            num_hypotheses,
            forced,
        };
        self.search_processed(prefix, options, rules, process)
    }

    /// [`Session::generate_with`] with the rules of `transformers`' beam search: the processor
    /// gets each row's log-probabilities (`log_softmax` of the raw logits) and the search ranks
    /// what it leaves without normalising again; and an EOS continuation finishes a hypothesis
    /// only when it ranks among the best `beam` of the step's `2·beam` candidates (lower ones
    /// are dropped), into the set of the best `beam` finished ones; the search stops as
    /// `early_stopping` says (see the module documentation). Greedy search (one beam) still
    /// hands the processor raw logits, as `transformers`' greedy search does.
    pub fn generate_as_transformers(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        early_stopping: EarlyStopping,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.search_processed(
            prefix,
            options,
            Rules::Transformers(early_stopping),
            process,
        )
    }

    fn search_processed(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        rules: Rules,
        mut process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        let transformers = matches!(rules, Rules::Transformers(_));
        self.check_search(options)?;
        let config = self.model().config();
        let limits = self.limits();
        if prefix.is_empty() {
            return Err(RunError::BadOption("the prefix needs at least one token"));
        }
        let positions = prefix.len() - 1 + options.max_steps;
        if positions > limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len: positions,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", prefix, config.tgt_vocab)?;
        let (vocab, tgt, max_beam) = (config.tgt_vocab, limits.max_tgt_len, limits.max_beam);
        let eos = config.eos_id;
        let isa = self.isa();
        let beam = options.beam;
        let k = 2 * beam;
        self.reset_decoder();
        let mut live = 1;
        let mut tally = Tally::default();
        let mut cur = 0;
        let mut rng = options.sampling.as_ref().map(Sampling::rng);
        for step in 0..options.max_steps {
            if step == 0 {
                self.prefill(prefix)?;
            } else {
                self.step(Tokens::Staged(live))?;
            }
            let buffers = self.search_buffers();
            let (logits, step_tokens, parents) =
                (buffers.logits, buffers.step_tokens, buffers.parents);
            let mut st = State::new(buffers.search, max_beam, tgt);
            if step == 0 {
                st.beam_score[0] = 0.0;
            }
            let normalised = transformers && beam > 1;
            if normalised {
                for row in logits.chunks_exact_mut(vocab) {
                    log_softmax(isa, row);
                }
            }
            process(&mut StepLogits {
                step,
                logits: &mut *logits,
                beams: live,
                vocab,
                history: st.history[cur],
                stride: tgt,
            });
            let len = step + 1;
            let last_step = len == options.max_steps;
            if beam == 1 {
                let chosen = match (&options.sampling, &mut rng) {
                    (Some(sampling), Some(rng)) => sample(logits, sampling, rng),
                    _ => argmax(logits).map(|(i, _)| i as u32),
                };
                let (token, value) = chosen.map_or((eos, 0.0), |t| (t, logits[t as usize]));
                st.beam_score[0] += value - logsumexp(isa, logits);
                st.history[cur][step] = token;
                if (options.stop_at_eos && token == eos) || last_step {
                    let score = normalise(st.beam_score[0], len, options.length_penalty);
                    st.finish(0, cur, 0, len, token, score, tgt);
                    tally.finished = 1;
                    break;
                }
                step_tokens[0] = token;
                continue;
            }
            let mut count = 0;
            for (b, row) in logits.chunks_exact_mut(vocab).enumerate() {
                if !normalised {
                    log_softmax(isa, row);
                }
                st.offer_row(&mut count, k, st.beam_score[b], b as u32, row);
            }
            let at = BeamStep {
                beam,
                count,
                step,
                cur,
                tgt,
                eos: Some(eos).filter(|_| options.stop_at_eos),
                length_penalty: options.length_penalty,
                last: last_step,
            };
            let kept = match rules {
                Rules::CTranslate2 { forced, .. } => {
                    let first_free = forced > 0 && step == forced;
                    st.select_ctranslate2(&at, first_free, &mut tally, parents, step_tokens)
                }
                Rules::Plain | Rules::Transformers(_) => {
                    st.select_best(&at, transformers, &mut tally, parents, step_tokens)
                }
            };
            cur = 1 - cur;
            let done = last_step
                || kept == 0
                || match rules {
                    Rules::Plain => tally.finished >= beam,
                    Rules::CTranslate2 { num_hypotheses, .. } => {
                        tally.ctranslate2_done(beam, num_hypotheses, options.length_penalty)
                    }
                    Rules::Transformers(early_stopping) => {
                        st.transformers_done(tally.finished, beam, early_stopping, len, options)
                    }
                };
            if done {
                if rules == Rules::Plain && last_step && tally.finished < beam {
                    // The live hypotheses finish as they are.
                    for b in 0..kept.min(beam - tally.finished) {
                        let last = st.history[cur][b * tgt + step];
                        let norm = normalise(st.beam_score[b], len, options.length_penalty);
                        st.finish(tally.finished, cur, b, len, last, norm, tgt);
                        tally.finished += 1;
                    }
                }
                break;
            }
            self.reorder(Tokens::Staged(kept));
            live = kept;
        }
        let mut st = State::new(self.search_buffers().search, max_beam, tgt);
        st.sort_finished(tally.finished, tgt);
        let State {
            finished: tokens,
            finished_len: lens,
            finished_score: scores,
            ..
        } = st;
        Ok(Hypotheses {
            tokens,
            lens,
            scores,
            count: tally.finished,
            stride: tgt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::search_parts;

    /// The candidate list after offering `rows` (one per beam, scores `base[b] + lp`), either
    /// token by token through `offer` or row by row through `offer_row`.
    fn candidates(rows: &[Vec<f32>], base: &[f32], k: usize, by_row: bool) -> Vec<(u32, u32, u32)> {
        let vocab = rows[0].len();
        // Room for `2 · beams >= k` candidates, as the search plans it.
        let beams = rows.len().max(k);
        let mut buffer = vec![0.0f32; search_parts(beams, vocab).iter().sum()];
        let mut st = State::new(&mut buffer, beams, vocab);
        let mut count = 0;
        for (b, row) in rows.iter().enumerate() {
            if by_row {
                st.offer_row(&mut count, k, base[b], b as u32, row);
            } else {
                for (token, &lp) in row.iter().enumerate() {
                    st.offer(&mut count, k, base[b] + lp, b as u32, token as u32);
                }
            }
        }
        (0..count)
            .map(|i| {
                (
                    st.cand_score[i].to_bits(),
                    st.cand_beam[i],
                    st.cand_token[i],
                )
            })
            .collect()
    }

    #[test]
    fn offering_a_row_keeps_what_offering_each_token_keeps() {
        // A small generator of rows with ties, NaN and -inf at awkward lengths.
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for vocab in [1, 2, 15, 16, 17, 33, 100, 517] {
            for k in [1, 2, 4, 10] {
                let rows: Vec<Vec<f32>> = (0..3)
                    .map(|_| {
                        (0..vocab)
                            .map(|_| match next() % 20 {
                                0 => f32::NAN,
                                1 => f32::NEG_INFINITY,
                                // Few distinct values: many ties.
                                r => -((r % 7) as f32) * 0.5,
                            })
                            .collect()
                    })
                    .collect();
                let base = [0.0, -0.5, -1.0];
                assert_eq!(
                    candidates(&rows, &base, k, true),
                    candidates(&rows, &base, k, false),
                    "vocab {vocab}, k {k}"
                );
            }
        }
    }
}
