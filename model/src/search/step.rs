//! One search step after the decoder ran: the logits processor, then the greedy (or sampled)
//! choice, or the beam step's ranking and selection under the search's rules.

use rand_chacha::ChaCha8Rng;
use tessel_kernels::Isa;

use super::options::SearchOptions;
use super::rules::{normalise, BeamRules, BeamStep, Tally};
use super::state::State;
use super::views::StepLogits;
use crate::config::Config;
use crate::forward::SearchBuffers;
use crate::ops::{argmax, log_softmax, logsumexp};
use crate::plan::Limits;
use crate::sampling::{sample, Sampling};
use crate::session::RunError;

/// What a search step leaves for the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The search is over; the tally counts the finished hypotheses.
    Done,
    /// The one hypothesis goes on as it is.
    Same,
    /// This many live hypotheses go on, in the order of the step's parents.
    Reordered(usize, Lineage),
}

/// The live hypotheses before a beam step, which tell how much of each reordered cache row
/// already holds its parent's: rows `b` and `p` computed the same cache positions for the
/// tokens their histories share. Every live hypothesis is distinct (each continues a distinct
/// one with its own token, from one at the start), so a shared history of `n` tokens was one
/// hypothesis whose rows were computed once and copied exactly: the two rows agree, bit for
/// bit, on every position up to the `n`-th generated one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lineage {
    /// Which of the two histories held them.
    history: usize,
    /// Tokens each had: the step's index.
    len: usize,
    /// How many there were: the rows with a cache of their own.
    live: usize,
    /// Stride of the histories.
    tgt: usize,
}

impl Lineage {
    /// How many of its last cache positions row `b` must take from row `p` (both below the
    /// step's rows) to hold what `p` holds, given the slot's search state `search` (a
    /// [`SearchParts`](crate::plan::SearchParts) region planned for `max_beam`): the
    /// generated tokens after their common history; every position before them (the forced
    /// start, the same in every row) and those of the common history already agree. `None`:
    /// all of them, for a row that had no hypothesis.
    pub(crate) fn differing(
        &self,
        search: &mut [f32],
        max_beam: usize,
        b: usize,
        p: usize,
    ) -> Option<usize> {
        if b >= self.live || p >= self.live {
            return None;
        }
        let [even, odd] = State::new(search, max_beam, self.tgt).history;
        let history = if self.history == 0 { even } else { odd };
        let (row_b, row_p) = (b * self.tgt, p * self.tgt);
        let common = history[row_b..row_b + self.len]
            .iter()
            .zip(&history[row_p..row_p + self.len])
            .take_while(|(x, y)| x == y)
            .count();
        Some(self.len - common)
    }
}

/// A search's settings, and what it carries from one step to the next.
pub(crate) struct Search {
    options: SearchOptions,
    rules: BeamRules,
    isa: Isa,
    /// One logits row: the target vocabulary.
    vocab: usize,
    /// Stride of the histories: the planned target length.
    pub(super) tgt: usize,
    /// Beams the arena's search state was planned for.
    max_beam: usize,
    eos: u32,
    /// Live hypotheses: the rows the next decoder step runs.
    live: usize,
    /// Which of the two histories holds the live hypotheses.
    cur: usize,
    /// What has finished so far.
    tally: Tally,
    /// The sampler's generator, when the search samples.
    rng: Option<ChaCha8Rng>,
}

impl Search {
    /// A search from one live hypothesis, for a session planned as `limits` say.
    pub(crate) fn new(
        options: &SearchOptions,
        rules: BeamRules,
        isa: Isa,
        config: &Config,
        limits: Limits,
    ) -> Search {
        Search {
            options: *options,
            rules,
            isa,
            vocab: config.tgt_vocab,
            tgt: limits.max_tgt_len,
            max_beam: limits.max_beam,
            eos: config.eos_id,
            live: 1,
            cur: 0,
            tally: Tally::default(),
            rng: options.sampling.as_ref().map(Sampling::rng),
        }
    }

    /// Live hypotheses: the rows the next decoder step runs.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// How many hypotheses have finished so far.
    pub(crate) fn finished(&self) -> usize {
        self.tally.finished
    }

    /// Runs step `step` (0 after the prefix) over the logits the decoder left in `buffers`;
    /// [`RunError::NonFiniteLogits`] when no candidate is finite.
    pub(crate) fn step(
        &mut self,
        step: usize,
        buffers: SearchBuffers<'_>,
        process: &mut impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Next, RunError> {
        let SearchBuffers {
            logits,
            step_tokens,
            parents,
            search,
        } = buffers;
        let mut st = State::new(search, self.max_beam, self.tgt);
        if step == 0 {
            st.beam_score[0] = 0.0;
        }
        if self.log_probs_first() {
            for row in logits.chunks_exact_mut(self.vocab) {
                log_softmax(self.isa, row);
            }
        }
        process(&mut StepLogits {
            step,
            logits: &mut *logits,
            beams: self.live,
            vocab: self.vocab,
            history: st.history[self.cur],
            stride: self.tgt,
        });
        if self.options.beam == 1 {
            self.greedy(&mut st, step, logits, step_tokens)
        } else {
            self.beam(&mut st, step, logits, parents, step_tokens)
        }
    }

    /// Whether rows become log-probabilities before the logits processor sees them
    /// (`transformers`' beam search) rather than after.
    fn log_probs_first(&self) -> bool {
        matches!(self.rules, BeamRules::Transformers(_)) && self.options.beam > 1
    }

    /// The greedy (or sampled) token extends the one hypothesis, which finishes on EOS or at
    /// the length limit. A chosen logit that is not finite (every one NaN or `-inf`, or the
    /// best `+inf`) has no score: [`RunError::NonFiniteLogits`].
    fn greedy(
        &mut self,
        st: &mut State<'_>,
        step: usize,
        logits: &[f32],
        step_tokens: &mut [u32],
    ) -> Result<Next, RunError> {
        let chosen = match (&self.options.sampling, &mut self.rng) {
            (Some(sampling), Some(rng)) => sample(self.isa, logits, sampling, rng),
            _ => argmax(self.isa, logits).map(|(i, _)| i as u32),
        };
        let (token, value) = chosen
            .map(|t| (t, logits[t as usize]))
            .filter(|(_, value)| value.is_finite())
            .ok_or(RunError::NonFiniteLogits { step })?;
        st.beam_score[0] += value - logsumexp(self.isa, logits);
        st.history[self.cur][step] = token;
        let len = step + 1;
        if (self.options.stop_at_eos && token == self.eos) || len == self.options.max_steps {
            let score = normalise(st.beam_score[0], len, self.options.length_penalty);
            st.finish(0, self.cur, 0, len, token, score, self.tgt);
            self.tally.finished = 1;
            return Ok(Next::Done);
        }
        step_tokens[0] = token;
        Ok(Next::Same)
    }

    /// Every live row's continuations ranked into the best `2·beam` candidates, which the
    /// rules split into finished and live hypotheses. No candidate at all (every summed score
    /// NaN or `-inf`) is [`RunError::NonFiniteLogits`].
    fn beam(
        &mut self,
        st: &mut State<'_>,
        step: usize,
        logits: &mut [f32],
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> Result<Next, RunError> {
        let options = self.options;
        let mut count = 0;
        for (b, row) in logits.chunks_exact_mut(self.vocab).enumerate() {
            if !self.log_probs_first() {
                log_softmax(self.isa, row);
            }
            st.offer_row(
                &mut count,
                2 * options.beam,
                st.beam_score[b],
                b as u32,
                row,
            );
        }
        if count == 0 {
            return Err(RunError::NonFiniteLogits { step });
        }
        let at = BeamStep {
            beam: options.beam,
            needed: options.finished_needed(),
            count,
            step,
            cur: self.cur,
            tgt: self.tgt,
            eos: Some(self.eos).filter(|_| options.stop_at_eos),
            length_penalty: options.length_penalty,
            last: step + 1 == options.max_steps,
        };
        let kept = self.select(st, &at, parents, step_tokens);
        let lineage = Lineage {
            history: self.cur,
            len: step,
            live: self.live,
            tgt: self.tgt,
        };
        self.cur = 1 - self.cur;
        if !at.last && kept > 0 && !self.stops(st, at.len()) {
            self.live = kept;
            return Ok(Next::Reordered(kept, lineage));
        }
        if self.rules == BeamRules::Plain && at.last {
            self.finish_live(st, kept, step);
        }
        Ok(Next::Done)
    }

    /// The rules' choice of the candidates that live on; returns how many.
    fn select(
        &mut self,
        st: &mut State<'_>,
        at: &BeamStep,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> usize {
        let tally = &mut self.tally;
        match self.rules {
            BeamRules::CTranslate2 { forced, .. } => {
                let first_free = forced > 0 && at.step == forced;
                st.select_ctranslate2(at, first_free, tally, parents, step_tokens)
            }
            BeamRules::Plain => st.select_best(at, false, tally, parents, step_tokens),
            BeamRules::Transformers(_) => st.select_best(at, true, tally, parents, step_tokens),
        }
    }

    /// Whether the rules stop the search before its length limit, after a step that generated
    /// the `len`-th token.
    fn stops(&self, st: &State<'_>, len: usize) -> bool {
        let (beam, options) = (self.options.beam, self.options);
        match self.rules {
            BeamRules::Plain => self.tally.registered >= options.finished_needed(),
            BeamRules::CTranslate2 { num_hypotheses, .. } => self.tally.ctranslate2_done(
                options.finished_needed(),
                num_hypotheses,
                options.length_penalty,
            ),
            BeamRules::Transformers(early_stopping) => {
                st.transformers_done(self.tally.finished, beam, early_stopping, len, &options)
            }
        }
    }

    /// Under tessel's rules at the length limit, the best of the `kept` live hypotheses fill
    /// the finished set's free places as they are.
    fn finish_live(&mut self, st: &mut State<'_>, kept: usize, step: usize) {
        let len = step + 1;
        let free = self.options.beam.saturating_sub(self.tally.finished);
        for b in 0..kept.min(free) {
            let last = st.history[self.cur][b * self.tgt + step];
            let score = normalise(st.beam_score[b], len, self.options.length_penalty);
            st.finish(self.tally.finished, self.cur, b, len, last, score, self.tgt);
            self.tally.finished += 1;
        }
    }
}
